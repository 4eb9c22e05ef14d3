"""Generated arithmetic word problems as a verifiers environment: `vf.load_environment("word-arithmetic")`.

GSM8K is out of reach of a 135M model (SmolLM2-135M-Instruct solves ~1-5%): GRPO on it can only
teach the answer format. These problems are one or two steps of + - x / in plain words, small
numbers, so the same model starts with some right answers and GRPO has something to reinforce:

    one step:  "Mia has 12 marbles. She gets 7 more. How many marbles does Mia have now?"   #### 19
    two steps: "Leo buys 4 bags with 6 apples in each bag. He already had 5 apples.
                How many apples does Leo have now?"                                        #### 29

The prompt, parser and rubric are gsm8k-course's `hash` variant, imported from it (the model ends
with '#### <number>'; reward = correct_answer + 0.5 x hash_format), so the lesson and the rubric
stay the same and only the problems change.

Problems are generated from `seed` (the same arguments give the same problems on any machine).
The held-out split is disjoint from the training split by construction: each problem's
arithmetic (its template and numbers) is hashed, and one hash in three belongs to the held-out
split; names and objects do not count, so a held-out sum is never trained on under another name.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

import verifiers as vf
from datasets import Dataset
from gsm8k_course import (
    HASH_SYSTEM_PROMPT,
    NUMBER,
    HashParser,
    canonical_number,
    extract_hash_answer,
    make_rubric,
)

DIFFICULTIES = ("one-step", "two-step", "mixed")
SPLITS = ("train", "eval")
HELD_OUT_SHARE = 3  # one problem (template and numbers) in three belongs to the held-out split: small
# numbers allow few distinct problems, and a run trains on a few hundred prompts at most
MIN_MAX_NUMBER, MAX_MAX_NUMBER = 10, 1000

NAMES = [("Mia", "She"), ("Leo", "He"), ("Ava", "She"), ("Sam", "He"), ("Zoe", "She"), ("Ben", "He"),
         ("Lily", "She"), ("Omar", "He"), ("Emma", "She"), ("Noah", "He"), ("Sara", "She"), ("Jack", "He")]
THINGS = ["apples", "marbles", "stickers", "pencils", "cookies", "books", "coins", "cards", "shells", "eggs"]
FRIENDS = ["her friend", "his brother", "a classmate", "her sister", "a neighbor", "his cousin"]


@dataclass(frozen=True)
class Problem:
    question: str
    answer: int
    kind: str  # the template's name
    steps: int  # arithmetic operations needed: 1 or 2
    numbers: tuple[int, ...]

    @property
    def key(self) -> str:
        """The arithmetic alone (template and numbers): what the split is decided on."""
        return f"{self.kind}:{','.join(map(str, self.numbers))}"


def split_of(problem: Problem) -> str:
    digest = hashlib.sha256(problem.key.encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % HELD_OUT_SHARE == 0 else "train"


# ----------------------------------------------------------------------------- templates
# Each takes (rng, max_number, name, pronoun, things, friend) and returns a Problem; answers are
# whole, positive numbers.


def _add(r, m, name, he, things, friend):
    a, b = r.randint(2, m), r.randint(2, m)
    return Problem(f"{name} has {a} {things}. {he} gets {b} more. How many {things} does {name} have now?",
                   a + b, "add", 1, (a, b))


def _subtract(r, m, name, he, things, friend):
    a = r.randint(3, m)
    b = r.randint(1, a - 1)
    return Problem(f"{name} has {a} {things} and gives {b} of them to {friend}. "
                   f"How many {things} does {name} have left?", a - b, "subtract", 1, (a, b))


def _multiply(r, m, name, he, things, friend):
    a, b = r.randint(2, 10), r.randint(2, min(m, 12))
    return Problem(f"{name} buys {a} bags with {b} {things} in each bag. How many {things} does {name} buy?",
                   a * b, "multiply", 1, (a, b))


def _divide(r, m, name, he, things, friend):
    b, q = r.randint(2, 10), r.randint(2, min(m, 12))
    return Problem(f"{name} shares {b * q} {things} equally among {b} friends. "
                   f"How many {things} does each friend get?", q, "divide", 1, (b * q, b))


def _add_subtract(r, m, name, he, things, friend):
    a, b = r.randint(2, m), r.randint(2, m)
    c = r.randint(1, a + b - 1)
    return Problem(f"{name} has {a} {things}. {he} gets {b} more, then gives {c} to {friend}. "
                   f"How many {things} does {name} have now?", a + b - c, "add_subtract", 2, (a, b, c))


def _multiply_add(r, m, name, he, things, friend):
    a, b, c = r.randint(2, 10), r.randint(2, min(m, 12)), r.randint(1, m)
    return Problem(f"{name} buys {a} bags with {b} {things} in each bag. {he} already had {c} {things}. "
                   f"How many {things} does {name} have now?", a * b + c, "multiply_add", 2, (a, b, c))


def _multiply_subtract(r, m, name, he, things, friend):
    a, b = r.randint(2, 10), r.randint(2, min(m, 12))
    c = r.randint(1, a * b - 1)
    return Problem(f"{name} has {a} boxes with {b} {things} in each box. {he} gives {c} {things} to {friend}. "
                   f"How many {things} does {name} have left?", a * b - c, "multiply_subtract", 2, (a, b, c))


def _subtract_divide(r, m, name, he, things, friend):
    b, q, c = r.randint(2, 10), r.randint(2, min(m, 12)), r.randint(1, m)
    return Problem(f"{name} has {b * q + c} {things} and eats {c} of them. {he} shares the rest equally "
                   f"among {b} friends. How many {things} does each friend get?", q, "subtract_divide", 2,
                   (b * q + c, c, b))


ONE_STEP = (_add, _subtract, _multiply, _divide)
TWO_STEP = (_add_subtract, _multiply_add, _multiply_subtract, _subtract_divide)


def generate(n: int, split: str = "train", difficulty: str = "mixed", max_number: int = 50,
             seed: int = 0) -> list[Problem]:
    """`n` distinct problems of `split` ("train" or "eval"), the same for the same arguments."""
    _check_args(n=n, split=split, difficulty=difficulty, max_number=max_number, seed=seed)
    templates = {"one-step": ONE_STEP, "two-step": TWO_STEP, "mixed": ONE_STEP + TWO_STEP}[difficulty]
    rng = random.Random(f"word-arithmetic:{split}:{difficulty}:{max_number}:{seed}")  # str seeds are stable
    problems: dict[str, Problem] = {}
    attempts = 0
    while len(problems) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(
                f"only {len(problems)} distinct {difficulty} problems of the {split!r} split exist with "
                f"max_number={max_number}; ask for fewer than {n} or raise max_number.")
        name, pronoun = rng.choice(NAMES)
        problem = rng.choice(templates)(rng, max_number, name, pronoun, rng.choice(THINGS), rng.choice(FRIENDS))
        if split_of(problem) == split:
            problems.setdefault(problem.key, problem)
    return list(problems.values())


def as_dataset(problems: list[Problem]) -> Dataset:
    """Columns `question`, `answer` (the number as text, like GSM8K's) and `info` (kind, steps)."""
    return Dataset.from_list([{"question": p.question, "answer": str(p.answer),
                               "info": {"kind": p.kind, "steps": p.steps}} for p in problems])


def load_environment(
    difficulty: str = "mixed",
    num_examples: int = 500,
    num_eval_examples: int = 200,
    max_number: int = 50,
    seed: int = 0,
    system_prompt: str | None = None,
    eval_start: int = 0,
) -> vf.SingleTurnEnv:
    """Arithmetic word problems as a `vf.SingleTurnEnv` with gsm8k-course's `hash` prompt and rubric.

    difficulty: "one-step", "two-step" or "mixed" (half of the templates each).
    num_examples / num_eval_examples: training problems (`dataset`) / held-out ones (`eval_dataset`).
    max_number: the largest number added or subtracted (factors and divisors stay at most 12).
    seed: which problems; the held-out split stays disjoint from training whatever the seeds.
    system_prompt: overrides gsm8k-course's '#### <number>' prompt.
    eval_start: the held-out problems start at this index of the held-out split, so that the ones before it
        (e.g. those a design was chosen on) are never the ones a run is judged on.
    """
    _check_args(num_examples=num_examples, num_eval_examples=num_eval_examples, difficulty=difficulty,
                max_number=max_number, seed=seed)
    if not isinstance(eval_start, int) or isinstance(eval_start, bool) or eval_start < 0:
        raise ValueError(f"eval_start must be a whole number of problems to skip, 0 or more, not {eval_start!r}")
    held_out = generate(eval_start + num_eval_examples, "eval", difficulty, max_number, seed)[eval_start:]
    parser = HashParser()
    return vf.SingleTurnEnv(
        dataset=as_dataset(generate(num_examples, "train", difficulty, max_number, seed)),
        eval_dataset=as_dataset(held_out),
        system_prompt=system_prompt or HASH_SYSTEM_PROMPT,
        parser=parser,
        rubric=make_rubric(parser, "hash"),
    )


def _check_args(**args) -> None:
    """Refuse arguments that would silently give something else, naming the fix."""
    for name in ("n", "num_examples", "num_eval_examples"):
        if name in args and (not isinstance(args[name], int) or isinstance(args[name], bool) or args[name] < 1):
            raise ValueError(f"{name} must be a positive number of problems, not {args[name]!r} "
                             "(these problems are generated: there is no 'all', so -1 is refused too)")
    if "split" in args and args["split"] not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {args['split']!r}")
    if args["difficulty"] not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, not {args['difficulty']!r}")
    max_number = args["max_number"]
    if not isinstance(max_number, int) or isinstance(max_number, bool) \
            or not MIN_MAX_NUMBER <= max_number <= MAX_MAX_NUMBER:
        raise ValueError(f"max_number must be a whole number from {MIN_MAX_NUMBER} to {MAX_MAX_NUMBER}, "
                         f"not {max_number!r}")
    if not isinstance(args["seed"], int) or isinstance(args["seed"], bool):
        raise ValueError(f"seed must be a whole number, not {args['seed']!r}")  # noqa: TRY004 - as every bad argument


# ----------------------------------------------------------------------------- notebook 02's prompt, and
# the references its exercises compare with (helpers.checks.notebook_02)


# Notebook 02's prompt on the CPU's task (one-step word problems): one short line of working fits its 48 tokens
ONE_LINE_PROMPT = ("Solve the math problem in one short line of working. "
                   "On the last line, write the final answer as '#### <number>'.")


# The first held-out problems of that task, on which the course chose notebook 02's design: a run is judged on the
# problems after them (word_arithmetic's eval_start), never on these
DESIGN_PROBLEMS = 100


def hash_lines(text: str) -> int:
    """How many lines of a completion hold a '####' answer marker: 2 or more is the gamed format
    (a list of '#### N' lines instead of one answer)."""
    return sum("####" in line for line in str(text).splitlines())


def last_number(text: str) -> str:
    """The last number anywhere in a reply ('18', '-3', '1,200', '0.5': gsm8k_course's number pattern),
    canonical as gsm8k_course writes answers ('1,200.' -> '1200'); '' when the reply holds none."""
    numbers = NUMBER.findall(str(text))
    return canonical_number(numbers[-1]) if numbers else ""


def one_answer_line(completion: Any, **kwargs) -> float:
    """The course's reference for notebook 02's format exercise: 1.0 when the reply holds exactly one '####'
    and a number follows it; else 0.0. A list of '#### N' lines earns nothing; an answer followed by more
    text still does."""
    text = reply_text(completion)
    return 1.0 if text.count("####") == 1 and extract_hash_answer(text) else 0.0


def last_number_right(completion: Any, answer: str) -> float:
    """The course's reference for notebook 02's reward (and the 'lenient' accuracy the benchmarks report): 1.0
    when the reply's last number is the gold answer, whatever the format."""
    number = last_number(reply_text(completion))
    return 1.0 if number and number == canonical_number(answer) else 0.0


def right_answer_line(completion: Any, answer: str, **kwargs) -> float:
    """The course's reference for notebook 02's section-12 fix: 1.0 when the reply holds exactly one '####' and
    the number after it is the gold answer; else 0.0. A format term that pays only with the right answer: a
    constant '#### 9' earns it only where 9 is right, a list of '#### N' lines never."""
    text = reply_text(completion)
    number = extract_hash_answer(text) if text.count("####") == 1 else ""
    return 1.0 if number and canonical_number(number) == canonical_number(answer) else 0.0


def gold_anywhere(completion: Any, answer: str, **kwargs) -> float:
    """What notebook 02's reward exercise holds as committed (its placeholder): 1.0 when the gold number appears
    anywhere in the reply, as text. Kept here for the benchmark that trains on it (a reward that pays for many
    numbers); the course's reward is `last_number_right`."""
    return 1.0 if canonical_number(answer) in reply_text(completion) else 0.0


def reply_text(completion: Any) -> str:
    """A completion as text: chat messages (what a rubric passes) become the assistant's words."""
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return str(completion)
