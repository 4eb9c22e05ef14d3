"""Checks of notebook 02's reward exercises (GRPO): the right last number, the rubric as TRL reward functions, and
a format term paid only with the right answer. The reward functions are run next to the references
(environments/word_arithmetic) on replies built from GSM8K rows of both splits (real_inputs). The other
exercises' checks: notebook_02_advantages (group advantages, a knob that kills the signal), notebook_02_loss."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import math

from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import call_reward, completions, gold_hint, gsm8k_rows, write_number
from helpers.checks.registry import checks_exercise
from helpers.worker_thread import run_sync

# ----------------------------------------------------------------------------- the rubric as TRL reward functions


def last_number_right(completion, answer, **kwargs) -> float:
    """Notebook 02's reward with the exercise's signature (what the notebook's rubric holds): the course's own."""
    from word_arithmetic import last_number_right as reference

    return reference(completion, answer)


def _course_rubrics() -> tuple:
    """The rubrics the adapter meets: the course's two GSM8K rubrics ('####' and <think>: a different parser each,
    a different format weight), and notebook 02's own, as its cells build them: its functions not in alphabetical
    order, a weight of 0 (section 3) and of 0.5 (section 12). New ones for every check: the learner's code may
    change what it is given."""
    import verifiers as vf
    from gsm8k_course import HashParser, correct_answer, make_parser, make_rubric
    from word_arithmetic import right_answer_line

    warns = logging.getLogger("verifiers.parsers.ThinkParser")  # its warning is for notebook 01's model, not here
    warns.disabled = True
    try:
        course = [make_rubric(make_parser(variant), variant) for variant in ("hash", "think")]
    finally:
        warns.disabled = False
    return (*course, vf.Rubric(funcs=[last_number_right, correct_answer], weights=[1.0, 0.0], parser=HashParser()),
            vf.Rubric(funcs=[last_number_right, right_answer_line, correct_answer], weights=[1.0, 0.5, 0.0],
                      parser=HashParser()))


def _hash_line(number: str) -> str:
    return f"#### {number}"


def _after_thinking(number: str) -> str:
    return f"</think>{number}"


@functools.cache
def _adapter_batch() -> tuple[tuple[list[dict], str, str], ...]:
    """(completion, gold, question) over GSM8K rows: the shared completions with the answer after '####' and after
    </think> (the gold written every way, near misses, text after it, two answers, none, several messages)."""
    batch = []
    for question, gold in gsm8k_rows():
        for mark, work in ((_hash_line, f"{question[:60]} ..."), (_after_thinking, f"<think>{question[:60]} ...")):
            batch += [(completion, gold, question) for completion, _ in completions(gold, mark, work)]
    return tuple(batch)


@functools.cache
def _rubric_scores() -> tuple[dict[str, list[float]], ...]:
    """For each of _course_rubrics, each function's score of each completion of _adapter_batch: what TRL's
    function of that name should return (scored on rubrics of their own: the learner's code gets others)."""
    async def score_all(rubric):
        return [await rubric.score_rollout(prompt=[], completion=copy.deepcopy(completion), answer=gold,
                                           state={"timing": {"total_ms": 0.0}})
                for completion, gold, _ in _adapter_batch()]

    rubrics = _course_rubrics()
    scores = [run_sync(score_all(rubric)) for rubric in rubrics]
    return tuple({name: [s.metrics[name] for s in each] for name in rubric.get_reward_func_names()}
                 for rubric, each in zip(rubrics, scores))


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


def _calls(batch) -> list[tuple[str, dict]]:
    """(how, keywords) of each call a TRL reward function gets: TRL 0.24's (the batch's prompts, completions and
    completion ids, every other dataset column, trainer_state), and notebook 02's cells' (prompts, completions,
    answer)."""
    prompts = [[{"role": "user", "content": question}] for _, _, question in batch]
    completions_ = [copy.deepcopy(completion) for completion, _, _ in batch]
    answers = [gold for _, gold, _ in batch]
    trl = {"prompts": prompts, "completions": completions_, "completion_ids": [[1]] * len(batch),
           "question": [question for _, _, question in batch], "answer": answers, "info": [{}] * len(batch),
           "id": list(range(len(batch))), "trainer_state": None}
    return [("as TRL calls it", trl),
            ("as the notebook's cells call it", {"prompts": prompts, "completions": completions_, "answer": answers})]


def _adapter_references() -> tuple:
    from helpers.grpo.rewards import RubricRewards

    return (RubricRewards,)


@checks_exercise("02-reward-adapter")
def reward_adapter(build) -> str | None:
    """build(rubric) -> one TRL reward function per rubric function: (prompts, completions, answer, **kw) -> floats.
    Tried on the course's rubrics and notebook 02's, on batches of several sizes, called as TRL and as the
    notebook's cells call them, against the rubric's own scores."""
    if not callable(build):
        return "trl_reward_funcs should be a function that takes a rubric"
    full = _adapter_batch()
    for rubric, expected_full in zip(_course_rubrics(), _rubric_scores()):
        names = rubric.get_reward_func_names()
        try:
            funcs = list(build(rubric) or [])
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"trl_reward_funcs(rubric) raised {type(e).__name__}: {e}"
        own = not_your_own(build, *funcs, references=_adapter_references())
        if own:
            return own
        if len(funcs) != len(names) or not all(callable(f) for f in funcs):
            return (f"one TRL function per rubric function: {len(names)} functions ({', '.join(names)}), "
                    f"not {len(funcs)}")
        if [getattr(f, "__name__", "") for f in funcs] != names:
            return (f"TRL logs each function as rewards/<its __name__>: name them {names}, in the rubric's order "
                    "(set reward.__name__ = func.__name__)")
        weights = dict(zip(names, rubric.get_reward_weights()))
        for size in (len(full), 3, 1):  # the batches TRL sends vary in size
            batch = full[:size]
            for how, keywords in _calls(batch):
                for func, name in zip(funcs, names):
                    hint = _adapter_difference(func, name, keywords, batch, expected_full[name][:size], weights[name],
                                               rubric, how)
                    if hint:
                        return hint
    return None


def _adapter_difference(func, name: str, keywords: dict, batch, expected: list, weight: float, rubric,
                        how: str) -> str | None:
    """The first difference between one TRL function's scores of a batch and the rubric's, with its mistake."""
    size = len(batch)
    try:
        got = func(**keywords)
    except TypeError as e:
        if any(f"'{key}'" in str(e) for key in set(keywords) - {"prompts", "completions", "answer"}):
            return (f"{name}, called {how} ({', '.join(f'{k}=' for k in keywords)}), raised TypeError: {e}. TRL passes "
                    "every column of the dataset as a keyword, and trainer_state: end the signature with **kwargs")
        return (f"{name} raised TypeError: {e}. TRL calls it with keywords (prompts=, completions=, answer=, ...); "
                "pass the rubric's parser to functions that take one")
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return (f"{name} raised {type(e).__name__}: {e}. TRL calls it with keywords (prompts=, completions=, "
                "answer=, ...); pass the rubric's parser to functions that take one")
    values = _floats(got, size)
    if values is None:
        return f"{name} must return one float per completion (a list of {size}), not {got!r}"
    if _close_all(values, expected):
        return None
    if weight != 1.0 and _close_all(values, [v * weight for v in expected]):
        return (f"{name} multiplied its scores by the weight {weight}: TRL applies reward_weights itself "
                "(GRPOConfig(reward_weights=...)), so return the function's own score")
    i = next(i for i, (v, e) in enumerate(zip(values, expected)) if v is None or not math.isclose(v, e))
    completion, gold, _ = batch[i]
    shown = repr(completion[0]["content"]) if len(completion) == 1 else f"the messages {completion!r}"
    fraction = (" (a score between 0 and 1 is a score too: return the function's own float)"
                if 0 < expected[i] < 1 else "")
    return (f"{name} gave {values[i]} for completion {i} of a batch of {size} ({shown}, gold {gold!r}), where the "
            f"rubric [{', '.join(rubric.get_reward_func_names())}] (parser {type(rubric.parser).__name__}) scores "
            f"{expected[i]}{fraction}: score "
            "completion i (all its messages) against answer i with the rubric's function and the rubric's parser "
            "(rubric.parser)"
            + (f"; {gold_hint(gold)}" if gold_hint(gold) else ""))


# ----------------------------------------------------------------------------- a format term paid only with the answer

LINE_CASES = [  # (reply, expected score, what a wrong score here means); the gold answer is 72
    ("48 / 2 = 24, 48 + 24 = 72.\n#### 72", 1.0, "a worked answer ending in '#### 72' (the gold) must earn 1.0"),
    ("#### 72\nThe answer is: 72", 1.0,
     "text after the one answer line is fine (SmolLM2 often writes it): only a second '####' is a list"),
    ("Total: 72 apples\n#### 72.00", 1.0, "'#### 72.00' is 72 (compare with canonical_number)"),
    ("#### 9", 0.0, ("a '####' answer that is wrong must earn 0: a constant '#### 9' to every problem collected a "
                    "format term that paid for any number, whatever the answer")),
    ("It is 72.\n#### 70", 0.0, ("the number after '####' is the answer, not the last number before it: '#### 70' "
                                "is wrong")),
    ("So the answer is 72.", 0.0, "no '####' line earns 0: this term pays for the answer line the prompt asks for"),
    ("#### 72\n#### 72\n#### 72\n#### 72", 0.0, "a list of '#### N' lines earns 0: only ONE '####' earns it"),
    ("#### 12\n#### 72", 0.0, "several '####' lines earn 0, whatever they say"),
    ("The answer is #### 72 #### 72", 0.0, "count the '####' markers, not the lines: two on one line are two"),
    ("First, 48 divided by 2 is 24. Then we add 48 and", 0.0, "a reply cut before its answer earns 0"),
    ("So the answer is\n#### seventy-two", 0.0, "'#### seventy-two' holds no number"),
    ("", 0.0, "an empty reply earns 0"),
]


def _line_replies() -> list[tuple[list[dict], str, str]]:
    """(completion, gold, what it is) over GSM8K rows: one answer line (the gold as GSM8K writes it, plain, wrong,
    with text after it, with no space after the marker), lists on separate lines and on one line, no answer; then
    the shared completions with a '####' line (the gold written every way, near misses, text after it, two '####'
    lines with different numbers, none, several messages)."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in gsm8k_rows():
        number = canonical_number(gold)
        wrong = write_number(float(number) + 1)
        texts = [(f"{question[:80]}\nSo the answer is {gold}.\n#### {gold}", "one right answer line"),
                 (f"#### {number}\nThe answer is: {number}", "one right answer line, then text"),
                 (f"I think it is {wrong}.\n#### {wrong}", "one answer line with a wrong number: it must earn 0"),
                 (f"So the total is {number}.\n####{number}", "one right answer line, no space after the marker"),
                 (f"So it is {number}.\n#### {wrong}", "the right number before a wrong '####' answer: it must earn 0"),
                 (f"#### {gold}\n#### {gold}", "two '####' lines: a list earns 0"),
                 (f"#### {gold} #### {gold}", ("two '####' markers on one line that starts with one: a list (count "
                                               "the '####' markers, not the lines)")),
                 (f"It is {wrong}, so #### {wrong} #### {gold}", "two '####' markers on one line: a list"),
                 (f"{question[:80]}", "no answer line"),
                 (f"So the answer is {gold}\n####", "a '####' with no number after it")]
        cases += [([{"role": "assistant", "content": text}], gold, what) for text, what in texts]
        cases += [(completion, gold, what)
                  for completion, what in completions(gold, _hash_line, f"{question[:60]} ...", earlier_turns=False)]
    return cases


def _shown(completion: list[dict]) -> str:
    """A completion in a hint: its text when it is one message, else its messages."""
    return repr(completion[0]["content"]) if len(completion) == 1 else f"the completion {completion!r}"


def _reward_difference(func, cases, reference, adapter_call: bool) -> str | None:
    """`func` next to `reference` on (completion, gold, expected or None, what it is), called as a rubric calls a
    reward function (notebook 02's RubricRewards scores through one) and, with `adapter_call`, as the
    notebook's TRL adapter calls one: f(parser=..., completion=..., answer=...), without await. The first
    difference, with what it is."""
    from gsm8k_course import HashParser

    for completion, gold, expected, what in cases:
        expected = reference(completion, gold) if expected is None else expected
        case = f"for {_shown(completion)} (gold {gold!r})"
        try:
            if adapter_call:
                result = func(parser=HashParser(), completion=copy.deepcopy(completion), answer=gold)
                if inspect.isawaitable(result):
                    getattr(result, "close", lambda: None)()  # never awaited: close it quietly
                    return ("write it with def, not async def: the notebook's TRL adapter (trl_reward_funcs, section "
                            "3) "
                            "calls it as f(parser=..., completion=..., answer=...) without await, and a coroutine is "
                            "not a number")
                if float(result) != expected:
                    return (f"{case} it gave {result}, expected {expected}: "
                            + "; ".join(filter(None, [what, gold_hint(gold)])))
            got = call_reward(func, completion=copy.deepcopy(completion), answer=gold, parser=HashParser())
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"{case} it raised {type(e).__name__}: {e}" + (f"; {gold_hint(gold)}" if gold_hint(gold) else "")
        if got != expected:
            why = gold_hint(gold) if expected == 1.0 else ""
            return f"{case} it gave {got}, expected {expected}: " + "; ".join(filter(None, [what, why]))
    return None


@checks_exercise("02-close-the-hack")
def right_answer_line(func) -> str | None:
    """func(completion, answer) -> 1.0 only when the reply holds exactly one '####' and the number after it is the
    gold answer; tried next to the course's reference (word_arithmetic.right_answer_line)."""
    from word_arithmetic import right_answer_line as reference

    if not callable(func):
        return ("right_answer_line should be a reward function: "
                "def right_answer_line(completion, answer, **kwargs) -> float")
    own = not_your_own(func, references=(reference,))
    if own:
        return own
    cases = [([{"role": "assistant", "content": text}], "72", expected, hint) for text, expected, hint in LINE_CASES]
    number = ("one '####' whose number is the gold answer earns 1.0: extract_hash_answer reads every way a number is "
              "written ('$18', '-3', '1,000', '0.5.'), and canonical_number makes both sides the same number")
    cases += [(completion, gold, None, f"{what}; {number}") for completion, gold, what in _line_replies()]
    # section 12 scores it through RubricRewards only, which awaits it: an async def is fine there
    return _reward_difference(func, cases, lambda completion, gold: reference(completion, gold), adapter_call=False)


# ----------------------------------------------------------------------------- the right last number


def _arithmetic_rows() -> list[tuple[str, str]]:
    """(question, gold) from the word problems notebook 02 trains on (one step, numbers up to 20), then GSM8K's
    rows (golds written '1,080', '-3', '0.5')."""
    from word_arithmetic import generate

    problems = generate(4, "eval", "one-step", 20, 0)
    return [(p.question, str(p.answer)) for p in problems] + list(gsm8k_rows())


def _said(number: str) -> str:
    return f"So the answer is {number}"


def _last_number_replies() -> list[tuple[list[dict], str, str]]:
    """(completion, gold, what it is) for each row: the right number last, with and without a '####' line, written
    another way ('1,200', '1200', '12.0', '$12.'), followed by words; the right number early and another one last
    (a worked line, a second question), a number that only contains the gold, none at all; then the shared
    completions, the answer in words and in a '####' line (near misses, two answers, several messages)."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in _arithmetic_rows():
        number = canonical_number(gold)
        value = float(number)
        wrong, bigger = write_number(value + 1), f"1{number.lstrip('-')}"
        with_comma = f"{int(value):,}" if value == int(value) else number
        texts = [
            (f"{question[:60]} ... = {number}", "the right number last, no '####' line (it must still earn 1)"),
            (f"So it is {number}.\n#### {number}", "the right number in a '####' line"),
            (f"#### {gold}\nThe answer is: {gold} apples.", "the right number, then words after it"),
            (f"It is {with_comma}.", "the right number written with a thousands comma"),
            (f"It is {number}.0", "the right number written as a decimal (12.0 is 12)"),
            (f"That makes ${number}.", "the right number after a '$', with a full stop"),
            (f"First {number}, then {wrong}, so the answer is {wrong}.", "the right number early, a wrong one last"),
            (f"#### {number}\nQuestion: Tom has {wrong} apples.",
             "the right answer, then a new question with another number: only the LAST number counts"),
            (f"It is {bigger}.", "a number that contains the gold's digits is another number"),
            (f"It is {wrong}.\n#### {number}", "a wrong number early, the right one last"),
            ("I do not know.", "no number at all"),
            ("", "an empty reply"),
        ]
        cases += [([{"role": "assistant", "content": text}], gold, what) for text, what in texts]
        for mark in (_said, _hash_line):
            cases += [(completion, gold, what)
                      for completion, what in completions(gold, mark, f"{question[:60]} ...", earlier_turns=False)]
    return cases


def _last_number_references() -> tuple:
    from word_arithmetic import last_number_right as reference

    return (reference, last_number_right)


@checks_exercise("02-last-number")
def last_number_reward(func) -> str | None:
    """func(completion, answer) -> 1.0 when the reply's last number is the gold one, whatever the format; tried
    next to the course's reference (word_arithmetic.last_number_right) on replies to real problems, called as the
    notebook's rubric and its TRL adapter call it."""
    if not callable(func):
        return "last_number_right should be a reward function: def last_number_right(completion, answer, **kwargs)"
    own = not_your_own(func, references=_last_number_references())
    if own:
        return own
    cases = [(completion, gold, None, what) for completion, gold, what in _last_number_replies()]
    return _reward_difference(func, cases, last_number_right, adapter_call=True)
