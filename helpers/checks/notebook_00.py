"""Checks of notebook 00's exercises (tracing)."""

from __future__ import annotations

from helpers.checks import checks_exercise
from helpers.tracing import current_session


def _session_calls():
    session = current_session()
    if session is None:
        return None
    return list(session.get_calls())


@checks_exercise("00-traced-function")
def traced_function(func) -> str | None:
    from weave.trace.op import is_op

    if not is_op(func):
        return "decorate the function with @weave.op so that Weave records its calls"
    if func("one two three") != 3:
        return "word_count('one two three') should be 3: split the text on whitespace and count the pieces"
    calls = _session_calls()
    if calls is None:
        return "start tracing first (the cell with helpers.init_tracing)"
    if not any(call.func_name == func.__name__ for call in calls):
        return f"no traced call of {func.__name__} yet: call it once"
    return None


@checks_exercise("00-completion-tokens")
def completion_tokens(value) -> str | None:
    calls = _session_calls()
    if calls is None:
        return "start tracing first (the cell with helpers.init_tracing)"
    brief = [c for c in calls if c.func_name == "answer_briefly"]
    if not brief:
        return "run the cell that calls answer_briefly first"
    model_calls = [c for c in brief[-1].children() if "chat.completions.create" in c.func_name]
    usage = next(iter((model_calls[0].summary or {}).get("usage", {}).values()), {}) if model_calls else {}
    expected = usage.get("completion_tokens")
    if value is None:
        return "find the model call among brief.children(), then read its summary['usage']"
    if value != expected:
        return (f"{value} is not what that call used; summary['usage'] is keyed by model name: "
                "take the one entry's 'completion_tokens'")
    return None
