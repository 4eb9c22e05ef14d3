"""How often a GRPO group gets a signal (rewards that are not all equal) at the start of notebook 02's CI
run: CI's system prompt, SmolLM2-135M on the llama.cpp policy server (float16, as the trainer's first
sync), temperature 0.9, groups of 4, for several completion lengths. A run whose groups all have equal
rewards moves no weight, so the CI parameters need a length at which that is very unlikely.
Prints a table and writes benchmarks/results/signal-<date>.json.

    .venv/bin/python benchmarks/bench_signal.py                        # 96, 128 and 160 tokens, 40 prompts x 4
    .venv/bin/python benchmarks/bench_signal.py --lengths 96 128       # what signal-2026-12-03.json holds
    .venv/bin/python benchmarks/bench_signal.py --lengths 96 160 --prompts 16
    .venv/bin/python benchmarks/bench_signal.py --lengths 32 48 --system-prompt "..." --suffix answer-only
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "environments" / "gsm8k_course"), str(ROOT / "tests")]

from arguments import positive_number, whole_number

from helpers.parameters import GSM8K_ROWS
from helpers.results import machine_info, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=whole_number(1, what="max_tokens"), nargs="+",
                        default=[96, 128, 160])
    parser.add_argument("--prompts", type=whole_number(1, GSM8K_ROWS["train"], "GSM8K train problems"), default=40,
                        help="training questions, one group of 4 each")
    parser.add_argument("--group", type=whole_number(2, what="GRPO compares at least 2 completions"),
                        default=4)
    parser.add_argument("--temperature", type=positive_number("sampled, not greedy"), default=0.9)
    parser.add_argument("--system-prompt", help="instead of CI's (tests/test_notebook_02.py's CI_SYSTEM_PROMPT)")
    parser.add_argument("--suffix", default="", help="signal-<suffix>-<date>.json, to keep another prompt's file")
    args = parser.parse_args()
    os.environ.setdefault("GSM8K_DIR", str(ROOT.parent / "shared" / "data" / "gsm8k"))

    import torch
    import verifiers as vf
    from test_notebook_02 import CI_PARAMETERS, CI_SYSTEM_PROMPT
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import helpers
    from helpers.grpo.backends import start_model
    from helpers.grpo.policy_server import PolicyServer
    from helpers.grpo.rewards import RubricRewards

    info = machine_info()
    ci_completions = CI_PARAMETERS["max_steps"] * CI_PARAMETERS["per_device_train_batch_size"]
    ci_groups = ci_completions // CI_PARAMETERS["num_generations"]
    system_prompt = args.system_prompt or CI_SYSTEM_PROMPT
    env = vf.load_environment("gsm8k-course", variant="hash", num_examples=args.prompts,
                              system_prompt=system_prompt, seed=0)
    model_dir = start_model("cpu")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt_ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True) for p in env.dataset["prompt"]]
    rewards = RubricRewards(env.rubric)  # the rewards exactly as the trainer computes them
    prompts = [p for p in env.dataset["prompt"] for _ in range(args.group)]
    answers = [a for a in env.dataset["answer"] for _ in range(args.group)]
    rows = []
    with PolicyServer(folder=helpers.runs_dir("models"), name="bench_signal", threads=os.cpu_count()) as server:
        server.sync(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), step=0)
        for length in args.lengths:
            started = time.monotonic()
            completions = server.complete(prompt_ids, n=args.group, max_tokens=length,
                                          temperature=args.temperature, seed=7)
            seconds = time.monotonic() - started
            texts = [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in completions]
            scores = rewards.score(prompts, [[{"role": "assistant", "content": t}] for t in texts], answers)
            groups = [scores["reward"][i: i + args.group] for i in range(0, len(texts), args.group)]
            mixed = sum(len(set(g)) > 1 for g in groups) / len(groups)
            rows.append({"max_tokens": length, "completions": len(texts),
                         "format_rate": round(sum(s > 0 for s in scores["hash_format"]) / len(texts), 3),
                         "correct_rate": round(sum(s > 0 for s in scores["correct_answer"]) / len(texts), 3),
                         "mean_prompt_tokens": round(sum(map(len, prompt_ids)) / len(prompt_ids), 1),
                         "groups": len(groups), "groups_with_signal": round(mixed, 3),
                         "p_no_signal_in_ci_run": float(f"{(1 - mixed) ** ci_groups:.2g}"),
                         "sampling_s": round(seconds, 1)})
            print(rows[-1], flush=True)
    print(f"\n{info['cpu']}, {info['cores']} cores; {args.prompts} prompts x {args.group}, temperature "
          f"{args.temperature}")
    print(f"| max tokens | '####' rate | groups with signal | P(no signal in the CI run's {ci_groups} groups) | "
          "sampling s |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['max_tokens']} | {r['format_rate']} | {r['groups_with_signal']} | {r['p_no_signal_in_ci_run']} "
              f"| {r['sampling_s']} |")
    write_result("signal", info, {"prompts": args.prompts, "group": args.group, "temperature": args.temperature,
                                  "system_prompt": system_prompt, "ci_groups": ci_groups, "rows": rows},
                 suffix=args.suffix)


if __name__ == "__main__":
    main()
