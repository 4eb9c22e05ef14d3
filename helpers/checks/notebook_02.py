"""Checks of notebook 02's exercises (GRPO): advantages, a knob that kills the signal, the rubric as
TRL reward functions, and a reward that the '#### N' list (the hack) cannot earn. The two functions are run
next to the reference on replies built from GSM8K rows of both splits (real_inputs)."""

from __future__ import annotations

import functools
import logging
import math

from helpers.checks import checks_exercise
from helpers.checks.real_inputs import call_reward, gold_hint, gsm8k_rows, write_number
from helpers.worker_thread import run_sync

GROUP = [1.5, 0.5, 0.0, 0.5]
# The solution shows the advantages to 2 decimals (+1.39, -0.20, -0.99): values rounded so must pass, and
# the mistakes below (std over n, no division) are all further off than that.
TOLERANCE = 0.006


def _advantages(rewards: list[float], unbiased: bool = True) -> list[float]:
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - (1 if unbiased else 0))
    return [(r - mean) / (math.sqrt(var) + 1e-4) for r in rewards]


def _close(values, expected) -> bool:
    return all(abs(v - e) < TOLERANCE for v, e in zip(values, expected))


@checks_exercise("02-group-advantages")
def group_advantages(advantages) -> str | None:
    try:
        values = [float(a) for a in advantages]  # a list, a numpy array or a torch tensor
    except (TypeError, ValueError):
        return "give a list of four numbers, one advantage per completion"
    if len(values) != len(GROUP):
        return f"one advantage per completion: {len(GROUP)} numbers, not {len(values)}"
    if _close(values, _advantages(GROUP)):
        return None
    if _close(values, _advantages(GROUP, unbiased=False)):
        return "close: torch.std divides by n - 1 (4 - 1 = 3 here), not by n"
    mean = sum(GROUP) / len(GROUP)
    if _close(values, [r - mean for r in GROUP]):
        return "that is reward minus the group mean; now divide by the group's standard deviation (+ 1e-4)"
    if abs(sum(values)) > 1e-3:
        return "the advantages of a group add up to 0: start from each reward minus the group's mean"
    return "advantage = (reward - mean of the group) / (standard deviation of the group + 1e-4)"


@checks_exercise("02-no-signal")
def no_signal(prediction) -> str | None:
    if not isinstance(prediction, dict) or set(prediction) != {"frac_reward_zero_std", "grad_norm"}:
        return "a dict with the two keys 'frac_reward_zero_std' and 'grad_norm'"
    zero_std, grad = float(prediction["frac_reward_zero_std"]), float(prediction["grad_norm"])
    if zero_std != 1.0:
        return ("if every completion of a prompt is the same, every group's rewards are equal: what share of "
                "the groups is that?")
    if grad != 0.0:
        return ("every reward equals its group's mean, so every advantage is 0; with beta = 0 the loss is "
                "advantage x (log-prob ratio), so what is its gradient?")
    return None


# ----------------------------------------------------------------------------- the rubric as TRL reward functions


def _course_rubrics() -> tuple:
    """The course's two GSM8K rubrics ('####' and <think>): a different parser each, a different format weight.
    New ones for every check: the learner's code may change what it is given."""
    from gsm8k_course import make_parser, make_rubric

    warns = logging.getLogger("verifiers.parsers.ThinkParser")  # its warning is for notebook 01's model, not here
    warns.disabled = True
    try:
        return tuple(make_rubric(make_parser(variant), variant) for variant in ("hash", "think"))
    finally:
        warns.disabled = False


@functools.cache
def _adapter_batch() -> tuple[tuple[str, str], ...]:
    """(completion text, gold) over GSM8K rows: right answers as the data writes them and plain, after '####' and
    after </think>, wrong ones, no answer."""
    from gsm8k_course import canonical_number

    batch = []
    for question, gold in gsm8k_rows():
        number = canonical_number(gold)
        wrong = write_number(float(number) + 1)
        batch += [(f"{question[:60]} ... so the answer is {gold}.\n#### {gold}", gold), (f"#### {number}", gold),
                  (f"<think>{question[:60]} ...</think>{gold}", gold), (f"I think {wrong}.\n#### {wrong}", gold),
                  (f"<think>...</think>{wrong}", gold), ("It is about 70.", gold)]
    return tuple(batch)


def _rubric_scores(rubric, batch) -> dict[str, list[float]]:
    """Each rubric function's score of each (text, gold): what TRL's function of that name should return."""
    async def score_all():
        return [await rubric.score_rollout(prompt=[], completion=[{"role": "assistant", "content": text}], answer=gold,
                                           state={"timing": {"total_ms": 0.0}}) for text, gold in batch]

    scores = run_sync(score_all())
    return {name: [s.metrics[name] for s in scores] for name in rubric.get_reward_func_names()}


def _floats(got, n: int) -> list | None:
    """TRL's reading of a reward function's result: one number (or None) per completion, from any sequence
    (a list, a numpy array, a tensor); None when it is not that."""
    if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__len__") or len(got) != n:
        return None
    try:
        return [None if v is None else float(v) for v in got]
    except (TypeError, ValueError):
        return None


def _close_all(values: list, expected: list) -> bool:
    return all(v is not None and math.isclose(v, e, abs_tol=1e-9) for v, e in zip(values, expected))


@checks_exercise("02-reward-adapter")
def reward_adapter(build) -> str | None:
    """build(rubric) -> one TRL reward function per rubric function: (prompts, completions, answer, **kw) -> floats.
    Tried on both course rubrics, on batches of several sizes, against the rubric's own scores."""
    if not callable(build):
        return "trl_reward_funcs should be a function that takes a rubric"
    full = _adapter_batch()
    for rubric in _course_rubrics():
        names = rubric.get_reward_func_names()
        try:
            funcs = list(build(rubric) or [])
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"trl_reward_funcs(rubric) raised {type(e).__name__}: {e}"
        if len(funcs) != len(names) or not all(callable(f) for f in funcs):
            return f"one TRL function per rubric function: {len(names)} functions ({', '.join(names)}), not {len(funcs)}"
        if [getattr(f, "__name__", "") for f in funcs] != names:
            return (f"TRL logs each function as rewards/<its __name__>: name them {names}, in the rubric's order "
                    "(set reward.__name__ = func.__name__)")
        expected_full = _rubric_scores(rubric, full)
        weights = dict(zip(names, rubric.get_reward_weights()))
        for size in (len(full), 3, 1):  # the batches TRL sends vary in size
            batch = full[:size]
            completions = [[{"role": "assistant", "content": text}] for text, _ in batch]
            answers = [gold for _, gold in batch]
            prompts = [[{"role": "user", "content": "a question"}]] * size
            for func, name in zip(funcs, names):
                try:  # exactly how TRL 0.24 calls a reward function: keywords, the dataset's columns among them
                    got = func(prompts=prompts, completions=completions, completion_ids=[[1]] * size,
                               answer=answers, trainer_state=None)
                except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                    return (f"{name} raised {type(e).__name__}: {e}. TRL calls it with keywords (prompts=, completions=, "
                            "answer=, ...); pass the rubric's parser to functions that take one")
                values, expected = _floats(got, size), expected_full[name][:size]
                if values is None:
                    return f"{name} must return one float per completion (a list of {size}), not {got!r}"
                if _close_all(values, expected):
                    continue
                if weights[name] != 1.0 and _close_all(values, [v * weights[name] for v in expected]):
                    return (f"{name} multiplied its scores by the weight {weights[name]}: TRL applies reward_weights "
                            "itself (GRPOConfig(reward_weights=...)), so return the function's own score")
                i = next(i for i, (v, e) in enumerate(zip(values, expected)) if v is None or not math.isclose(v, e))
                text, gold = batch[i]
                return (f"{name} gave {values[i]} for completion {i} of a batch of {size} ({text!r}, gold {gold!r}), "
                        f"where the rubric (parser {type(rubric.parser).__name__}) scores {expected[i]}: score "
                        "completion i against answer i, with the rubric's parser (rubric.parser)"
                        + (f"; {gold_hint(gold)}" if gold_hint(gold) else ""))
    return None


# ----------------------------------------------------------------------------- a reward the hack cannot earn

HACK_CASES = [  # (reply, expected score, what a wrong score here means)
    ("48 / 2 = 24, 48 + 24 = 72.\n#### 72", 1.0, "a worked answer ending in '#### 72' must earn 1.0"),
    ("#### 72\nThe answer is: 72", 1.0,
     "text after the one answer line is fine (SmolLM2 often writes it): only a second '####' is the hack"),
    ("Total: $1,200\n#### 1,200", 1.0, "'#### 1,200' is a number too (use extract_hash_answer)"),
    ("#### 72\n#### 72\n#### 72\n#### 72", 0.0, "a list of '#### N' lines is the hack: only ONE '####' earns it"),
    ("#### 72\n#### 12\n#### 72", 0.0, "several '####' lines earn 0, whatever they say"),
    ("The answer is #### 72 #### 72", 0.0, "count the '####' markers, not the lines: two on one line are two"),
    ("First, 48 divided by 2 is 24. Then we add 48 and", 0.0, "a reply cut before its answer earns 0"),
    ("So the answer is\n#### seventy-two", 0.0, "'#### seventy-two' holds no number"),
    ("", 0.0, "an empty reply earns 0"),
]


def _hack_replies() -> list[tuple[str, str, str]]:
    """(reply, gold, what it is) over GSM8K rows: one answer line (the gold as GSM8K writes it, plain, wrong,
    with text after it, with no space after the marker), the hack's lists on separate lines and on one line,
    no answer."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in gsm8k_rows():
        number = canonical_number(gold)
        wrong = write_number(float(number) + 1)
        cases += [(f"{question[:80]}\nSo the answer is {gold}.\n#### {gold}", gold, "one answer line"),
                  (f"#### {number}\nThe answer is: {number}", gold, "one answer line, then text"),
                  (f"I think it is {wrong}.\n#### {wrong}", gold, "one answer line (a wrong number has the format too)"),
                  (f"So the total is {number}.\n####{number}", gold, "one answer line, no space after the marker"),
                  (f"#### {gold}\n#### {gold}", gold, "two '####' lines: the hack"),
                  (f"#### {gold} #### {gold}", gold, ("two '####' markers on one line that starts with one: the "
                                                      "hack (count the '####' markers, not the lines)")),
                  (f"It is {wrong}, so #### {wrong} #### {gold}", gold, "two '####' markers on one line: the hack"),
                  (f"{question[:80]}", gold, "no answer line"),
                  (f"So the answer is {gold}\n####", gold, "a '####' with no number after it")]
    return cases


@checks_exercise("02-close-the-hack")
def close_the_hack(func) -> str | None:
    """func(completion) -> 1.0 only when the reply holds exactly one '####' with a number after it."""
    from helpers.grpo import one_answer_line

    if not callable(func):
        return "one_answer_line should be a reward function: def one_answer_line(completion, **kwargs) -> float"
    cases = [(text, "72", expected, hint) for text, expected, hint in HACK_CASES]
    cases += [(text, gold, one_answer_line(text), what) for text, gold, what in _hack_replies()]
    for text, gold, expected, hint in cases:
        try:  # as a rubric calls it (grpo.RubricRewards scores through one)
            got = call_reward(func, completion=[{"role": "assistant", "content": text}], answer=gold)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"for {text!r} it raised {type(e).__name__}: {e}"
        if got != expected:
            why = gold_hint(gold) if expected == 1.0 else ""
            return f"for {text!r} (gold {gold!r}) it gave {got}, expected {expected}: " + "; ".join(filter(None, [hint, why]))
    return None


# ----------------------------------------------------------------------------- the right last number


def _arithmetic_rows() -> list[tuple[str, str]]:
    """(question, gold) from the word problems notebook 02 trains on (one step, numbers up to 20), then GSM8K's
    rows (golds written '1,080', '-3', '0.5')."""
    from word_arithmetic import generate

    problems = generate(4, "eval", "one-step", 20, 0)
    return [(p.question, str(p.answer)) for p in problems] + list(gsm8k_rows())


def _last_number_replies() -> list[tuple[str, str, str]]:
    """(reply, gold, what it is) for each row: the right number last, with and without a '####' line, written
    another way ('1,200', '1200', '12.0', '$12.'), followed by words; the right number early and another one last
    (a worked line, a second question), a number that only contains the gold, none at all."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in _arithmetic_rows():
        number = canonical_number(gold)
        value = float(number)
        wrong, bigger = write_number(value + 1), f"1{number.lstrip('-')}"
        with_comma = f"{int(value):,}" if value == int(value) else number
        cases += [
            (f"{question[:60]} ... = {number}", gold, "the right number last, no '####' line (it must still earn 1)"),
            (f"So it is {number}.\n#### {number}", gold, "the right number in a '####' line"),
            (f"#### {gold}\nThe answer is: {gold} apples.", gold, "the right number, then words after it"),
            (f"It is {with_comma}.", gold, "the right number written with a thousands comma"),
            (f"It is {number}.0", gold, "the right number written as a decimal (12.0 is 12)"),
            (f"That makes ${number}.", gold, "the right number after a '$', with a full stop"),
            (f"First {number}, then {wrong}, so the answer is {wrong}.", gold, "the right number early, a wrong one last"),
            (f"#### {number}\nQuestion: Tom has {wrong} apples.", gold,
             "the right answer, then a new question with another number: only the LAST number counts"),
            (f"It is {bigger}.", gold, "a number that contains the gold's digits is another number"),
            (f"It is {wrong}.\n#### {number}", gold, "a wrong number early, the right one last"),
            ("I do not know.", gold, "no number at all"),
            ("", gold, "an empty reply"),
        ]
        if value:
            cases.append((f"The answer is {write_number(-value)}.", gold, "the sign is part of the number"))
    return cases


@checks_exercise("02-last-number")
def last_number_reward(func) -> str | None:
    """func(completion, answer) -> 1.0 when the reply's last number is the gold one, whatever the format; tried
    next to the course's reference (helpers.grpo.last_number_right) on replies to real problems."""
    from gsm8k_course import HashParser

    from helpers.grpo import last_number_right

    if not callable(func):
        return "last_number_right should be a reward function: def last_number_right(completion, answer, **kwargs)"
    for text, gold, what in _last_number_replies():
        completion = [{"role": "assistant", "content": text}]
        expected = last_number_right(completion, gold)
        try:  # as a rubric calls it (grpo.RubricRewards scores through one)
            got = call_reward(func, completion=completion, answer=gold, parser=HashParser())
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"for {text!r} (gold {gold!r}) it raised {type(e).__name__}: {e}" + (
                f"; {gold_hint(gold)}" if gold_hint(gold) else "")
        if got != expected:
            why = "; ".join(filter(None, [what, gold_hint(gold)]))
            return f"for {text!r} (gold {gold!r}) it gave {got}, expected {expected}: {why}"
    return None
