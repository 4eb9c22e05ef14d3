"""Benchmark of the local model endpoint; prints a table (no pass/fail: targets are for reading).

    .venv/bin/python scripts/bench_endpoint.py [--install]

Measures: llama.cpp server start-up (until /health answers), generation speed for one stream and
for 4 concurrent streams (fixed 128-token completions), and with --install the time
scripts/setup_env.sh takes to build a fresh .venv in a temporary clone of this repository.
Targets from the foundation issue: ready in <= 15 s, >= 80 tokens/s for one stream on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from helpers.local.llama_server import LOCAL_MODEL_NAME, LocalModelServer

TOKENS = 128
PROMPT = "Write a short story about a robot who learns to count."


def stream_tokens_per_s(client: openai.OpenAI) -> tuple[int, float]:
    started = time.monotonic()
    reply = client.chat.completions.create(
        model=LOCAL_MODEL_NAME, messages=[{"role": "user", "content": PROMPT}], max_tokens=TOKENS,
        temperature=0.8, extra_body={"ignore_eos": True},  # llama.cpp: always generate TOKENS
    )
    return reply.usage.completion_tokens, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="also time a fresh setup_env.sh")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []

    startups = []
    for _ in range(args.repeats):
        with LocalModelServer(parallel=4) as server:
            startups.append(server.startup_s)
    rows.append(("server start-up (s, median)", f"{statistics.median(startups):.2f}", "<= 15"))

    with LocalModelServer(parallel=4) as server:
        client = server.endpoint().client
        stream_tokens_per_s(client)  # warm-up
        single = [stream_tokens_per_s(client) for _ in range(args.repeats)]
        rate = statistics.median(tokens / seconds for tokens, seconds in single)
        rows.append(("1 stream (tokens/s, median)", f"{rate:.1f}", ">= 80"))
        for streams in (4,):
            started = time.monotonic()
            with ThreadPoolExecutor(streams) as pool:
                results = list(pool.map(lambda _: stream_tokens_per_s(client), range(streams * args.repeats)))
            total = sum(tokens for tokens, _ in results) / (time.monotonic() - started)
            per_stream = statistics.median(tokens / seconds for tokens, seconds in results)
            rows.append((f"{streams} concurrent streams (tokens/s, total)", f"{total:.1f}", "> 1 stream"))
            rows.append((f"{streams} concurrent streams (tokens/s, each)", f"{per_stream:.1f}", ""))

    if args.install:
        root = Path(__file__).resolve().parent.parent
        with tempfile.TemporaryDirectory() as tmp:
            clone = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
            started = time.monotonic()
            subprocess.run(["bash", "scripts/setup_env.sh"], cwd=clone, check=True,
                           stdout=subprocess.DEVNULL, env={**os.environ, "PIP_NO_CACHE_DIR": ""})
            rows.append(("fresh setup_env.sh (s)", f"{time.monotonic() - started:.0f}", ""))

    print(f"\nlocal endpoint: {LOCAL_MODEL_NAME} (Q4_1 GGUF) on llama.cpp, {os.cpu_count()} cores, "
          f"{TOKENS}-token completions\n")
    width = max(len(name) for name, _, _ in rows)
    print(f"{'measure':<{width}}  {'value':>8}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>8}  {target}")


if __name__ == "__main__":
    main()
