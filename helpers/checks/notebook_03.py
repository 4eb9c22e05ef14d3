"""Checks of notebook 03's exercises (multi-turn and tool environments). Each receives the
learner's function and tries it on conversations shaped exactly like real rollouts; None means
right, else a hint naming the mistake."""

from __future__ import annotations

import functools
import inspect
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


# ----------------------------------------------------------------------------- the feedback environment's methods
# is_completed and env_response are checked the way a rollout uses them: MultiTurnEnv.rollout's loop is
# replayed with scripted model turns (right answers written as GSM8K writes them and otherwise, wrong ones, no
# answer), over gold answers of both GSM8K splits (commas and negative ones among them) and several
# max_turns, once with the learner's method and once with the reference (gsm8k_feedback.FeedbackEnv's); the
# first conversation where they part is the hint.

MAX_SCRIPTED_TURNS = 6  # a conversation that has not ended by then never would


@functools.cache
def _golds() -> tuple[str, ...]:
    """Gold answers as GSM8K writes them (and as state["answer"] holds them): from both splits when the data
    is at hand (GSM8K_DIR or the HF cache), with commas and negative ones; else a fixed set like them."""
    import datasets
    from gsm8k_course import load_gsm8k

    golds = ["72", "1,600", "-3"]
    datasets.disable_progress_bars()
    try:
        for split in ("test", "train"):
            answers = list(load_gsm8k(split)["answer"])
            golds += [a for a in answers if "," in a][:2] + [a for a in answers if a.startswith("-")][:2] + answers[:2]
    except Exception:  # noqa: BLE001 - offline without GSM8K_DIR: the fixed set is shaped like the real ones
        golds += ["114,200", "-47", "18", "5"]
    finally:
        datasets.enable_progress_bars()
    return tuple(dict.fromkeys(golds))


def _scripts(gold: str) -> list[tuple[str, list[str]]]:
    """(what the model does, its answers turn by turn) for one gold answer, padded with wrong answers."""
    from gsm8k_course import canonical_number

    number = canonical_number(gold)
    value = float(number)

    def written(x: float) -> str:
        return str(int(x)) if x == int(x) else str(x)

    right, plain, wrong, wrong_2 = f"#### {gold}", f"#### {number}", f"#### {written(value + 1)}", f"#### {written(value - 2)}"
    scripts = [("right at once", [right]), ("wrong, then right", [wrong, right]),
               ("no answer, wrong, then right", ["I am not sure yet.", wrong_2, right]),
               ("never right", [wrong, wrong_2, wrong, wrong_2]),
               (f"right, written '{number}' where the gold is '{gold}'", [wrong, plain])]
    return [(what, [f"Let me compute.\n{a}" for a in answers] + [f"Again.\n{wrong}"] * MAX_SCRIPTED_TURNS)
            for what, answers in scripts]


def _feedback_env(max_turns: int, **methods):
    """gsm8k_feedback's FeedbackEnv with `methods` (is_completed, env_response) replaced."""
    import datasets
    import verifiers as vf
    from datasets import Dataset
    from gsm8k_feedback import FeedbackEnv, FinalAnswerParser

    env_class = type("CheckedFeedbackEnv", (FeedbackEnv,), methods)
    parser = FinalAnswerParser()
    datasets.disable_progress_bars()  # its one-row dataset is mapped: no bar in the learner's output
    try:
        return env_class(max_turns=max_turns, eval_dataset=Dataset.from_list([{"question": "q", "answer": "1"}]),
                         parser=parser, rubric=vf.Rubric(parser=parser))
    finally:
        datasets.enable_progress_bars()


async def _conversation(env, gold: str, answers: list[str]) -> tuple[list[tuple[str, str]], bool]:
    """MultiTurnEnv.rollout's loop (verifiers 0.1.5) with scripted model turns: [(role, text), ...], and whether
    the state kept what it held (its answer and a key of the caller's own) through every turn."""
    keep = object()  # a key of the caller's own, that must survive every turn
    state = {"answer": gold, "turn": 0, "prompt": [], "completion": [], "responses": [], "info": {}, "mine": keep}
    messages: list[dict] = [{"role": "user", "content": "A GSM8K problem."}]
    said: list[tuple[str, str]] = []
    while not await env.is_completed(messages, state):
        if state["turn"] >= MAX_SCRIPTED_TURNS:
            said.append(("-", "(never ended)"))
            break
        messages.append({"role": "assistant", "content": answers[state["turn"]]})
        said.append(("assistant", answers[state["turn"]].split("\n")[-1]))
        state["turn"] += 1
        if await env.is_completed(messages, state):
            break
        replies, state = await env.env_response(messages, state)
        if not isinstance(state, dict):
            raise TypeError(f"env_response returned {type(state).__name__} as the state: return (replies, state)")
        messages += replies
        said += [(reply.get("role", "?"), "Correct." if reply.get("content", "").strip() == "Correct." else "not right")
                 for reply in replies]
    return said, state.get("mine") is keep and state.get("answer") == gold


def _first_difference(method: str, yours: Callable) -> str | None:
    """Every scripted conversation with the learner's `method` and with the reference's; the first difference."""
    envs = {max_turns: (_feedback_env(max_turns, **{method: yours}), _feedback_env(max_turns)) for max_turns in (1, 2, 3, 4)}

    async def compare() -> str | None:  # one event loop for them all
        for max_turns, (env, reference) in envs.items():
            for gold in _golds():
                for what, answers in _scripts(gold):
                    expected, _ = await _conversation(reference, gold, answers)
                    case = f"max_turns={max_turns}, gold answer {gold!r}, the model {what}"
                    try:
                        got, kept = await _conversation(env, gold, answers)
                    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                        return f"with {case}, it raised {type(e).__name__}: {e}"
                    if got != expected:
                        return (f"with {case}:\n  expected {_transcript(expected)}\n  yours    {_transcript(got)}\n"
                                + _why(method, expected, got))
                    if not kept:
                        return (f"with {case}, the state lost what it held before (its 'answer' or other keys): "
                                "update the state dict you were given and return that one")
        return None

    return run_sync(compare())


def _transcript(said: list[tuple[str, str]]) -> str:
    return " → ".join(f"{role}: {text}" for role, text in said) or "(nothing: it ended before the first turn)"


def _why(method: str, expected: list[tuple[str, str]], got: list[tuple[str, str]]) -> str:
    """The mistake the first difference points at."""
    at = next(i for i in range(max(len(expected), len(got))) if expected[i: i + 1] != got[i: i + 1])
    want, have = (expected[at] if at < len(expected) else None), (got[at] if at < len(got) else None)
    ended_right = bool(expected) and expected[-1] == ("user", "Correct.")
    if want and have and want[0] == "user" and have[0] != "user":
        return "the environment's reply is a message with role 'user': [{'role': 'user', 'content': ...}]"
    if method == "env_response" and want and have and want[1] != have[1]:
        return ("the environment judged this answer differently: compare the NUMBERS (canonical_number of the parsed "
                "answer and of state['answer']: '1600', '1,600' and '$1,600' are one number), set state['solved'] "
                "and say 'Correct.' exactly when they are equal")
    if want is None and ended_right:
        return ("it said 'Correct.' and the conversation went on: set state['solved'] = True in env_response, and end "
                "the conversation once it is (is_completed)")
    if want is None:
        return ("after the model's last allowed turn (max_turns) the conversation must end: ask the base class, "
                "await vf.MultiTurnEnv.is_completed(self, messages, state, **kwargs), which checks max_turns")
    return ("it ended before the model had its max_turns turns and before a right answer: one turn early? End it "
            "when state['solved'] is True, or when the base class says so")


@checks_exercise("03-is-completed")
def feedback_is_completed(is_completed: Callable) -> str | None:
    """async is_completed(self, messages, state): over after a right answer, or at max_turns (the base class)."""
    if not inspect.iscoroutinefunction(is_completed):
        return "write it as `async def is_completed(self, messages, state, **kwargs)`: the environment awaits it"
    return _first_difference("is_completed", is_completed)


@checks_exercise("03-env-response")
def feedback_env_response(env_response: Callable) -> str | None:
    """async env_response(self, messages, state): parse the last model turn, set state['solved'], reply."""
    if not inspect.iscoroutinefunction(env_response):
        return "write it as `async def env_response(self, messages, state, **kwargs)`: the environment awaits it"
    return _first_difference("env_response", env_response)
