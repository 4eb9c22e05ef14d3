"""Checks of notebook 00's exercises (tracing)."""

from __future__ import annotations

from helpers.checks import checks_exercise
from helpers.tracing import current_session

WORD_COUNTS = [  # (text, words): one case per way of splitting a text wrongly
    ("one two three", 3),
    ("  Two   spaces,\nand a newline. ", 5),
    ("", 0),
]


def _session_calls():
    session = current_session()
    return None if session is None else session.get_calls()


@checks_exercise("00-traced-function")
def traced_function(func) -> str | None:
    from weave.trace.op import is_op

    if not callable(func):
        return "word_count should be a function (def word_count(text: str) -> int: ...)"
    if not is_op(func):
        return "decorate the function with @weave.op so that Weave records its calls"
    calls = _session_calls()  # looked up before this check calls anything itself
    if calls is None:
        return "start tracing first (the cell with helpers.init_tracing)"
    if not any(call.func_name == func.name for call in calls):
        return f"no traced call of {func.name} yet: call it once, on the reply of section 6"
    plain = func.resolve_fn  # the undecorated function: checking it adds no call to your traces
    for text, words in WORD_COUNTS:
        got = plain(text)
        if not isinstance(got, int) or isinstance(got, bool):
            return f"return the number of words as an int, not {type(got).__name__} ({got!r})"
        if got != words:
            return (f"word_count({text!r}) gave {got}, not {words}: split on any run of whitespace "
                    "(text.split() with no argument) and count the pieces, not the characters")
    return None


def _model_calls(calls) -> list:
    return [c for c in calls if "chat.completions.create" in (c.func_name or "")]


def _completion_tokens(call) -> int:
    usage = (call.summary or {}).get("usage") or {}
    return sum(int(counts.get("completion_tokens") or 0) for counts in usage.values())


@checks_exercise("00-completion-tokens")
def completion_tokens(func) -> str | None:
    if not callable(func):
        return "completion_tokens should be a function of a list of calls, returning an int"
    calls = _session_calls()
    if calls is None:
        return "start tracing first (the cell with helpers.init_tracing)"
    model_calls = _model_calls(calls)
    if not model_calls:
        return "run the model calls of sections 6 and 7 first"
    expected = sum(_completion_tokens(c) for c in model_calls)
    try:
        got = func(calls)
    except (KeyError, TypeError, AttributeError) as e:
        return (f"on this project's calls it raised {type(e).__name__}: {e}. Not every call used a model: "
                "skip the calls whose summary has no 'usage'")
    if got == expected:
        if func(model_calls[-1:]) != _completion_tokens(model_calls[-1]):
            return "it should add up the calls it is given, not always the same ones"
        return None
    every_call = sum(_completion_tokens(c) for c in calls)
    prompt = sum(sum(int(u.get("prompt_tokens") or 0) for u in ((c.summary or {}).get("usage") or {}).values())
                 for c in model_calls)
    if got == every_call:
        return (f"{got} counts some tokens twice: Weave adds a call's usage to its parent's summary too "
                "(answer_briefly repeats the model call inside it). Count only the model calls "
                "(op names containing 'chat.completions.create')")
    if got == prompt:
        return f"{got} is the prompt tokens; the exercise asks for 'completion_tokens'"
    if got == len(model_calls):
        return f"{got} is the number of model calls; add up each one's completion tokens"
    return (f"{got} is not what this project's model calls used ({len(model_calls)} calls). A call's "
            "summary['usage'] maps a model name to its counts: add 'completion_tokens' over the model calls")
