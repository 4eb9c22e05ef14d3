"""gsm8k-calculator's tool environments through `env.evaluate`, against a tiny fake
OpenAI-compatible endpoint on 127.0.0.1 that answers from a script. It is the path these tests name:
a malformed tool call from the model (which no real model here can be made to send on demand), and
the JSON-reply protocol's conversion of a reply into a tool call. The real local model runs this
environment in tests/test_multiturn_env.py (vf-eval) and in benchmarks/bench_tool_calls.py."""

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
import verifiers as vf
from gsm8k_calculator import (
    JSON_WORKED_EXAMPLE,
    STRICT_EXPRESSION_PATTERN,
    STRICT_RESPONSE_PATTERN,
    JsonToolEnv,
    TolerantToolEnv,
    calculate,
    json_reply_schema,
    read_json_reply,
)
from openai.types.chat import ChatCompletionMessage

KEY = "fake-endpoint-key"
CUT_OFF_ARGUMENTS = '{"expression": "2+2"'  # a call cut off before its closing brace
# JSON nested deeper than Python's parser recurses: json.loads raises RecursionError, not a ValueError
DEEP = "[" * 100_000 + "]" * 100_000


def completion(message: dict) -> dict:
    return {"id": "fake", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                         "message": {"role": "assistant", **message}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def tool_call(name: str, arguments: str) -> dict:
    return {"content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                              "function": {"name": name, "arguments": arguments}}]}


@contextmanager
def fake_endpoint(script: Callable[[dict], dict]) -> Iterator[tuple[openai.OpenAI, list[dict]]]:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 whose reply is script(request body).
    Yields a client for it and the list of request bodies it received."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # the name http.server calls
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/chat/completions" or self.headers.get("Authorization") != f"Bearer {KEY}":
                self.send_error(404 if self.headers.get("Authorization") == f"Bearer {KEY}" else 401)
                return
            received.append(body)
            data = json.dumps(completion(script(body))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # keep pytest's output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key=KEY,
                               max_retries=0, timeout=10)
        yield client, received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def calls_then_answers(call: dict) -> Callable[[dict], dict]:
    """The model's script: `call` first; once it has read a tool result, '#### 4'."""
    return lambda body: {"content": "2 + 2 = 4\n#### 4"} if body["messages"][-1]["role"] == "tool" else call


@pytest.mark.parametrize(("call", "error"), [
    (tool_call("calculate", CUT_OFF_ARGUMENTS), "error: the arguments '{\"expression\": \"2+2\"' are not valid JSON"),
    (tool_call("calculate", '"2+2"'), "error: the arguments must be a JSON object"),
    (tool_call("calc", '{"expression": "2+2"}'), "error: there is no tool named 'calc'; the tools are: calculate"),
    (tool_call("calculate", '{"expression": ' + DEEP + "}"), "error: the arguments '{\"expression\": [[[[["),
])
def test_a_malformed_tool_call_becomes_a_tool_error_and_no_rollout_is_lost(call, error):
    env = vf.load_environment("gsm8k-calculator", num_examples=1, num_eval_examples=3)
    assert isinstance(env, TolerantToolEnv)
    with fake_endpoint(calls_then_answers(call)) as (client, received):
        out = env.evaluate(client, "scripted", num_examples=3, rollouts_per_example=2, max_concurrent=4,
                           sampling_args={"temperature": 0})
    assert len(out.completion) == len(out.reward) == 6  # every rollout kept
    for rollout in out.completion:
        assert [m["role"] for m in rollout] == ["assistant", "tool", "assistant"]
        assert rollout[1]["tool_call_id"] == "call_1" and rollout[1]["content"].startswith(error)
    # the model was sent the error as the tool's answer, and went on to its final reply
    assert sum(b["messages"][-1]["role"] == "tool" for b in received) == 6
    assert out.metrics["tool_calls"] == [1.0] * 6 and out.metrics["valid_tool_calls"] == [0.0] * 6


def test_verifiers_own_tool_env_loses_the_evaluation_on_the_same_call():
    """Why TolerantToolEnv exists: verifiers 0.1.5's ToolEnv raises out of evaluate (if this test
    fails, verifiers has fixed it and the subclass can go)."""
    env = vf.ToolEnv(tools=[calculate], max_turns=4, eval_dataset=vf.load_environment(
        "gsm8k-calculator", num_examples=1, num_eval_examples=1).eval_dataset)
    script = calls_then_answers(tool_call("calculate", CUT_OFF_ARGUMENTS))
    with fake_endpoint(script) as (client, _), pytest.raises(json.JSONDecodeError):
        env.evaluate(client, "scripted", num_examples=1, rollouts_per_example=1)


def test_well_formed_calls_run_as_before():
    env = vf.load_environment("gsm8k-calculator", num_examples=1, num_eval_examples=1)
    with fake_endpoint(calls_then_answers(tool_call("calculate", '{"expression": "48 / 2 + 48"}'))) as (client, _):
        out = env.evaluate(client, "scripted", num_examples=1, rollouts_per_example=1)
    assert out.completion[0][1]["content"] == "72"
    assert out.metrics["valid_tool_calls"] == [1.0]


# ----------------------------------------------------------------------------- the JSON-reply protocol

JSON_CALL = '{"tool_call": {"name": "calculate", "arguments": {"expression": "2 + 2"}}}'


def test_json_replies_become_a_tool_round_trip():
    """A call reply becomes an OpenAI tool call that the calculator answers; a response reply becomes
    the final text. Every request carries the schema, and the worked example before the question."""
    env = vf.load_environment("gsm8k-calculator", tool_protocol="json", num_examples=1, num_eval_examples=2)
    assert isinstance(env, JsonToolEnv)

    def script(body):
        if body["messages"][-1]["role"] == "tool":
            return {"content": '{"response": "2 + 2 = 4\\n#### 4"}'}
        return {"content": JSON_CALL}

    with fake_endpoint(script) as (client, received):
        out = env.evaluate(client, "scripted", num_examples=2, rollouts_per_example=1)
    rollout = out.completion[0]
    assert [m["role"] for m in rollout] == ["assistant", "tool", "assistant"]
    assert rollout[0]["content"] == JSON_CALL  # the model reads its own call in the next turn
    assert rollout[1]["content"] == "4" and rollout[2]["content"] == "2 + 2 = 4\n#### 4"
    assert out.metrics["tool_calls"] == [1.0, 1.0] and out.metrics["valid_tool_calls"] == [1.0, 1.0]
    assert out.metrics["hash_format"] == [1.0, 1.0]
    for body in received:
        assert body["response_format"]["json_schema"]["schema"] == env.reply_schema
        assert body["messages"][1:1 + len(JSON_WORKED_EXAMPLE)] == JSON_WORKED_EXAMPLE
    assert len(out.prompt[0]) == 2  # the recorded prompt is the question's own (system, user)


def test_a_json_reply_nested_too_deeply_is_a_malformed_reply_and_no_rollout_is_lost():
    """json.loads raised RecursionError out of get_model_response, and env.evaluate lost every rollout. The
    reply is now what a reply cut off at max_tokens is: not a call, kept as written, the rollout's last turn."""
    env = vf.load_environment("gsm8k-calculator", tool_protocol="json", num_examples=1, num_eval_examples=2)
    for deep in (DEEP, '{"tool_call": {"name": "calculate", "arguments": {"expression": ' + DEEP + "}}}"):
        with fake_endpoint(lambda body, deep=deep: {"content": deep}) as (client, _):
            out = env.evaluate(client, "scripted", num_examples=2, rollouts_per_example=2, max_concurrent=4)
        assert len(out.completion) == len(out.reward) == 4
        for rollout in out.completion:
            assert [m["role"] for m in rollout] == ["assistant"] and rollout[0]["content"] == deep
        assert out.metrics["tool_calls"] == [0.0] * 4 and out.reward == [0.0] * 4


def test_read_json_reply():
    call = ChatCompletionMessage(role="assistant", content=JSON_CALL)
    read_json_reply(call)
    assert call.tool_calls[0].function.name == "calculate"
    assert json.loads(call.tool_calls[0].function.arguments) == {"expression": "2 + 2"}
    answer = ChatCompletionMessage(role="assistant", content='{"response": "#### 4"}')
    read_json_reply(answer)
    assert answer.content == "#### 4" and not answer.tool_calls
    cut = ChatCompletionMessage(role="assistant", content='{"response": "2 + 2 is')  # stopped at max_tokens
    read_json_reply(cut)
    assert cut.content == '{"response": "2 + 2 is' and not cut.tool_calls


def test_reply_schema_offers_each_tool_or_a_response():
    tools = vf.load_environment("gsm8k-calculator", num_examples=1, num_eval_examples=1).oai_tools
    loose, strict = json_reply_schema(tools), json_reply_schema(tools, strict=True)
    assert [list(s["properties"]) for s in loose["anyOf"]] == [["tool_call"], ["response"]]
    expression = strict["anyOf"][0]["properties"]["tool_call"]["properties"]["arguments"]["properties"]["expression"]
    assert "pattern" in expression and "pattern" in strict["anyOf"][1]["properties"]["response"]
    assert "pattern" not in tools[0]["function"]["parameters"]["properties"]["expression"]  # not changed in place


def test_strict_patterns_hold_a_call_to_arithmetic_and_a_reply_to_one_final_number():
    expression, response = re.compile(STRICT_EXPRESSION_PATTERN), re.compile(STRICT_RESPONSE_PATTERN)
    assert expression.match("3 * 12 - 5") and expression.match("(48 / 2) + 0.5")
    for bad in ("100 + 25 + 50 = 300", "x * 2", "__import__('os')", ""):
        assert not expression.match(bad), bad
    assert response.match("3 boxes of 12 is 36, and 36 - 5 = 31.\n#### 31") is None  # one line only
    assert response.match("3 boxes of 12 is 36, and 36 - 5 = 31. #### 31") and response.match("Half. #### 2.5")
    for bad in ("#### 105.1010101010", "#### 31 apples", "no answer", "#### 3\n#### 4"):
        assert not response.match(bad), bad


def test_without_the_grammar_no_schema_is_sent_and_json_the_model_writes_is_still_read():
    env = vf.load_environment("gsm8k-calculator", tool_protocol="json", grammar=False, num_examples=1,
                              num_eval_examples=1)
    assert env.reply_schema is None

    def script(body):
        return {"content": "#### 4"} if body["messages"][-1]["role"] == "tool" else {"content": JSON_CALL}

    with fake_endpoint(script) as (client, received):
        out = env.evaluate(client, "scripted", num_examples=1, rollouts_per_example=1)
    assert all("response_format" not in body for body in received)
    assert out.metrics["valid_tool_calls"] == [1.0] and out.completion[0][-1]["content"] == "#### 4"
