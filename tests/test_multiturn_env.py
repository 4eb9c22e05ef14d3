"""The course's multi-turn and tool environment modules (`gsm8k-feedback`, `gsm8k-calculator`):
`is_completed` / `env_response` on scripted conversations, the rollout loop with a scripted model
(a tiny fake client, named as such), the per-turn discount, the tool metrics, and both modules
loaded with `vf.load_environment` and run by verifiers' own `vf-eval` against the local server."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import verifiers as vf
from gsm8k_feedback import CORRECT_REPLY, FeedbackEnv, feedback_message
from openai.types.chat import ChatCompletion

VF_EVAL = Path(sys.executable).parent / "vf-eval"
QUESTION = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "48 + 24?"}]


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


@pytest.fixture(scope="module")
def feedback_env() -> FeedbackEnv:
    return vf.load_environment("gsm8k-feedback", max_turns=3, num_examples=2, num_eval_examples=2)


def test_env_response_says_not_yet_then_correct(feedback_env):
    state = {"answer": "72", "turn": 1}
    messages = [*QUESTION, assistant("48 + 24 = 70\n#### 70")]
    reply, state = asyncio.run(feedback_env.env_response(messages, state))
    assert reply == [{"role": "user", "content": feedback_message("70", "72")}]
    assert reply[0]["content"].startswith("Not yet: 70 is not the answer.")
    assert not state["solved"]
    assert not asyncio.run(feedback_env.is_completed([*messages, *reply], state))

    state["turn"] = 2
    messages = [*messages, *reply, assistant("Sorry: 48 + 24 = 72\n#### 72")]
    reply, state = asyncio.run(feedback_env.env_response(messages, state))
    assert reply == [{"role": "user", "content": CORRECT_REPLY}] and state["solved"]
    assert asyncio.run(feedback_env.is_completed([*messages, *reply], state))


def test_no_final_answer_gets_told_the_format(feedback_env):
    reply, state = asyncio.run(feedback_env.env_response([*QUESTION, assistant("It is 72.")],
                                                         {"answer": "72", "turn": 1}))
    assert "no final answer" in reply[0]["content"] and "'#### <number>'" in reply[0]["content"]
    assert not state["solved"]


def test_max_turns_ends_the_rollout(feedback_env):
    state = {"answer": "72", "turn": 3}
    assert asyncio.run(feedback_env.is_completed([*QUESTION, assistant("#### 1")], state))
    state["turn"] = 2
    assert not asyncio.run(feedback_env.is_completed([*QUESTION, assistant("#### 1")], state))


def test_hints_say_too_high_or_too_low():
    assert "too high" in feedback_message("90", "72", hints=True)
    assert "too low" in feedback_message("1,000", "2000", hints=True)
    assert "too" not in feedback_message("90", "72")
    assert feedback_message("$72.00", "72", hints=True) == CORRECT_REPLY


class ScriptedModel:
    """A tiny fake of AsyncOpenAI's chat.completions.create that answers from a script (for the
    rollout loop only; every real model call in the course goes to a real server)."""

    def __init__(self, replies: list[str]):
        self.replies, self.seen = list(replies), []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, model: str, messages: list, **kwargs) -> ChatCompletion:
        self.seen.append([dict(m) for m in messages])
        return ChatCompletion.model_validate({
            "id": f"scripted-{len(self.seen)}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.replies.pop(0)}}]})


def rollout(env, replies: list[str], answer: str = "72"):
    model = ScriptedModel(replies)
    completion, state = asyncio.run(env.rollout(model, "scripted", QUESTION, answer=answer))
    score = asyncio.run(env.rubric.score_rollout(QUESTION, completion, answer, state))
    return model, completion, state, score


def test_rollout_loop_and_discounted_reward(feedback_env):
    model, completion, state, score = rollout(feedback_env, ["#### 70", "#### 72"])
    assert [m["role"] for m in completion] == ["assistant", "user", "assistant", "user"]
    assert completion[-1]["content"] == CORRECT_REPLY and state["turn"] == 2
    # the second model call saw the first answer and the environment's feedback
    assert model.seen[1][-2:] == [assistant("#### 70"), {"role": "user", "content": feedback_message("70", "72")}]
    assert score.metrics == {"discounted_correct": 0.5, "hash_format": 1.0, "solved": 1.0, "turns": 2.0}
    assert score.reward == pytest.approx(0.5 + 0.5 * 1.0)


@pytest.mark.parametrize(("replies", "discounted", "turns"), [
    (["#### 72"], 1.0, 1),
    (["#### 1", "#### 72"], 0.5, 2),
    (["#### 1", "#### 2", "#### 72"], 0.25, 3),
    (["#### 1", "#### 2", "#### 3"], 0.0, 3),  # max_turns=3: the third answer gets no feedback
])
def test_per_turn_discount(feedback_env, replies, discounted, turns):
    _, completion, _, score = rollout(feedback_env, replies)
    assert score.metrics["discounted_correct"] == discounted
    assert score.metrics["turns"] == turns and score.metrics["solved"] == float(discounted > 0)
    # "Correct." ends a rollout, except after the last allowed turn, which gets no reply at all
    assert completion[-1]["role"] == ("user" if discounted and turns < 3 else "assistant")


def test_discount_is_an_argument():
    env = vf.load_environment("gsm8k-feedback", discount=0.9, num_eval_examples=1, num_examples=1)
    _, _, _, score = rollout(env, ["#### 1", "#### 72"])
    assert score.metrics["discounted_correct"] == pytest.approx(0.9)
    with pytest.raises(RuntimeError):  # vf.load_environment wraps the module's ValueError
        vf.load_environment("gsm8k-feedback", discount=0, num_eval_examples=1, num_examples=1)


def test_calculator_env_has_the_tool_and_a_baseline_without_it():
    with_tool = vf.load_environment("gsm8k-calculator", num_examples=1, num_eval_examples=2)
    assert isinstance(with_tool, vf.ToolEnv)
    assert [t["function"]["name"] for t in with_tool.oai_tools] == ["calculate"]
    baseline = vf.load_environment("gsm8k-calculator", use_tool=False, num_examples=1, num_eval_examples=2)
    assert not baseline.oai_tools
    assert with_tool.rubric.get_reward_func_names() == ["correct_answer", "hash_format", "tool_calls",
                                                        "valid_tool_calls"]
    assert with_tool.rubric.get_reward_weights() == [1.0, 0.5, 0.0, 0.0]


def test_calculator_env_answers_tool_calls_and_counts_them():
    """env_response runs the tool for each call; refusals come back as messages; metrics count both."""
    env = vf.load_environment("gsm8k-calculator", num_examples=1, num_eval_examples=1)
    calls = [{"id": "a", "type": "function",
              "function": {"name": "calculate", "arguments": '{"expression": "48/2+48"}'}},
             {"id": "b", "type": "function",
              "function": {"name": "calculate", "arguments": '{"expression": "9**9**9"}'}}]
    turn = {"role": "assistant", "content": "", "tool_calls": calls}
    replies, _ = asyncio.run(env.env_response([*QUESTION, turn], {"answer": "72"}))
    assert replies[0]["content"] == "72" and replies[1]["content"].startswith("error: ")
    assert [r["tool_call_id"] for r in replies] == ["a", "b"]
    completion = [turn, *replies, assistant("#### 72")]
    state = {"timing": {"scoring_ms": 0.0, "total_ms": 0.0}}
    score = asyncio.run(env.rubric.score_rollout(QUESTION, completion, "72", state))
    assert score.metrics == {"correct_answer": 1.0, "hash_format": 1.0, "tool_calls": 2.0, "valid_tool_calls": 1.0}


@pytest.mark.parametrize(("env_id", "env_args"), [
    ("gsm8k-feedback", '{"max_turns": 2, "num_examples": 1, "num_eval_examples": 2}'),
    ("gsm8k-calculator", '{"num_examples": 1, "num_eval_examples": 2}'),
])
@pytest.mark.slow
def test_vf_eval_runs_the_module(local_server, env_id, env_args):
    """verifiers' own CLI, unmodified, on the installed module against the real local server."""
    key_var = "COURSE_VF_EVAL_KEY"  # vf-eval reads the key from the variable named by -k
    result = subprocess.run(
        [str(VF_EVAL), env_id, "-a", env_args, "-m", local_server.alias, "-b", local_server.base_url,
         "-k", key_var, "-n", "2", "-r", "1", "-c", "2", "-t", "64", "-T", "0"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, key_var: local_server.api_key},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    reward = float(re.search(r"^reward: avg - ([0-9.]+)", result.stdout, re.MULTILINE).group(1))
    assert 0.0 <= reward <= 1.5
    metric = "turns" if env_id == "gsm8k-feedback" else "tool_calls"
    assert re.search(rf"^{metric}: avg - [0-9.]+", result.stdout, re.MULTILINE), result.stdout[-1500:]
