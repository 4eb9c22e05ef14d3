"""The calculator tool of `gsm8k-calculator` (and notebook 03): arithmetic only, refusals the
model can read, and no input that makes it run long."""

import random
import time

import pytest
from gsm8k_calculator import MAX_EXPRESSION_CHARS, CalculatorError, calculate, tool_error


@pytest.mark.parametrize(("expression", "result"), [
    ("(48 / 2) + 48", "72"),
    ("3 * 12 - 5", "31"),
    ("2 ** 10", "1024"),
    ("10 / 4", "2.5"),
    ("10 / 3", "3.333333333"),
    ("17 % 5", "2"),
    ("-(3 - 5)", "2"),
    ("+7", "7"),
    ("2 ** -2", "0.25"),
    ("1.5 * 4", "6"),
    ("10**15", "1000000000000000"),
])
def test_arithmetic(expression, result):
    assert calculate(expression) == result


@pytest.mark.parametrize(("expression", "says"), [
    ("x + 1", "a name ('x')"),
    ("__import__('os').system('true')", "not allowed"),
    ("(1).__class__", "an attribute"),
    ("abs(-3)", "a function call ('abs(-3)')"),
    ("print(1)", "a function call"),
    ("True + 1", "this constant ('True')"),
    ("'1' * 3", "this constant"),
    ("[1, 2][0]", "not allowed"),
    ("1,000 * 3", "a comma"),
    ("7 // 2", "this operator"),
    ("1 < 2", "a comparison"),
    ("lambda: 1", "not allowed"),
    ("3 x 4", "not an arithmetic expression"),
    ("", "give an arithmetic expression"),
    ("9**9**9", "too large"),
    ("10**16", "too large"),
    ("1e308 * 10", "too large"),
    ("1.0000001 ** 1e15", "too large"),
    ("(-8) ** 0.5", "not a real number"),
    ("1 / 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0 ** -1", "division by zero"),
    ("1" * (MAX_EXPRESSION_CHARS + 1), f"longer than {MAX_EXPRESSION_CHARS}"),
])
def test_refusals_say_why(expression, says):
    with pytest.raises(CalculatorError) as refused:
        calculate(expression)
    assert says in str(refused.value)


def test_not_text_is_refused():
    with pytest.raises(CalculatorError):
        calculate(12)  # type: ignore[arg-type]


def test_the_model_reads_the_refusal_as_the_tools_answer():
    """ToolEnv puts error_formatter(exception) into the tool message: the model sees why."""
    try:
        calculate("9**9**9")
    except CalculatorError as error:
        message = tool_error(error)
    assert message.startswith("error: ") and "too large" in message


WORST_CASES = [
    "9**9**9", "9**9**9**9**9", "(10**15)**(10**15)", "2**(2**(2**(2**(2**2))))", "-" * 199 + "1",
    "(" * 90 + "2**50" + ")" * 90, "99999999999999*99999999999999", "1" * MAX_EXPRESSION_CHARS,
    "10**15 % 7**15", "(-1)**(10**15)", "0.5**(10**15)", "1.0000001**(10**15)",
]


@pytest.mark.parametrize("expression", WORST_CASES)
def test_worst_cases_finish_at_once(expression):
    """Nothing an expression of at most 200 characters can say makes the walk run long."""
    started = time.perf_counter()
    try:
        calculate(expression)
    except CalculatorError:
        pass
    assert time.perf_counter() - started < 0.5  # measured: < 2 ms each; generous for a busy runner


def test_random_expressions_answer_or_refuse_quickly():
    """2000 random expressions over the allowed grammar, with large numbers and towers of powers:
    each gives a number or a CalculatorError (any other exception fails the test), within seconds."""
    rng = random.Random(0)

    def expression(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(["0", "1", "-1", "2", "9", "0.5", "1e15", "123456789", "10**15", "3.25"])
        op = rng.choice(["+", "-", "*", "/", "%", "**", "**", "**"])
        return f"({expression(depth - 1)}){op}({expression(depth - 1)})"

    started = time.perf_counter()
    answered = 0
    for _ in range(2000):
        text = expression(4)[:MAX_EXPRESSION_CHARS]
        try:
            float(calculate(text))
            answered += 1
        except CalculatorError:
            pass
    assert answered > 100
    assert time.perf_counter() - started < 20
