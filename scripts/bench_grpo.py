"""Benchmark CPU GRPO (helpers.grpo): seconds per step split into generation / scoring / update,
peak RSS, and the reward over the first and last 5 logged steps.

    .venv/bin/python scripts/bench_grpo.py                 # the notebook's default run (~15-40 min)
    .venv/bin/python scripts/bench_grpo.py --max-steps 3 --max-completion-tokens 32

Tracing (local Weave store) and wandb (offline) are on, as in the notebook. Results are printed as
a table and written to runs/bench/<run_name>.json. Other processes on the machine slow it down:
the load average at start and end is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from helpers.grpo import GRPOSettings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = GRPOSettings(run_name="bench_grpo")
    for f in fields(GRPOSettings):
        value = getattr(defaults, f.name)
        kind = type(value) if value is not None else int
        if kind is bool:
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=lambda s: s.lower() in ("1", "true", "yes"),
                                default=value)
        else:
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=value)
    args = parser.parse_args()
    settings = GRPOSettings(**{f.name: getattr(args, f.name) for f in fields(GRPOSettings)})

    from helpers.env import build_gsm8k_env
    from helpers.grpo import build_trainer, learning_summary, train
    from helpers.paths import runs_dir
    from helpers.tracing import init_tracing

    load_start = os.getloadavg()[0]
    started = time.monotonic()
    init_tracing("grpo-bench")
    env = build_gsm8k_env(variant=settings.variant, num_examples=settings.num_train_examples,
                          num_eval_examples=1, seed=settings.seed)
    trainer = build_trainer(env, settings, resume="never")
    setup_s = time.monotonic() - started
    result = train(trainer)
    m = result.metrics
    learn = learning_summary(m)
    table = {
        "steps": len(m),
        "generation s/step": m["generation_s"].mean(),
        "scoring s/step": m["scoring_s"].mean(),
        "update s/step": m["update_s"].mean(),
        "total s/step": m["step_s"].mean(),
        "peak RSS (GB)": result.peak_rss_gb,
        "setup s (load model, data)": setup_s,
        "training wall s": result.wall_s,
        f"reward first {learn['n']}": learn["first"],
        f"reward last {learn['n']}": learn["last"],
        "reward gain": learn["gain"],
        "load avg start / end": f"{load_start:.1f} / {os.getloadavg()[0]:.1f}",
    }
    for component in ("correct_answer", "hash_format"):
        if component in m:
            s = learning_summary(m, column=component)
            table[f"{component} first/last {s['n']}"] = f"{s['first']:.2f} -> {s['last']:.2f}"
    import torch

    table["threads"] = torch.get_num_threads()
    width = max(len(k) for k in table)
    print(f"\nCPU GRPO benchmark ({settings.run_name}, seed {settings.seed})")
    for key, value in table.items():
        print(f"  {key:<{width}}  {value:.2f}" if isinstance(value, float) else f"  {key:<{width}}  {value}")
    print("\nper step:\n" + m.round(3).to_string())
    out = runs_dir("bench") / f"{settings.run_name}.json"
    out.write_text(json.dumps({"settings": asdict(settings), "table": table,
                               "metrics": json.loads(m.reset_index().to_json(orient="records"))}, indent=2,
                              default=str))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
