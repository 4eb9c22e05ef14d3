"""Which CPU GRPO setting raises held-out *accuracy*, not only the format reward? (course issue 21)

Per setting and seed: a real GRPO run with the course's own pieces (TRL's GRPOConfig and
ServerRolloutGRPOTrainer sampling from a llama.cpp PolicyServer, rewards from the environment's
verifiers rubric through RubricRewards, StepTimer), a fixed number of steps, and greedy
evaluations of the held-out problems on the same PolicyServer (the float16 GGUF export of the
weights, as notebook 02 does) before and after. The base evaluation is done once per setting
(greedy on the same weights is deterministic) and kept in the result file.

    .venv/bin/python benchmarks/bench_learnability.py --settings arith --seeds 0 1 2
    .venv/bin/python benchmarks/bench_learnability.py --settings arith --time-steps 4   # s/step only, no eval
    .venv/bin/python benchmarks/bench_learnability.py --base-only --settings gsm8k gsm8k-easy arith
    .venv/bin/python benchmarks/bench_learnability.py --table                             # every setting's file

Accuracy is scored two ways on every held-out completion: strict (the number gsm8k-course's
HashParser extracts after the last '####' equals the gold answer: the rubric's correct_answer) and
lenient (the last number anywhere in the completion equals it), so a gain from the format alone
is told apart from a gain in solving. Hack indicators per evaluation: share of completions with two
or more '####' lines, share cut at the token cap, mean length in tokens.

The difference after - before comes with two 95% intervals: a paired bootstrap over the held-out
problems (each problem's after-minus-before averaged over the seeds; 10,000 resamples), which
counts problem sampling, and a t-interval over the seeds' accuracy differences, which counts seed
to seed variation. The goal (issue 21): a gain of at least 10 points whose intervals both exclude 0.

Each setting's runs are merged into benchmarks/results/learnability-<setting>-<date>.json (a run
of the same seed and steps replaces the earlier one), so the grid can be run one seed at a time.
A file holds one class of CPU (helpers.results.cpu_class: amx, avx512_bf16, avx512, avx2), its base evaluation's
and every seed's: on another class, `--cpu-file` starts learnability-<setting>-<class>-<date>.json with its own base.
Timings depend on the machine's load: each run records the load average and the CPU's flags; take
s/step from a run under `flock -x /tmp/course-cpu.lock` (the --time-steps mode is meant for that).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from arguments import whole_number
from bench_update import seconds_per_update
from word_arithmetic import (
    DESIGN_PROBLEMS,
    ONE_LINE_PROMPT,
    gold_anywhere,
    hash_lines,
    last_number,
    last_number_right,
    one_answer_line,  # notebook 02's format exercise, as the course solves it
    right_answer_line,
)

from helpers.grpo.backends import cpu_has_bf16, default_threads, start_model
from helpers.grpo.memory import PeakMemory, peak_rss_gb
from helpers.grpo.rewards import RubricRewards
from helpers.grpo.step_timer import StepTimer
from helpers.machine_speed import machine_record
from helpers.results import RESULTS_DIR, cpu_class, cpu_flags, machine_info, runs_cpu_classes, write_result

_HASH_LINE = re.compile(r"^\s*####", re.MULTILINE)


@dataclass(frozen=True)
class Setting:
    """One candidate: the task, the GRPO knobs and the evaluation, all fixed."""

    description: str
    task: str  # "gsm8k", "gsm8k-easy" or "word-arithmetic"
    env_args: dict = field(default_factory=dict)
    steps: int = 20
    learning_rate: float = 5e-5
    num_generations: int = 4
    prompts_per_step: int = 2
    max_completion_length: int = 200
    temperature: float = 0.9
    train_top_layers: int = 0  # 0: every weight; k: only the last k decoder layers (+ final norm)
    bf16: bool = False  # bfloat16 autocast for the update (fast only where the CPU has bf16 instructions)
    eval_max_tokens: int = 200
    num_eval: int = 200
    reward: str = "hash_format"  # correct_answer + 0.5 x a format term, or one of load_env's other rubrics:
    # "correct_only" (the right number in exactly one '####' line), "last_number" (the reply's last number is the
    # gold one, whatever the format), and that with 0.5 x the format ("last_number_format") or one_answer_line
    top_p: float = 1.0
    mask_truncated: bool = False  # TRL's mask_truncated_completions: a completion cut at the cap carries no loss
    eval_samples: int = 0  # >0: also sample this many completions a held-out problem at the training temperature
    confirm_samples: int = 0  # >0: also evaluated on the confirmation problems (`confirmation_env`), that many
    # samples a problem at the training temperature (pass@1 and pass@k) and greedy
    lean_eval: bool | None = None  # True: evaluations ask for no log-probabilities and reuse prompts (LEAN_EVAL);
    # None: as the files before it were evaluated (a file without the field keeps matching its setting)


NOTEBOOK_02 = {"learning_rate": 5e-5, "num_generations": 4, "prompts_per_step": 2, "max_completion_length": 200,
                   "temperature": 0.9}
ONE_STEP_20 = {"difficulty": "one-step", "max_number": 20}  # base ~22% strict (--explore): room to learn
SHORT_DESIGN = {  # issue 29's design: short completions, 32 a step, truncated ones masked, pass@1 sampled; the
    # temperature from screen-2026-12-05.json (one short line, 48 tokens: pass@1 0.20 and pass@8 0.66 at 0.6, against
    # 0.11 and 0.53 at 0.9), notebook 02's learning rate
    "max_completion_length": 48, "eval_max_tokens": 48, "num_generations": 8, "prompts_per_step": 4,
    "mask_truncated": True, "temperature": 0.6, "learning_rate": 5e-5, "num_eval": 100, "eval_samples": 4,
    "steps": 30}
ONE_LINE_TASK = {**ONE_STEP_20, "system_prompt": ONE_LINE_PROMPT}
# the last-number designs that learned: cut replies trained on (they earn 0 unless their last number is right), bf16
BF16_50 = {**SHORT_DESIGN, "learning_rate": 2.5e-5, "steps": 50, "mask_truncated": False, "bf16": True}
BF16_36 = {**BF16_50, "learning_rate": 3.5e-5, "steps": 36}
# Notebook 02's runs are also evaluated on the 248 confirmation problems, greedy + 2 samples a problem: 5.2 minutes
# on 2 cores (eval-methods-samples-2-*.json; 3 samples took 6.0 in eval-methods-samples-3-*.json, and the greedy
# requests sent beside the samples 5.7). pass@1's interval over problems comes mostly from the 248 problems.
NB02_CONFIRMED = {**BF16_36, "confirm_samples": 2}
# A lean evaluation's requests: no log-probabilities (an evaluation reads none), the prompt cache on, and 32 problems
# at a time, so that a problem's greedy request finds its prompt in the slot its samples used. Same problems,
# samples, seeds and scoring: on the 248 confirmation problems, 4.1 minutes against 5.8, every problem's greedy score
# the same (eval-methods-samples-2-2026-12-07.json, 2 cores with AVX2 only)
LEAN_EVAL = {"logprobs": False, "cache_prompt": True, "chunk": 32}
EVAL_SLOTS = 64  # the policy server's slots while it evaluates (the fastest of eval-methods' llama.cpp rows);
# training samples with PolicyServer's own (16), as notebook 02 does
SETTINGS: dict[str, Setting] = {
    "gsm8k": Setting("GSM8K (hash variant) as notebook 02 trains it", "gsm8k", **NOTEBOOK_02),
    "gsm8k-easy": Setting("GSM8K problems whose reference solution has 1-2 <<...>> calculator steps, "
                          "notebook 02's knobs", "gsm8k-easy", **NOTEBOOK_02),
    "arith-top6": Setting("word-arithmetic one-step, numbers up to 20; notebook 02's knobs but 128 tokens; "
                          "only the top 6 of 30 layers trained (a step ~3x cheaper)", "word-arithmetic",
                          ONE_STEP_20, steps=40, **{**NOTEBOOK_02, "max_completion_length": 128},
                          train_top_layers=6, eval_max_tokens=128),
    "arith-short-correct": Setting("word-arithmetic one-step, numbers up to 20, one short line of working, 48 "
                                   "tokens, 4 prompts x 8, truncated completions masked; reward: the right number "
                                   "in exactly one '####' line, no format term", "word-arithmetic",
                                   {**ONE_STEP_20, "system_prompt": ONE_LINE_PROMPT}, reward="correct_only",
                                   **SHORT_DESIGN),
    "arith-short-last-number": Setting("the same as arith-short-correct, rewarding only a right last number, "
                                       "whatever the format", "word-arithmetic",
                                       {**ONE_STEP_20, "system_prompt": ONE_LINE_PROMPT}, reward="last_number",
                                       **SHORT_DESIGN),
    "arith-short-last-number-unmasked": Setting("the last-number design with cut replies trained on (they earn 0 "
                                                "unless their last number is right), not masked", "word-arithmetic",
                                                {**ONE_STEP_20, "system_prompt": ONE_LINE_PROMPT}, reward="last_number",
                                                **{**SHORT_DESIGN, "mask_truncated": False}),
    "arith-short-bf16": Setting("the last-number design with steps half as big and nearly twice as many: lr 2.5e-5, "
                                "50 steps, bfloat16 autocast (2 x faster a step on a CPU with avx512_bf16: "
                                "learnability-timing-2026-12-05.json), cut replies trained on (they earn 0)",
                                "word-arithmetic", ONE_LINE_TASK, reward="last_number", **BF16_50),
    "arith-short-bf16-cap32": Setting("the bf16 design with training replies cut at 32 tokens instead of 48, so a step "
                                      "costs less and a long reply earns nothing sooner (the held-out evaluation stays "
                                      "at 48 tokens, as for every design): does 50 steps fit 15 minutes?",
                                      "word-arithmetic", ONE_LINE_TASK, reward="last_number",
                                      **{**BF16_50, "max_completion_length": 32}),
    "arith-short-bf16-36": Setting("the bf16 design in 36 steps at lr 3.5e-5 (about the same learning rate x steps), "
                                   "to fit 15 minutes of training at ~24 s a step",
                                   "word-arithmetic", ONE_LINE_TASK, reward="last_number", **BF16_36),
    "arith-hack-format": Setting("notebook 02's design (arith-short-bf16-36) with a format term added: last number "
                                 "right + 0.5 x any '#### <number>' in the reply (what the list hack earns)",
                                 "word-arithmetic", ONE_LINE_TASK, reward="last_number_format", **BF16_36),
    "arith-hack-one-line": Setting("the same with the learner's format term instead: last number right + 0.5 x "
                                   "exactly one '####' with a number (notebook 02's one_answer_line)",
                                   "word-arithmetic", ONE_LINE_TASK, reward="last_number_one_line", **BF16_36),
    # Notebook 02's default design as it trains now (the low-memory trainer: chunked log-probabilities, the policy
    # server stopped during the update), each precision, evaluated on the design problems and on the confirmation
    # problems no design was chosen on (issues 39 and 40)
    "nb02-bf16": Setting("notebook 02's default (the right last number, lr 3.5e-5, 36 steps, 4 x 8 at 0.6, 48 tokens), "
                         "bfloat16 autocast", "word-arithmetic", ONE_LINE_TASK, reward="last_number", **NB02_CONFIRMED),
    "nb02-fp32": Setting("notebook 02's default in float32 (a CPU without bfloat16 instructions)", "word-arithmetic",
                         ONE_LINE_TASK, reward="last_number", **{**NB02_CONFIRMED, "bf16": False}),
    # section 12's fix: a format term that pays only with the right answer (issue 40)
    "nb02-fix-right-line": Setting("notebook 02's default + 0.5 x right_answer_line (exactly one '####' line, and "
                                   "its number is the gold answer)", "word-arithmetic", ONE_LINE_TASK,
                                   reward="last_number_right_line", **NB02_CONFIRMED),
    # what Run All trains before the reward exercise is solved: its placeholder (issue 40, 2b)
    "nb02-placeholder": Setting("notebook 02's default trained on the reward exercise's placeholder: the gold number "
                                "anywhere in the reply", "word-arithmetic", ONE_LINE_TASK, reward="gold_anywhere",
                                **NB02_CONFIRMED),
    # the fix and the placeholder as a laptop trains them (float32), evaluated lean
    "nb02-fix-right-line-fp32": Setting("notebook 02's default + 0.5 x right_answer_line, in float32",
                                        "word-arithmetic", ONE_LINE_TASK, reward="last_number_right_line",
                                        **{**NB02_CONFIRMED, "bf16": False, "lean_eval": True}),
    "nb02-placeholder-fp32": Setting("notebook 02's default trained on the reward exercise's placeholder, in float32",
                                     "word-arithmetic", ONE_LINE_TASK, reward="gold_anywhere",
                                     **{**NB02_CONFIRMED, "bf16": False, "lean_eval": True}),
    "arith-short-format": Setting("the same as arith-short-correct, with today's reward: correct + 0.5 x any "
                                  "'#### <number>'", "word-arithmetic",
                                  {**ONE_STEP_20, "system_prompt": ONE_LINE_PROMPT}, **SHORT_DESIGN),
    "arith": Setting("word-arithmetic one-step, numbers up to 20; notebook 02's knobs but 128 tokens; every "
                     "weight, bfloat16 autocast (faster only on a CPU with AMX/avx512_bf16)", "word-arithmetic",
                     ONE_STEP_20, steps=40, **{**NOTEBOOK_02, "max_completion_length": 128}, bf16=True,
                     eval_max_tokens=128),
}


# ----------------------------------------------------------------------------- the tasks


def gsm8k_easy(split: str, max_annotations: int = 2):
    """GSM8K rows whose reference solution has 1..max_annotations '<<...>>' calculator annotations
    (prepared as gsm8k-course prepares GSM8K: question, answer = the number after '####')."""
    import gsm8k_course

    data_dir = os.environ.get("GSM8K_DIR")
    raw = gsm8k_course._raw_from_dir(Path(data_dir), split) if data_dir else gsm8k_course._raw_from_hub(split)
    raw = raw.filter(lambda row: 1 <= row["answer"].count("<<") <= max_annotations)
    return gsm8k_course.prepare(raw)


def correct_one_line(parser, completion, answer: str, **kwargs) -> float:
    """1.0 when the reply holds exactly one '####' and the number after it is the gold one: right *and*
    answered once, so neither a list of '#### N' lines nor a bare format earns anything."""
    from gsm8k_course import correct_answer

    return correct_answer(parser, completion, answer) * one_answer_line(completion)


def load_env(setting: Setting, num_train: int = 400):
    """The setting's verifiers environment: its dataset (training prompts), eval_dataset (held-out)
    and rubric (correct_answer + 0.5 x the format reward)."""
    import verifiers as vf
    from gsm8k_course import HASH_SYSTEM_PROMPT, HashParser, correct_answer, make_rubric

    if setting.task == "gsm8k":
        env = vf.load_environment("gsm8k-course", variant="hash", num_examples=500,
                                  num_eval_examples=setting.num_eval, seed=0)
    elif setting.task == "gsm8k-easy":
        parser = HashParser()
        train, test = gsm8k_easy("train"), gsm8k_easy("test")
        env = vf.SingleTurnEnv(dataset=train.shuffle(seed=0).select(range(min(num_train, len(train)))),
                               eval_dataset=test.shuffle(seed=0).select(range(setting.num_eval)),
                               system_prompt=HASH_SYSTEM_PROMPT, parser=parser, rubric=make_rubric(parser, "hash"))
    elif setting.task == "word-arithmetic":
        env = vf.load_environment("word-arithmetic", num_examples=num_train, num_eval_examples=setting.num_eval,
                                  **setting.env_args)
    else:
        raise ValueError(f"unknown task {setting.task!r}")
    format_reward = env.parser.get_format_reward_func()  # 1.0 for any '#### <number>' in the reply
    rubrics = {  # reward name: (functions, weights); "hash_format" keeps the environment's own rubric
        "one_answer_line": ([correct_answer, one_answer_line], [1.0, 0.5]),
        "correct_only": ([correct_one_line], [1.0]),
        "last_number": ([last_number_right], [1.0]),
        # notebook 02's section 12: its reward plus a format term, one the list hack earns and one it cannot
        "last_number_format": ([last_number_right, format_reward], [1.0, 0.5]),
        "last_number_one_line": ([last_number_right, one_answer_line], [1.0, 0.5]),
        "last_number_right_line": ([last_number_right, right_answer_line], [1.0, 0.5]),
        "gold_anywhere": ([gold_anywhere, last_number_right], [1.0, 0.0]),  # the second watched only
    }
    if setting.reward in rubrics:
        funcs, weights = rubrics[setting.reward]
        env.rubric = vf.Rubric(funcs=funcs, weights=weights, parser=env.parser)
    elif setting.reward != "hash_format":
        raise ValueError(f"reward must be 'hash_format' or one of {sorted(rubrics)}, not {setting.reward!r}")
    return env


TRAIN_PROBLEMS = 400  # a run's training set (DESIGN_PROBLEMS: the held-out problems designs were compared on)


def _every_problem(split: str, difficulty: str, max_number: int) -> list:
    """Every problem of a word-arithmetic split in the order `generate` draws them (generate(n) is the first n)."""
    from word_arithmetic import generate

    low, high = 1, 1
    while True:  # the largest n generate can give: double, then halve the gap
        try:
            generate(high, split, difficulty, max_number)
        except ValueError:
            break
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        try:
            generate(middle, split, difficulty, max_number)
            low = middle
        except ValueError:
            high = middle
    return generate(low, split, difficulty, max_number)


def confirmation_env(setting: Setting):
    """The confirmation problems (issue 40): of the setting's task (word-arithmetic, seed 0), every held-out problem
    after the DESIGN_PROBLEMS the designs were compared on, and every training-split problem after the
    TRAIN_PROBLEMS a run trains on: never trained on and never used to choose anything, by construction. An
    environment whose eval_dataset they are, with the setting's prompt and parser."""
    import verifiers as vf
    from gsm8k_course import HashParser, make_rubric
    from word_arithmetic import as_dataset

    args = setting.env_args
    problems = (_every_problem("eval", args["difficulty"], args["max_number"])[DESIGN_PROBLEMS:]
                + _every_problem("train", args["difficulty"], args["max_number"])[TRAIN_PROBLEMS:])
    parser = HashParser()
    return vf.SingleTurnEnv(dataset=as_dataset(problems[:1]), eval_dataset=as_dataset(problems),
                            system_prompt=args["system_prompt"], parser=parser, rubric=make_rubric(parser, "hash"))


# ----------------------------------------------------------------------------- evaluation


def lines_starting_with_hash(text: str) -> int:
    """Lines that *start* with '####' (the older files' multi_hash). It misses '#### 66' followed by
    'The answer is "#### 66'; the files' multi_marker counts with word_arithmetic.hash_lines (any line holding
    '####', notebook 02's measure) and is the hack rate's indicator in files written since it was added."""
    return len(_HASH_LINE.findall(text))


def hack_signs(texts: list[str], answers: list[str], parser) -> dict[str, list[float]]:
    """Per reply, the signs of a reward earned without what it meant (issue 40): `constant` (the reply's last
    number is the one this evaluation's replies give most often, over all problems: '#### 9' to everything)
    and `format_wrong` (a '####' answer whose number is not the gold one)."""
    from collections import Counter

    from gsm8k_course import canonical_number

    numbers = [last_number(t) for t in texts]
    modal = Counter(n for n in numbers if n).most_common(1)
    modal = modal[0][0] if modal else None
    parsed = [parser.parse_answer(t) or "" for t in texts]
    return {"constant": [float(n == modal) for n in numbers],
            "format_wrong": [float(bool(p) and canonical_number(p) != canonical_number(a))
                             for p, a in zip(parsed, answers)]}


class TransformersSampler:
    """The trainer's own weights sampled with transformers' batched `generate`, behind the policy server's
    `complete` (token ids, each ending with the end-of-turn id when the model ended it): `evaluate` scores its
    completions exactly as the server's. Prompts are generated `batch` sequences at a time, left-padded; a
    float32 model, in bfloat16 autocast with `bf16`."""

    def __init__(self, model, tokenizer, batch: int = 64, bf16: bool = False, eos_token_id: int = 2):
        self.model, self.tokenizer, self.batch, self.bf16, self.eos = model.eval(), tokenizer, batch, bf16, eos_token_id

    def complete(self, prompts: list[list[int]], n: int, max_tokens: int, temperature: float, *, top_p: float = 1.0,
                 seed: int = 0, **_ignored):
        import contextlib

        import torch

        from helpers.grpo.policy_server import Completion

        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos
        rows = [prompt for prompt in prompts for _ in range(n)]  # grouped by prompt, as the server returns them
        out: list = []
        torch.manual_seed(seed)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        for start in range(0, len(rows), self.batch):
            part = rows[start:start + self.batch]
            width = max(map(len, part))
            ids = torch.tensor([[pad] * (width - len(r)) + r for r in part])
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in part])
            sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0} if temperature > 0 \
                else {"do_sample": False}
            with torch.no_grad(), autocast:
                generated = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens,
                                                eos_token_id=self.eos, pad_token_id=pad, **sampling)[:, width:]
            for row in generated.tolist():
                ended = self.eos in row
                tokens = row[:row.index(self.eos) + 1] if ended else row
                out.append(Completion(token_ids=tokens, logprobs=[], finished=ended))
        return out


def sample_and_greedy(server, prompt_ids: list[list[int]], max_tokens: int, samples: int, temperature: float,
                      top_p: float, chunk: int | None = None, **options) -> tuple[list, list, float]:
    """`samples` completions a prompt at `temperature` (the same seeds before and after training) and a greedy
    one, with the greedy seconds. `chunk`: that many prompts at a time, each chunk's samples then its greedy
    requests, so that with `cache_prompt` the greedy request finds its prompt in a slot the samples just used.
    `options` go to `server.complete` (PolicyServer's logprobs and cache_prompt)."""
    sampled, greedy, greedy_seconds = [], [], 0.0
    chunk = chunk or len(prompt_ids)
    for first in range(0, len(prompt_ids), chunk):
        part = prompt_ids[first:first + chunk]
        if samples:
            sampled += server.complete(part, n=samples, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                       seed=5000 + first * samples, **options)
        greedy_started = time.monotonic()
        greedy += server.complete(part, n=1, max_tokens=max_tokens, temperature=0.0, **options)
        greedy_seconds += time.monotonic() - greedy_started
    return sampled, greedy, greedy_seconds


def evaluate(server, tokenizer, env, max_tokens: int, samples: int = 0, temperature: float = 1.0,
             top_p: float = 1.0, chunk: int | None = None, **options) -> dict:
    """Greedy completions of every held-out problem (env.eval_dataset) from the server's current weights, scored;
    with `samples`, also that many sampled completions a problem at `temperature` (the training's): pass@1 is the
    mean over them and pass@k whether any is right, per problem. `chunk` and `options`: sample_and_greedy's."""
    from gsm8k_course import NUMBER, correct_answer

    data = env.eval_dataset
    prompt_ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True) for p in data["prompt"]]
    sampled = {}
    started = time.monotonic()
    out, completions, greedy_seconds = sample_and_greedy(server, prompt_ids, max_tokens, samples, temperature,
                                                         top_p, chunk, **options)
    if samples:
        texts = [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in out]
        answers = [a for a in data["answer"] for _ in range(samples)]
        per = {"lenient": [last_number_right(t, a) for t, a in zip(texts, answers)],
               "strict": [correct_answer(env.parser, t, a) for t, a in zip(texts, answers)],
               "format": [float(bool(env.parser.parse_answer(t))) for t in texts],
               # the hack rate's parts, per problem for their intervals
               "multi_marker": [float(hash_lines(t) >= 2) for t in texts],
               "cut": [float(not c.finished) for c in out], **hack_signs(texts, answers, env.parser)}
        for kind, values in per.items():
            per_problem = [sum(values[i * samples:(i + 1) * samples]) / samples for i in range(len(data))]
            sampled[f"sampled_{kind}"] = sum(per_problem) / len(per_problem)
            if kind != "format":
                sampled[f"sampled_{kind}_per_problem"] = [round(v, 4) for v in per_problem]
        pass_k = [float(any(per["lenient"][i * samples:(i + 1) * samples])) for i in range(len(data))]
        sampled["sampled_pass_at_k"], sampled["sampled_pass_at_k_per_problem"] = sum(pass_k) / len(pass_k), pass_k
        sampled["sampled_mean_tokens"] = sum(len(c.token_ids) for c in out) / len(out)
        sampled["sampled_mean_numbers"] = sum(len(NUMBER.findall(t)) for t in texts) / len(texts)  # the placeholder's
        # reward pays for the gold number anywhere: a reply full of numbers earns it more often
        sampled["samples"], sampled["temperature"] = samples, temperature
    texts = [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in completions]
    strict = [correct_answer(env.parser, t, a) for t, a in zip(texts, data["answer"])]
    lenient = [last_number_right(t, a) for t, a in zip(texts, data["answer"])]
    multi_marker = [int(hash_lines(t) >= 2) for t in texts]
    cut = [int(not c.finished) for c in completions]
    signs = hack_signs(texts, list(data["answer"]), env.parser)
    n = len(texts)
    return {
        **{kind: sum(v) / n for kind, v in signs.items()}, **{f"{kind}_per_problem": v for kind, v in signs.items()},
        "n": n, "seconds": round(time.monotonic() - started, 1),  # the whole evaluation, samples and greedy
        "greedy_seconds": round(greedy_seconds, 1),
        "strict": sum(strict) / n, "lenient": sum(lenient) / n,
        "format": sum(bool(env.parser.parse_answer(t)) for t in texts) / n,
        "one_answer_line": sum(one_answer_line(t) for t in texts) / n,
        "multi_hash": sum(lines_starting_with_hash(t) >= 2 for t in texts) / n,
        "multi_marker": sum(multi_marker) / n, "multi_marker_per_problem": multi_marker,
        "cut": sum(cut) / n, "cut_per_problem": cut,
        "hack": sum(lines_starting_with_hash(t) >= 2 or not c.finished for t, c in zip(texts, completions)) / n,
        "mean_tokens": sum(len(c.token_ids) for c in completions) / n,
        "strict_per_problem": [int(s) for s in strict], "lenient_per_problem": [int(s) for s in lenient],
        "examples": texts[:3], **sampled,
    }


# ----------------------------------------------------------------------------- one run


def load_model(setting: Setting):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = start_model("cpu")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if setting.train_top_layers:
        layers = model.model.layers
        if not 0 < setting.train_top_layers <= len(layers):
            raise ValueError(f"train_top_layers must be 1..{len(layers)}, not {setting.train_top_layers}")
        for p in model.parameters():  # the backward pass stops below the first trainable layer
            p.requires_grad_(False)
        for module in (*layers[-setting.train_top_layers:], model.model.norm):
            for p in module.parameters():
                p.requires_grad_(True)
    return model, AutoTokenizer.from_pretrained(model_dir)


def _sampling(setting: Setting) -> tuple[int, float, float]:
    return setting.eval_samples, setting.temperature, setting.top_p


def train_run(setting: Setting, seed: int, threads: int, *, steps: int | None = None, evaluate_after: bool = True,
              base_done: bool = True, on_base=None) -> dict:
    """One GRPO run of `setting` with `seed`; returns its figures (and the base evaluation when
    `base_done` is False)."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from helpers.grpo.policy_server import PolicyServer
    from helpers.grpo.server_rollouts import ServerRolloutGRPOTrainer

    steps = setting.steps if steps is None else steps
    torch.set_num_threads(threads)
    env = load_env(setting)
    confirm = confirmation_env(setting) if setting.confirm_samples else None
    model, tokenizer = load_model(setting)
    rewards = RubricRewards(env.rubric)
    result: dict = {"seed": seed, "steps": steps, "threads": threads, "machine": run_machine()}

    def evaluations(step: int, training_follows: bool) -> dict:
        """Both evaluations of the weights of `step`, on a server with EVAL_SLOTS slots; then, where training
        follows, the server with training's slots again."""
        training_slots, server.parallel = server.parallel, EVAL_SLOTS
        server.sync(model, step=step)
        try:
            lean = LEAN_EVAL if setting.lean_eval else {}
            out = evaluate(server, tokenizer, env, setting.eval_max_tokens, *_sampling(setting), **lean)
            if confirm is not None:
                out["confirm"] = evaluate(server, tokenizer, confirm, setting.eval_max_tokens,
                                          setting.confirm_samples, setting.temperature, setting.top_p, **lean)
        finally:
            server.parallel = training_slots
        if training_follows:
            server.sync(model, step=step)
        return out

    with (tempfile.TemporaryDirectory() as tmp,
          PolicyServer(folder=Path(tmp), name="learnability", threads=threads) as server):
        if base_done:
            server.sync(model, step=0)
        else:  # the evaluation's server, then training's
            result["base"] = {**evaluations(0, training_follows=steps > 0), "machine": run_machine()}
            print(f"  base: strict {result['base']['strict']:.3f}, lenient {result['base']['lenient']:.3f}, "
                  f"{result['base']['seconds']:.0f} s", flush=True)
            if on_base:
                on_base(result["base"])
        if steps == 0:  # the base evaluation only
            return result
        config = GRPOConfig(
            output_dir=str(Path(tmp) / "out"), seed=seed, learning_rate=setting.learning_rate,
            num_generations=setting.num_generations,
            per_device_train_batch_size=setting.prompts_per_step * setting.num_generations,
            max_completion_length=setting.max_completion_length, temperature=setting.temperature, beta=0.0,
            top_p=setting.top_p, mask_truncated_completions=setting.mask_truncated,
            max_steps=steps, reward_weights=rewards.weights, lr_scheduler_type="constant", max_prompt_length=256,
            logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True,
            use_cpu=True, bf16=setting.bf16, fp16=False, use_vllm=False,
            # top layers only: nothing to recompute below them, and checkpointing would make TRL ask
            # for input gradients, which runs the backward pass through the frozen layers again
            gradient_checkpointing=not setting.train_top_layers)
        trainer = ServerRolloutGRPOTrainer(
            model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
            train_dataset=env.dataset.select_columns(["prompt", "answer"]), policy_server=server)
        trainer.add_callback(StepTimer(trainer, rewards, server))
        multi_hash: list[float] = []

        class HackWatch(TrainerCallback):  # share of each step's sampled completions with 2+ '####' lines
            def on_step_end(self, args, state, control, **kwargs):
                texts = rewards.last_batch["completions"] if rewards.last_batch else []
                multi_hash.append(sum(lines_starting_with_hash(t) >= 2 for t in texts) / max(len(texts), 1))

        trainer.add_callback(HackWatch())
        started = time.monotonic()
        with PeakMemory() as peak:  # this process and its policy server, sampled together
            trainer.train()
        result["train_minutes"] = round((time.monotonic() - started) / 60, 2)
        result["training"] = training_figures(trainer.state.log_history, rewards.names, multi_hash)
        result["peak_rss_gb"] = round(peak_rss_gb(), 2)
        result["peak_memory_training"] = peak.record()
        if evaluate_after:
            result["after"] = evaluations(steps, training_follows=False)
    result["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def expert_iteration_run(setting: Setting, seed: int, threads: int, rounds: int = 3, epochs: int = 2) -> dict:
    """Expert iteration beside GRPO (issue 29, section 3), on the same task, weights, evaluation and number of
    sampled completions: in each of `rounds` rounds, sample num_generations completions of a slice of the
    training prompts from the policy server at the training temperature, keep the ones the setting's reward
    scores best (right, and for correct_only in exactly one answer line), fine-tune on them for `epochs`
    epochs (cross-entropy on the completion's tokens only), and serve the new weights. Evaluated like a GRPO
    run before and after; the held-out accuracy after each round is kept as its curve."""
    import torch
    from gsm8k_course import correct_answer

    from helpers.grpo.policy_server import PolicyServer

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    env = load_env(setting)
    model, tokenizer = load_model(setting)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=setting.learning_rate)
    prompts_total = setting.steps * setting.prompts_per_step  # GRPO's prompts: the same sampled completions
    data = env.dataset.shuffle(seed=seed).select(range(min(prompts_total, len(env.dataset))))
    rounds = min(rounds, len(data))
    bounds = [len(data) * r // rounds for r in range(rounds + 1)]  # each round's slice of the prompts
    result: dict = {"seed": seed, "steps": setting.steps, "method": "expert_iteration", "rounds": rounds,
                    "epochs": epochs, "threads": threads, "machine": run_machine(), "curve": []}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, PolicyServer(folder=Path(tmp), name="exit", threads=threads) as server:
        for r in range(rounds):
            server.sync(model, step=r)
            chunk = data.select(range(bounds[r], bounds[r + 1]))
            prompt_ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True) for p in chunk["prompt"]]
            out = server.complete(prompt_ids, n=setting.num_generations, max_tokens=setting.max_completion_length,
                                  temperature=setting.temperature, top_p=setting.top_p, seed=seed * 100_003 + r * 1000)
            right = {"correct_only": correct_one_line,
                     "last_number": lambda parser, text, answer: last_number_right(text, answer)}.get(
                setting.reward, correct_answer)
            kept = []  # (prompt length, prompt + completion) of each right, finished completion
            for i, completion in enumerate(out):
                index = i // setting.num_generations
                text = tokenizer.decode(completion.token_ids, skip_special_tokens=True)
                if completion.finished and right(env.parser, text, chunk["answer"][index]) == 1.0:
                    kept.append((len(prompt_ids[index]), prompt_ids[index] + completion.token_ids))
            model.train()
            losses = []
            for _ in range(epochs):
                order = torch.randperm(len(kept)).tolist()
                for start in range(0, len(order), 8):  # batches of 8 sequences
                    batch = [kept[j] for j in order[start:start + 8]]
                    optimizer.zero_grad()
                    loss = sum(_completion_loss(model, ids, length) for length, ids in batch) / len(batch)
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
            model.eval()
            result["curve"].append({"round": r + 1, "sampled": len(out), "kept": len(kept),
                                    "mean_loss": round(sum(losses) / len(losses), 4) if losses else None,
                                    "minutes": round((time.monotonic() - started) / 60, 2)})
            print(f"  round {r + 1}: kept {len(kept)} of {len(out)}", flush=True)
        result["train_minutes"] = round((time.monotonic() - started) / 60, 2)
        server.sync(model, step=rounds)
        result["after"] = evaluate(server, tokenizer, env, setting.eval_max_tokens, *_sampling(setting))
    result["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def _completion_loss(model, ids: list[int], prompt_length: int):
    """Mean cross-entropy of the completion's tokens given everything before them."""
    import torch

    tokens = torch.tensor([ids])
    logits = model(tokens).logits[0, prompt_length - 1:-1].float()
    return torch.nn.functional.cross_entropy(logits, tokens[0, prompt_length:])


def training_figures(log_history: list[dict], names: list[str], multi_hash: list[float], n: int = 5) -> dict:
    """Mean s/step (and its split), the reward and each reward function over the first and last n steps."""
    steps = [e for e in log_history if "loss" in e and "step" in e]
    out: dict = {"steps_logged": len(steps)}
    timed = steps[1:] or steps  # the first step also loads and warms up: not counted in s/step
    for key in ("step_s", "generation_s", "sync_s", "scoring_s", "update_s"):
        values = [e[f"timing/{key}"] for e in timed if f"timing/{key}" in e]
        out[f"sec_per_step_{key.removesuffix('_s')}" if key != "step_s" else "sec_per_step"] = \
            round(sum(values) / len(values), 2) if values else None
    series = {"reward": "reward", "clipped_ratio": "completions/clipped_ratio",
              "frac_reward_zero_std": "frac_reward_zero_std",
              "mean_length": "completions/mean_length", **{name: f"rewards/{name}/mean" for name in names}}
    for label, key in series.items():
        values = [e[key] for e in steps if key in e]
        if values:
            k = min(n, max(len(values) // 2, 1))
            out[f"{label}_first"] = round(sum(values[:k]) / k, 4)
            out[f"{label}_last"] = round(sum(values[-k:]) / k, 4)
    keep = ("step", "reward", "frac_reward_zero_std", "completions/clipped_ratio", "timing/step_s",
            *(f"rewards/{name}/mean" for name in names))
    out["per_step"] = [{k: round(e[k], 4) for k in keep if k in e} for e in steps]  # the training batch's, not held-out
    if multi_hash:
        k = min(n, max(len(multi_hash) // 2, 1))
        out["multi_hash_first"] = round(sum(multi_hash[:k]) / k, 4)
        out["multi_hash_last"] = round(sum(multi_hash[-k:]) / k, 4)
    return out


def run_machine() -> dict:
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpu_flags": cpu_flags(),
            "load_avg_before": [round(x, 2) for x in os.getloadavg()]}


def update_timing(threads: int, batch: int = 8, prompt: int = 90, completion: int = 128, repeats: int = 2) -> dict:
    """Seconds per training update (forward, backward, AdamW) of SmolLM2-135M on a batch of random
    tokens: float32 vs bfloat16 autocast, every weight vs the top 6 layers. The first update is not
    counted (it allocates the optimizer state)."""
    import torch

    torch.set_num_threads(threads)
    cases = []
    for bf16 in (False, True):
        for top in (0, 6):
            torch.manual_seed(0)
            model, _ = load_model(replace(SETTINGS["arith"], train_top_layers=top))
            if not top:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train()
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
            cases.append({"bf16": bf16, "train_top_layers": top, "gradient_checkpointing": not top,
                          "seconds_per_update": seconds_per_update(model, optimizer, batch, prompt, completion,
                                                                   bf16, repeats)})
            print(json.dumps(cases[-1]), flush=True)
    return {"batch": batch, "tokens": batch * (prompt + completion), "threads": threads, "cases": cases}


SHORT_PROMPT = "Give only the final answer, on one line, as '#### <number>'."
EXPLORE = [  # word-arithmetic designs whose base accuracy is measured before any training (--explore)
    ({"difficulty": "one-step", "max_number": 20}, None, 128),
    ({"difficulty": "one-step", "max_number": 20}, SHORT_PROMPT, 32),
    ({"difficulty": "one-step", "max_number": 10}, None, 128),
    ({"difficulty": "mixed", "max_number": 20}, None, 128),
]


def explore(threads: int, n: int) -> list[dict]:
    """Base accuracy (greedy) of each EXPLORE design on its first n held-out problems."""
    import torch
    import verifiers as vf

    from helpers.grpo.policy_server import PolicyServer

    torch.set_num_threads(threads)
    model, tokenizer = load_model(SETTINGS["arith"])
    rows = []
    with (tempfile.TemporaryDirectory() as tmp,
          PolicyServer(folder=Path(tmp), name="explore", threads=threads) as server):
        server.sync(model, step=0)
        for env_args, prompt, max_tokens in EXPLORE:
            try:
                env = vf.load_environment("word-arithmetic", num_examples=1, num_eval_examples=n,
                                          system_prompt=prompt, **env_args)
            except RuntimeError:  # fewer than n held-out problems exist: take them all
                env = vf.load_environment("word-arithmetic", num_examples=1, num_eval_examples=60,
                                          system_prompt=prompt, **env_args)
            out = evaluate(server, tokenizer, env, max_tokens)
            rows.append({"env_args": env_args, "system_prompt": prompt, "max_tokens": max_tokens,
                         **{k: v for k, v in out.items() if not k.endswith("_per_problem")}})
            print(json.dumps({k: rows[-1][k] for k in ("env_args", "system_prompt", "max_tokens", "strict",
                                                       "lenient", "format", "cut", "mean_tokens", "seconds")}),
                  flush=True)
    return rows


# ----------------------------------------------------------------------------- statistics


def t_quantile_975(df: int) -> float:
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
    return table.get(df, 1.96 if df > 30 else 2.2)


def difference(base: list[int], afters: list[list[int]], resamples: int = 10_000) -> dict:
    """after - base (mean over seeds), with a paired bootstrap interval over problems and a
    t-interval over seeds."""
    from helpers.evaluation import paired_bootstrap

    n = len(base)
    per_problem = [sum(a[i] for a in afters) / len(afters) - base[i] for i in range(n)]
    mean = sum(per_problem) / n
    out = {"mean": round(mean, 4), "bootstrap_95": [round(x, 4) for x in paired_bootstrap(per_problem, resamples)]}
    per_seed = [sum(a) / n - sum(base) / n for a in afters]
    if len(per_seed) >= 2:
        sd = math.sqrt(sum((d - mean) ** 2 for d in per_seed) / (len(per_seed) - 1))
        half = t_quantile_975(len(per_seed) - 1) * sd / math.sqrt(len(per_seed))
        out["t_95_over_seeds"] = [round(mean - half, 4), round(mean + half, 4)]
    out["per_seed"] = [round(d, 4) for d in per_seed]
    return out


CONFIRM_KINDS = {  # what the confirmation summary reports: the evaluation's key and what it is
    "pass1": ("sampled_lenient", "pass@1 (the right last number, mean of the samples at the training temperature)"),
    "pass_at_k": ("sampled_pass_at_k", "pass@k (any of the samples right)"),
    "greedy": ("lenient", "greedy (temperature 0): the right last number"),
    "cut": ("sampled_cut", "sampled replies cut at the token cap"),
    "constant": ("sampled_constant", "sampled replies whose last number is the run's most common one"),
    "format_wrong": ("sampled_format_wrong", "sampled replies with a '####' answer that is wrong"),
}


def changes(base: dict, afters: list[dict], kinds: dict) -> dict:
    """For each kind: before, after (mean and per seed), the change with its paired-bootstrap interval over
    problems and its t-interval over seeds, and in how many seeds it rose and fell."""
    out = {}
    for name, (key, meaning) in kinds.items():
        if f"{key}_per_problem" not in base or not all(f"{key}_per_problem" in a for a in afters):
            continue
        d = difference(base[f"{key}_per_problem"], [a[f"{key}_per_problem"] for a in afters])
        out[name] = {"meaning": meaning, "before": round(base[key], 4),
                     "after": round(sum(a[key] for a in afters) / len(afters), 4),
                     "after_per_seed": [round(a[key], 4) for a in afters], "change": d,
                     "rose_in": sum(x > 0 for x in d["per_seed"]), "fell_in": sum(x < 0 for x in d["per_seed"]),
                     "seeds": len(afters)}
    return out


def summarize(record: dict, runs_key: str = "runs") -> dict:
    """The setting's figures over its runs (GRPO's; with runs_key="expert_iteration_runs", expert
    iteration's) with the most common step budget."""
    runs = record.get(runs_key, [])
    base = record.get("base")
    if not runs or not base:
        return {}
    budget = max({r["steps"] for r in runs}, key=lambda s: sum(r["steps"] == s for r in runs))
    runs = [r for r in runs if r["steps"] == budget and "after" in r]
    if not runs:
        return {}
    out = {"steps": budget, "seeds": [r["seed"] for r in runs]}
    for kind in ("strict", "lenient"):
        out[f"base_{kind}"] = base[kind]
        out[f"after_{kind}"] = round(sum(r["after"][kind] for r in runs) / len(runs), 4)
        out[f"after_{kind}_per_seed"] = [r["after"][kind] for r in runs]
        out[f"diff_{kind}"] = difference(base[f"{kind}_per_problem"], [r["after"][f"{kind}_per_problem"] for r in runs])
    for key in ("train_minutes",):
        out[key] = round(sum(r[key] for r in runs) / len(runs), 2)
    for key in ("sec_per_step", "sec_per_step_generation", "sec_per_step_sync", "sec_per_step_update"):
        values = [r["training"].get(key) for r in runs if r.get("training", {}).get(key) is not None]
        out[key] = round(sum(values) / len(values), 2) if values else None
    for key in ("hack", "multi_hash", "cut", "mean_tokens", "format", "one_answer_line"):
        out[f"base_{key}"] = base[key]
        out[f"after_{key}"] = round(sum(r["after"][key] for r in runs) / len(runs), 4)
    if "sampled_lenient_per_problem" in base and all("sampled_lenient_per_problem" in r["after"] for r in runs):
        for kind in ("sampled_lenient", "sampled_strict", "sampled_format", "sampled_cut"):
            out[f"base_{kind}"] = round(base[kind], 4)
            out[f"after_{kind}"] = round(sum(r["after"][kind] for r in runs) / len(runs), 4)
        out["diff_sampled_lenient"] = difference(base["sampled_lenient_per_problem"],
                                                 [r["after"]["sampled_lenient_per_problem"] for r in runs])
    # the hack rate's parts with intervals, where the files hold them per problem (files written since multi_marker was
    # added)
    for key in ("multi_marker", "cut", "sampled_multi_marker", "sampled_cut"):
        if f"{key}_per_problem" in base and all(f"{key}_per_problem" in r["after"] for r in runs):
            out[f"base_{key}"] = round(base[key], 4)
            out[f"after_{key}"] = round(sum(r["after"][key] for r in runs) / len(runs), 4)
            out[f"diff_{key}"] = difference(base[f"{key}_per_problem"],
                                            [r["after"][f"{key}_per_problem"] for r in runs])
    # issue 40: the hack signs of a reward earned without what it meant, and the confirmation problems
    out["signs"] = changes(base, [r["after"] for r in runs], {
        k: CONFIRM_KINDS[k] for k in ("pass1", "greedy", "cut", "constant", "format_wrong")})
    if base.get("confirm") and all("confirm" in r["after"] for r in runs):
        out["confirm"] = {"problems": base["confirm"]["n"], "samples": base["confirm"].get("samples"),
                          **changes(base["confirm"], [r["after"]["confirm"] for r in runs], CONFIRM_KINDS)}
    if "diff_sampled_lenient" in out:
        # issue 29's goal: held-out lenient pass@1 at the training temperature up 10 points or more, mean of 3+
        # seeds, every seed's gain above 0, the pooled bootstrap interval above 0, in at most 15 minutes
        d = out["diff_sampled_lenient"]
        out["reaches_goal"] = bool(len(runs) >= 3 and d["mean"] >= 0.10 and min(d["per_seed"]) > 0
                                   and d["bootstrap_95"][0] > 0 and out["train_minutes"] <= 15)
        return out
    d = out["diff_strict"]
    intervals = [d["bootstrap_95"]] + ([d["t_95_over_seeds"]] if "t_95_over_seeds" in d else [])
    out["reaches_goal"] = bool(len(runs) >= 3 and d["mean"] >= 0.10 and all(lo > 0 for lo, _ in intervals))
    return out


# ----------------------------------------------------------------------------- result files


MACHINE_SPEED: dict = {}  # helpers.machine_speed.machine_record(), read once by run_setting


def result_path(name: str) -> Path | None:
    files = sorted(RESULTS_DIR.glob(f"learnability-{name}-2*.json"))
    return files[-1] if files else None


def base_cpu_class(record: dict) -> str:
    """The CPU class a result file's base evaluation ran on (a base without its own machine record ran where the
    file was last written: the files written before bases kept one had one CPU each)."""
    return cpu_class(record["base"].get("machine", {}).get("cpu_flags") or record.get("cpu_flags", {}))


def record_cpu_classes(record: dict) -> set[str]:
    """The CPU classes a result file's base evaluation and runs ran on."""
    return runs_cpu_classes(record) | ({base_cpu_class(record)} if record.get("base") else set())


def load_record(bench: str, name: str, setting: Setting) -> dict:
    path = result_path(name) if bench == "learnability" else None
    if path is None:
        return {"setting": name, **asdict(setting), "base": None, "runs": []}
    record = json.loads(path.read_text())
    if {k: record.get(k) for k in asdict(setting)} != asdict(setting):
        print(f"  {path.name} holds another configuration of {name!r}: starting its runs afresh", flush=True)
        return {"setting": name, **asdict(setting), "base": None, "runs": []}
    here = cpu_class()
    if (classes := record_cpu_classes(record)) - {here}:  # before and after, and seeds, on one class of CPU
        raise SystemExit(f"{path.name} ran on a CPU of class {', '.join(sorted(classes))}; this one is {here}. "
                         f"Pass --cpu-file to keep this CPU's runs, with their own base evaluation, in "
                         f"learnability-{name}-{here}-<date>.json")
    return record


# what a base evaluation depends on (the weights are the start model's)
EVALUATION_FIELDS = ("task", "env_args", "eval_max_tokens", "num_eval", "eval_samples", "confirm_samples",
                     "temperature", "top_p", "lean_eval")


def shared_base(name: str, setting: Setting, file_suffix: str = "") -> dict | None:
    """The base evaluation of another setting whose evaluation is the same (same problems, samples and seeds, the
    same untrained weights) on this class of CPU: it is the same evaluation, done once. Marked with the file it came
    from. `file_suffix`: the files of this CPU's own (--cpu-file)."""
    key = {f: getattr(setting, f) for f in EVALUATION_FIELDS}
    for other, other_setting in SETTINGS.items():
        path = result_path(other + file_suffix)
        if other + file_suffix == name or path is None or \
                {f: getattr(other_setting, f) for f in EVALUATION_FIELDS} != key:
            continue
        record = json.loads(path.read_text())
        if record.get("base") and {k: record.get(k) for k in asdict(other_setting)} == asdict(other_setting) \
                and base_cpu_class(record) == cpu_class():
            return {**record["base"], "from": record["base"].get("from", path.name)}
    return None


def save_record(bench: str, name: str, record: dict, info: dict) -> Path:
    keep = {k: v for k, v in record.items() if k not in ("bench", "date", "commit", "cpu", "cores", "python",
                                                         "load_avg_before", "load_avg_after")}
    keep["cpu_flags"] = cpu_flags()
    if MACHINE_SPEED and "machine_speed" not in keep:  # measured on the machine that ran the file's first runs
        keep["machine_speed"] = dict(MACHINE_SPEED)
    keep["summary"] = summarize(record)
    if record.get("expert_iteration_runs"):
        keep["summary_expert_iteration"] = summarize(record, "expert_iteration_runs")
    return write_result(bench, info, keep, suffix=name)


def run_setting(name: str, setting: Setting, seeds: list[int], threads: int, expert_iteration: bool = False,
                file_suffix: str = "") -> dict:
    """Each seed's run of `setting` (GRPO, or expert iteration on the same samples), merged into its result
    file as soon as it ends (the file is read again before writing, so runs of other seeds in other
    processes are kept)."""
    info = machine_info()
    MACHINE_SPEED.update(machine_record())  # this machine's matrix speed, before the runs (save_record keeps it)
    record = load_record("learnability", name, setting)
    if expert_iteration:
        if record.get("base") is None:  # the same base evaluation as GRPO's runs
            record["base"] = train_run(setting, 0, threads, steps=0, base_done=False)["base"]
            save_record("learnability", name, record, info)
        for seed in seeds:
            print(f"learnability: {name}, expert iteration, seed {seed} ...", flush=True)
            out = expert_iteration_run(setting, seed, threads)
            record = load_record("learnability", name, setting)
            record["expert_iteration_runs"] = [r for r in record.get("expert_iteration_runs", [])
                                               if r["seed"] != seed] + [out]
            print(f"  after: lenient {out['after']['lenient']:.3f}, sampled lenient "
                  f"{out['after'].get('sampled_lenient', float('nan')):.3f}; {out['train_minutes']:.1f} min",
                  flush=True)
            save_record("learnability", name, record, info)
        return record
    if record.get("base") is None and (base := shared_base(name, setting, file_suffix)):
        record["base"] = base
        print(f"  base evaluation: {base['from']}'s, the same evaluation", flush=True)
        save_record("learnability", name, record, info)
    for seed in seeds:
        print(f"learnability: {name}, seed {seed}, {setting.steps} steps ...", flush=True)

        def save_base(base: dict) -> None:  # other processes of this setting can start training now
            latest = load_record("learnability", name, setting)
            if latest.get("base") is None:
                save_record("learnability", name, {**latest, "base": base}, info)

        out = train_run(setting, seed, threads, base_done=record.get("base") is not None, on_base=save_base)
        record = load_record("learnability", name, setting)
        if "base" in out:
            base = out.pop("base")
            record["base"] = record.get("base") or base
        record["runs"] = [r for r in record["runs"] if (r["seed"], r["steps"]) != (seed, setting.steps)] + [out]
        a = out["after"]
        print(f"  after: strict {a['strict']:.3f}, lenient {a['lenient']:.3f}, hack {a['hack']:.2f}; "
              f"{out['train_minutes']:.1f} min, {out['training']['sec_per_step']} s/step", flush=True)
        save_record("learnability", name, record, info)  # after every run: a partial grid is kept
    return record


def print_table(records: list[dict]) -> None:
    header = ("setting", "base strict/lenient", "after strict/lenient", "diff strict [boot 95%] [t 95%]",
              "diff lenient", "sampled pass@1 before->after, diff [boot 95%]", "steps", "min",
              "s/step (gen/sync/upd)", "hack before->after", "goal")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for record in records:
        rows = [(record["setting"], record.get("summary") or summarize(record))]
        if record.get("expert_iteration_runs"):
            rows.append((record["setting"] + " (expert iteration)", record.get("summary_expert_iteration")
                         or summarize(record, "expert_iteration_runs")))
        for name, s in rows:
            if not s:
                base = record.get("base")
                if base:
                    print(f"| {name} | {base['strict']:.3f} / {base['lenient']:.3f} | (no runs) |"
                          + " |" * (len(header) - 3))
                continue
            d, dl = s["diff_strict"], s["diff_lenient"]
            t = d.get("t_95_over_seeds")
            split = "/".join(f"{s[k]:.1f}" if s.get(k) is not None else "-" for k in
                             ("sec_per_step_generation", "sec_per_step_sync", "sec_per_step_update"))
            ds = s.get("diff_sampled_lenient")
            sampled = (f"{s['base_sampled_lenient']:.3f} -> {s['after_sampled_lenient']:.3f}, {ds['mean']:+.3f} "
                       f"{ds['bootstrap_95']}" if ds else "-")
            print(f"| {name} | {s['base_strict']:.3f} / {s['base_lenient']:.3f} | "
                  f"{s['after_strict']:.3f} / {s['after_lenient']:.3f} | {d['mean']:+.3f} {d['bootstrap_95']}"
                  f"{f' {t}' if t else ''} | {dl['mean']:+.3f} {dl['bootstrap_95']} | {sampled} | {s['steps']} "
                  f"(seeds {s['seeds']}) | {s['train_minutes']:.1f} | {s['sec_per_step']} ({split}) | "
                  f"{s['base_hack']:.2f} -> {s['after_hack']:.2f} | {'yes' if s['reaches_goal'] else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", nargs="+", type=whole_number(0, what="a training seed"), default=[0, 1, 2])
    parser.add_argument("--threads", type=whole_number(1, what="threads"), default=None,
                        help="torch and llama.cpp threads (default: idle cores)")
    parser.add_argument("--precision", choices=("float32", "bfloat16"),
                        help="train in this precision instead of the setting's (the result file is then named "
                             "after the setting plus the precision); bfloat16 needs a CPU with its instructions")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a Setting field for an exploratory run (the result file is then named "
                             "after the setting plus the overrides)")
    parser.add_argument("--cpu-file", action="store_true",
                        help="keep this CPU's runs and base evaluation in files of their own, named after the setting "
                             "plus the CPU's class (amx, avx512_bf16, avx512, avx2): seeds are pooled, and before "
                             "compared with after, only within one class")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--time-steps", type=whole_number(1, what="steps"),
                      help="train this many steps and report s/step only (no evaluation)")
    mode.add_argument("--base-only", action="store_true", help="only the base evaluation of each setting")
    mode.add_argument("--table", action="store_true", help="print the table of every committed result file")
    mode.add_argument("--explore", type=whole_number(1, what="held-out problems"), metavar="N",
                      help="base accuracy of the EXPLORE task designs on N held-out problems each (no training)")
    mode.add_argument("--expert-iteration", action="store_true",
                      help="expert iteration instead of GRPO, on the same samples (kept in the setting's file)")
    mode.add_argument("--update-timing", action="store_true",
                      help="s/update: float32 vs bfloat16, all weights vs the top 6 layers (run under flock -x)")
    args = parser.parse_args()
    fields = {f.name: f.type for f in dataclass_fields(Setting)}
    for key, value in args.parameter:  # refused by name before anything runs
        if key not in fields:
            parser.error(f"-p {key}: Setting has no field {key!r}; its fields: {', '.join(fields)}")
        try:
            json.loads(value) if fields[key] in ("dict", "bool") else {"int": int, "float": float}.get(
                fields[key], str)(value)
        except ValueError:
            parser.error(f"-p {key} {value!r}: not a {fields[key]}")
    if args.precision == "bfloat16" and not cpu_has_bf16():
        parser.error("--precision bfloat16: this CPU has no bfloat16 instructions (emulated, ~14x slower)")
    if args.table:
        records = [json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("learnability-*.json"))]
        print_table([r for r in records if "setting" in r])  # not the timing files (--time-steps, --update-timing)
        return

    threads = args.threads or default_threads()
    if args.update_timing:
        info = machine_info()
        write_result("learnability", info, {"cpu_flags": cpu_flags(), **update_timing(threads)}, suffix="update")
        return
    if args.explore:
        info = machine_info()
        write_result("learnability", info, {"cpu_flags": cpu_flags(), "n": args.explore,
                                            "designs": explore(threads, args.explore)}, suffix="explore")
        return
    records = []
    file_suffix = f"-{cpu_class()}" if args.cpu_file else ""
    for name in args.settings:
        setting, label = SETTINGS[name], name
        for key, value in args.parameter:
            kind = type(getattr(setting, key))
            setting = replace(setting, **{key: json.loads(value) if kind in (dict, bool) else kind(value)})
            label += f"_{key}={value}"
        if args.precision and args.precision != ("bfloat16" if setting.bf16 else "float32"):
            setting, label = replace(setting, bf16=args.precision == "bfloat16"), f"{label}_{args.precision}"
        label += file_suffix
        if args.time_steps:
            out = train_run(setting, args.seeds[0], threads, steps=args.time_steps, evaluate_after=False)
            timing = {"setting": label, "steps": args.time_steps, "threads": threads, **out["training"],
                      "train_minutes": out["train_minutes"], "peak_rss_gb": out["peak_rss_gb"],
                      "machine": out["machine"]}
            print(json.dumps(timing), flush=True)
            path = RESULTS_DIR / f"learnability-timing-{machine_info()['date'][:10]}.json"
            old = json.loads(path.read_text()).get("timings", []) if path.is_file() else []
            write_result("learnability", machine_info(), {
                "cpu_flags": cpu_flags(), "note": "s/step of each setting in a short window; the first step "
                "(warm-up) is not counted; run under flock -x on otherwise idle cores",
                "timings": [t for t in old if t["setting"] != label] + [timing]}, suffix="timing")
            continue
        if args.base_only:
            info, record = machine_info(), load_record("learnability", label, setting)
            if record.get("base") is None:
                out = train_run(setting, 0, threads, steps=0, base_done=False)
                record["base"] = out["base"]
                save_record("learnability", label, record, info)
            records.append(record)
            continue
        records.append(run_setting(label, setting, args.seeds, threads, expert_iteration=args.expert_iteration,
                                   file_suffix=file_suffix))
    if records:
        print()
        print_table(records)


if __name__ == "__main__":
    main()
