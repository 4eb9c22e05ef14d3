"""Checks of notebook 02's two exercises on GRPO's group advantages: the advantages of a group of rewards
(`group_advantages`), and which knob leaves a group with no signal (`no_signal`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from helpers.checks.registry import checks_exercise

GROUP = [1.5, 0.5, 0.0, 0.5]


# The solution shows the advantages to 2 decimals (+1.39, -0.20, -0.99): values rounded so must pass, and
# the mistakes below (std over n, no division) are all further off than that.
TOLERANCE = 0.006


def _advantages(rewards: list[float], unbiased: bool = True) -> list[float]:
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - (1 if unbiased else 0))
    return [(r - mean) / (math.sqrt(var) + 1e-4) for r in rewards]


def _close(values, expected) -> bool:
    return all(abs(v - e) < TOLERANCE for v, e in zip(values, expected))


@checks_exercise("02-group-advantages")
def group_advantages(advantages) -> str | None:
    try:
        values = [float(a) for a in advantages]  # a list, a numpy array or a torch tensor
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
    # any mapping (MappingProxyType, UserDict) holding the two keys; other keys are the learner's notes
    if not isinstance(prediction, Mapping) or {"frac_reward_zero_std", "grad_norm"} - set(prediction):
        return "a dict with the two keys 'frac_reward_zero_std' and 'grad_norm'"
    try:
        zero_std, grad = float(prediction["frac_reward_zero_std"]), float(prediction["grad_norm"])
    except (TypeError, ValueError):
        return "predict numbers: 'frac_reward_zero_std' is a share between 0 and 1, 'grad_norm' a norm"
    if zero_std != 1.0:
        return ("if every completion of a prompt is the same, every group's rewards are equal: what share of "
                "the groups is that?")
    if grad != 0.0:
        return ("every reward equals its group's mean, so every advantage is 0; with beta = 0 the loss is "
                "advantage x (log-prob ratio), so what is its gradient?")
    return None
