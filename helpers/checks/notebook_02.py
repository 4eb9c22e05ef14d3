"""Checks of notebook 02's exercises (GRPO)."""

from __future__ import annotations

import math

from helpers.checks import checks_exercise

GROUP = [1.5, 0.5, 0.0, 0.5]


def _advantages(rewards: list[float], unbiased: bool = True) -> list[float]:
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - (1 if unbiased else 0))
    return [(r - mean) / (math.sqrt(var) + 1e-4) for r in rewards]


@checks_exercise("02-group-advantages")
def group_advantages(advantages) -> str | None:
    values = [float(a) for a in advantages]
    if len(values) != len(GROUP):
        return f"one advantage per completion: {len(GROUP)} numbers, not {len(values)}"
    if all(abs(v - e) < 1e-3 for v, e in zip(values, _advantages(GROUP))):
        return None
    if all(abs(v - e) < 1e-3 for v, e in zip(values, _advantages(GROUP, unbiased=False))):
        return "close: torch.std divides by n - 1 (4 - 1 = 3 here), not by n"
    mean = sum(GROUP) / len(GROUP)
    if all(abs(v - (r - mean)) < 1e-3 for v, r in zip(values, GROUP)):
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
