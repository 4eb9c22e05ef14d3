"""Checks of notebook 04's exercises (verifiers 0.4's v1 API). They run in notebook 04's kernel
(.venv-v1): verifiers.v1 is imported inside them, so this module also imports in the main kernel. The format
reward is scored next to the solution's on replies built from GSM8K's gold answers of both splits."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import gold_hint, gsm8k_golds, replies, write_number
from helpers.checks.registry import checks_exercise

FORMAT_CASES = [  # (reply, gold answer)
    ("48 + 24 = 72\n#### 72", "72"),
    ("She earns $1,200 in all.\n#### $1,200.00", "1200"),
    ("The answer is 19.\n#### 19", "72"),  # the format is right, the answer is not
    ("The answer is 72.", "72"),
    ("So the total is ####", "72"),
    ("", "72"),
]
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _final_number(reply: str) -> str:
    """The notebook's final_number (gsm8k_course's extract_hash_answer, which this environment cannot import: it
    needs verifiers 0.1.5): the first number after the last '####', canonical; '' when there is none."""
    if "####" not in reply:
        return ""
    match = NUMBER.search(reply.rsplit("####", 1)[1])
    if not match:
        return ""
    number = match.group().rstrip(".").replace(",", "")
    return number.rstrip("0").rstrip(".") if "." in number else number


def _reference_rewards(reply: str, answer: str) -> tuple[float, float]:
    """(hash_format, the task's total reward) of the solution's GSM8KTask."""
    form = 1.0 if _final_number(reply) else 0.0
    right = 1.0 if form and _final_number(reply) == _final_number(f"#### {answer}") else 0.0
    return form, right + 0.5 * form


def _hash_line(number: str) -> str:
    return f"#### {number}"


def _format_replies() -> list[tuple[str, str]]:
    """(reply, gold) over GSM8K's gold answers: the gold after '####' as GSM8K writes it, with '$', without a space,
    followed by text; a wrong number; a '####' list; a '####' with no number; no marker; then the shared replies
    with a '####' line (the gold written every way, near misses, text after it, two '####' lines, none)."""
    cases = []
    for gold in gsm8k_golds():
        number = _final_number(f"#### {gold}")
        wrong = write_number(float(number) + 1)
        cases += [(f"So the answer is {gold}.\n#### {gold}", gold), (f"Total: ${gold}\n#### ${gold}.00", gold),
                  (f"####{number}\nThe answer is: {number}", gold), (f"I think {wrong}.\n#### {wrong}", gold),
                  (f"#### {gold}\n#### {gold}", gold), (f"The answer is {gold}.\n####", gold),
                  (f"The answer is {gold}.", gold)]
        cases += [(text, gold) for text, _ in replies(gold, _hash_line, "Let me compute.")]
    return cases


def _scored(task_cls, reply: str, answer: str):
    """A trace whose final reply is `reply`, scored by a `task_cls` task for gold `answer`."""
    import verifiers.v1 as vf

    from helpers.worker_thread import run_sync

    task = task_cls(task_cls.data_type()(prompt="a GSM8K question", answer=answer))
    trace = vf.Trace(task=vf.TraceTask(type=task_cls.__name__, data=task.data),
                     agent=vf.AgentInfo(config=vf.AgentConfig()), root_reply=reply)
    run_sync(task.score(trace))
    return trace


@checks_exercise("04-format-reward")
def format_reward(task_cls) -> str | None:
    """The learner's GSM8KTask next to the solution's: the same hash_format score and the same total on replies
    built from GSM8K's gold answers (commas, negative ones, decimals)."""
    import verifiers.v1 as vf

    if not (inspect.isclass(task_cls) and issubclass(task_cls, vf.Task)):
        return "pass the Task class itself (GSM8KTask), a subclass of vf.Task"
    if not_your_own(task_cls):
        return not_your_own(task_cls)
    task = task_cls(task_cls.data_type()(prompt="a GSM8K question", answer="72"))
    rewards = {fn.__name__: fn for fn in task.hooks("reward")}
    if "correct_answer" not in rewards:
        return "keep the correct_answer reward; hash_format is a second reward next to it"
    if "hash_format" not in rewards:
        if callable(getattr(task_cls, "hash_format", None)):
            return ("hash_format is a plain method, so the task never calls it: mark it as a reward with "
                    "@vf.reward(weight=0.5) on the line above")
        return "add a method hash_format(self, trace) marked with @vf.reward(weight=0.5)"
    weight = getattr(rewards["hash_format"], "_vf_weight", 1.0)
    if weight != 0.5:
        return f"its weight is {weight}, not 0.5: @vf.reward(weight=0.5) (without weight= it is 1.0)"
    for reply, answer in FORMAT_CASES + _format_replies():
        try:
            trace = _scored(task_cls, reply, answer)
            got = trace.rewards.get("hash_format")
            unscored = got is None or got.score is None
            error = trace.errors[-1].message if trace.errors else ("no score" if unscored else None)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            error = f"{type(e).__name__}: {e}"
        if error and "awaitable is required" in error:
            return ("write it as `async def hash_format(...)`: the task awaits all its rewards together "
                    "(asyncio.gather in verifiers/v1/utils/decorators.py), and a plain def that returns a number "
                    "fails the whole scoring with 'An asyncio.Future, a coroutine or an awaitable is required'")
        if error:
            return f"scoring {reply!r} failed: {error}"
        expected, total = _reference_rewards(reply, answer)
        if got.score != expected:
            return (f"{reply!r} (gold {answer!r}) got {got.score}, not {expected}: "
                    + _format_mistake(task_cls, reply, answer, expected))
        if trace.reward != total:
            return (f"{reply!r} (gold {answer!r}) totals {trace.reward}, not {total}: correct_answer (weight 1.0) "
                    "plus 0.5 x hash_format; keep the notebook's correct_answer as it is")
    return None


def _format_mistake(task_cls, reply: str, answer: str, expected: float) -> str:
    if expected == 0.0 and "####" in reply:
        return ("a '####' with no number after it is not the format; return 1.0 only when "
                "final_number(trace.last_reply) finds a number")
    number = _final_number(reply)
    if expected == 1.0 and number != _final_number(f"#### {answer}"):
        try:
            looks_at_answer = _scored(task_cls, reply, number).rewards["hash_format"].score == 1.0
        except Exception:  # noqa: BLE001 - only a diagnosis: the plain hint below stands
            looks_at_answer = False
        if looks_at_answer:  # it earns the format only when its number is the gold
            return ("the format reward does not look at the answer (correct_answer does); a reply ending in "
                    "'#### <number>' has the format even when the number is wrong")
    written = next((why for mark, why in (("-", "negative: the minus sign is part of it"),
                                          (".", "a decimal"), (",", "written with a comma"))
                    if mark in number), "")
    return "; ".join(filter(None, ["return 1.0 when final_number(trace.last_reply) finds a number",
                                   f"the number after '####' here is {written}" if written else "",
                                   gold_hint(answer)]))


# The concept map of notebook 04's last section: each v0 name (verifiers 0.1.5) and what takes its place
# in verifiers 0.4.0, with the hint for the tempting wrong choices.
CONCEPT_MAP = {
    "vf.Rubric(funcs=..., weights=...)": "@vf.reward(weight=...) methods on a vf.Task",
    "vf.ThinkParser": "trace.last_reply, parsed inside a reward method",
    "vf.ToolEnv(tools=...)": "a vf.Toolset with @vf.tool methods (served over MCP)",
    "env.evaluate(client, model, ...)": "vf-eval (verifiers.v1.cli.eval.runner.run_eval)",
    "vf.GRPOTrainer": "prime-rl (a separate project, not in verifiers)",
}
CONCEPT_HINTS = {
    ("vf.Rubric(funcs=..., weights=...)", "vf.Taskset"): (
        "a Taskset only loads tasks; the scoring and its weights moved onto the Task's reward methods"),
    ("vf.ThinkParser", "a vf.Toolset with @vf.tool methods (served over MCP)"): (
        "a Toolset gives the model tools to call; nothing parses replies for you any more: a reward reads "
        "trace.last_reply"),
    ("vf.ThinkParser", "@vf.reward(weight=...) methods on a vf.Task"): (
        "close: the parsing happens inside a reward method, but what replaces the parser is reading "
        "trace.last_reply there"),
    ("vf.ToolEnv(tools=...)", "vf.Taskset"): "tools are not tasks: they are a Toolset's @vf.tool methods",
    ("env.evaluate(client, model, ...)", "prime-rl (a separate project, not in verifiers)"): (
        "prime-rl trains (and will take over large evals); the eval runner that ships with verifiers 0.4 "
        "is vf-eval"),
    ("vf.GRPOTrainer", "vf-eval (verifiers.v1.cli.eval.runner.run_eval)"): (
        "vf-eval only evaluates: verifiers 0.4 has no trainer at all; training is prime-rl's"),
}


@checks_exercise("04-concept-map")
def concept_map(answers) -> str | None:
    if not isinstance(answers, Mapping):  # any mapping: a dict, MappingProxyType, UserDict
        return "give a dict: each v0 name -> the v1 choice that takes its place"
    for v0, v1 in CONCEPT_MAP.items():
        given = answers.get(v0)
        given = given.strip() if isinstance(given, str) else given  # a space around a pasted choice is no mistake
        if not given:
            return f"{v0}: pick one of the choices for it"
        if given == v1:
            continue
        otherwise = f"not {given!r}; look again at section 3 and the source cited there"
        return f"{v0}: {CONCEPT_HINTS.get((v0, given), otherwise)}"
    return None
