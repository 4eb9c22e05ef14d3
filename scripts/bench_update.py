"""Benchmark of one CPU training update of SmolLM2-135M (forward, backward, AdamW step), the part of a
GRPO step that does not depend on how the rollouts were sampled: float32 vs TRL's default bfloat16
autocast, and gradient checkpointing on vs off. Each case runs in a fresh process (peak memory is
its own). Prints a table and writes benchmarks/results/update-<date>.json.

    .venv/bin/python scripts/bench_update.py                     # notebook 02's batch: 8 x (130 + 200) tokens
    .venv/bin/python scripts/bench_update.py --batch 1 --bf16    # float32 vs bfloat16 (slow on AVX2: small batch)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from bench_results import machine_info, write_result


def seconds_per_update(model, optimizer, batch: int, prompt: int, completion: int, bf16: bool, repeats: int) -> float:
    """Mean seconds of one update (forward, backward, optimizer step) on a batch of random tokens; the
    first update also allocates the optimizer state and is not counted."""
    import torch

    ids = torch.randint(100, 40000, (batch, prompt + completion))
    seconds = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(ids, logits_to_keep=completion + 1).logits[:, :-1].float()
        loss = torch.log_softmax(logits, -1).gather(-1, ids[:, -completion:, None]).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        seconds.append(time.perf_counter() - started)
    return round(sum(seconds[1:]) / repeats, 2)


def one_case(batch: int, prompt: int, completion: int, bf16: bool, checkpointing: bool, repeats: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(ROOT))
    from helpers.local.gguf_convert import convert_gguf

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(convert_gguf(quiet=True), dtype=torch.float32)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    seconds = seconds_per_update(model, optimizer, batch, prompt, completion, bf16, repeats)
    return {"batch": batch, "tokens": batch * (prompt + completion), "bf16": bf16, "gradient_checkpointing": checkpointing,
            "threads": torch.get_num_threads(), "seconds_per_update": seconds,
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=130)
    parser.add_argument("--completion", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="also TRL's default bfloat16 autocast")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # "bf16,checkpointing" in a child process
    args = parser.parse_args()
    if args.case:
        bf16, checkpointing = (flag == "1" for flag in args.case.split(","))
        print(json.dumps(one_case(args.batch, args.prompt, args.completion, bf16, checkpointing, args.repeats)))
        return
    info = machine_info()
    results = []
    for bf16, checkpointing in [(False, True), (False, False), *([(True, True)] if args.bf16 else [])]:
        out = subprocess.run([sys.executable, __file__, "--case", f"{int(bf16)},{int(checkpointing)}",
                              "--batch", str(args.batch), "--prompt", str(args.prompt),
                              "--completion", str(args.completion), "--repeats", str(args.repeats)],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{info['cpu']}, {info['cores']} cores; one update of {args.batch} x ({args.prompt} + {args.completion}) tokens")
    print("| precision | gradient checkpointing | s/update | peak RSS (GB) |\n|---|---|---|---|")
    for r in results:
        print(f"| {'bf16 autocast' if r['bf16'] else 'float32'} | {'on' if r['gradient_checkpointing'] else 'off'} "
              f"| {r['seconds_per_update']} | {r['peak_rss_gb']} |")
    write_result("update", info, {"cases": results}, suffix=f"batch{args.batch}")


if __name__ == "__main__":
    main()
