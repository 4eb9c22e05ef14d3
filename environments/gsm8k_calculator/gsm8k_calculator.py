"""GSM8K with a calculator tool: `vf.load_environment("gsm8k-calculator")`, a `vf.ToolEnv`.

The model may call `calculate(expression)` (OpenAI tool calling) as often as it likes within
`max_turns` model turns, then ends with `#### <number>`. The calculator is safe by construction:
an AST walk that knows numbers, + - * / ** %, unary signs and parentheses, and nothing else. It
refuses names, attributes, calls, long inputs and results too large to compute quickly
(`9**9**9`), with a message the model reads as the tool's answer; no input can make it hang.

Reward: 1.0 for the right number after the last '####' + 0.5 x the '####' format. Two metrics
with weight 0 count the tool calls of a rollout and the valid ones (arguments the calculator
accepted). `use_tool=False` gives the same environment with no tool: the baseline.

It depends on verifiers only. GSM8K comes from the HF hub (`openai/gsm8k`), or offline from a
folder of `train.jsonl`/`test.jsonl` named by `GSM8K_DIR` (the same rows as the course's
`gsm8k-course` environment for the same `num_eval_examples` and `seed`).
"""

from __future__ import annotations

import ast
import json
import math
import operator
import os
import re
from pathlib import Path

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = (
    "Solve the math problem step by step. Use the calculate tool for arithmetic. "
    "On the last line, write the final answer as '#### <number>'."
)
NO_TOOL_SYSTEM_PROMPT = (
    "Solve the math problem step by step. "
    "On the last line, write the final answer as '#### <number>'."
)

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


# ----------------------------------------------------------------------------- answers and rubric

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def canonical_number(text: str | None) -> str:
    """'$1,200.00' -> '1200'. Text that is not a single number comes back stripped, unchanged."""
    text = (text or "").strip()
    number = text.lstrip("$").rstrip(".").replace(",", "")
    if not _NUMBER.fullmatch(number):
        return text
    return number.rstrip("0").rstrip(".") if "." in number else number


def extract_hash_answer(text: str) -> str:
    """The first number after the last '####', '' when there is none."""
    if "####" not in (text or ""):
        return ""
    match = _NUMBER.search(text.rsplit("####", 1)[1])
    return canonical_number(match.group()) if match else ""


def correct_answer(parser: vf.Parser, completion, answer: str, **kwargs) -> float:
    """1.0 when the number after the last '####' of the final reply is the gold number."""
    response = canonical_number(parser.parse_answer(completion))
    return 1.0 if response and response == canonical_number(answer) else 0.0


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


# ----------------------------------------------------------------------------- the environment


def load_environment(
    use_tool: bool = True,
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
    max_turns: model turns per rollout (each tool call costs one).
    split / eval_split, num_examples / num_eval_examples, seed: GSM8K rows (-1 = all), as in gsm8k-course.
    """
    if not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be a positive number of model turns, not {max_turns!r}")
    parser = vf.Parser(extract_fn=extract_hash_answer)
    return vf.ToolEnv(
        tools=[calculate] if use_tool else [],
        max_turns=max_turns,
        error_formatter=tool_error,
        dataset=load_gsm8k(split, num_examples, seed),
        eval_dataset=load_gsm8k(eval_split, num_eval_examples, seed),
        system_prompt=system_prompt or (SYSTEM_PROMPT if use_tool else NO_TOOL_SYSTEM_PROMPT),
        parser=parser,
        rubric=make_rubric(parser),
    )


def load_gsm8k(split: str, n: int = -1, seed: int = 0) -> Dataset:
    """`question` and `answer` (the number after '####'), like vf.load_example_dataset("gsm8k")."""
    folder = os.environ.get("GSM8K_DIR")
    if not folder:
        return vf.load_example_dataset("gsm8k", split=split, n=n if n > 0 else None, seed=seed)
    path = Path(folder) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"GSM8K_DIR is set, but {path} is missing: it must hold {split}.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    raw = Dataset.from_list([{"question": r["question"], "answer": r["answer"]} for r in rows])
    if n > 0:
        raw = raw.shuffle(seed=seed).select(range(min(n, len(raw))))
    return raw.map(lambda x: {"answer": extract_hash_answer(x["answer"])}, load_from_cache_file=False)
