"""Checks of notebook 03's exercises (multi-turn and tool environments). Each receives the
learner's function and tries it on scripted conversations; None means right, else a hint."""

from __future__ import annotations

from collections.abc import Callable

from helpers.checks import checks_exercise


@checks_exercise("03-feedback-hints")
def feedback_hints(feedback_message: Callable[[str, str], str]) -> str | None:
    """feedback_message(parsed, answer): "Correct." when right; "too high" / "too low" otherwise."""
    if feedback_message("72", "72").strip() != "Correct.":
        return "a right answer should get exactly 'Correct.' (the environment ends the rollout on it)"
    if "####" not in feedback_message("", "72"):
        return "with no final answer, remind the model of the '#### <number>' format"
    high, low = feedback_message("90", "72").lower(), feedback_message("50", "72").lower()
    if "too high" not in high or "too low" in high:
        return "90 for a gold answer of 72 should be called 'too high' (compare the numbers with float())"
    if "too low" not in low or "too high" in low:
        return "50 for a gold answer of 72 should be called 'too low'"
    if "too low" not in feedback_message("1,000", "2000").lower():
        return "'1,000' is a number too: compare canonical_number(parsed) with canonical_number(answer)"
    return None


def _scripted(*answers: str) -> list[dict]:
    """A completion in which the model answered `answers` in turn, with feedback in between."""
    completion = []
    for i, answer in enumerate(answers):
        if i:
            completion.append({"role": "user", "content": "Not yet: try again."})
        completion.append({"role": "assistant", "content": f"Let me compute.\n#### {answer}"})
    return completion


@checks_exercise("03-turn-discount")
def turn_discount(discounted_correct: Callable[..., float]) -> str | None:
    """discounted_correct(parser, completion, answer): 1.0 on turn 1, times a discount per extra turn."""
    from gsm8k_feedback import FinalAnswerParser

    parser = FinalAnswerParser()

    def reward(*answers: str) -> float:
        return float(discounted_correct(parser=parser, completion=_scripted(*answers), answer="72"))

    first, second, third = reward("72"), reward("1", "72"), reward("1", "2", "72")
    if first != 1.0:
        return f"a right answer on the first turn should earn 1.0, not {first}"
    if reward("1", "2", "3") != 0.0:
        return "a rollout that never got it right should earn 0"
    if not 0 < second < first:
        return (f"right on the second turn earned {second}: it should earn less than on the first "
                "(discount ** (turns - 1)), and more than 0")
    if abs(third - second * second) > 1e-9:
        return (f"turn 2 earned {second} and turn 3 {third}: each extra turn should multiply by the same "
                "discount (discount ** (turns - 1))")
    return None


@checks_exercise("03-tool-calls")
def tool_call_count(tool_calls: Callable[..., float]) -> str | None:
    """tool_calls(completion): how many tool calls the model's messages carry."""
    call = {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2+2"}'}}
    cases = [
        ([{"role": "assistant", "content": "#### 4"}], 0),
        ([{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "content": "4"},
          {"role": "assistant", "content": "#### 4"}], 1),
        ([{"role": "assistant", "content": "", "tool_calls": [call, call]}, {"role": "tool", "content": "4"},
          {"role": "tool", "content": "4"}, {"role": "assistant", "content": "", "tool_calls": [call]},
          {"role": "tool", "content": "4"}, {"role": "assistant", "content": "#### 4"}], 3),
        ([{"role": "assistant", "content": "#### 4", "tool_calls": None}], 0),
    ]
    for completion, expected in cases:
        got = tool_calls(completion=completion)
        if got != expected:
            return (f"a rollout with {expected} tool call(s) counted {got}: add up len(message['tool_calls']) "
                    "over the assistant messages (it may be missing or None)")
    return None
