"""Checks of notebook 01's exercises (rubrics, scoring one rollout, GRPO signal, reward functions)."""

from __future__ import annotations

import inspect
import math

from helpers.checks import checks_exercise
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


def _score(rubric, text: str, answer: str):
    completion = [{"role": "assistant", "content": text}]
    return run_sync(rubric.score_rollout(prompt=[], completion=completion, answer=answer,
                                         state={"timing": {"total_ms": 0.0}}))


@checks_exercise("01-repair-the-trap")
def repair_the_trap(rubric) -> str | None:
    import verifiers as vf

    if not isinstance(rubric, vf.Rubric):
        return "build a vf.Rubric(funcs=[...], weights=[...], ...)"
    if rubric.get_reward_weights() != [1.0, 0.2]:
        return "keep the weights [1.0, 0.2]: only one argument is missing"
    if not isinstance(rubric.parser, vf.ThinkParser):
        return ("the rubric hands its reward functions its own parser, a plain vf.Parser by default: "
                "pass the ThinkParser with parser=parser")
    for text, answer in TRAP_EXAMPLES:
        if _score(rubric, text, answer).metrics.get("correct_answer") != 1.0:
            return f"{text!r} should score 1.0 for correct_answer: use the notebook's correct_answer function"
    return None


@checks_exercise("01-score-rollout")
def score_rollout(score_text) -> str | None:
    """score_text(rubric, text, answer): awaits rubric.score_rollout on one assistant reply, returns its result."""
    import verifiers as vf

    if not inspect.iscoroutinefunction(score_text):
        return ("rubric.score_rollout is a coroutine function: write `async def score_text(...)` and "
                "`return await rubric.score_rollout(...)`")
    fixed, trap, _ = _think_rubrics()
    text, answer = TRAP_EXAMPLES[0]
    cases = [  # (rubric, text, gold, expected reward, what a wrong reward means)
        (fixed, text, answer, 1.2, None),
        (trap, text, answer, 0.2, "use the rubric you are given (its parser decides what is parsed)"),
        (fixed, text, "19", 0.2, "pass the gold answer you are given as answer="),
        (fixed, "18", answer, 0.0, "score the text you are given"),
    ]
    for rubric, reply, gold, expected, hint in cases:
        try:
            result = run_sync(score_text(rubric, reply, gold))
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return (f"it raised {type(e).__name__}: {e}. Call rubric.score_rollout(prompt=[], completion="
                    "[{'role': 'assistant', 'content': text}], answer=answer, state={'timing': {'total_ms': 0.0}})")
        if inspect.isawaitable(result):
            getattr(result, "close", lambda: None)()  # never awaited: close it quietly
            return "you returned a coroutine: `await` rubric.score_rollout(...) before returning it"
        if not isinstance(result, vf.RolloutScore):
            return (f"return what score_rollout returns (a RolloutScore with .reward and .metrics), "
                    f"not {type(result).__name__}")
        if not math.isclose(result.reward, expected, abs_tol=1e-9):
            because = hint or ("the format reward scored 0: pass the completion as a list of messages, "
                               "[{'role': 'assistant', 'content': text}]" if math.isclose(result.reward, 1.0) else
                               "call score_rollout with the rubric, text and answer you are given")
            return f"{reply!r} (gold {gold}) scored {result.reward}, expected {expected}. {because}".strip()
    return None


SIGNAL_CASES = [  # (rewards per example, as [rollout 0, rollout 1], expected share)
    ([[0.0, 0.5], [0.5, 0.0], [0.0, 0.0]], 2 / 3),
    ([[0.0, 0.0], [1.0, 0.0], [0.2, 0.2], [1.2, 1.2]], 0.25),
    ([[0.0], [1.0], [0.5]], 0.0),  # one rollout per example: no group to compare with
]


def _rollouts(rewards_per_example):
    import pandas as pd

    return pd.DataFrame([{"example": e, "rollout": r, "reward": reward}
                         for e, rewards in enumerate(rewards_per_example) for r, reward in enumerate(rewards)])


@checks_exercise("01-signal-share")
def signal_share(func) -> str | None:
    """func(rollouts): share of examples whose rollouts got different rewards."""
    if not callable(func):
        return "signal_share should be a function of the rollouts table"
    for rewards, expected in SIGNAL_CASES:
        table = _rollouts(rewards)
        try:
            got = float(func(table))
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"on a table with columns {list(table.columns)} it raised {type(e).__name__}: {e}"
        if math.isclose(got, expected, abs_tol=1e-9):
            continue
        if got > 1:
            return f"it gave {got}: a share is between 0 and 1 (divide by the number of examples)"
        if math.isnan(got):
            return "it gave NaN: an example with one rollout has no spread, which counts as no signal"
        return (f"for rewards {rewards} (one list per example) it gave {got:.3f}, expected {expected:.3f}: group "
                "the rollouts by 'example' and count the examples whose rewards are not all equal "
                "(a reward above 0 is not a signal; a difference between siblings is)")
    return None


def _signal_share(rollouts) -> float:
    return float((rollouts.groupby("example")["reward"].nunique() > 1).mean())


@checks_exercise("01-signal-prediction")
def signal_prediction(value) -> str | None:
    """value: {"predicted": the learner's share, "rollouts": the run's rollouts table (the check measures it)}."""
    if not isinstance(value, dict) or {"predicted", "rollouts"} - set(value):
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


@checks_exercise("01-boxed-reward")
def boxed_reward(func) -> str | None:
    for text, answer, expected, hint in BOXED_CASES:
        try:
            got = func(completion=[{"role": "assistant", "content": text}], answer=answer)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"for {text!r} it raised {type(e).__name__}: {e}"
        if got is None or float(got) != expected:
            return f"for {text!r} (gold {answer}) it gave {got}, expected {expected}: {hint}"
    return None
