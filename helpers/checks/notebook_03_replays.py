"""Notebook 03's feedback environment, replayed for its checks: built as the notebook builds it (its FeedbackEnv
class: verifiers' vf.MultiTurnEnv with the two functions, HASH_SYSTEM_PROMPT, the FinalAnswerParser, max_turns as
the notebook sets it and verifiers' own -1), with the learner's function and the solution's other one, and run
by verifiers' own MultiTurnEnv.rollout: a scripted client returns the model's turns as the OpenAI client returns
them, over the shared replies to GSM8K rows of both splits. The reference replays are what the checks compare
with."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
from collections.abc import Callable
from typing import NamedTuple

from helpers.checks.real_inputs import (
    gsm8k_rows,
    quiet_datasets,
    replies,
    write_number,
)
from helpers.worker_thread import run_sync

MAX_TURNS = (3, 1, 2, 4, -1)  # the notebook's default first; -1 is verifiers' default: no limit on turns


MAX_SCRIPTED_TURNS = 6  # a conversation that has not ended by then never would


# What MultiTurnEnv.rollout's state holds from its start: it reads 'responses' and 'turn' at every turn
ROLLOUT_STATE = ("id", "prompt", "completion", "answer", "task", "info", "responses", "turn", "timing")


QUIET = logging.getLogger(f"{__name__}.replay")  # a scripted model that stops is not an error to log
QUIET.disabled = True


async def _solution_is_completed(self, messages, state, **kwargs) -> bool:
    """The solution's is_completed (solutions/03_multiturn_and_tools.md)."""
    import verifiers as vf

    return state.get("solved", False) or await vf.MultiTurnEnv.is_completed(self, messages, state, **kwargs)


async def _solution_env_response(self, messages, state, **kwargs):
    """The solution's env_response, replying with the course's feedback_message."""
    from gsm8k_course import canonical_number
    from gsm8k_feedback import feedback_message

    parsed = self.parser.parse_answer(messages)
    state["solved"] = bool(parsed) and canonical_number(parsed) == canonical_number(state["answer"])
    return [{"role": "user", "content": feedback_message(parsed, state["answer"])}], state


def _hash_line(number: str) -> str:
    return f"#### {number}"


def _scripts(gold: str) -> list[tuple[str, list[str]]]:
    """(what the model does, its turns) for one gold answer: right at once, wrong then right, no answer then wrong
    then right, never right; then each shared reply with a '####' line (the gold written every way, near misses,
    text after the answer line, two '####' lines, none), followed by the right answer. Padded with wrong ones."""
    from gsm8k_course import canonical_number

    value = float(canonical_number(gold))
    right, wrong, wrong_2 = f"#### {gold}", f"#### {write_number(value + 1)}", f"#### {write_number(value - 2)}"
    scripts = [("answers right at once", [right]), ("answers wrong, then right", [wrong, right]),
               ("gives no answer, a wrong one, then the right one", ["I am not sure yet.", wrong_2, right]),
               ("is never right", [wrong, wrong_2])]
    scripts = [(what, [f"Let me compute.\n{turn}" for turn in turns]) for what, turns in scripts]
    scripts += [(f"writes {what}", [text, f"Let me compute.\n{right}"])
                for text, what in replies(gold, _hash_line, "Let me compute.")]
    # Model turns that hold the environment's own words (an is_completed that ends on them lets the model end its
    # rollout), and earlier turns with other numbers and '####' lines (a reply must be about the LAST turn)
    wrong_3 = f"#### {write_number(value + 3)}"
    scripts += [
        ("writes the environment's 'Correct.' before a wrong answer", [f"Correct.\n{wrong}", right]),
        ("asks whether its wrong answer is correct",
         [f"Is {write_number(value + 1)} correct? I think so.\n{wrong}", right]),
        ("quotes the environment's reply, then answers wrong",
         [f"Not yet: {write_number(value + 3)} is not the answer. Correct.\n{wrong_2}", right]),
        ("answers wrong, then works without an answer line, then right",
         [f"Let me compute.\n{wrong}", f"Let me recheck: {write_number(value + 3)} or {write_number(value - 2)}.",
          right]),
        ("answers wrong three times, each time another number", [wrong, wrong_3, wrong_2, right]),
    ]
    return [(what, turns + [f"Again.\n{wrong}"] * MAX_SCRIPTED_TURNS) for what, turns in scripts]


class NotAwaitable(TypeError):
    """The learner's method returned something the environment cannot await."""


class NotAReply(TypeError):
    """The learner's env_response returned something other than (messages, state)."""


def _awaited(method: str, yours: Callable) -> Callable:
    """Your function as the notebook's FeedbackEnv calls it (`return await is_completed(self, ...)`): an async
    def, or a plain function that returns a coroutine."""

    async def call(self, messages, state, **kwargs):
        result = yours(self, messages, state, **kwargs)
        if not inspect.isawaitable(result):
            raise NotAwaitable(f"{method} returned {type(result).__name__}, which the environment cannot await")
        result = await result
        if method == "env_response" and not (isinstance(result, tuple) and len(result) == 2
                                             and isinstance(result[0], list) and isinstance(result[1], dict)):
            raise NotAReply(f"env_response returned {str(result)[:120]!r}: return (a list of messages, the state), "
                            "e.g. `return [{'role': 'user', 'content': reply}], state`")
        return result

    return call


def _notebook_env(max_turns: int, rows, is_completed: Callable = _solution_is_completed,
                  env_response: Callable = _solution_env_response):
    """Section 2's environment as the notebook builds it, on `rows` (question, gold)."""
    import verifiers as vf
    from datasets import Dataset
    from gsm8k_course import HASH_SYSTEM_PROMPT
    from gsm8k_feedback import FinalAnswerParser, make_rubric

    completed, respond = _awaited("is_completed", is_completed), _awaited("env_response", env_response)

    class FeedbackEnv(vf.MultiTurnEnv):  # the notebook's class: your two functions on verifiers' base class
        async def is_completed(self, messages, state, **kwargs) -> bool:
            return await completed(self, messages, state, **kwargs)

        async def env_response(self, messages, state, **kwargs):
            return await respond(self, messages, state, **kwargs)

    parser = FinalAnswerParser()
    with quiet_datasets():  # its dataset is mapped
        env = FeedbackEnv(max_turns=max_turns, system_prompt=HASH_SYSTEM_PROMPT, parser=parser,
                          rubric=make_rubric(parser),
                          eval_dataset=Dataset.from_list([{"question": q, "answer": a} for q, a in rows]))
    env.logger = QUIET
    return env


class NeverEnded(Exception):
    """The scripted model has no turn left: the conversation had not ended by then."""

    def __init__(self, messages: list):
        super().__init__("the conversation never ended")
        self.messages = messages


class ScriptedClient:
    """Stands in for the OpenAI client in verifiers' own rollout loop: each `chat.completions.create` returns the
    script's next model turn as a ChatCompletion, as the client returns it."""

    def __init__(self, turns: list):
        self.turns = list(turns)
        self.chat = self.completions = self  # client.chat.completions.create

    async def create(self, *, messages, **kwargs):
        if not self.turns:
            raise NeverEnded(list(messages))
        return _model_turn(self.turns.pop(0))


def _model_turn(turn):
    """One model turn as the OpenAI client returns it: a ChatCompletion, its tool calls the client's objects."""
    from openai.types.chat import ChatCompletion

    text, calls = (turn, []) if isinstance(turn, str) else turn
    message = {"role": "assistant", "content": text,
               "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "calculate", "arguments": a}}
                              for i, a in enumerate(calls)] or None}
    return ChatCompletion.model_validate({
        "id": "scripted", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}]})


class Replay(NamedTuple):
    said: list[tuple[str, str]]  # (role, what it said in short) message by message
    completion: list[dict]  # as the rollout returns it
    state: dict | None  # None when the conversation never ended


def _judged(reply: str) -> str:
    return "Correct." if reply.strip() == "Correct." else "not right"


def _judged_with_hints(reply: str) -> str:
    words = [w for w in ("too high", "too low") if w in reply.lower()]
    return _judged(reply) + (f" ({words[0]})" if len(words) == 1 else "")


def _short(text) -> str:
    return str(text).removeprefix("Let me compute.\n").replace("\n", " / ")


async def _replay(env, prompt: list, gold: str, turns: list, judge: Callable[[str], str] = _judged) -> Replay:
    """One rollout of `env` by verifiers' own MultiTurnEnv.rollout, the model's turns scripted."""
    try:
        completion, state = await env.rollout(ScriptedClient(turns[:MAX_SCRIPTED_TURNS]), "scripted",
                                              copy.deepcopy(prompt), answer=gold)
    except NeverEnded as stop:
        completion, state = stop.messages[len(prompt):], None
    said = [(m.get("role", "?"), _short(m.get("content")) if m.get("role") == "assistant"
             else judge(str(m.get("content"))))  for m in completion]
    return Replay(said + ([("-", "(never ended)")] if state is None else []), completion, state)


@functools.cache
def _rows() -> tuple[tuple[str, str], ...]:
    """(question, gold), one row per gold answer of real_inputs."""
    rows = tuple({gold: (question, gold) for question, gold in reversed(gsm8k_rows())}.values())[::-1]
    # every other prompt holds a worked example with its own '####' line: a number the model never wrote
    return tuple((f"{q}\nWrite it as in: 2 + 14 = 16\n#### 16" if i % 2 else q, gold) for i,
                 (q, gold) in enumerate(rows))


@functools.cache
def _reference_replays() -> dict[tuple[int, str, str], Replay]:
    """{(max_turns, gold, what the model does): the solution's replay} for every max_turns, row and script."""
    async def replay_all():
        replays = {}
        for max_turns in MAX_TURNS:
            env = _notebook_env(max_turns, _rows())
            for (_, gold), prompt in zip(_rows(), env.eval_dataset["prompt"]):
                for what, turns in _scripts(gold):
                    replays[max_turns, gold, what] = await _replay(env, prompt, gold, turns)
        return replays

    return run_sync(replay_all())


def _transcript(said: list[tuple[str, str]]) -> str:
    return " → ".join(f"{role}: {text}" for role, text in said) or "(nothing: it ended before the first turn)"


def _method_references(method: str) -> tuple:
    from gsm8k_feedback import FeedbackEnv

    return (getattr(FeedbackEnv, method),
            _solution_is_completed if method == "is_completed" else _solution_env_response)
