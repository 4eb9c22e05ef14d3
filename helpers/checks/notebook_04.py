"""Checks of notebook 04's exercises (verifiers 0.4's v1 API). They run in notebook 04's kernel
(.venv-v1): verifiers.v1 is imported inside them, so this module also imports in the main kernel."""

from __future__ import annotations

import inspect

from helpers.checks import checks_exercise

FORMAT_CASES = [  # (reply, gold answer, the format reward it should get)
    ("48 + 24 = 72\n#### 72", "72", 1.0),
    ("She earns $1,200 in all.\n#### $1,200.00", "1200", 1.0),
    ("The answer is 19.\n#### 19", "72", 1.0),  # the format is right, the answer is not
    ("The answer is 72.", "72", 0.0),
    ("So the total is ####", "72", 0.0),
    ("", "72", 0.0),
]


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
    import verifiers.v1 as vf

    if not (inspect.isclass(task_cls) and issubclass(task_cls, vf.Task)):
        return "pass the Task class itself (GSM8KTask), a subclass of vf.Task"
    task = task_cls(task_cls.data_type()(prompt="a GSM8K question", answer="72"))
    rewards = {fn.__name__: fn for fn in task.hooks("reward")}
    if "correct_answer" not in rewards:
        return "keep the correct_answer reward; hash_format is a second reward next to it"
    if "hash_format" not in rewards:
        if callable(getattr(task_cls, "hash_format", None)):
            return ("hash_format is a plain method, so the task never calls it: mark it as a reward with "
                    "@vf.reward(weight=0.5) on the line above")
        return "add a method hash_format(self, trace) marked with @vf.reward(weight=0.5)"
    method = rewards["hash_format"]
    if not inspect.iscoroutinefunction(method):
        return ("write it as `async def hash_format(...)`: the task awaits all its rewards together "
                "(asyncio.gather in verifiers/v1/utils/decorators.py), and a plain def fails the whole "
                "scoring with 'An asyncio.Future, a coroutine or an awaitable is required'")
    weight = getattr(method, "_vf_weight", 1.0)
    if weight != 0.5:
        return f"its weight is {weight}, not 0.5: @vf.reward(weight=0.5) (without weight= it is 1.0)"
    for reply, answer, expected in FORMAT_CASES:
        trace = _scored(task_cls, reply, answer)
        got = trace.rewards["hash_format"]
        if got is None or trace.errors:
            error = trace.errors[-1].message if trace.errors else "no score"
            return f"scoring {reply!r} failed: {error}"
        if got.score == expected:
            continue
        if expected == 0.0 and "####" in reply:
            return (f"{reply!r} got {got.score}: a '####' with no number after it is not the format; "
                    "return 1.0 only when final_number(trace.last_reply) finds a number")
        if expected == 1.0 and answer not in reply:
            return (f"{reply!r} got {got.score} for gold {answer}: the format reward does not look at the "
                    "answer (correct_answer does); a reply ending in '#### <number>' has the format even when "
                    "the number is wrong")
        return f"{reply!r} got {got.score}, not {expected}"
    total = _scored(task_cls, "48 + 24 = 72\n#### 72", "72").reward
    if total != 1.5:
        return f"a right answer in the right format should total 1.0 + 0.5 = 1.5, not {total}"
    return None


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
    if not isinstance(answers, dict):
        return "give a dict: each v0 name -> the v1 choice that takes its place"
    for v0, v1 in CONCEPT_MAP.items():
        given = answers.get(v0)
        if not given:
            return f"{v0}: pick one of the choices for it"
        if given == v1:
            continue
        return f"{v0}: {CONCEPT_HINTS.get((v0, given), f'not {given!r}; look again at section 3 and the source cited there')}"
    return None
