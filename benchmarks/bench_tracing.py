"""What local tracing costs: the same verifiers evaluation untraced and traced into the local store.

    .venv/bin/python benchmarks/bench_tracing.py [--rollouts 32] [--max-tokens 64] [--repeats 2]

One llama.cpp server (SmolLM2-135M, temperature 0, fixed seed) serves every run. Each run is a
fresh Python process (untraced runs never import weave), and untraced/traced runs alternate so that
a busy machine slows both alike. Prints a table (wall time per run, the traced/untraced ratio, how
many calls the store recorded per second) and writes benchmarks/results/tracing-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number

from helpers.parameters import GSM8K_ROWS
from helpers.results import machine_info, write_result

SERVER_KEY_ENV = "COURSE_BENCH_SERVER_KEY"  # the local server's per-start key, for the child processes


def _noop(x: int) -> int:
    return x


def child(mode: str, base_url: str, rollouts: int, max_tokens: int) -> dict:
    """One evaluation in this process; with mode "traced", traced into the local store."""
    import openai

    from helpers.gsm8k_env import build_gsm8k_env

    session = None
    if mode == "traced":
        from helpers.tracing.session import init_tracing

        session = init_tracing(f"bench-{os.getpid()}", quiet=True)  # a fresh store per run
    client = openai.OpenAI(base_url=base_url, api_key=os.environ[SERVER_KEY_ENV])
    env = build_gsm8k_env(variant="hash", num_examples=1, num_eval_examples=rollouts)
    started, cpu_started = time.perf_counter(), time.process_time()
    out = env.evaluate(client, "SmolLM2-135M-Instruct", num_examples=rollouts, rollouts_per_example=1,
                       sampling_args={"max_tokens": max_tokens, "temperature": 0, "seed": 0})
    if session is not None:
        session.flush()  # the cost of tracing includes writing every record
    # CPU time of this process (all threads): what tracing adds to it does not depend on how busy
    # the machine is, unlike wall time, which mostly waits for the model server.
    result = {"eval_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu_started,
              "mean_reward": statistics.mean(out.reward)}
    if session is not None:
        result["calls"] = len(session.client.get_calls())
        result["records"] = session.server.records_written
        # the store's own throughput: a trivial op, nothing else
        import weave

        noop = weave.op(_noop)
        started = time.perf_counter()
        for i in range(1000):
            noop(i)
        session.flush()
        result["noop_calls_per_s"] = 1000 / (time.perf_counter() - started)
    return result


def run_child(mode: str, server, args, runs_dir: str) -> dict:
    env = {**os.environ, "COURSE_RUNS_DIR": runs_dir, "PYTHONPATH": str(ROOT), SERVER_KEY_ENV: server.api_key}
    shared_gsm8k = ROOT.parent / "shared" / "data" / "gsm8k"  # offline copy, as the tests use
    if not env.get("GSM8K_DIR") and shared_gsm8k.is_dir():
        env["GSM8K_DIR"] = str(shared_gsm8k)
    env.pop("WANDB_API_KEY", None)  # the benchmark measures the local store
    cmd = [sys.executable, __file__, "--child", mode, "--base-url", server.base_url,
           "--rollouts", str(args.rollouts), "--max-tokens", str(args.max_tokens)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=whole_number(1, GSM8K_ROWS["test"], "GSM8K test problems"),
                        default=32)
    parser.add_argument("--max-tokens", type=whole_number(1), default=64)
    parser.add_argument("--repeats", type=whole_number(1), default=2)
    parser.add_argument("--child", choices=["untraced", "traced"], help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.base_url, args.rollouts, args.max_tokens)))
        return

    from helpers.serving.llama_server import LocalModelServer

    info = machine_info()
    results: dict[str, list[dict]] = {"untraced": [], "traced": []}
    with tempfile.TemporaryDirectory() as runs_dir, LocalModelServer(parallel=4) as server:
        run_child("untraced", server, argparse.Namespace(rollouts=2, max_tokens=8), runs_dir)  # warm-up
        for _ in range(args.repeats):
            for mode in ("untraced", "traced"):
                results[mode].append(run_child(mode, server, args, runs_dir))
                print(f"  {mode:9s} {json.dumps(results[mode][-1])}", file=sys.stderr, flush=True)

    untraced = statistics.median(r["eval_s"] for r in results["untraced"])
    traced = statistics.median(r["eval_s"] for r in results["traced"])
    calls = results["traced"][-1]["calls"]
    cpu_untraced = statistics.median(r["cpu_s"] for r in results["untraced"])
    cpu_traced = statistics.median(r["cpu_s"] for r in results["traced"])
    rows = [
        ("rollouts per run (temperature 0, seed 0)", f"{args.rollouts} x max {args.max_tokens} tokens"),
        ("runs (alternating, each a fresh process)", f"{args.repeats} untraced + {args.repeats} traced"),
        ("untraced wall time, median", f"{untraced:.2f} s"),
        ("traced wall time (incl. flush), median", f"{traced:.2f} s"),
        ("traced / untraced", f"{traced / untraced:.3f}  ({(traced / untraced - 1) * 100:+.1f}%)"),
        ("client CPU time untraced / traced, median", f"{cpu_untraced:.2f} s / {cpu_traced:.2f} s"),
        ("CPU added by tracing, as % of untraced wall time", f"{(cpu_traced - cpu_untraced) / untraced * 100:.1f}%"),
        ("mean reward untraced / traced", " / ".join(f"{results[m][-1]['mean_reward']:.3f}" for m in results)),
        ("calls recorded per run", f"{calls} ({results['traced'][-1]['records']} records)"),
        ("calls recorded per second of evaluation", f"{calls / traced:.1f}"),
        ("store throughput, trivial op (calls/s)",
         f"{statistics.median(r['noop_calls_per_s'] for r in results['traced']):.0f}"),
        ("all runs untraced (s)", ", ".join(f"{r['eval_s']:.2f}" for r in results["untraced"])),
        ("all runs traced (s)", ", ".join(f"{r['eval_s']:.2f}" for r in results["traced"])),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'measure':{width}s} | value |\n|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name:{width}s} | {value} |")
    write_result("tracing", info, {"rollouts": args.rollouts, "max_tokens": args.max_tokens, "table": dict(rows),
                                   "runs": results})


if __name__ == "__main__":
    main()
