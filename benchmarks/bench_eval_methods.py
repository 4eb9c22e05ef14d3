"""Notebook 02's evaluation by several methods, side by side: the same problems, the same samples and the same
scoring (bench_learnability.evaluate: greedy, plus k samples a problem at the training temperature; strict and
lenient, pass@1 from the k samples, pass@k), from the untrained model, each method timed as a whole. Prints a
table and writes benchmarks/results/eval-methods-<date>.json.

    .venv/bin/python benchmarks/bench_eval_methods.py [--problems 62] [--samples 8] [--full "llama.cpp x32" ...]

The methods: llama.cpp's server (the policy server, float16 GGUF) with 8 request slots as bench_learnability
used it, and with more; the 64-slot server asked for no log-probabilities, with its prompt cache, and in chunks
of problems whose greedy requests follow their samples; transformers' own batched `generate` on the trainer's
float32 weights, and in bfloat16 autocast where the CPU has bfloat16 instructions. Each row says how many
problems it scored as the first row did (a method that changes no reply: all).
`--problems` takes the first N confirmation problems for the
comparison; `--full METHOD ...` also evaluates all of them (248) with each method named, the figure a learnability
run pays per evaluation (the file's "full": one row per method).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_learnability as bl
from arguments import whole_number

from helpers.grpo.backends import cpu_has_bf16, default_threads
from helpers.results import machine_info, write_result

SERVER_SLOTS = (8, 32, 64)
HF_BATCHES = (64, 128)


def methods(model, tokenizer, folder: Path, threads: int) -> dict:
    """Method name -> (a function that opens its sampler, a context manager yielding an object with `complete`;
    the options bench_learnability.evaluate passes on)."""
    import contextlib

    from helpers.grpo.policy_server import PolicyServer

    def server(slots: int):
        @contextlib.contextmanager
        def open_server():
            with PolicyServer(folder=folder, name=f"eval{slots}", parallel=slots, threads=threads) as policy:
                policy.sync(model, step=0)
                yield policy
        return open_server

    def transformers(bf16: bool, batch: int):
        @contextlib.contextmanager
        def open_sampler():
            yield bl.TransformersSampler(model, tokenizer, batch=batch, bf16=bf16)
        return open_sampler

    found = {f"llama.cpp x{slots}": (server(slots), {}) for slots in SERVER_SLOTS}
    found["llama.cpp x64, again"] = (server(64), {})  # how far one method agrees with itself run to run
    # The same server asked for less: no per-token log-probabilities (an evaluation reads none), then also the
    # prompt cache (the system prompt is 36 of a prompt's ~65 tokens), then bench_learnability's lean evaluation:
    # also in chunks of problems whose greedy requests follow their own samples, finding the whole prompt in a slot
    lean = {"logprobs": False}
    found["llama.cpp x64 no logprobs"] = (server(64), lean)
    found["llama.cpp x64 no logprobs, prompt cache"] = (server(64), {**lean, "cache_prompt": True})
    found["llama.cpp x64 lean (no logprobs, prompt cache, chunks)"] = (server(64), bl.LEAN_EVAL)
    for batch in HF_BATCHES:
        found[f"transformers float32 x{batch}"] = (transformers(False, batch), {})
        if cpu_has_bf16():  # emulated bfloat16 is ~14x slower: not a candidate on such a CPU
            found[f"transformers bfloat16 x{batch}"] = (transformers(True, batch), {})
    return found


def measure(method: tuple, tokenizer, env, samples: int, setting) -> dict:
    open_sampler, options = method
    with open_sampler() as sampler:
        started = time.monotonic()
        out = bl.evaluate(sampler, tokenizer, env, setting.eval_max_tokens, samples, setting.temperature,
                          setting.top_p, **options)
        seconds = time.monotonic() - started
    problems = out["n"]
    tokens = problems * (out["mean_tokens"] + samples * out["sampled_mean_tokens"])
    return {"problems": problems, "samples": samples, "seconds": round(seconds, 1),
            "greedy_seconds": out["greedy_seconds"],
            "tokens": round(tokens), "tokens_per_s": round(tokens / seconds, 1),
            "greedy_lenient": out["lenient"], "greedy_strict": out["strict"],
            "pass1_lenient": out["sampled_lenient"], "pass1_strict": out["sampled_strict"],
            "pass_at_k": out["sampled_pass_at_k"], "cut": out["cut"], "sampled_cut": out["sampled_cut"],
            "greedy_per_problem": out["lenient_per_problem"], "pass1_per_problem": out["sampled_lenient_per_problem"]}


def agreement(row: dict, reference: dict) -> dict:
    """The share of problems a method scored as the reference did (greedy right or not; pass@1 from the same
    seeds): where a method changes no reply, 1.0."""
    def share(key: str) -> float:
        pairs = list(zip(row[key], reference[key]))
        return round(sum(a == b for a, b in pairs) / len(pairs), 4)
    return {"reference": reference["method"], "greedy": share("greedy_per_problem"),
            "pass1": share("pass1_per_problem")}


def subset(env, n: int):
    """The environment with only its first `n` held-out problems."""
    env.eval_dataset = env.eval_dataset.select(range(min(n, len(env.eval_dataset))))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=whole_number(1, 248, "confirmation problems"), default=62)
    parser.add_argument("--samples", type=whole_number(1, 64, "samples a problem"), default=8)
    parser.add_argument("--threads", type=whole_number(1, 256, "threads"), default=default_threads())
    parser.add_argument("--full", nargs="*", default=[], help="also evaluate every confirmation problem with these")
    parser.add_argument("--only", nargs="*", default=None, help="compare only these methods")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    setting = bl.SETTINGS["nb02-fp32"]
    model, tokenizer = bl.load_model(setting)
    info = machine_info()
    rows, full = [], []
    with tempfile.TemporaryDirectory() as tmp:
        found = methods(model, tokenizer, Path(tmp), args.threads)
        unknown = [m for m in [*args.full, *(args.only or [])] if m not in found]
        if unknown:
            raise SystemExit(f"bench_eval_methods: no method {unknown}; the methods are {sorted(found)}")
        for name, method in found.items():
            if args.only is not None and name not in args.only:
                continue
            row = {"method": name, **measure(method, tokenizer, subset(bl.confirmation_env(setting),
                                                                                args.problems), args.samples, setting)}
            print(f"{name:28s} {row['seconds']:7.1f} s  {row['tokens_per_s']:6.1f} tokens/s  pass@1 "
                  f"{row['pass1_lenient']:.3f}  pass@{args.samples} {row['pass_at_k']:.3f}  greedy "
                  f"{row['greedy_lenient']:.3f}", flush=True)
            row["same_scores_as_first"] = agreement(row, rows[0]) if rows else None
            rows.append(row)
        for name in args.full:
            full.append({"method": name, **measure(found[name], tokenizer, bl.confirmation_env(setting),
                                                   args.samples, setting)})
            full[-1]["same_scores_as_first"] = agreement(full[-1], full[0]) if len(full) > 1 else None
            print(f"full: {name}: {full[-1]['problems']} problems in {full[-1]['seconds'] / 60:.1f} min, same scores "
                  f"as the first: {full[-1]['same_scores_as_first']}", flush=True)
    path = write_result("eval-methods", info, {
        "model": "SmolLM2-135M-Instruct, untrained", "problems": "the first --problems confirmation problems "
        "(bench_learnability.confirmation_env)", "threads": args.threads, "max_tokens": setting.eval_max_tokens,
        "temperature": setting.temperature, "samples": args.samples, "rows": rows, "full": full},
        suffix="" if args.samples == 8 else f"samples-{args.samples}")  # the 8-sample comparison keeps its file
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
