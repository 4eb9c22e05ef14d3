"""Checks of notebook 03's exercises (multi-turn and tool environments). Each receives the
learner's function and tries it on conversations shaped exactly like real rollouts; None means
right, else a hint naming the mistake."""

from __future__ import annotations

import math
from collections.abc import Callable

from helpers.checks import checks_exercise
from helpers.worker_thread import run_sync

HINT_CASES = [  # (parsed, gold, the word the feedback must contain, what a wrong word here means)
    ("90", "72", "too high", "90 for a gold answer of 72 is too high (compare the numbers with float())"),
    ("50", "72", "too low", "50 for a gold answer of 72 is too low"),
    ("100", "72", "too high", "'100' < '72' as text, but 100 > 72 as numbers: compare float(...) of both"),
    ("9", "72", "too low", "'9' > '72' as text, but 9 < 72 as numbers: compare float(...) of both"),
    ("1,000", "2000", "too low", "'1,000' is a number too: float(canonical_number(parsed))"),
]


@checks_exercise("03-feedback-hints")
def feedback_hints(feedback_message: Callable[[str, str], str]) -> str | None:
    """feedback_message(parsed, answer): "Correct." when right; "too high" / "too low" otherwise."""
    if feedback_message("72", "72").strip() != "Correct.":
        return "a right answer should get exactly 'Correct.' (the environment ends the rollout on it)"
    if "####" not in feedback_message("", "72"):
        return "with no final answer, remind the model of the '#### <number>' format"
    for parsed, gold, word, hint in HINT_CASES:
        try:
            reply = feedback_message(parsed, gold).lower()
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"feedback_message({parsed!r}, {gold!r}) raised {type(e).__name__}: {e}. {hint}"
        other = "too low" if word == "too high" else "too high"
        if word not in reply or other in reply:
            return f"feedback_message({parsed!r}, {gold!r}) said {reply!r}: {hint}"
    return None


def _rollout(*answers: str, gold: str = "72", max_turns: int = 3) -> list[dict]:
    """A completion exactly as FeedbackEnv's rollout makes it: each model turn, then the environment's
    reply ("Correct." ends the rollout), except after the last allowed turn (no reply then)."""
    completion = []
    for turn, answer in enumerate(answers, start=1):
        completion.append({"role": "assistant", "content": f"Let me compute.\n#### {answer}"})
        if turn == max_turns:
            break
        completion.append({"role": "user", "content": "Correct." if answer == gold else "Not yet: try again."})
    return completion


@checks_exercise("03-turn-discount")
def turn_discount(discounted_correct: Callable[..., float]) -> str | None:
    """discounted_correct(parser, completion, answer): 1.0 on turn 1, times a discount per extra turn."""
    from gsm8k_feedback import FinalAnswerParser

    parser = FinalAnswerParser()

    def reward(*answers: str) -> float:
        return float(discounted_correct(parser=parser, completion=_rollout(*answers), answer="72"))

    try:
        first, second, third, never = reward("72"), reward("1", "72"), reward("1", "2", "72"), reward("1", "2", "3")
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"it raised {type(e).__name__}: {e}"
    if first != 1.0:
        return (f"right on the first turn earned {first}, not 1.0. A real rollout ends with the environment's "
                "'Correct.': count the MODEL's turns (parser.get_assistant_messages), not the messages")
    if never != 0.0:
        return "a rollout that never got it right should earn 0"
    if not 0 < second < first:
        return (f"right on the second turn earned {second}: it should earn less than on the first "
                "(discount ** (turns - 1)), and more than 0")
    if not math.isclose(third, second * second):
        return (f"turn 2 earned {second} and turn 3 {third}: each extra model turn multiplies by the same discount "
                "(discount ** (model turns - 1)); the last allowed turn gets no 'Correct.' after it")
    return None


_CALL = {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2+2"}'}}
TOOL_CASES = [  # (completion, tool calls in it, what a wrong count here means)
    ([{"role": "assistant", "content": "#### 4"}], 0, "a reply without tool calls has none"),
    ([{"role": "assistant", "content": "#### 4", "tool_calls": None}], 0,
     "'tool_calls' may be None: count it as no calls"),
    ([{"role": "assistant", "content": "", "tool_calls": [_CALL]}, {"role": "tool", "content": "4"},
      {"role": "assistant", "content": "#### 4"}], 1, "one call, one result"),
    ([{"role": "assistant", "content": "", "tool_calls": [_CALL, _CALL]}, {"role": "tool", "content": "4"},
      {"role": "tool", "content": "4"}, {"role": "assistant", "content": "", "tool_calls": [_CALL]},
      {"role": "tool", "content": "4"}, {"role": "assistant", "content": "#### 4"}], 3,
     "one message may carry several calls: add up len(message['tool_calls'])"),
    ([{"role": "assistant", "content": "", "tool_calls": [_CALL]}, {"role": "tool", "content": "4"},
      {"role": "assistant", "content": "", "tool_calls": [_CALL]}], 2,
     ("at max_turns ToolEnv stops right after the model's call, before running it: count the calls the model "
     "made (its messages' tool_calls), not the tool results")),
]


@checks_exercise("03-tool-calls")
def tool_call_count(tool_calls: Callable[..., float]) -> str | None:
    """tool_calls(completion): how many tool calls the model's messages carry."""
    for completion, expected, hint in TOOL_CASES:
        try:
            got = tool_calls(completion=completion)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"on a rollout with {expected} tool call(s) it raised {type(e).__name__}: {e}. {hint}"
        if got != expected:
            return f"a rollout with {expected} tool call(s) counted {got}: {hint}"
    return None


FEEDBACK_RUBRIC = {"discounted_correct": 1.0, "hash_format": 0.5, "solved": 0.0, "turns": 0.0}


@checks_exercise("03-my-environment")
def my_environment(load_environment: Callable) -> str | None:
    """load_environment(max_turns=, discount=, num_eval_examples=, seed=) of the learner's module: section 2's
    feedback environment, with section 2's rubric (weights included)."""
    import verifiers as vf

    if not callable(load_environment):
        return "pass your module's load_environment function"
    try:
        env = load_environment(max_turns=2, discount=0.5, num_eval_examples=2, seed=0)
    except NotImplementedError:
        return "load_environment still raises NotImplementedError: write its body"
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"load_environment(max_turns=2, discount=0.5, num_eval_examples=2, seed=0) raised {type(e).__name__}: {e}"
    if not isinstance(env, vf.MultiTurnEnv):
        return f"return the feedback environment (a vf.MultiTurnEnv), not {type(env).__name__}"
    if env.max_turns != 2:
        return f"max_turns=2 gave an environment with max_turns={env.max_turns}: pass the argument on"
    if env.eval_dataset is None or len(env.eval_dataset) != 2:
        return "num_eval_examples=2 should give an eval_dataset of 2 GSM8K problems (load_gsm8k('test', n, seed))"
    rubric = dict(zip(env.rubric.get_reward_func_names(), env.rubric.get_reward_weights()))
    if rubric != FEEDBACK_RUBRIC:
        return (f"the rubric is {rubric}; section 2's is {FEEDBACK_RUBRIC}: the same four functions with the "
                "same weights (the '####' format counts 0.5)")
    gold = env.eval_dataset[0]["answer"]
    messages = [{"role": "assistant", "content": f"#### {gold}"}]
    try:
        replies, state = run_sync(env.env_response(messages, {"answer": gold, "turn": 1}))
        done = run_sync(env.is_completed(messages + replies, state))
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"env_response/is_completed raised {type(e).__name__}: {e}"
    if replies[0]["content"].strip() != "Correct." or not done:
        return "a right answer should get 'Correct.' and end the rollout (is_completed True)"
    for answers, expected, when in ((("72",), 1.5, "on the first turn"), (("1", "72"), 1.0, "on the second turn")):
        completion = _rollout(*(gold if a == "72" else a for a in answers), gold=gold, max_turns=2)
        score = run_sync(env.rubric.score_rollout(prompt=[], completion=completion, answer=gold,
                                                  state={"timing": {"total_ms": 0.0}}))
        if not math.isclose(score.reward, expected):
            return (f"right {when} should score {expected} (discounted answer + 0.5 x format), not {score.reward}: "
                    "parse the model's LAST turn (its last assistant message, not the environment's 'Correct.'), "
                    "and discount per model turn")
    return None
