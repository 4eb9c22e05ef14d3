"""Notebook 02's trainer before and after its memory changes: a few GRPO steps of the default design (4 prompts x 8
completions, 48 tokens) in each precision, with this checkout's trainer and with another checkout's (e.g. a
`git worktree` of an older commit), each in a fresh process: seconds per step after the first (and its split) and
the peak resident memory of the process and its llama.cpp server read together. Prints a table and writes
benchmarks/results/trainer-memory-<date>.json.

With `--rounds 2` the two checkouts run in the order this, other, then other, this (and so on): a shared
machine's speed drifts over minutes, and that order puts the same drift on both. Each tree's s/step is the mean of
its rounds, its peak the largest of them.

    git worktree add /tmp/oldtree ca3be0c
    .venv/bin/python benchmarks/bench_trainer_memory.py --other /tmp/oldtree --steps 5 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number

from helpers.results import machine_info, write_result

# Runs in a child process with the checkout under test first on sys.path; the memory is read by this checkout's
# PeakMemory (an older checkout may not have it), around the whole run.
CHILD = """
import importlib.util, json, os, sys
from dataclasses import replace
root, precision, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path[:0] = [root, root + "/benchmarks", root + "/scripts"]
os.chdir(root)
import bench_learnability as b
spec = importlib.util.spec_from_file_location("course_memory", sys.argv[4])
memory = sys.modules["course_memory"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(memory)
captured = {}
figures = b.training_figures
def keep_log(log, *args, **kwargs):  # train_run hands its log history here: kept for the per-step times
    captured["log"] = log
    return figures(log, *args, **kwargs)
b.training_figures = keep_log
setting = replace(b.SETTINGS["arith-short-bf16-36"], bf16=precision == "bfloat16")
import resource
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
with memory.PeakMemory() as peak:
    b.train_run(setting, 0, 2, steps=steps, evaluate_after=False, base_done=True)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults  # pages the system handed out and zeroed
timed = [e for e in captured["log"] if "timing/step_s" in e][1:]  # the first step also starts the server
mean = lambda key: round(sum(e[f"timing/{key}"] for e in timed) / len(timed), 2)
print("RESULT " + json.dumps({"sec_per_step": mean("step_s"),
                              **{f"sec_per_step_{k[:-2]}": mean(k) for k in ("generation_s", "sync_s", "update_s")},
                              "steps_timed": len(timed), "peak": peak.record(),
                              "minor_page_faults_per_step": round(faults / steps)}))
"""


def run(tree: Path, precision: str, steps: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), precision, str(steps),
                           str(ROOT / "helpers" / "grpo" / "memory.py")],
                          check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode or line is None:
        raise SystemExit(f"bench_trainer_memory: the run in {tree} ({precision}) failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, help="another checkout to compare with (e.g. a git worktree)")
    parser.add_argument("--steps", type=whole_number(2, what="training steps; the first is not timed"), default=5)
    parser.add_argument("--precisions", nargs="+", choices=("float32", "bfloat16"), default=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=whole_number(1, what="rounds of each checkout"), default=1)
    parser.add_argument("--suffix", default="", help="trainer-memory-<suffix>-<date>.json (e.g. the CPU's name)")
    args = parser.parse_args()
    if args.other is not None and not (args.other / "scripts" / "bench_learnability.py").is_file():
        parser.error(f"{args.other} is not a checkout of the course (no benchmarks/bench_learnability.py)")
    trees = {"this checkout": ROOT, **({"other": args.other} if args.other else {})}
    info = machine_info()
    commits = {label: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, check=False,
                                     capture_output=True, text=True).stdout.strip() for label, tree in trees.items()}
    runs = []  # one per round, tree and precision
    for precision in args.precisions:
        for round_ in range(args.rounds):
            order = list(trees.items()) if round_ % 2 == 0 else list(trees.items())[::-1]
            for label, tree in order:
                print(f"bench_trainer_memory: {label} ({commits[label]}), {precision}, round {round_ + 1}, "
                      f"{args.steps} steps ...", flush=True)
                r = {"tree": label, "commit": commits[label], "precision": precision, "round": round_ + 1,
                     **run(tree, precision, args.steps)}
                runs.append(r)
                print(f"  {r['sec_per_step']} s/step (update {r['sec_per_step_update']}), peak "
                      f"{r['peak']['total_gb']} GB (process and server)", flush=True)
    rows = [summary([r for r in runs if r["tree"] == label and r["precision"] == precision])
            for precision in args.precisions for label in trees]
    print("\n| tree | commit | precision | s/step | generation | sync | update | peak GB (with server) | page "
          "faults/step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['tree']} | {r['commit']} | {r['precision']} | {r['sec_per_step']} | "
              f"{r['sec_per_step_generation']} "
              f"| {r['sec_per_step_sync']} | {r['sec_per_step_update']} | {r['peak']['total_gb']} "
              f"| {r['minor_page_faults_per_step']:,} |")
    # this checkout's s/step over the other's, per precision: <= 1.0 is "no slower"
    ratios = {p: round(mine["sec_per_step"] / theirs["sec_per_step"], 3) for p in args.precisions
              for mine in rows if mine["precision"] == p and mine["tree"] == "this checkout"
              for theirs in rows if theirs["precision"] == p and theirs["tree"] == "other"}
    for precision, ratio in ratios.items():
        print(f"{precision}: this checkout's s/step is {ratio} times the other's")
    write_result("trainer-memory", info, {"steps": args.steps, "design": "arith-short-bf16-36 (notebook 02's defaults)",
                                          "rounds": args.rounds, "rows": rows, "ratio_to_other": ratios,
                                          **({"runs": runs} if args.rounds > 1 else {})}, suffix=args.suffix)


def summary(runs: list[dict]) -> dict:
    """One tree's row in one precision: the mean of its rounds' seconds and page faults, the largest of their
    peaks (a single round's row as it is)."""
    if len(runs) == 1:
        return {k: v for k, v in runs[0].items() if k != "round"}
    mean = lambda key: round(sum(r[key] for r in runs) / len(runs), 2)
    peaks = [r["peak"] for r in runs]
    return {"tree": runs[0]["tree"], "commit": runs[0]["commit"], "precision": runs[0]["precision"],
            **{key: mean(key) for key in ("sec_per_step", "sec_per_step_generation", "sec_per_step_sync",
                                          "sec_per_step_update")},
            "sec_per_step_rounds": [r["sec_per_step"] for r in runs],
            "steps_timed": sum(r["steps_timed"] for r in runs),
            "peak": {k: max(p[k] for p in peaks) for k in ("own_gb", "children_gb", "total_gb")}
            | {"interval_s": peaks[0]["interval_s"]},
            "minor_page_faults_per_step": round(sum(r["minor_page_faults_per_step"] for r in runs) / len(runs))}


if __name__ == "__main__":
    main()
