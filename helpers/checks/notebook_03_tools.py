"""The check of notebook 03's tool exercise: the learner's count of tool calls next to the reference on
verifiers' ToolEnv rollouts, run with scripted replies shaped exactly as the OpenAI client returns them, and on
message shapes a completion may hold besides real rollouts'."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

from helpers.checks.notebook_03_replays import MAX_SCRIPTED_TURNS, ScriptedClient
from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import (
    call_reward,
    gsm8k_rows,
    quiet_datasets,
)
from helpers.checks.registry import checks_exercise
from helpers.worker_thread import run_sync

TOOL_CASES = [  # (what the case is, completion): message shapes a completion may hold besides real rollouts'
    ("the model's one message has no 'tool_calls'", [{"role": "assistant", "content": "#### 4"}]),
    ("the model's one message has 'tool_calls': None",
     [{"role": "assistant", "content": "#### 4", "tool_calls": None}]),
]


def _call(expression: str) -> str:
    return json.dumps({"expression": expression})


def _tool_scripts(question: str, gold: str) -> list[tuple[str, list]]:
    """(what the model does, its turns: a final text, or (text, [the calls' JSON arguments])) for one problem."""
    from gsm8k_course import canonical_number

    number = canonical_number(gold)
    answer = f"So the answer is {gold}.\n#### {gold}"
    return [
        ("answers without the tool", [answer]),
        ("makes one call, then answers", [("", [_call(f"{number} * 1")]), answer]),
        ("makes two calls in one turn, one in the next, then answers",
         [(f"{question[:40]}: let me compute.", [_call(f"{number} + 1"), _call(f"{number} - 1")]),
          ("", [_call(f"{number} * 2")]), answer]),
        ("keeps calling until max_turns", [("", [_call(f"{number} + {k}")]) for k in range(MAX_SCRIPTED_TURNS)]),
        ("sends arguments that are not JSON, then answers", [("", ['{"expression": "2+2"']), answer]),
        ("asks for what the calculator refuses, then answers", [("", [_call("__import__('os')")]), answer]),
    ]


def _tool_rollouts() -> list[tuple[str, list, dict]]:
    """(what the case is, completion, state) of real rollouts of the course's TolerantToolEnv (verifiers 0.1.5's
    ToolEnv loop, the real calculator) with scripted model turns, for max_turns 1, 2 and 4."""
    import verifiers as vf
    from datasets import Dataset
    from gsm8k_calculator import TolerantToolEnv, calculate

    async def run_all():
        rollouts = []
        for max_turns in (1, 2, 4):
            with quiet_datasets():
                env = TolerantToolEnv(tools=[calculate], max_turns=max_turns, parser=vf.Parser(),
                                      eval_dataset=Dataset.from_list([{"question": "q", "answer": "1"}]))
            for question, gold in gsm8k_rows()[:4] + gsm8k_rows()[-4:]:
                for what, turns in _tool_scripts(question, gold):
                    completion, state = await env.rollout(ScriptedClient(turns), "scripted",
                                                          [{"role": "user", "content": question}], answer=gold)
                    rollouts.append((f"the model {what} (max_turns={max_turns})", completion, state))
        return rollouts

    return run_sync(run_all())


@checks_exercise("03-tool-calls")
def tool_call_count(tool_calls: Callable[..., float]) -> str | None:
    """tool_calls(completion): how many tool calls the model's messages carry, on real ToolEnv rollouts."""
    from gsm8k_calculator import tool_calls as reference
    from gsm8k_feedback import FinalAnswerParser

    if not callable(tool_calls):
        return "tool_calls should be a reward function: def tool_calls(completion, **kwargs) -> float"
    own = not_your_own(tool_calls, references=(reference,))
    if own:
        return own
    cases = [(case, completion, {}) for case, completion in TOOL_CASES] + _tool_rollouts()
    for case, completion, state in cases:
        expected = reference(completion)
        try:
            got = call_reward(tool_calls, completion=copy.deepcopy(completion), state=state,
                              answer=state.get("answer", ""), parser=FinalAnswerParser())
        except TypeError as e:
            if "subscriptable" in str(e):
                return (f"on a rollout where {case}, it raised TypeError: {e}. A real rollout's tool calls are the "
                        "OpenAI client's objects (ChatCompletionMessageToolCall: call.function.name, call.id), not "
                        "dicts; to count them, len(message['tool_calls']) is all you need")
            none = "; 'tool_calls' may be None: count it as no calls" if "NoneType" in str(e) else ""
            return f"on a rollout where {case}, it raised TypeError: {e}{none}"
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"on a rollout where {case}, it raised {type(e).__name__}: {e}"
        if got != expected:
            return f"on a rollout where {case}, it counted {got}, not {expected}: {_tool_mistake(completion, got)}"
    return None


def _tool_mistake(completion: list, got: float) -> str:
    calls = [m for m in completion if m["role"] == "assistant" and m.get("tool_calls")]
    if got == sum(m["role"] == "tool" for m in completion):
        return ("at max_turns ToolEnv stops right after the model's call, before running it: count the calls the "
                "model made (its messages' tool_calls), not the tool results")
    if got == len(calls):
        return "one message may carry several calls: add up len(message['tool_calls'])"
    return "add up len(message['tool_calls']) over the assistant messages ('tool_calls' may be missing or None)"
