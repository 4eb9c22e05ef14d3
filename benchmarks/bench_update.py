"""Benchmark of one CPU training update of SmolLM2-135M (forward, backward, AdamW step), the part of a
GRPO step that does not depend on how the rollouts were sampled: float32 vs TRL's default bfloat16
autocast, and gradient checkpointing on vs off. Each case runs in a fresh process (peak memory is
its own). Prints a table and writes benchmarks/results/update-<date>.json.

    .venv/bin/python benchmarks/bench_update.py                     # notebook 02's batch: 8 x (130 + 200) tokens
    .venv/bin/python benchmarks/bench_update.py --batch 1 --bf16    # float32 vs bfloat16 (slow on AVX2: small batch)
    .venv/bin/python benchmarks/bench_update.py --batch 1 --busy 0 1 --threads 1 2
        # torch threads on an idle machine and beside other programs that keep cores busy: the rule of
        # helpers.grpo.backends.default_threads, written to update-threads-<date>.json
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
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number

from helpers.results import machine_info, write_result


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


def one_case(batch: int, prompt: int, completion: int, bf16: bool, checkpointing: bool, repeats: int,
             threads: int | None = None) -> dict:
    import torch

    if threads:
        torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(ROOT))
    from helpers.serving.gguf_convert import convert_gguf

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(convert_gguf(quiet=True), dtype=torch.float32)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    seconds = seconds_per_update(model, optimizer, batch, prompt, completion, bf16, repeats)
    return {"batch": batch, "tokens": batch * (prompt + completion), "bf16": bf16,
            "gradient_checkpointing": checkpointing,
            "threads": torch.get_num_threads(), "seconds_per_update": seconds,
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=whole_number(1), default=8)
    parser.add_argument("--prompt", type=whole_number(1), default=130)
    parser.add_argument("--completion", type=whole_number(1), default=200)
    parser.add_argument("--repeats", type=whole_number(1), default=2)
    parser.add_argument("--bf16", action="store_true", help="also TRL's default bfloat16 autocast")
    parser.add_argument("--threads", type=whole_number(1), nargs="+",
                        help="torch threads to try (float32, checkpointing on)")
    parser.add_argument("--busy", type=whole_number(0), nargs="+", default=[0],
                        help="with --threads: how many other processes keep a core busy while it runs")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # "bf16,checkpointing[,threads]" in a child process
    args = parser.parse_args()
    if args.case:
        flags = args.case.split(",")
        bf16, checkpointing = (flag == "1" for flag in flags[:2])
        threads = int(flags[2]) if len(flags) > 2 else None
        print(json.dumps(one_case(args.batch, args.prompt, args.completion, bf16, checkpointing, args.repeats,
                                  threads)))
        return
    info = machine_info()
    if args.threads:
        threads_under_load(args, info)
        return
    results = []
    for bf16, checkpointing in [(False, True), (False, False), *([(True, True)] if args.bf16 else [])]:
        out = subprocess.run([sys.executable, __file__, "--case", f"{int(bf16)},{int(checkpointing)}",
                              "--batch", str(args.batch), "--prompt", str(args.prompt),
                              "--completion", str(args.completion), "--repeats", str(args.repeats)],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{info['cpu']}, {info['cores']} cores; one update of {args.batch} x ({args.prompt} + {args.completion}) "
          "tokens")
    print("| precision | gradient checkpointing | s/update | peak RSS (GB) |\n|---|---|---|---|")
    for r in results:
        print(f"| {'bf16 autocast' if r['bf16'] else 'float32'} | {'on' if r['gradient_checkpointing'] else 'off'} "
              f"| {r['seconds_per_update']} | {r['peak_rss_gb']} |")
    write_result("update", info, {"cases": results}, suffix=f"batch{args.batch}")


def run_case(args, case: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", case, "--batch", str(args.batch), "--prompt",
                          str(args.prompt), "--completion", str(args.completion), "--repeats", str(args.repeats)],
                         capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def threads_under_load(args, info: dict) -> None:
    """Each thread count, with `busy` other processes spinning on a core each (stopped by their handles)."""
    results = []
    for busy in args.busy:
        for threads in args.threads:
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                result = {**run_case(args, f"0,1,{threads}"), "busy_processes": busy}
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            results.append(result)
            print(json.dumps(result), flush=True)
    print(f"\n{info['cpu']}, {info['cores']} cores; one update of {args.batch} x ({args.prompt} + {args.completion}) "
          "tokens, float32")
    print("| other busy processes | torch threads | s/update |\n|---|---|---|")
    for r in results:
        print(f"| {r['busy_processes']} | {r['threads']} | {r['seconds_per_update']} |")
    write_result("update", info, {"cases": results}, suffix="threads")


if __name__ == "__main__":
    main()
