"""Which tasks can GRPO raise on a CPU? Screen them before training (course issue 29, section 1).

RL re-weights what a model already samples: a task where the model rarely samples a right answer at
the training temperature gives GRPO nothing to reinforce. For each candidate task, on its held-out
problems, with SmolLM2-135M-Instruct's own weights (the float16 GGUF notebook 02's policy server
serves) this measures:

- greedy: strict accuracy (the number after the last '####' is the gold one), lenient accuracy (the
  last number anywhere is), format rate ('####' and a number), mean completion tokens, share cut;
- sampled, 8 completions a problem at the training temperature and at one lower one: the mean
  sampled accuracy (pass@1, strict and lenient), pass@8 (at least one of the 8 right, lenient), the
  format rate and mean tokens.

A task is kept for training when, at the training temperature, pass@8 exceeds pass@1 by 25 points
or more: the right answer is among what the model samples, but not yet what it samples most.

    .venv/bin/python benchmarks/bench_screen.py                      # every task, 100 problems each
    .venv/bin/python benchmarks/bench_screen.py --tasks arith-1step-20 --problems 40
    .venv/bin/python benchmarks/bench_screen.py --table              # the newest screen file as a table

Each task's row is merged into benchmarks/results/screen-<date>.json as soon as it is measured.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number
from bench_learnability import SETTINGS, lines_starting_with_hash, load_model
from word_arithmetic import ONE_LINE_PROMPT, last_number_right

from helpers.grpo.backends import default_threads
from helpers.results import RESULTS_DIR, cpu_flags, machine_info, write_result

TRAIN_TEMPERATURE = 0.9  # notebook 02's
LOW_TEMPERATURE = 0.6
SAMPLES = 8
KEEP_GAP = 0.25  # pass@8 - pass@1 at the training temperature, for a task worth training on

ANSWER_ONLY_PROMPT = "Answer with the number only."
ANSWER_PREFIX = "#### "  # the assistant's reply starts here: the completion is the number and little else


@dataclass(frozen=True)
class Task:
    description: str
    source: str  # "gsm8k" or "word-arithmetic"
    max_tokens: int
    difficulty: str = "one-step"
    max_number: int = 20
    kinds: tuple[str, ...] = ()  # word-arithmetic templates kept (empty: all of the difficulty's)
    answer_only: bool = False  # the reply is prefilled with ANSWER_PREFIX: no working, just the number
    short: bool = False  # ONE_LINE_PROMPT instead of the hash prompt: one line of working, a short cap


TASKS: dict[str, Task] = {
    "gsm8k": Task("GSM8K test split, gsm8k-course's hash prompt (what notebooks 01 and 02 use)", "gsm8k", 200),
    "arith-1step-20": Task("word arithmetic, one step (+ - x /), numbers up to 20, hash prompt", "word-arithmetic", 96),
    "arith-addsub-20": Task("word arithmetic, one step, add and subtract only, numbers up to 20, hash prompt",
                            "word-arithmetic", 96, kinds=("add", "subtract")),
    "arith-1step-20-short": Task("word arithmetic, one step (+ - x /), numbers up to 20, one short line of "
                                 "working asked for, 48 tokens", "word-arithmetic", 48, short=True),
    "arith-1step-10": Task("word arithmetic, one step (+ - x /), numbers up to 10, hash prompt (every held-out "
                           "problem there is)", "word-arithmetic", 96, max_number=10),
    "arith-2step-20": Task("word arithmetic, two steps, numbers up to 20, hash prompt", "word-arithmetic", 128,
                           difficulty="two-step"),
    "arith-1step-20-answer-only": Task("word arithmetic, one step (+ - x /), numbers up to 20, answer only: the "
                                       "reply starts with '#### ', the model writes the number",
                                       "word-arithmetic", 8, answer_only=True),
    "arith-addsub-20-answer-only": Task("word arithmetic, one step, add and subtract only, numbers up to 20, "
                                        "answer only", "word-arithmetic", 8, kinds=("add", "subtract"),
                                        answer_only=True),
}


def held_out(task: Task, n: int) -> tuple[list[list[dict]], list[str]]:
    """The task's first n held-out problems as chat prompts, and their gold answers."""
    import verifiers as vf

    if task.source == "gsm8k":
        env = vf.load_environment("gsm8k-course", variant="hash", num_examples=1, num_eval_examples=n, seed=0)
        data = env.eval_dataset
        return list(data["prompt"]), list(data["answer"])
    import word_arithmetic
    from gsm8k_course import HASH_SYSTEM_PROMPT

    try:  # more than n: only some templates may be kept
        problems = word_arithmetic.generate(4 * n, "eval", task.difficulty, task.max_number, seed=0)
    except ValueError:  # fewer distinct problems exist: take every one there is
        problems = _every_problem(task)
    problems = [p for p in problems if not task.kinds or p.kind in task.kinds][:n]
    system = ONE_LINE_PROMPT if task.short else HASH_SYSTEM_PROMPT
    if task.answer_only:
        system = f"{HASH_SYSTEM_PROMPT} {ANSWER_ONLY_PROMPT}"
    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": p.question}]
               + ([{"role": "assistant", "content": ANSWER_PREFIX.strip()}] if task.answer_only else [])
               for p in problems]
    return prompts, [str(p.answer) for p in problems]


def _every_problem(task: Task) -> list:
    import word_arithmetic

    low, high = 1, 1000
    while high - low > 1:  # the largest n generate() can fill
        mid = (low + high) // 2
        try:
            word_arithmetic.generate(mid, "eval", task.difficulty, task.max_number, seed=0)
            low = mid
        except ValueError:
            high = mid
    return word_arithmetic.generate(low, "eval", task.difficulty, task.max_number, seed=0)


def prompt_ids(tokenizer, prompt: list[dict]) -> list[int]:
    if prompt[-1]["role"] == "assistant":  # answer only: continue the prefilled reply (as TRL does)
        return tokenizer.apply_chat_template(prompt, continue_final_message=True) + \
            tokenizer.encode(" ", add_special_tokens=False)
    return tokenizer.apply_chat_template(prompt, add_generation_prompt=True)


def score(task: Task, texts: list[str], answers: list[str]) -> dict[str, list[int]]:
    """Per completion: strict, lenient (answer only: the first number, what the reply answers), formatted."""
    from gsm8k_course import canonical_number, extract_hash_answer

    if task.answer_only:
        texts = [ANSWER_PREFIX + t for t in texts]
    extracted = [extract_hash_answer(t) for t in texts]
    return {"strict": [int(bool(e) and e == canonical_number(a)) for e, a in zip(extracted, answers)],
            "lenient": [int(e == canonical_number(a)) if task.answer_only else int(last_number_right(t, a))
                        for e, t, a in zip(extracted, texts, answers)],
            "format": [int(bool(e)) for e in extracted],
            "multi_hash": [int(lines_starting_with_hash(t) >= 2) for t in texts]}


def bootstrap_95(values: list[float], resamples: int = 5000) -> list[float]:
    rng = random.Random(0)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return [round(means[int(0.025 * resamples)], 4), round(means[int(0.975 * resamples) - 1], 4)]


def screen_task(name: str, task: Task, server, tokenizer, n: int) -> dict:
    prompts, answers = held_out(task, n)
    ids = [prompt_ids(tokenizer, p) for p in prompts]
    row: dict = {"task": name, **asdict(task), "n": len(ids)}
    started = time.monotonic()
    greedy = server.complete(ids, n=1, max_tokens=task.max_tokens, temperature=0.0)
    texts = [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in greedy]
    s = score(task, texts, answers)
    row["greedy"] = {
        "strict": round(sum(s["strict"]) / len(ids), 4), "lenient": round(sum(s["lenient"]) / len(ids), 4),
        "lenient_95": bootstrap_95(s["lenient"]), "format": round(sum(s["format"]) / len(ids), 4),
        "cut": round(sum(not c.finished for c in greedy) / len(ids), 4),
        "mean_tokens": round(sum(len(c.token_ids) for c in greedy) / len(ids), 1),
        "examples": [{"answer": a, "completion": t} for a, t in list(zip(answers, texts))[:3]]}
    for temperature in (TRAIN_TEMPERATURE, LOW_TEMPERATURE):
        out = server.complete(ids, n=SAMPLES, max_tokens=task.max_tokens, temperature=temperature, seed=1000)
        texts = [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in out]
        s = score(task, texts, [a for a in answers for _ in range(SAMPLES)])
        per_problem = [s["lenient"][i * SAMPLES:(i + 1) * SAMPLES] for i in range(len(ids))]
        pass1 = [sum(p) / SAMPLES for p in per_problem]
        total = len(texts)
        row[f"sampled_t{temperature}"] = {
            "temperature": temperature, "samples_per_problem": SAMPLES,
            "pass1_lenient": round(sum(pass1) / len(ids), 4), "pass1_lenient_95": bootstrap_95(pass1),
            "pass1_strict": round(sum(s["strict"]) / total, 4),
            "pass8_lenient": round(sum(any(p) for p in per_problem) / len(ids), 4),
            "format": round(sum(s["format"]) / total, 4), "multi_hash": round(sum(s["multi_hash"]) / total, 4),
            "cut": round(sum(not c.finished for c in out) / total, 4),
            "mean_tokens": round(sum(len(c.token_ids) for c in out) / total, 1),
            "problems_with_contrast": round(sum(0 < sum(p) < SAMPLES for p in per_problem) / len(ids), 4)}
    train = row[f"sampled_t{TRAIN_TEMPERATURE}"]
    row["gap_at_training_temperature"] = round(train["pass8_lenient"] - train["pass1_lenient"], 4)
    row["keep"] = row["gap_at_training_temperature"] >= KEEP_GAP
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def newest_file() -> Path | None:
    files = sorted(RESULTS_DIR.glob("screen-2*.json"))
    return files[-1] if files else None


def print_table(rows: list[dict]) -> None:
    t, low = f"t{TRAIN_TEMPERATURE}", f"t{LOW_TEMPERATURE}"
    header = ("task", "n", "greedy strict / lenient", f"pass@1 / pass@8 at {TRAIN_TEMPERATURE}",
              f"pass@1 / pass@8 at {LOW_TEMPERATURE}", "format (greedy)", "tokens", "gap", "keep")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        g, a, b = r["greedy"], r[f"sampled_{t}"], r[f"sampled_{low}"]
        print(f"| {r['task']} | {r['n']} | {g['strict']:.2f} / {g['lenient']:.2f} | {a['pass1_lenient']:.2f} / "
              f"{a['pass8_lenient']:.2f} | {b['pass1_lenient']:.2f} / {b['pass8_lenient']:.2f} | {g['format']:.2f} | "
              f"{g['mean_tokens']:.0f} | {r['gap_at_training_temperature']:+.2f} | {'yes' if r['keep'] else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--problems", type=whole_number(1), default=100,
                        help="held-out problems per task (default 100)")
    parser.add_argument("--threads", type=whole_number(1), default=None,
                        help="llama.cpp threads (default: idle cores)")
    parser.add_argument("--table", action="store_true", help="print the newest screen file as a table")
    args = parser.parse_args()
    if args.table:
        path = newest_file()
        print_table(json.loads(path.read_text())["tasks"] if path else [])
        return
    import torch

    from helpers.grpo.policy_server import PolicyServer

    threads = args.threads or default_threads()
    torch.set_num_threads(threads)
    info = machine_info()
    model, tokenizer = load_model(SETTINGS["gsm8k"])  # every weight, float32: the base model
    path = RESULTS_DIR / f"screen-{info['date'][:10]}.json"
    with tempfile.TemporaryDirectory() as tmp, PolicyServer(folder=Path(tmp), name="screen", threads=threads) as server:
        server.sync(model, step=0)
        for name in args.tasks:
            print(f"screen: {name} ...", flush=True)
            row = screen_task(name, TASKS[name], server, tokenizer, args.problems)
            print_table([row])
            old = json.loads(path.read_text())["tasks"] if path.is_file() else []
            rows = [r for r in old if r["task"] != name] + [row]
            rows.sort(key=lambda r: list(TASKS).index(r["task"]) if r["task"] in TASKS else len(TASKS))
            write_result("screen", info, {
                "cpu_flags": cpu_flags(), "threads": threads, "train_temperature": TRAIN_TEMPERATURE,
                "low_temperature": LOW_TEMPERATURE, "keep_gap": KEEP_GAP,
                "note": "SmolLM2-135M-Instruct's own weights as the float16 GGUF notebook 02's policy server "
                        "serves; lenient = the last number anywhere is the gold one; pass@1 = mean over 8 "
                        "samples; keep = pass@8 - pass@1 >= keep_gap at the training temperature",
                "tasks": rows})
    print()
    print_table(json.loads(path.read_text())["tasks"])


if __name__ == "__main__":
    main()
