"""Benchmark of notebook 01's evaluation on the local endpoint; prints a table and writes
benchmarks/results/eval-<date>.json.

    .venv/bin/python benchmarks/bench_eval.py [--rollouts 16] [--max-tokens 256]

Rollouts per second of `env.evaluate` (the '#### N' GSM8K environment, temperature 0.7) at
max_concurrent 1, 4 and 8, for llama.cpp servers with 4 and 8 request slots (n_parallel).
Target from the notebook-01 issue: concurrency 4 is faster than 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number

from helpers import build_gsm8k_env
from helpers.parameters import GSM8K_ROWS
from helpers.results import machine_info, write_result
from helpers.serving.llama_server import LOCAL_MODEL_NAME, LocalModelServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=whole_number(1, GSM8K_ROWS["test"], "GSM8K test problems"),
                        default=16, help="examples evaluated (1 rollout each)")
    parser.add_argument("--max-tokens", type=whole_number(1), default=256)
    args = parser.parse_args()
    info = machine_info()
    env = build_gsm8k_env(variant="hash", num_eval_examples=args.rollouts)
    sampling = {"max_tokens": args.max_tokens, "temperature": 0.7}
    rows = []
    for slots in (4, 8):
        with LocalModelServer(parallel=slots) as server:
            client = server.endpoint().client
            for concurrency in (1, 4, 8):
                started = time.monotonic()
                out = env.evaluate(client, LOCAL_MODEL_NAME, sampling_args=sampling,
                                   num_examples=args.rollouts, max_concurrent=concurrency)
                wall = time.monotonic() - started
                tokens = sum(s["responses"][0].usage.completion_tokens for s in out.state)
                rows.append((slots, concurrency, wall, args.rollouts / wall, tokens / wall))
    print(f"\nenv.evaluate, {args.rollouts} rollouts, max_tokens {args.max_tokens}, {os.cpu_count()} cores\n")
    print(f"{'n_parallel':>10} {'max_concurrent':>14} {'wall s':>8} {'rollouts/s':>11} {'tokens/s':>9}")
    for slots, concurrency, wall, rps, tps in rows:
        print(f"{slots:>10} {concurrency:>14} {wall:>8.1f} {rps:>11.2f} {tps:>9.1f}")
    write_result("eval", info, {"rollouts": args.rollouts, "max_tokens": args.max_tokens, "runs": [
        {"n_parallel": slots, "max_concurrent": concurrency, "wall_s": round(wall, 1),
         "rollouts_per_s": round(rps, 3), "tokens_per_s": round(tps, 1)}
        for slots, concurrency, wall, rps, tps in rows]})


if __name__ == "__main__":
    main()
