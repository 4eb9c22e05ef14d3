"""Checks of notebook 02's exercises (GRPO): advantages, a knob that kills the signal, the rubric as
TRL reward functions, and a reward that the '#### N' list (the hack) cannot earn."""

from __future__ import annotations

import math

from helpers.checks import checks_exercise
from helpers.worker_thread import run_sync

GROUP = [1.5, 0.5, 0.0, 0.5]


def _advantages(rewards: list[float], unbiased: bool = True) -> list[float]:
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - (1 if unbiased else 0))
    return [(r - mean) / (math.sqrt(var) + 1e-4) for r in rewards]


def _close(values, expected) -> bool:
    return all(abs(v - e) < 1e-3 for v, e in zip(values, expected))


@checks_exercise("02-group-advantages")
def group_advantages(advantages) -> str | None:
    try:
        values = [float(a) for a in advantages]
    except (TypeError, ValueError):
        return "give a list of four numbers, one advantage per completion"
    if len(values) != len(GROUP):
        return f"one advantage per completion: {len(GROUP)} numbers, not {len(values)}"
    if _close(values, _advantages(GROUP)):
        return None
    if _close(values, _advantages(GROUP, unbiased=False)):
        return "close: torch.std divides by n - 1 (4 - 1 = 3 here), not by n"
    mean = sum(GROUP) / len(GROUP)
    if _close(values, [r - mean for r in GROUP]):
        return "that is reward minus the group mean; now divide by the group's standard deviation (+ 1e-4)"
    if abs(sum(values)) > 1e-3:
        return "the advantages of a group add up to 0: start from each reward minus the group's mean"
    return "advantage = (reward - mean of the group) / (standard deviation of the group + 1e-4)"


@checks_exercise("02-no-signal")
def no_signal(prediction) -> str | None:
    if not isinstance(prediction, dict) or set(prediction) != {"frac_reward_zero_std", "grad_norm"}:
        return "a dict with the two keys 'frac_reward_zero_std' and 'grad_norm'"
    zero_std, grad = float(prediction["frac_reward_zero_std"]), float(prediction["grad_norm"])
    if zero_std != 1.0:
        return ("if every completion of a prompt is the same, every group's rewards are equal: what share of "
                "the groups is that?")
    if grad != 0.0:
        return ("every reward equals its group's mean, so every advantage is 0; with beta = 0 the loss is "
                "advantage x (log-prob ratio), so what is its gradient?")
    return None


ADAPTER_BATCH = [  # (completion text, gold answer): a right answer, a wrong one, no answer, a formatted number
    ("48 + 24 = 72\n#### 72", "72"),
    ("I think 71.\n#### 71", "72"),
    ("It is about 70.", "72"),
    ("Total: $1,200.\n#### 1,200", "1200"),
]


def _hash_rubric():
    from gsm8k_course import HashParser, make_rubric

    return make_rubric(HashParser(), "hash")


@checks_exercise("02-reward-adapter")
def reward_adapter(build) -> str | None:
    """build(rubric) -> one TRL reward function per rubric function: (prompts, completions, answer, **kw) -> floats."""
    if not callable(build):
        return "trl_reward_funcs should be a function that takes a rubric"
    rubric = _hash_rubric()
    names = rubric.get_reward_func_names()
    try:
        funcs = list(build(rubric) or [])
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"trl_reward_funcs(rubric) raised {type(e).__name__}: {e}"
    if len(funcs) != len(names) or not all(callable(f) for f in funcs):
        return f"one TRL function per rubric function: {len(names)} functions ({', '.join(names)}), not {len(funcs)}"
    if [getattr(f, "__name__", "") for f in funcs] != names:
        return (f"TRL logs each function as rewards/<its __name__>: name them {names}, in the rubric's order "
                "(set reward.__name__ = func.__name__)")
    completions = [[{"role": "assistant", "content": text}] for text, _ in ADAPTER_BATCH]
    answers = [gold for _, gold in ADAPTER_BATCH]
    prompts = [[{"role": "user", "content": "a question"}]] * len(ADAPTER_BATCH)
    expected = {name: [] for name in names}
    for completion, gold in zip(completions, answers):
        score = run_sync(rubric.score_rollout(prompt=[], completion=completion, answer=gold,
                                              state={"timing": {"total_ms": 0.0}}))
        for name in names:
            expected[name].append(score.metrics[name])
    weights = dict(zip(names, rubric.get_reward_weights()))
    for func, name in zip(funcs, names):
        try:  # exactly how TRL 0.24 calls a reward function: keywords, the dataset's columns among them
            got = func(prompts=prompts, completions=completions, completion_ids=[[1]] * len(prompts),
                       answer=answers, trainer_state=None)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return (f"{name} raised {type(e).__name__}: {e}. TRL calls it with keywords (prompts=, completions=, "
                    "answer=, ...); pass the rubric's parser to functions that take one")
        if not isinstance(got, (list, tuple)) or len(got) != len(ADAPTER_BATCH):
            return f"{name} must return one float per completion (a list of {len(ADAPTER_BATCH)}), not {got!r}"
        values = [float(v) for v in got]
        if values == expected[name]:
            continue
        if weights[name] != 1.0 and values == [v * weights[name] for v in expected[name]]:
            return (f"{name} multiplied its scores by the weight {weights[name]}: TRL applies reward_weights "
                    "itself (GRPOConfig(reward_weights=...)), so return the function's own score")
        return (f"{name} gave {values} on a batch where the rubric scores {expected[name]}: score completion i "
                "against answer i, with the rubric's parser")
    return None


HACK_CASES = [  # (reply, expected score, what a wrong score here means)
    ("48 / 2 = 24, 48 + 24 = 72.\n#### 72", 1.0, "a worked answer ending in '#### 72' must earn 1.0"),
    ("#### 72\nThe answer is: 72", 1.0,
     "text after the one answer line is fine (SmolLM2 often writes it): only a second '####' is the hack"),
    ("Total: $1,200\n#### 1,200", 1.0, "'#### 1,200' is a number too (use extract_hash_answer)"),
    ("#### 72\n#### 72\n#### 72\n#### 72", 0.0, "a list of '#### N' lines is the hack: only ONE '####' earns it"),
    ("#### 72\n#### 12\n#### 72", 0.0, "several '####' lines earn 0, whatever they say"),
    ("The answer is #### 72 #### 72", 0.0, "count the '####' markers, not the lines: two on one line are two"),
    ("First, 48 divided by 2 is 24. Then we add 48 and", 0.0, "a reply cut before its answer earns 0"),
    ("So the answer is\n#### seventy-two", 0.0, "'#### seventy-two' holds no number"),
    ("", 0.0, "an empty reply earns 0"),
]


@checks_exercise("02-close-the-hack")
def close_the_hack(func) -> str | None:
    """func(completion) -> 1.0 only when the reply holds exactly one '####' with a number after it."""
    if not callable(func):
        return "one_answer_line should be a reward function: def one_answer_line(completion, **kwargs) -> float"
    for text, expected, hint in HACK_CASES:
        try:
            got = func(completion=[{"role": "assistant", "content": text}], answer="72")
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"for {text!r} it raised {type(e).__name__}: {e}"
        if got is None or float(got) != expected:
            return f"for {text!r} it gave {got}, expected {expected}: {hint}"
    return None
