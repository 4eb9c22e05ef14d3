"""GSM8K with a calculator tool: `vf.load_environment("gsm8k-calculator")`, a `vf.ToolEnv`.

The model may call `calculate(expression)` (OpenAI tool calling) as often as it likes within
`max_turns` model turns, then ends with `#### <number>`. The calculator is safe by construction:
an AST walk that knows numbers, + - * / ** %, unary signs and parentheses, and nothing else. It
refuses names, attributes, calls, long inputs and results too large to compute quickly
(`9**9**9`), with a message the model reads as the tool's answer; no input can make it hang.

Reward: 1.0 for the right number after the last '####' + 0.5 x the '####' format. Two metrics
with weight 0 count the tool calls of a rollout and the valid ones (arguments the calculator
accepted). `use_tool=False` gives the same environment with no tool: the baseline.

Malformed tool calls never end a rollout: `TolerantToolEnv` (a `vf.ToolEnv`) answers arguments that
are not JSON, arguments that are not an object and unknown tool names with an `error: ...` tool
message for that call, which the model reads; verifiers 0.1.5's ToolEnv raises instead (its
`json.loads` runs outside its try block), losing every rollout of the evaluation.

`tool_protocol="json"` is for a model that was never trained to call tools (the local SmolLM2-135M
calls none through OpenAI `tools`: benchmarks/bench_tool_calls.py). `JsonToolEnv` sends llama.cpp a
JSON schema (`response_format`), so that each reply is one JSON object of one of two shapes, a call
`{"tool_call": {"name": "calculate", "arguments": {"expression": "..."}}}` or a final answer
`{"response": "..."}`: the grammar fixes the form; the model chooses the shape and writes the
expression and the answer. The environment turns a call into an OpenAI tool call that ToolEnv runs.

It depends on verifiers and the course's `gsm8k-course` module, whose GSM8K loader and answer checks
it uses: GSM8K from the HF hub (`openai/gsm8k`), or offline from a folder of `train.jsonl`/`test.jsonl`
named by `GSM8K_DIR`, every record checked (the same rows as `gsm8k-course` for the same
`num_eval_examples` and `seed`).
"""

from __future__ import annotations

import ast
import json
import math
import operator
import uuid

import verifiers as vf
from gsm8k_course import (
    HASH_SYSTEM_PROMPT,
    check_counts,
    correct_answer,
    extract_hash_answer,
    load_gsm8k,
)
from openai.types.chat import ChatCompletion, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_tool_call import Function

SYSTEM_PROMPT = (
    "Solve the math problem step by step. Use the calculate tool for arithmetic. "
    "On the last line, write the final answer as '#### <number>'."
)
NO_TOOL_SYSTEM_PROMPT = HASH_SYSTEM_PROMPT

# ----------------------------------------------------------------------------- the calculator

MAX_EXPRESSION_CHARS = 200
MAX_ABS_VALUE = 10**15  # far beyond any GSM8K quantity; keeps every step of the walk fast
# Keyed by the AST node's class name (Weave records an op's globals; it cannot store type keys).
OPERATORS = {"Add": operator.add, "Sub": operator.sub, "Mult": operator.mul,
             "Div": operator.truediv, "Mod": operator.mod, "Pow": operator.pow}
SIGNS = {"UAdd": operator.pos, "USub": operator.neg}
ALLOWED = "numbers, + - * / ** %, and parentheses"


class CalculatorError(ValueError):
    """An expression the calculator refuses; the message is what the model reads."""


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Args:
        expression: numbers, + - * / ** % and parentheses only, e.g. "(48 / 2) + 48".
    """
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError(f"give an arithmetic expression as text, using {ALLOWED}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"{expression!r} is not an arithmetic expression; use {ALLOWED}") from None
    return _format(_evaluate(tree.body))


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op).__name__ in SIGNS:
        return SIGNS[type(node.op).__name__](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op).__name__ in OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            return _checked(OPERATORS[type(node.op).__name__](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
    raise CalculatorError(f"{_describe(node)} is not allowed; use {ALLOWED}")


def _check_power(base: float, exponent: float) -> None:
    """Refuse a power before computing it when its result would be huge or not a real number."""
    if base < 0 and exponent != int(exponent):
        raise CalculatorError("a negative number to a fractional power is not a real number")
    if abs(base) > 1 and exponent * math.log10(abs(base)) > math.log10(MAX_ABS_VALUE):
        raise CalculatorError(f"the result is too large (more than {MAX_ABS_VALUE:.0e})")


def _checked(value: float) -> float:
    if isinstance(value, complex) or not math.isfinite(value) or abs(value) > MAX_ABS_VALUE:
        raise CalculatorError(f"the result is too large (more than {MAX_ABS_VALUE:.0e})")
    return value


def _describe(node: ast.AST) -> str:
    kinds = {ast.Name: "a name", ast.Attribute: "an attribute", ast.Call: "a function call",
             ast.Constant: "this constant", ast.Tuple: "a comma (write 1000, not 1,000)",
             ast.BinOp: "this operator", ast.UnaryOp: "this operator", ast.Compare: "a comparison"}
    what = next((label for kind, label in kinds.items() if isinstance(node, kind)), "this")
    try:
        return f"{what} ({ast.unparse(node)[:40]!r})"
    except Exception:  # noqa: BLE001 - only a description for the message
        return what


def _format(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.10g}" if isinstance(value, float) else str(value)


def tool_error(error: Exception) -> str:
    """What the model reads when a tool call fails (ToolEnv's error_formatter)."""
    return f"error: {error}"


# ----------------------------------------------------------------------------- rubric


def hash_format(parser: vf.Parser, completion, **kwargs) -> float:
    """1.0 when the final reply ends with '#### <number>'."""
    return 1.0 if parser.parse_answer(completion) else 0.0


def _calls(message) -> list:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return list(calls or [])


def tool_calls(completion, **kwargs) -> float:
    """Metric: how many tool calls the model made in this rollout."""
    return float(sum(len(_calls(m)) for m in completion if m["role"] == "assistant"))


def valid_tool_calls(completion, **kwargs) -> float:
    """Metric: how many tool calls the calculator accepted (a result, not an error)."""
    return float(sum(1 for m in completion if m["role"] == "tool"
                     and not str(m.get("content", "")).startswith("error")))


def make_rubric(parser: vf.Parser) -> vf.Rubric:
    return vf.Rubric(funcs=[correct_answer, hash_format, tool_calls, valid_tool_calls],
                     weights=[1.0, 0.5, 0.0, 0.0], parser=parser)


# ----------------------------------------------------------------------------- malformed tool calls


class TolerantToolEnv(vf.ToolEnv):
    """A `vf.ToolEnv` in which a malformed tool call becomes an `error: ...` tool message.

    verifiers 0.1.5's `ToolEnv.env_response` parses each call's arguments with `json.loads` outside
    its try block: one call like `{"expression": "2+2"` (cut off) raises out of the rollout, and
    `env.evaluate` loses every rollout. Here each call that cannot be made (arguments that are not
    JSON, or not a JSON object; a tool name that does not exist) is answered with
    `error_formatter(reason)` for that call's id, so the model reads why and the rollout goes on.
    Turns whose calls are all well formed go to ToolEnv's own `env_response` unchanged.
    """

    def __init__(self, tools=None, error_formatter=tool_error, **kwargs):
        super().__init__(tools=tools, error_formatter=error_formatter, **kwargs)

    async def env_response(self, messages, state, **kwargs):
        calls = [_call_parts(call) for call in messages[-1]["tool_calls"]]
        problems = [self.call_problem(name, arguments) for name, arguments, _ in calls]
        if not any(problems):
            return await super().env_response(messages, state, **kwargs)
        replies = []
        for (name, arguments, call_id), problem in zip(calls, problems):
            if problem:
                replies.append({"role": "tool", "content": self.error_formatter(problem), "tool_call_id": call_id})
            else:
                replies.append(await self.call_tool(name, json.loads(arguments), call_id))
        return replies, state

    def call_problem(self, name: str, arguments) -> ValueError | None:
        """Why this call cannot be made, or None when it can."""
        if name not in self.tool_map:
            return ValueError(f"there is no tool named {name!r}; the tools are: {', '.join(self.tool_map)}")
        try:
            parsed = _loads(arguments)
        except (TypeError, ValueError) as e:
            return ValueError(f"the arguments {str(arguments)[:80]!r} are not valid JSON ({e}); "
                              'send a JSON object, e.g. {"expression": "3 * 12 - 5"}')
        if not isinstance(parsed, dict):
            return ValueError(f"the arguments must be a JSON object of named arguments, not {arguments[:80]!r}")
        return None


def _loads(text):
    """json.loads, with JSON nested too deeply for Python's parser (a RecursionError, which would end the
    rollout and lose the evaluation) raised as the ValueError any other malformed JSON raises."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _call_parts(call) -> tuple[str, object, str]:
    """(name, arguments text, id) of a tool call, whether an OpenAI object or a plain dict."""
    if isinstance(call, ChatCompletionMessageToolCall):
        return call.function.name, call.function.arguments, call.id or ""
    function = call.get("function") or {}
    return function.get("name", ""), function.get("arguments"), call.get("id", "")


# ----------------------------------------------------------------------------- tool calls as JSON replies

JSON_SYSTEM_PROMPT = (
    "Solve the math problem. You may use a calculator. Reply with one JSON object: a tool call "
    '{"tool_call": {"name": "calculate", "arguments": {"expression": ...}}} to compute an arithmetic '
    'expression (you get the result back), or your final reply {"response": ...}, which ends with '
    "'#### ' and the answer."
)
# One worked exchange in the same protocol, put before the question on every model call: without it
# the 135M model copies the prompt's placeholders into the expression.
JSON_WORKED_EXAMPLE = [
    {"role": "user", "content": "Tom has 3 boxes with 12 apples each. He eats 5 apples. How many apples are left?"},
    {"role": "assistant", "content": '{"tool_call": {"name": "calculate", "arguments": {"expression": "3 * 12 - 5"}}}'},
    {"role": "tool", "tool_call_id": "worked_example", "content": "31"},
    {"role": "assistant", "content": '{"response": "3 boxes of 12 apples is 36 apples, and 36 - 5 = 31.\\n#### 31"}'},
]
MAX_RESPONSE_CHARS = 400  # the grammar closes a final reply here (a 135M model can ramble until max_tokens)
# The strict form: an expression of the calculator's characters only, a reply ending in '#### <number>'. The
# number has at most 2 decimals: with any number allowed, the 135M model wrote '#### 105.1010...' until
# max_tokens (tool_calls-2026-12-04.json's first strict-form run).
STRICT_EXPRESSION_PATTERN = rf"^[0-9.+*/%() -]{{1,{MAX_EXPRESSION_CHARS}}}$"
STRICT_RESPONSE_PATTERN = r'^[^#"\\\x00-\x1f]{0,300}#### -?[0-9]{1,15}(\.[0-9]{1,2})?$'


def json_reply_schema(oai_tools: list[dict], strict: bool = False) -> dict:
    """The JSON schema of one reply: a call of one of the tools, or a final response.

    strict: string arguments may use only the calculator's characters, and the response must end
    with '#### <number>' (one line, no quotes); otherwise any text of a bounded length.
    """
    calls = []
    for tool in oai_tools:
        function = tool["function"]
        arguments = json.loads(json.dumps(function["parameters"]))  # a copy to add patterns to
        for spec in arguments.get("properties", {}).values():
            if spec.get("type") == "string":
                spec.update({"pattern": STRICT_EXPRESSION_PATTERN} if strict else {"maxLength": MAX_EXPRESSION_CHARS})
        calls.append(_object({"tool_call": _object({"name": {"const": function["name"]}, "arguments": arguments})}))
    response = {"type": "string", **({"pattern": STRICT_RESPONSE_PATTERN} if strict
                                      else {"maxLength": MAX_RESPONSE_CHARS})}
    return {"anyOf": [*calls, _object({"response": response})]}


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


class JsonToolEnv(TolerantToolEnv):
    """Tool calls for a model without tool-call training, through llama.cpp's constrained decoding.

    Every model call carries `response_format` (a JSON schema, `json_reply_schema`): llama.cpp's
    grammar then lets the model write one JSON object, either {"tool_call": {...}} or {"response": ...}.
    The grammar fixes the form; the model chooses call or answer, and writes the arguments and the
    answer. A call reply becomes an OpenAI tool call (its JSON stays the message's content, so the
    model reads its own call in the next turn); a response reply becomes the final answer text.
    `worked_example` messages go between the system prompt and the question of every model call.
    Needs a server that takes `response_format` with a JSON schema (llama.cpp, vLLM, OpenAI).
    grammar=False sends no schema: the JSON form is then the model's own (how much the grammar adds).
    """

    def __init__(self, tools=None, strict: bool = False, worked_example: list[dict] | None = None,
                 grammar: bool = True, system_prompt: str = JSON_SYSTEM_PROMPT, **kwargs):
        super().__init__(tools=tools, system_prompt=system_prompt, **kwargs)
        self.reply_schema = json_reply_schema(self.oai_tools, strict=strict) if grammar else None
        self.worked_example = list(worked_example or [])

    async def get_model_response(self, client, model, prompt, oai_tools=None, sampling_args=None, **kwargs):
        sampling_args = dict(sampling_args or {})
        if self.reply_schema:
            sampling_args["extra_body"] = {**sampling_args.get("extra_body", {}), "response_format": {
                "type": "json_schema", "json_schema": {"name": "reply", "schema": self.reply_schema}}}
        if self.worked_example and isinstance(prompt, list) and prompt and prompt[0]["role"] == "system":
            prompt = [prompt[0], *self.worked_example, *prompt[1:]]
        response = await super().get_model_response(client, model, prompt, oai_tools=oai_tools,
                                                    sampling_args=sampling_args, **kwargs)
        if isinstance(response, ChatCompletion) and response.choices:
            read_json_reply(response.choices[0].message)
        return response


def read_json_reply(message) -> None:
    """Turn a JSON reply into what ToolEnv expects, in place: a call -> `tool_calls`, a response ->
    its text as the content. Anything else (e.g. JSON cut off at max_tokens, or nested too deeply to parse)
    stays as written."""
    try:
        reply = _loads(message.content or "")
    except ValueError:
        return
    if not isinstance(reply, dict):
        return
    call = reply.get("tool_call")
    if isinstance(call, dict) and "name" in call:
        message.tool_calls = [ChatCompletionMessageToolCall(
            id=f"call_{uuid.uuid4().hex[:12]}", type="function",
            function=Function(name=str(call["name"]), arguments=json.dumps(call.get("arguments", {}))))]
    elif isinstance(reply.get("response"), str):
        message.content = reply["response"]


# ----------------------------------------------------------------------------- the environment

TOOL_PROTOCOLS = ("openai", "json", "json-strict")


def load_environment(
    use_tool: bool = True,
    tool_protocol: str = "openai",
    worked_example: bool = True,
    grammar: bool = True,
    max_turns: int = 4,
    split: str = "train",
    num_examples: int = -1,
    eval_split: str = "test",
    num_eval_examples: int = -1,
    system_prompt: str | None = None,
    seed: int = 0,
) -> vf.ToolEnv:
    """GSM8K as a `vf.ToolEnv` with the `calculate` tool.

    use_tool: False for the same environment without the tool (the baseline).
    tool_protocol: "openai" (OpenAI tool calling, the server's chat template), "json" (JsonToolEnv:
        one JSON reply per turn, call or response, through `response_format`), "json-strict" (the
        same, with arithmetic-only expressions and a response that ends in '#### <number>').
    worked_example: with a JSON protocol, one worked call-result-answer exchange before the question.
    grammar: with a JSON protocol, False sends no `response_format` (the JSON is then the model's own).
    max_turns: model turns per rollout (each tool call costs one).
    split / eval_split, num_examples / num_eval_examples, seed: GSM8K rows (-1 = all), as in gsm8k-course.
    """
    if not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be a positive number of model turns, not {max_turns!r}")
    if tool_protocol not in TOOL_PROTOCOLS:
        raise ValueError(f"tool_protocol must be one of {TOOL_PROTOCOLS}, not {tool_protocol!r}")
    check_counts(num_examples=num_examples, num_eval_examples=num_eval_examples)
    parser = vf.Parser(extract_fn=extract_hash_answer)
    common = {
        "max_turns": max_turns,
        "dataset": load_gsm8k(split, n=num_examples, seed=seed),
        "eval_dataset": load_gsm8k(eval_split, n=num_eval_examples, seed=seed),
        "parser": parser,
        "rubric": make_rubric(parser),
    }
    if use_tool and tool_protocol != "openai":
        return JsonToolEnv(tools=[calculate], strict=tool_protocol == "json-strict",
                           worked_example=JSON_WORKED_EXAMPLE if worked_example else None, grammar=grammar,
                           system_prompt=system_prompt or JSON_SYSTEM_PROMPT, **common)
    return TolerantToolEnv(tools=[calculate] if use_tool else [],
                           system_prompt=system_prompt or (SYSTEM_PROMPT if use_tool else NO_TOOL_SYSTEM_PROMPT),
                           **common)
