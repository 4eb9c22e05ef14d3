"""Checks of notebook 01's exercises (rubrics, scoring one rollout, GRPO signal, reward functions). Each runs the
learner's answer next to the reference on replies built from GSM8K rows of both splits (real_inputs) and on
irregular rollout tables, and names the first input where they part."""

from __future__ import annotations

import copy
import functools
import inspect
import math
import random
from collections.abc import Mapping

from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import (
    call_reward,
    completions,
    gold_hint,
    gsm8k_rows,
    replies,
    same_score,
)
from helpers.checks.registry import checks_exercise
from helpers.worker_thread import run_sync

TRAP_EXAMPLES = [
    ("<think>Each box holds 6 apples, 3 boxes: 6 * 3 = 18.</think>18", "18"),
    ("<think>48 / 2 = 24, then 48 + 24 = 72.</think>72", "72"),
]


def _think_rubrics():
    """The notebook's two rubrics, rebuilt: (with parser=parser, without), and the ThinkParser."""
    import verifiers as vf
    from gsm8k_course import correct_answer

    parser = vf.ThinkParser()
    funcs = [correct_answer, parser.get_format_reward_func()]
    return (vf.Rubric(funcs=funcs, weights=[1.0, 0.2], parser=parser),
            vf.Rubric(funcs=funcs, weights=[1.0, 0.2]), parser)


def _hash_rubric():
    from gsm8k_course import HashParser, make_rubric

    return make_rubric(HashParser(), "hash")


def _reply(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


async def _score_one(rubric, completion, answer: str):
    """What env.evaluate does once the model has answered: the rubric scores the reply against the gold."""
    completion = _reply(completion) if isinstance(completion, str) else completion
    return await rubric.score_rollout(prompt=[], completion=completion, answer=answer,
                                      state={"timing": {"total_ms": 0.0}})


def _scores(rubric, cases) -> list:
    async def score_all():
        return [await _score_one(rubric, completion, answer) for completion, answer in cases]

    return run_sync(score_all())


def _after_thinking(number: str) -> str:
    return f"</think>{number}"


@functools.cache
def _replies() -> tuple[tuple[str, str], ...]:
    """(reply, gold) over GSM8K rows: the shared replies with the answer after </think> (the gold written every
    way, near misses, text after the answer, two answers, none), unfinished thinking, no tags, a '####' line."""
    cases = list(TRAP_EXAMPLES)
    for question, gold in gsm8k_rows():
        cases += [(text, gold) for text, _ in replies(gold, _after_thinking, f"<think>{question[:100]} ...")]
        cases += [(f"<think>{question[:100]} so {gold}", gold), (gold, gold),
                  (f"{question[:60]} ... so the answer is {gold}.\n#### {gold}", gold)]
    return tuple(cases)


@functools.cache
def _completions() -> tuple[tuple[list[dict], str], ...]:
    """(completion, gold): each of _replies as one message, and completions of several messages."""
    cases = [(_reply(text), gold) for text, gold in _replies()]
    for question, gold in gsm8k_rows():
        cases += [(completion, gold) for completion, _ in
                  completions(gold, _after_thinking, f"<think>{question[:100]} ...") if len(completion) > 1]
    return tuple(cases)


def _shown(completion: list[dict]) -> str:
    """A completion in a hint: its text when it is one message, else its messages."""
    return repr(completion[0]["content"]) if len(completion) == 1 else f"the completion {completion!r}"


def _weights(rubric) -> list[tuple[str, float]]:
    return sorted(zip(rubric.get_reward_func_names(), rubric.get_reward_weights()))


@checks_exercise("01-repair-the-trap")
def repair_the_trap(rubric) -> str | None:
    import verifiers as vf

    if not isinstance(rubric, vf.Rubric):
        return "build a vf.Rubric(funcs=[...], weights=[...], ...)"
    fixed = _think_rubrics()[0]
    if _weights(rubric) != _weights(fixed):
        return (f"keep the weights of trap_rubric's functions, {_weights(fixed)}, not {_weights(rubric)} "
                "(correct_answer 1.0, the format reward 0.2): only one argument is missing")
    if not isinstance(rubric.parser, vf.ThinkParser):
        return ("the rubric hands its reward functions its own parser, a plain vf.Parser by default: "
                "pass the ThinkParser with parser=parser")
    cases = _completions()
    for (completion, answer), yours, expected in zip(cases, _scores(rubric, cases), _scores(fixed, cases)):
        if not same_score(yours, expected):
            return (f"{_shown(completion)} (gold {answer!r}) scored {yours.metrics}, reward {yours.reward}; with "
                    "parser=parser it "
                    f"scores {expected.metrics}, reward {expected.reward}. Build it from trap_rubric's own pieces: the "
                    "notebook's correct_answer, parser.get_format_reward_func(), the same parser")
    return None


def _score_references() -> tuple:
    from helpers.eval_views import score_text

    return (score_text,)


@checks_exercise("01-score-rollout")
def score_rollout(score_text) -> str | None:
    """score_text(rubric, text, answer): rubric.score_rollout's result on one assistant reply. The notebook awaits
    it, so an async def and a plain function that returns score_rollout's coroutine both do."""
    import verifiers as vf

    if not callable(score_text):
        return "score_text should be a function: async def score_text(rubric, text, answer)"
    own = not_your_own(score_text, references=_score_references())
    if own:
        return own
    fixed, trap, _ = _think_rubrics()
    rubrics = {"the fixed rubric": fixed, "trap_rubric": trap, "a '####' rubric": _hash_rubric()}

    async def compare() -> str | None:  # one event loop for every case
        for name, rubric in rubrics.items():
            for text, answer in _replies():
                case = f"with {name}, {text!r} (gold {answer!r})"
                try:
                    result = score_text(rubric, text, answer)
                    if not inspect.isawaitable(result):
                        return ("the notebook awaits it (`await score_text(...)`): write `async def score_text(...)` "
                                "and `return await rubric.score_rollout(...)`")
                    result = await result
                except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                    why = f"{gold_hint(answer)}. " if gold_hint(answer) else ""
                    return (f"{case}: it raised {type(e).__name__}: {e}. {why}Call rubric.score_rollout(prompt=[], "
                            "completion=[{'role': 'assistant', 'content': text}], answer=answer, "
                            "state={'timing': {'total_ms': 0.0}})")
                if inspect.isawaitable(result):
                    getattr(result, "close", lambda: None)()  # never awaited: close it quietly
                    return "you returned a coroutine: `await` rubric.score_rollout(...) before returning it"
                if not isinstance(result, vf.RolloutScore):
                    return (f"return what score_rollout returns (a RolloutScore with .reward and .metrics), "
                            f"not {type(result).__name__}")
                expected = await _score_one(rubric, text, answer)
                if not same_score(result, expected):
                    return (f"{case}: yours scored {result.metrics}, reward {result.reward}; expected "
                            f"{expected.metrics}, "
                            f"reward {expected.reward}: " + await _score_mistake(rubrics, rubric, text, answer, result))
        return None

    return run_sync(compare())


async def _score_mistake(rubrics: dict, rubric, text: str, answer: str, result) -> str:
    """The likely mistake behind a score that differs from the rubric's own."""
    for other_answer in dict.fromkeys(answer for _, answer in _replies()):
        if other_answer != answer and same_score(result, await _score_one(rubric, text, other_answer)):
            return "pass the gold answer you are given as answer="
    for other in rubrics.values():
        if other is not rubric and same_score(result, await _score_one(other, text, answer)):
            return "use the rubric you are given (its parser decides what is parsed)"
    expected = await _score_one(rubric, text, answer)
    if math.isclose(result.metrics.get("correct_answer", math.nan), expected.metrics["correct_answer"]):
        return ("the format reward scored differently: pass the completion as a list of messages, "
                "[{'role': 'assistant', 'content': text}]")
    return "call score_rollout with the rubric, text and answer you are given"


# ----------------------------------------------------------------------------- the share of examples with a signal

SIGNAL_CASES = [  # rewards per example, one list per example
    [[0.0, 0.5], [0.5, 0.0], [0.0, 0.0]],
    [[0.0, 0.0], [1.0, 0.0], [0.2, 0.2], [1.2, 1.2]],
    [[0.0], [1.0], [0.5]],  # one rollout per example: no group to compare with
    # irregular groups: 1 to 6 rollouts, unequal, two different rewards above 0 in one group
    [[0.5, 1.5], [1.2] * 6, [0.0], [0.2, 0.2, 1.0], [0.0, 0.0, 0.0, 0.0, 0.5]],
    [[1.0, 1.0, 1.0, 1.5], [0.0, 0.2], [1.2], [0.2, 0.2, 0.2, 0.2, 0.2]],
]


def _random_cases(count: int = 12) -> list[list[list[float]]]:
    """Groups of 1 to 6 rollouts with the rewards the course's rubrics give (think: 0, 0.2, 1.0, 1.2; '####':
    0, 0.5, 1.0, 1.5); a fixed seed, so every check tries the same ones."""
    rng = random.Random(0)
    levels = ([0.0, 0.2, 1.0, 1.2], [0.0, 0.5, 1.0, 1.5])
    return [[[rng.choice(levels[k % 2]) for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 6))]
            for k in range(count)]


def _rollouts(rewards_per_example):
    """A rollouts table shaped like helpers.evaluation.rollouts_frame's: the rows rollout by rollout, as
    env.evaluate returns them, with the columns a run's table has."""
    import pandas as pd

    rows = gsm8k_rows()
    return pd.DataFrame([
        {"example": e, "rollout": r, "question": rows[e % len(rows)][0], "answer": rows[e % len(rows)][1],
         "completion": f"#### {rewards[r]}", "reward": rewards[r], "correct_answer": float(rewards[r] >= 1.0)}
        for r in range(max(len(rewards) for rewards in rewards_per_example))
        for e, rewards in enumerate(rewards_per_example) if r < len(rewards)])


@checks_exercise("01-signal-share")
def signal_share(func) -> str | None:
    """func(rollouts): share of examples whose rollouts got different rewards."""
    if not callable(func):
        return "signal_share should be a function of the rollouts table"
    own = not_your_own(func, references=(_signal_share,))
    if own:
        return own
    tables, answers = [_rollouts(rewards) for rewards in SIGNAL_CASES + _random_cases()], []
    for rewards, table in zip(SIGNAL_CASES + _random_cases(), tables):
        try:
            answers.append(float(func(table)))
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return (f"for rewards {rewards} (one list per example) it raised {type(e).__name__}: {e} (the table has "
                    f"columns {list(table.columns)})")
    for rewards, table, got in zip(SIGNAL_CASES + _random_cases(), tables, answers):
        expected = _signal_share(table)
        if math.isclose(got, expected, abs_tol=1e-9):
            continue
        if got > 1:
            return f"it gave {got}: a share is between 0 and 1 (divide by the number of examples)"
        if math.isnan(got):
            return "it gave NaN: an example with one rollout has no spread, which counts as no signal"
        return (f"for rewards {rewards} (one list per example) it gave {got:.3f}, expected {expected:.3f}: "
                + _signal_mistake(tables, answers))
    return None


SIGNAL_MISTAKES = [  # (what the share would be with the mistake, what to say)
    (lambda groups: groups.transform("nunique").gt(1).mean(),
     "count each example once, not each rollout (examples have different numbers of rollouts)"),
    (lambda groups: ((groups.min() == 0) & (groups.max() > 0)).mean(),
     "two different rewards above 0 (0.5 and 1.5) are a signal too"),
    (lambda groups: groups.agg(lambda r: len(r) > 1 and r.iloc[0] != r.iloc[1]).mean(),
     "compare all of an example's rollouts, not the first two"),
]


def _signal_mistake(tables: list, answers: list[float]) -> str:
    """The known mistake that gives the learner's answer on every table, if one does."""
    generic = ("group the rollouts by 'example' and count the examples whose rewards are not all equal "
               "(a reward above 0 is not a signal; a difference between siblings is)")
    for share, why in SIGNAL_MISTAKES:
        if all(math.isclose(got, float(share(t.groupby("example")["reward"]))) for t, got in zip(tables, answers)):
            return f"{why}; {generic}"
    return generic


def _signal_share(rollouts) -> float:
    return float((rollouts.groupby("example")["reward"].nunique() > 1).mean())


@checks_exercise("01-signal-prediction")
def signal_prediction(value) -> str | None:
    """value: {"predicted": the learner's share, "rollouts": the run's rollouts table (the check measures it)}."""
    if not isinstance(value, Mapping) or {"predicted", "rollouts"} - set(value):  # any mapping; extra keys are fine
        return "pass {'predicted': your prediction, 'rollouts': classic.rollouts}"
    try:
        predicted = float(value["predicted"])
    except (TypeError, ValueError):
        return "predict a number: a share between 0 and 1"
    if not 0.0 <= predicted <= 1.0:
        return "a share is between 0 and 1"
    measured = _signal_share(value["rollouts"])
    if abs(predicted - measured) <= 0.1:
        return None
    return (f"the run measured {measured:.2f}. An example gives signal only if its rollouts got different "
            "rewards: how often did this model write <think> tags, and what did every rollout score then?")


# ----------------------------------------------------------------------------- a reward for \boxed{N}

BOXED_CASES = [  # (reply, gold answer, expected reward, what a wrong reward here means)
    ("So the total is \\boxed{18}.", "18", 1.0, "a plain \\boxed{18} should earn 1.0"),
    ("First \\boxed{1200}, no wait: \\boxed{7}", "7", 1.0, "take the LAST \\boxed{...}: the model corrected itself"),
    ("First \\boxed{1200}, no wait: \\boxed{7}", "1200", 0.0, "only the LAST \\boxed{...} counts, not any of them"),
    ("\\boxed{180}", "18", 0.0, "compare whole numbers (canonical_number on both sides), not substrings"),
    ("The answer is \\boxed{$1,200.00}", "1200", 1.0, "compare canonical_number(...) of both sides"),
    ("It is \\boxed{18} or maybe \\boxed{\\text{19}}", "18", 0.0,
     "the last box is \\boxed{\\text{19}}: find it with extract_boxed_answer, which matches nested braces"),
    ("The answer is 18", "18", 0.0,
     "no \\boxed{} at all earns 0 (extract_boxed_answer returns the whole text when there is no box)"),
    ("18", "18", 0.0, "no \\boxed{} at all earns 0, even when the text is the number"),
    ("\\boxed{}", "18", 0.0, "an empty \\boxed{} earns 0"),
]


def _boxed_reference(completion, answer, **kwargs) -> float:
    """The solution's boxed_reward."""
    from gsm8k_course import canonical_number
    from verifiers.utils.data_utils import extract_boxed_answer

    reply = completion[-1]["content"]
    if "\\boxed{" not in reply:
        return 0.0
    boxed = canonical_number(extract_boxed_answer(reply))
    return float(bool(boxed) and boxed == canonical_number(answer))


def _boxed(number: str) -> str:
    return f"So the answer is \\boxed{{{number}}}."


def _boxed_replies() -> list[tuple[list[dict], str, str]]:
    """(completion, gold, what it is) over GSM8K rows: the shared replies with the answer in a box (the gold written
    every way, near misses, text after it, two boxes, none, several messages), and the gold with no box."""
    cases = []
    for question, gold in gsm8k_rows():
        cases += [(completion, gold, what) for completion, what in completions(gold, _boxed, f"{question[:60]} ...")]
        cases.append(([{"role": "assistant", "content": f"The answer is {gold}."}], gold, "the gold with no box"))
    return cases


@checks_exercise("01-boxed-reward")
def boxed_reward(func) -> str | None:
    import verifiers as vf

    if not callable(func):
        return "boxed_reward should be a reward function: def boxed_reward(completion, answer, **kwargs) -> float"
    own = not_your_own(func, references=(_boxed_reference,))
    if own:
        return own
    cases = [(_reply(text), answer, expected, hint) for text, answer, expected, hint in BOXED_CASES]
    remedy = ("find the last box of the model's last turn with extract_boxed_answer and compare "
              "canonical_number(...) of both sides")
    cases += [(completion, answer, _boxed_reference(completion, answer),
               "; ".join(filter(None,
                                [what, gold_hint(answer), remedy]))) for completion, answer, what in _boxed_replies()]
    for completion, answer, expected, hint in cases:
        try:
            got = call_reward(func, completion=copy.deepcopy(completion), answer=answer, parser=vf.Parser())
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"for {_shown(completion)} (gold {answer!r}) it raised {type(e).__name__}: {e}. {hint}"
        if got != expected:
            return f"for {_shown(completion)} (gold {answer!r}) it gave {got}, expected {expected}: {hint}"
    return None
