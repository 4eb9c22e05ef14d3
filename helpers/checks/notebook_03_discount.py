"""The check of notebook 03's turn-discount exercise: `discounted_correct` pays less for every extra model turn;
the learner's function next to the reference on the feedback environment's replays (notebook_03_replays), at the
notebook's discount and at others."""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
from collections.abc import Callable

from helpers.checks.notebook_03_replays import (
    Replay,
    _reference_replays,
    _transcript,
)
from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import (
    call_reward,
    gold_hint,
)
from helpers.checks.registry import checks_exercise

# A learner's code that calls the course's reward (or runs a copy of its code) is not the learner's own work.


def _discount_references() -> tuple:
    from gsm8k_feedback import FinalAnswerParser, make_rubric

    return (make_rubric(FinalAnswerParser()).get_reward_funcs()[0], _discounted_reference)


DISCOUNTS = (0.5, 0.25, 0.9)  # the notebook's default first


def _discounted_reference(parser, completion, answer, discount: float) -> float:
    """The solution's discounted_correct."""
    from gsm8k_course import correct_answer

    return correct_answer(parser, completion, answer) * discount ** (len(parser.get_assistant_messages(completion)) - 1)


@contextlib.contextmanager
def _notebook_discount(func: Callable, value: float):
    """The notebook's `discount` parameter set to `value` while `func` runs, when `func` reads it (a global of its
    module): the exercise's function has no discount argument of its own."""
    namespace = getattr(func, "__globals__", {})
    if "discount" not in namespace:
        yield
        return
    before = namespace["discount"]
    namespace["discount"] = value
    try:
        yield
    finally:
        namespace["discount"] = before


@checks_exercise("03-turn-discount")
def turn_discount(discounted_correct: Callable[..., float]) -> str | None:
    """discounted_correct(parser, completion, answer, ...): 1.0 on turn 1, `discount` times less per extra model
    turn; called as the rubric calls it, on the reference environment's rollouts, at several discounts."""
    from gsm8k_feedback import FinalAnswerParser

    if not callable(discounted_correct):
        return ("discounted_correct should be a reward function: "
                "def discounted_correct(parser, completion, answer, **kwargs)")
    own = not_your_own(discounted_correct, references=_discount_references())
    if own:
        return own
    parser = FinalAnswerParser()
    replays = [(f"max_turns={max_turns}, gold answer {gold!r}, the model {what}", replay)
               for (max_turns, gold, what), replay in _reference_replays().items() if replay.state is not None]
    takes_discount = "discount" in inspect.signature(discounted_correct).parameters
    sees_discount = takes_discount or "discount" in getattr(discounted_correct, "__globals__", {})
    for discount in DISCOUNTS if sees_discount else DISCOUNTS[:1]:  # only a discount it sees can change it
        for case, replay in replays:
            expected = _discounted_reference(parser, replay.completion, replay.state["answer"], discount)
            arguments = {"parser": parser, "completion": copy.deepcopy(replay.completion),
                         "answer": replay.state["answer"], "state": copy.deepcopy(replay.state),
                         "prompt": copy.deepcopy(replay.state["prompt"])}
            if takes_discount:
                arguments["discount"] = discount
            try:
                with _notebook_discount(discounted_correct, discount):
                    got = call_reward(discounted_correct, **arguments)
            except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                why = gold_hint(replay.state["answer"])
                said = f"with {case} (discount={discount}), it raised {type(e).__name__}: {e}"
                return said + (f"; {why}" if why else "")
            if not math.isclose(got, expected, abs_tol=1e-9):
                return (f"with {case} (discount={discount}): {_transcript(replay.said)}; it earned {got}, expected "
                        f"{expected}: " + _discount_mistake(parser, replay, got, expected, discount))
    return None


def _discount_mistake(parser, replay: Replay, got: float, expected: float, discount: float) -> str:
    """The mistake behind a discounted reward that differs from the reference's."""
    from gsm8k_course import correct_answer

    completion, gold = replay.completion, replay.state["answer"]
    right = correct_answer(parser, completion, gold)
    turns = len(parser.get_assistant_messages(completion))
    replies = sum(m["role"] == "user" for m in completion)
    if expected == 0.0:
        return ("a rollout that never got it right should earn 0: judge the last answer with correct_answer(parser, "
                "completion, answer), which compares the numbers exactly")
    mistakes = [
        (len(completion) - 1, ("count the MODEL's turns (parser.get_assistant_messages), not the messages: a "
                               "real rollout ends with the environment's 'Correct.'")),
        (turns, "count the MODEL's turns, and pay discount ** (turns - 1): the first turn earns 1.0"),
        (replies, "count the MODEL's turns, not the environment's replies"),
        (replies - 1, ("count the model's turns, not the environment's replies: the last allowed turn gets no "
                       "'Correct.' after it")),
    ]
    for exponent, why in mistakes:
        if math.isclose(got, right * discount ** exponent):
            return why
    if discount != 0.5 and math.isclose(got, right * 0.5 ** (turns - 1)):
        return (f"it paid as if the discount were 0.5, with the notebook's `discount` at {discount}: use the "
                "parameter `discount`, not a number")
    return "; ".join(filter(None, ["pay correct_answer(parser, completion, answer) * discount ** (model turns - 1)",
                                   gold_hint(gold)]))
