"""Benchmark of CPU GRPO: notebook 02 itself, run end to end with its default parameters, once per
rollout path ("server": llama.cpp with a weight sync per step; "generate": TRL's model.generate) and
seed, side by side. Prints a table and writes benchmarks/results/grpo-<date>.json.

    .venv/bin/python benchmarks/bench_grpo.py                        # server and generate, seeds 0 and 1
    .venv/bin/python benchmarks/bench_grpo.py --rollouts server --seeds 0 -p max_steps 3

Each run is a fresh papermill execution in a temporary runs folder (no notebook 01 run to borrow
examples from: before/after use the first test examples, greedy), so peak memory is the kernel's own.
Per run: the notebook's minutes end to end, seconds per step split into generation / weight sync /
scoring / update, peak memory, the reward over the first and last 5 steps (and each reward function),
the held-out reward before and after, and how far the server's float16 policy is from the trainer's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number

from helpers.results import machine_info, write_result

NOTEBOOK = ROOT / "notebooks" / "02_traced_grpo_training.ipynb"


def run_once(rollouts: str, seed: int, overrides: dict) -> dict:
    from helpers.notebook_runner import execute

    with tempfile.TemporaryDirectory() as runs:
        os.environ["COURSE_RUNS_DIR"] = runs  # the kernel inherits it
        run_name = f"bench_{rollouts}_{seed}"
        started = time.monotonic()
        execute(NOTEBOOK, Path(runs) / "02.ipynb",
                {"rollouts": rollouts, "seed": seed, "run_name": run_name, "resume": "never", **overrides})
        wall = time.monotonic() - started
        summary = json.loads((Path(runs) / "grpo" / run_name / "summary.json").read_text())
    return {"rollouts": rollouts, "seed": seed, "notebook_minutes": round(wall / 60, 2), **summary}


def notebook_overrides(parser: argparse.ArgumentParser, pairs: list[list[str]]) -> dict:
    """The -p NAME VALUE pairs as papermill parameters, each checked by notebook 02's own rules now: a name the
    notebook does not have only made papermill warn, and a value its first cell refuses cost a kernel start."""
    from helpers.notebook_runner import _value
    from helpers.parameters import NOTEBOOK_PARAMETERS, problems

    rules = NOTEBOOK_PARAMETERS["02"]
    overrides = {name: _value(value) for name, value in pairs}
    unknown = [name for name in overrides if name not in rules]
    if unknown:
        parser.error(f"-p {', '.join(unknown)}: notebook 02 has no such parameter; its parameters are "
                     f"{', '.join(rules)}")
    if found := problems(overrides, {name: rules[name] for name in overrides}):
        parser.error("-p: " + "; ".join(found))
    return overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", nargs="+", default=["server", "generate"], choices=["server", "generate"])
    parser.add_argument("--seeds", nargs="+", type=whole_number(0, 2**32 - 1), default=[0, 1])
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override one of the notebook's parameters (default: its committed values)")
    args = parser.parse_args()
    overrides = notebook_overrides(parser, args.parameter)
    info = machine_info()
    runs = []
    for seed in args.seeds:
        for rollouts in args.rollouts:
            print(f"bench_grpo: notebook 02 with rollouts={rollouts!r}, seed {seed} ...", flush=True)
            runs.append(run_once(rollouts, seed, overrides))
            print(json.dumps({k: runs[-1][k] for k in ("notebook_minutes", "sec_per_step", "reward_first",
                                                       "reward_last")}), flush=True)

    rows = [
        ("notebook, end to end (min)", "notebook_minutes", "{:.1f}"),
        ("training (min)", "train_minutes", "{:.1f}"),
        ("s/step: total", "sec_per_step", "{:.1f}"),
        ("s/step: generation", "generation_s_sec_per_step", "{:.1f}"),
        ("s/step: weight sync", "sync_s_sec_per_step", "{:.2f}"),
        ("s/step: scoring", "scoring_s_sec_per_step", "{:.2f}"),
        ("s/step: update", "update_s_sec_per_step", "{:.1f}"),
        ("peak RSS (GB)", "peak_rss_gb", "{:.2f}"),
        ("reward, first 5 steps", "reward_first", "{:.3f}"),
        ("reward, last 5 steps", "reward_last", "{:.3f}"),
        ("reward gain", "reward_gain", "{:+.3f}"),
        ("held-out reward before", "before_reward", "{:.3f}"),
        ("held-out reward after", "after_reward", "{:.3f}"),
    ]
    header = [f"{r['rollouts']}, seed {r['seed']}" for r in runs]
    width = max(len(label) for label, _, _ in rows)
    print(f"\nCPU GRPO, notebook 02 defaults{' + ' + json.dumps(overrides) if overrides else ''}; "
          f"{info['cpu']}, {info['cores']} cores, load before {info['load_avg_before']}")
    print(f"| {'':{width}} | " + " | ".join(header) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(h) + 2) for h in header) + "|")
    for label, key, fmt in rows:
        cells = [fmt.format(r[key]) if isinstance(r.get(key), (int, float)) else "-" for r in runs]
        print(f"| {label:{width}} | " + " | ".join(f"{c:{len(h)}}" for c, h in zip(cells, header)) + " |")
    write_result("grpo", info, {"parameters": overrides or "notebook defaults", "runs": runs})


if __name__ == "__main__":
    main()
