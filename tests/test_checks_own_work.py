"""Issue 46, items 1-3: checks compare what the learner's code does (the loss's gradient names what cut it),
right answers are never refused (functools.wraps, any Mapping, extra keys, spaces), and a learner's own copy of
the reference (a wrapper, a re-compiled copy, stack inspection) is named. Each learner answer is written as a
learner writes it: one function, one way."""

import functools
import inspect
import types
from collections import UserDict

import pytest

from helpers.checks import CHECKS, _load_checks


@pytest.fixture(scope="module")
def checks():
    _load_checks()
    return CHECKS


def _advantages(rewards, num_generations):
    groups = rewards.float().view(-1, num_generations)
    return ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).reshape(-1, 1)


def loss_item(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    import torch

    ratio = torch.exp(logps - old_logps)
    advantages = _advantages(rewards, num_generations)
    per_token = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)
    return torch.tensor(((per_token * mask).sum() / mask.sum()).item())


def loss_no_grad(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    import torch

    with torch.no_grad():
        ratio = torch.exp(logps - old_logps)
    advantages = _advantages(rewards, num_generations)
    per_token = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)
    return (per_token * mask).sum() / mask.sum()


def loss_detached(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    import torch

    ratio = torch.exp(logps.detach() - old_logps)
    advantages = _advantages(rewards, num_generations)
    per_token = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)
    return (per_token * mask).sum() / mask.sum()


def loss_numpy(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    import numpy as np

    ratio = np.exp(logps.detach().numpy() - old_logps.numpy())
    advantages = _advantages(rewards, num_generations).numpy()
    per_token = -np.minimum(ratio * advantages, np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantages)
    return float((per_token * mask.numpy()).sum() / mask.numpy().sum())


@pytest.mark.parametrize(("loss", "named"), [(loss_item, ".item()"), (loss_no_grad, "torch.no_grad()"),
                                             (loss_detached, ".detach()"), (loss_numpy, "not a torch tensor")])
def test_a_loss_without_gradient_is_named(checks, loss, named):
    hint = checks["02-grpo-loss"](loss)
    assert hint and "the value is right but the loss has no gradient" in hint, hint
    assert f"your code uses {named}" in hint or named in hint.split(": it is ")[1].split(".")[0], hint


def test_a_decorated_reward_of_ones_own_is_ones_own(checks):
    """functools.wraps copies the rubric function's __module__ (the course's) and __wrapped__ onto the learner's
    TRL function: it is the learner's code all the same."""
    def trl_reward_funcs(rubric):
        funcs = []
        for func in rubric.get_reward_funcs():
            @functools.wraps(func)
            def reward(prompts, completions, answer, _func=func, **kwargs):
                return [float(_func(parser=rubric.parser, completion=c, answer=a)) for c, a in zip(completions, answer)]
            funcs.append(reward)
        return funcs

    assert checks["02-reward-adapter"](trl_reward_funcs) is None


@pytest.mark.parametrize("prediction", [
    types.MappingProxyType({"frac_reward_zero_std": 1.0, "grad_norm": 0.0}),
    UserDict({"frac_reward_zero_std": 1.0, "grad_norm": 0.0}),
    {"frac_reward_zero_std": 1.0, "grad_norm": 0.0, "why": "every group's rewards are equal"},
], ids=["MappingProxyType", "UserDict", "an extra key"])
def test_any_mapping_with_the_right_keys_passes(checks, prediction):
    assert checks["02-no-signal"](prediction) is None


def test_the_concept_map_takes_any_mapping_and_spaces_around_a_choice(checks):
    from helpers.checks.notebook_04 import CONCEPT_MAP

    spaced = {v0: f"{v1} " for v0, v1 in CONCEPT_MAP.items()}
    assert checks["04-concept-map"](spaced) is None
    assert checks["04-concept-map"](types.MappingProxyType(dict(CONCEPT_MAP))) is None
    assert checks["04-concept-map"](UserDict(CONCEPT_MAP)) is None


def test_signal_prediction_takes_any_mapping(checks):
    from helpers.checks.notebook_01 import _rollouts

    table = _rollouts([[0.0, 0.0], [0.0, 0.0]])
    assert checks["01-signal-prediction"](types.MappingProxyType({"predicted": 0.0, "rollouts": table})) is None


# ---------------------------------------------------------------- a learner's own copy of the reference


def last_number_wrapper(completion, answer, **kwargs):
    """A def that calls the course's reference."""
    import word_arithmetic

    return word_arithmetic.last_number_right(completion, answer)


def _recompiled(func):
    """The reference's source compiled again (exec), under the learner's globals."""
    namespace = {"__name__": "__main__", "Any": object}  # the names its annotations use
    exec(inspect.getsource(func), namespace)  # noqa: S102 - the cheat under test
    return namespace[func.__name__]


def test_wrappers_and_copies_of_the_reference_are_named(checks):
    from gsm8k_feedback import feedback_message
    from word_arithmetic import last_number_right

    copy_ = types.FunctionType(last_number_right.__code__, {"__name__": "__main__"}, "last_number_right")
    for answer in (last_number_wrapper, copy_, _recompiled(last_number_right)):
        hint = checks["02-last-number"](answer)
        assert hint and "needs your own code" in hint, (answer, hint)
    hint = checks["03-feedback-hints"](_recompiled(feedback_message))
    assert hint and "needs your own code" in hint and "copy of" in hint, hint


def test_stack_inspection_is_named(checks):
    def tool_calls(completion, **kwargs):
        caller = inspect.stack()[1]
        return float(caller.frame.f_locals.get("expected", 0.0))

    hint = checks["03-tool-calls"](tool_calls)
    assert hint and "looks at the code that calls it" in hint, hint


def test_honest_code_that_uses_the_course_helpers_and_torch_passes(checks):
    """Calling the helpers the exercise names (canonical_number, the parser), torch.stack and a helper of one's own
    is one's own work."""
    from gsm8k_course import canonical_number

    def number_of(text):
        from gsm8k_course import NUMBER

        found = NUMBER.findall(text)
        return canonical_number(found[-1]) if found else ""

    def last_number_right(completion, answer, **kwargs):
        text = "".join(m["content"] for m in completion if m["role"] == "assistant")
        number = number_of(text)
        return float(bool(number) and number == canonical_number(answer))

    assert checks["02-last-number"](last_number_right) is None
