"""Checks of notebook 00's exercises (tracing). Each runs the learner's function next to the reference: the word
count on GSM8K questions of both splits, this session's model replies and texts that split differently; the
token count on this session's traced calls and on calls made like them (Weave's own Call objects, usage as
Weave records it) where a trace called the model several times, or called two models."""

from __future__ import annotations

import re

from helpers.checks.real_inputs import gsm8k_rows
from helpers.checks.registry import checks_exercise
from helpers.tracing.session import current_session

TEXTS = [  # texts that split differently on spaces, on whitespace, on word characters
    "one two three",
    "  Two   spaces,\nand a newline. ",
    "",
    " \t\n ",
    "Don't stop: it's $1,200.00 in all.",
    "48/2 = 24\n#### 24",
]


def _session_calls():
    session = current_session()
    return None if session is None else session.get_calls()


def _model_replies(calls) -> list[str]:
    """The text of each model reply among `calls` (a model call's output is the ChatCompletion)."""
    replies = []
    for call in _model_calls(calls):
        try:
            replies.append(call.output["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            continue
    return replies


def _inputs(call) -> list:
    """The values a traced call was given (its inputs, whatever the parameters are named)."""
    try:
        return list((call.inputs or {}).values())
    except (AttributeError, TypeError):
        return []


def _word_mistake(text: str, got) -> str:
    if got == len(text):
        return "count the words, not the characters"
    if got == len(text.split(" ")):
        return "split on any run of whitespace (text.split() with no argument), not on single spaces"
    if got == len(re.findall(r"\w+", text)):
        return ("a word here is what whitespace separates: a \\w+ pattern counts \"don't\" and '1,200' as two "
                "words each; text.split() does not")
    return "split on any run of whitespace (text.split() with no argument) and count the pieces"


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
    own = [call for call in calls if call.func_name == func.name]
    if not own:
        return f"no traced call of {func.name} yet: call it once, on the reply of section 6"
    replies = {reply.strip() for reply in _model_replies(calls)}
    if not any(isinstance(text, str) and text.strip() in replies for call in own for text in _inputs(call)):
        return (f"the traces hold {func.name}'s calls, none of them on a model reply: call it on the reply of "
                f"section 6, {func.name}(reply.choices[0].message.content)")
    plain = func.resolve_fn  # the undecorated function: checking it adds no call to your traces
    for text in TEXTS + [question for question, _ in gsm8k_rows()] + _model_replies(calls):
        got = plain(text)
        if not isinstance(got, int) or isinstance(got, bool):
            return f"return the number of words as an int, not {type(got).__name__} ({got!r})"
        if got != len(text.split()):
            return f"word_count({text!r}) gave {got}, not {len(text.split())}: {_word_mistake(text, got)}"
    return None


# ----------------------------------------------------------------------------- completion tokens


def _model_calls(calls) -> list:
    return [c for c in calls if "chat.completions.create" in (c.func_name or "")]


def _usage(call) -> dict:
    return (call.summary or {}).get("usage") or {}


def _completion_tokens(call) -> int:
    return sum(int(counts.get("completion_tokens") or 0) for counts in _usage(call).values())


def _reference_tokens(calls) -> int:
    """The solution's completion_tokens: the model calls' completion tokens, every model's."""
    return sum(_completion_tokens(c) for c in _model_calls(calls))


def _made_calls(model_call) -> list[tuple[str, list]]:
    """Lists of calls made like `model_call` (Weave's Call objects, usage as Weave records it: one entry per
    model name, and an op's summary adding up the usage of the calls under it)."""
    from weave.trace.weave_client import Call

    model = next(iter(_usage(model_call)), "SmolLM2-135M-Instruct")
    op_name = model_call.op_name

    def call(id_, trace, parent, name, usage):
        counts = {m: {"requests": r, "completion_tokens": c, "prompt_tokens": p, "total_tokens": c + p}
                  for m, (r, c, p) in usage.items()}
        return Call(_op_name=op_name.replace("openai.chat.completions.create", name), trace_id=trace,
                    project_id=model_call.project_id, parent_id=parent, inputs={}, id=id_,
                    summary={"usage": counts} if counts else {"weave": {"status": "success"}})

    create = "openai.chat.completions.create"
    three = [call("p1", "t1", None, "solve", {model: (3, 7 + 11 + 13, 90)}),
             call("m1", "t1", "p1", create, {model: (1, 7, 30)}), call("m2", "t1", "p1", create, {model: (1, 11, 30)}),
             call("m3", "t1", "p1", create, {model: (1, 13, 30)})]
    two_models = [call("p2", "t2", None, "compare", {model: (1, 5, 20), "gpt-4.1-mini": (1, 17, 25)}),
                  call("m4", "t2", "p2", create, {model: (1, 5, 20)}),
                  call("m5", "t2", "p2", create, {"gpt-4.1-mini": (1, 17, 25)}),
                  call("m6", "t3", None, create, {"gpt-4.1-mini": (1, 19, 40)})]
    own_ops = [call("w1", "t4", None, "word_count", {}), call("w2", "t5", None, "word_count", {})]
    return [("a trace whose op called the model three times", three), ("calls to two models", two_models),
            ("calls of your own ops only, none of a model", own_ops), ("no calls at all", [])]


def _token_mistake(calls: list, got) -> str:
    model_calls = _model_calls(calls)
    per_trace = {c.trace_id: _completion_tokens(c) for c in model_calls}
    first_model = sum(int(next(iter(_usage(c).values()), {}).get("completion_tokens") or 0) for c in calls)
    if got == sum(_completion_tokens(c) for c in calls):
        return ("counts some tokens twice: Weave adds a call's usage to its parent's summary too (answer_briefly "
                "repeats the model call inside it). Count only the model calls (op names containing "
                "'chat.completions.create')")
    if got == sum(sum(int(u.get("prompt_tokens") or 0) for u in _usage(c).values()) for c in model_calls):
        return "that is the prompt tokens; the exercise asks for 'completion_tokens'"
    if got == len(model_calls):
        return "that is the number of model calls; add up each one's completion tokens"
    if got == sum(per_trace.values()):
        return "add up every model call, not one per trace: an op may call the model several times"
    if got == first_model:
        return "a call's summary['usage'] has one entry per model: add up every entry's completion_tokens"
    return ("a call's summary['usage'] maps a model name to its counts: add 'completion_tokens' over the model "
            "calls, every model's")


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
    lists = [("this session's calls", calls), ("this session's model calls alone", model_calls),
             ("this session's last model call alone", model_calls[-1:]), *_made_calls(model_calls[-1])]
    for what, given in lists:
        expected = _reference_tokens(given)
        try:
            got = func(list(given))
        except KeyError as e:
            if e.args and e.args[0] in {model for c in given for model in _usage(c)}:
                return (f"on {what} it raised KeyError: {e}. A call's summary['usage'] maps each model's name to its "
                        "counts, and calls may use other models: add up every entry's completion_tokens")
            return (f"on {what} it raised KeyError: {e}. Not every call used a model: skip the calls whose summary "
                    "has no 'usage'")
        except (TypeError, AttributeError) as e:
            return (f"on {what} it raised {type(e).__name__}: {e}. Not every call used a model: skip the calls whose "
                    "summary has no 'usage'")
        if got != expected:
            return f"on {what} it gave {got}, not {expected}: {_token_mistake(given, got)}"
    return None
