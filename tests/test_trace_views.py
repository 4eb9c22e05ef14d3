"""The trace view reads as a conversation: messages by role and turn, tool calls and results set
apart, reward/latency/tokens on top, Weave's bookkeeping hidden, long values folded, raw JSON one
click away, secrets scrubbed. Calls here are shaped exactly as Weave's verifiers and openai
integrations record them (copied from a real multi-turn trace, shortened)."""

import datetime as dt
import html
import re

from helpers.tracing.viewer import conversation, details_html
from helpers.tracing.views import TraceNode, _attach_scores

T0 = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)
SYSTEM = {"content": "Solve. End with '#### <number>'.", "role": "system"}
QUESTION = {"content": "Janet's ducks lay 16 eggs per day. She eats 3 and bakes with 4. She sells the rest "
                       "at $2 each. How much does she make?", "role": "user"}
TOOL_CALL = {"_type": "ChatCompletionMessageFunctionToolCall", "id": "c1", "type": "function",
             "function": {"_type": "Function", "arguments": '{"expression": "16 - 3 - 4"}', "name": "calculate",
                          "_class_name": "Function", "_bases": ["BaseModel", "BaseModel"]},
             "_class_name": "ChatCompletionMessageFunctionToolCall", "_bases": ["BaseModel", "BaseModel"]}
COMPLETION = [
    {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
    {"role": "tool", "content": "9", "tool_call_id": "c1"},
    {"role": "assistant", "content": "9 * 2 = 18\n#### 17"},
    {"role": "user", "content": "Not yet: 17 is not the answer. Check your steps and try again."},
    {"role": "assistant", "content": "9 * 2 = 18\n#### 18"},
]


def call(op: str, inputs: dict, output, latency_s: float = 0.5, usage: dict | None = None, **extra) -> dict:
    return {"id": f"id-{op}", "trace_id": "t1", "parent_id": None, "op_name": f"weave:///local/p/op/{op}:abc",
            "started_at": T0, "ended_at": T0 + dt.timedelta(seconds=latency_s), "inputs": inputs, "output": output,
            "summary": {"usage": {"model": usage}} if usage else {}, "exception": None, **extra}


def chat_completion(message: dict) -> dict:
    return {"_type": "ChatCompletion", "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"_type": "Choice", "finish_reason": "stop", "index": 0, "logprobs": None,
                         "message": {"_type": "ChatCompletionMessage", "refusal": None, "annotations": None,
                                     "audio": None, "function_call": None, "tool_calls": None,
                                     "_class_name": "ChatCompletionMessage", "_bases": ["BaseModel"], **message}}],
            "usage": {"_type": "CompletionUsage", "prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69}}


def outside_raw_json(page: str) -> str:
    """What a reader sees before opening any raw JSON block, as text (HTML entities decoded)."""
    return html.unescape(re.sub(r"<pre class='raw'>.*?</pre>", "", page, flags=re.DOTALL))


def test_rollout_reads_as_a_conversation_turn_by_turn():
    rollout = TraceNode(call("verifiers.envs.multiturn_env.MultiTurnEnv.rollout",
                             {"self": {"__class__": {"name": "ToolEnv"}}, "prompt": [SYSTEM, QUESTION], "answer": "18"},
                             [COMPLETION, {"turn": 3, "responses": []}], latency_s=12.0))
    score = TraceNode(call("verifiers.Rubric.score_rollout",
                           {"prompt": [SYSTEM, QUESTION], "completion": COMPLETION, "answer": "18"},
                           {"reward": 1.5, "metrics": {"correct_answer": 1.0, "hash_format": 1.0, "tool_calls": 1.0}}))
    _attach_scores([rollout, score])
    page = details_html(rollout)
    shown = outside_raw_json(page)
    order = [shown.index(s) for s in ("Janet", "assistant · turn 1", "tool call: calculate(expression=\"16 - 3 - 4\")",
                                      "tool result · c1", "assistant · turn 2", "environment (user message)",
                                      "Not yet: 17", "assistant · turn 3", "#### 18")]
    assert order == sorted(order), "the messages are not shown in conversation order"
    assert "msg tool" in shown and "msg environment" in shown and "msg assistant" in shown
    # reward and metrics (from the scoring call next to it), latency at the top
    assert shown.index("reward 1.5") < shown.index("12.00 s") < shown.index("Janet")
    assert "correct_answer 1" in shown and "tool_calls 1" in shown
    assert rollout.title.startswith("verifiers.envs.multiturn_env.MultiTurnEnv.rollout · 12.00 s · reward 1.50")
    assert rollout.title.endswith("“9 * 2 = 18 #### 18”")
    # the system prompt is folded, Weave's bookkeeping and `self` only in the raw JSON
    assert "1 earlier message" in shown
    for internal in ("_bases", "_class_name", "_type", "__class__", "refusal"):
        assert internal not in shown, internal
    assert "raw JSON" in page and "_bases" in page


def test_model_call_shows_its_reply_and_tokens():
    node = TraceNode(call("openai.chat.completions.create", {"messages": [SYSTEM, QUESTION], "model": "m"},
                          chat_completion({"role": "assistant", "content": "She makes 9 * 2 = 18.\n#### 18"}),
                          latency_s=2.5, usage={"prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69}))
    shown = outside_raw_json(details_html(node))
    assert "60 prompt + 9 completion tokens" in shown and "2.50 s" in shown
    assert "assistant · turn 1" in shown and "She makes 9 * 2 = 18." in shown
    assert node.title == "openai.chat.completions.create · 2.50 s · 69 tokens · “She makes 9 * 2 = 18. #### 18”"


def test_tool_calls_are_titled_by_call_and_result():
    reply = chat_completion({"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]})
    model = TraceNode(call("verifiers.Environment.get_model_response", {"prompt": [QUESTION]}, reply))
    assert model.title.endswith("“calculate(expression=\"16 - 3 - 4\")”")
    tool = TraceNode(call("verifiers.ToolEnv.call_tool",
                          {"tool_name": "calculate", "tool_args": {"expression": "16 - 3 - 4"}},
                          {"role": "tool", "content": "9", "tool_call_id": "c1"}))
    assert conversation(tool.call) == ([], [{"role": "tool", "content": "9", "tool_call_id": "c1"}])
    assert tool.title.endswith("“9”")
    refused = TraceNode(call("calculate", {"expression": "9**9**9"}, None,
                             exception="CalculatorError: the result is too large (more than 1e+15)"))
    shown = details_html(refused)
    assert "too large" in shown and "error" in shown and refused.title.split(" · ")[-1] == "ERROR"


def test_environment_response_shows_what_it_answered():
    node = TraceNode(call("FeedbackEnv.env_response", {"self": "<FeedbackEnv object>", "messages": [SYSTEM, QUESTION,
                          COMPLETION[2]], "state": {"answer": "18", "turn": 1}},
                          [[COMPLETION[3]], {"answer": "18", "solved": False}]))
    shown = outside_raw_json(details_html(node))
    assert shown.index("#### 17") < shown.index("environment (user message)") < shown.index("Not yet: 17")
    assert "FeedbackEnv object" not in details_html(node)  # `self` is not shown, not even raw


def test_long_values_fold_and_secrets_never_show(monkeypatch):
    from helpers import scrubbing

    secret = "sk-test-" + "9" * 40
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setattr(scrubbing, "_env_cache", (0.0, set()))  # read the environment again now
    long_answer = "step. " * 300 + f"my key is {secret}"
    node = TraceNode(call("openai.chat.completions.create", {"messages": [QUESTION], "api_key": secret},
                          chat_completion({"role": "assistant", "content": long_answer})))
    page = details_html(node)
    assert secret not in page and secret not in node.title
    assert "more characters</summary>" in page  # the long reply is folded after its start
    checker = TraceNode(call("verifiers.ToolEnv.is_completed", {"messages": [QUESTION, *COMPLETION],
                                                               "state": {"responses": ["x" * 5000]}}, False))
    shown = outside_raw_json(details_html(checker))
    assert "6 messages</summary>" in shown
    assert shown.count("x" * 161) == 0  # the long state is shown by its start, the rest folded


def test_deeply_nested_tool_arguments_are_cut_with_a_note_not_a_recursion_error():
    """Tool arguments nested thousands of levels deep (a model can write them; ToolEnv keeps them in the rollout)
    broke notebook 03's trace widget and its HTML export with a RecursionError. They are cut at MAX_DEPTH levels,
    and the view says so."""
    from helpers.tracing.viewer import MAX_DEPTH, page_html, tree_widget

    said = f"nested deeper than {MAX_DEPTH} levels: cut here"

    deep: dict = {}
    inner = deep
    for _ in range(5000):  # built without recursion
        inner["a"] = {}
        inner = inner["a"]
    arguments = '{"x": ' * 5000 + "1" + "}" * 5000  # as the model wrote it: json.loads alone recurses too deep
    tool_call = {**TOOL_CALL, "function": {**TOOL_CALL["function"], "arguments": arguments}}
    completion = [{"role": "assistant", "content": "", "tool_calls": [tool_call]},
                  {"role": "tool", "content": "9", "tool_call_id": "c1"}]
    rollout = TraceNode(call("verifiers.envs.multiturn_env.MultiTurnEnv.rollout",
                             {"prompt": [SYSTEM, QUESTION], "answer": "18"}, [completion, {"turn": 1}]))
    tool = TraceNode(call("calculate", {"expression": deep}, {"role": "tool", "content": "9"}))
    rollout.children.append(tool)
    for node in (rollout, tool):
        assert said in html.unescape(details_html(node))
    assert said in html.unescape(page_html(rollout))
    tree_widget(rollout)  # builds every call's view
