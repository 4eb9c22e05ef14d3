"""The check of notebook 02's loss exercise: GRPO's loss as TRL 0.24 computes it for the notebook's settings,
its value and its gradient next to a reference on made-up batches where clipping, padding and both advantage
signs matter, and next to the trainer's own loss on its last step."""

from __future__ import annotations

import math
import sys

from helpers.checks.own_code import not_your_own
from helpers.checks.registry import checks_exercise


def _loss_reference(rewards, logps, old_logps, mask, num_generations: int, epsilon: float = 0.2, mistake: str = ""):
    """TRL 0.24's GRPO loss for notebook 02's settings (scale_rewards "group", beta 0, loss_type "dapo" in one
    process, epsilon_high = epsilon): group-normalised advantages, the clipped ratio, the token average. With
    `mistake`, the same computation with one of the mistakes the check names."""
    import torch

    grouped = rewards.float().view(-1, num_generations)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True, unbiased=mistake != "std over n")
    advantages = (centred if mistake == "not normalised" else centred / (std + 1e-4)).reshape(-1, 1)
    ratio = torch.exp(logps.float() - old_logps.float())
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    if mistake == "no clipping":
        per_token = -ratio * advantages
    elif mistake == "wrong side":
        per_token = -torch.max(ratio * advantages, clipped * advantages)
    else:
        per_token = -torch.min(ratio * advantages, clipped * advantages)
    if mistake == "no minus":
        per_token = -per_token
    mask = mask.float()
    if mistake == "mask ignored":
        return per_token.mean()
    if mistake == "mean over completions":
        return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


LOSS_MISTAKES = {  # mistake -> its hint
    "mean over completions": ("that is the mean over completions of each one's token mean (TRL's loss_type 'grpo'); "
                              "TRL 0.24's default 'dapo' sums over every completion token of the batch and divides "
                              "by their number, so a long completion weighs more than a short one"),
    "no clipping": ("no clipping: the ratio is taken as it is; clip it to [1 - epsilon, 1 + epsilon] and keep the "
                    "smaller of ratio x advantage and clipped ratio x advantage"),
    "wrong side": ("the larger of ratio x advantage and clipped ratio x advantage was kept; PPO's objective keeps the "
                   "smaller (torch.min), so a step never gains from pushing the ratio past the clip"),
    "not normalised": "the advantages are reward minus the group's mean; divide by the group's standard deviation + "
                      "1e-4",
    "std over n": "close: torch.std divides by n - 1 (the group's size - 1), not by n",
    "mask ignored": ("the padding counted: average over the completion tokens only (mask 1), not over every position "
                     "of the padded batch"),
    "no minus": "the sign: the loss is minus the objective (the optimizer minimises it)",
}


def _loss_inputs() -> list[tuple[dict, str]]:
    """(keywords, what they are): made-up batches shaped like a step's (completions x tokens), with ratios away from
    1 on both sides of the clip, completions of different lengths padded with nonsense log-probabilities, rewards
    that give advantages of both signs and a group whose rewards are all equal (advantages 0)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    cases = []
    for groups, size, tokens, epsilon in ((3, 4, 6, 0.2), (2, 3, 5, 0.1), (4, 2, 7, 0.28)):
        n = groups * size
        rewards = torch.randint(0, 3, (n,), generator=generator).float() * 0.5
        rewards[:size] = 1.0  # the first group: all equal
        logps = -torch.rand(n, tokens, generator=generator) * 3
        old = logps - (torch.rand(n, tokens, generator=generator) - 0.45) * 1.2  # ratios about 0.55 to 1.9
        lengths = torch.randint(1, tokens + 1, (n,), generator=generator)
        lengths[-1] = tokens
        mask = (torch.arange(tokens)[None, :] < lengths[:, None]).int()
        logps = torch.where(mask.bool(), logps, torch.full_like(logps, -20.0))  # padding: not a real log-prob
        cases.append(({"rewards": rewards, "logps": logps, "old_logps": old, "mask": mask, "num_generations": size,
                       "epsilon": epsilon},
                      f"{groups} groups of {size} completions, up to {tokens} tokens, epsilon {epsilon}"))
    return cases


def _loss_of(func, keywords: dict) -> float:
    import torch

    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
    return float(func(**copies))


def _gradient_of(func, keywords: dict):
    """(the loss, its gradient with respect to logps) as the trainer uses it: logps come from the model (a tensor
    that requires grad, not a leaf), and the loss is backpropagated. The gradient is None when the loss carries
    none (a number, or a tensor cut from logps)."""
    import torch

    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
    leaf = copies["logps"].float().requires_grad_()
    copies["logps"] = leaf * 1.0  # the model's output is no leaf: in-place work on it is allowed, as in training
    loss = func(**copies)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        return loss, None
    loss.backward()
    return loss, torch.zeros_like(leaf) if leaf.grad is None else leaf.grad


def _reference_gradient(keywords: dict):
    return _gradient_of(lambda **k: _loss_reference(**k), keywords)[1]


def _cut(func) -> str:
    """What in the learner's code cuts the loss from logps' gradient, in words (from the names its code reads)."""
    import numpy

    from helpers.checks.own_code import _reached, _reads

    learner, reached = _reached(func)
    names = set()
    for function in learner:
        reads = _reads(function.__code__)
        names |= reads["attribute"] | reads["global"]
    found = [words for name, words in (("item", ".item()"), ("tolist", ".tolist()"), ("numpy", ".numpy() or numpy"),
                                       ("detach", ".detach()"), ("no_grad", "torch.no_grad()"),
                                       ("inference_mode", "torch.inference_mode()"), ("data", ".data"),
                                       ("tensor", "torch.tensor(...) of a number")) if name in names]
    if any(obj is numpy for obj in reached) and ".numpy() or numpy" not in found:
        found.append("numpy")
    return f" (your code uses {', '.join(found)})" if found else ""


def _gradient_mistake(keywords: dict, grad, expected) -> str:
    """Where the learner's gradient parts from the reference's: padding, clipped tokens, the equal-reward group."""
    import torch

    mask = keywords["mask"].bool()
    differs = ~torch.isclose(grad, expected, rtol=1e-3, atol=1e-7)
    if (differs & ~mask).any():
        return ("the padding gets a gradient: positions with mask 0 are not tokens the model wrote; multiply by the "
                "mask (or select the tokens) before averaging")
    ratio = torch.exp(keywords["logps"].float() - keywords["old_logps"].float())
    epsilon = keywords["epsilon"]
    clipped = (ratio < 1 - epsilon) | (ratio > 1 + epsilon)
    if (differs & clipped & (expected == 0)).any():
        return ("the tokens whose ratio is outside [1 - epsilon, 1 + epsilon] on the clipped side still get a "
                "gradient: "
                "with -min(ratio x A, clip(ratio) x A) the clipped term wins there and carries none")
    size = keywords["num_generations"]
    if (differs[:size] & (expected[:size] == 0)).any():
        return "the first group's rewards are all equal (advantages 0): its tokens must get no gradient"
    return ("its value is right but its gradient is not: part of the loss is cut from logps (.detach()?) or counted "
            "twice; let the gradient flow through ratio = exp(logps - old_logps) in both terms")


@checks_exercise("02-grpo-loss")
def grpo_loss(func) -> str | None:
    """func(rewards, logps, old_logps, mask, num_generations, epsilon) -> the loss TRL 0.24 computes for notebook
    02's settings, as the trainer uses it: its value and its gradient with respect to logps, next to the reference
    on made-up batches where clipping, padding and both advantage signs matter (at the trainer's own step the
    ratio is 1 and the clip never acts), then its value on the trainer's own last step (its batch, and the loss
    TRL computed from it)."""
    import torch

    if not callable(func):
        return ("grpo_loss should be a function: "
                "def grpo_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2)")
    own = not_your_own(func, references=_loss_references())
    if own:
        return own
    for keywords, what in _loss_inputs():
        try:
            loss, grad = _gradient_of(func, keywords)
            got = float(loss.detach() if hasattr(loss, "detach") else loss)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            grad_words = (" The logps the trainer passes come from the model and require grad: keep every step in "
                          "torch (no .numpy()), so that loss.backward() reaches the model") if "grad" in str(e) else ""
            return (f"on a batch of {what}, it raised {type(e).__name__}: {e}. The arguments are torch tensors: "
                    f"rewards (completions), logps, old_logps and mask (completions x tokens).{grad_words}")
        expected = float(_loss_reference(**keywords))
        if not math.isclose(got, expected, rel_tol=1e-4, abs_tol=1e-6):
            for mistake, hint in LOSS_MISTAKES.items():
                if math.isclose(got, float(_loss_reference(**keywords, mistake=mistake)), rel_tol=1e-4, abs_tol=1e-6):
                    return f"on a batch of {what}: {hint}"
            return (f"on a batch of {what}, your loss is {got:.6f}, TRL's {expected:.6f}: advantages per group "
                    "(reward - "
                    "mean) / (std + 1e-4), ratio = exp(logps - old_logps), per token -min(ratio x A, clip(ratio) x A), "
                    "summed over the completion tokens (mask 1) and divided by their number")
        if grad is None:
            kind = (f"a {type(loss).__module__.split('.')[0]} {type(loss).__name__}, not a torch tensor"
                    if not isinstance(loss, torch.Tensor) else "a tensor cut from logps (requires_grad is False)")
            return (f"on a batch of {what}, the value is right but the loss has no gradient: it is {kind}{_cut(func)}. "
                    "The trainer calls loss.backward() to train the model, and this loss cannot train it: keep every "
                    "step in torch on the tensors you are given (no .item(), float(), numpy, .detach() or "
                    "torch.no_grad())")
        reference = _reference_gradient(keywords)
        if not torch.allclose(grad.float(), reference, rtol=1e-3, atol=1e-7):
            return f"on a batch of {what}, the loss's gradient with respect to logps is wrong: " + _gradient_mistake(
                keywords, grad.float(), reference)
    batch = _trainer_batch()
    if batch is None:
        print("(no step of the trainer in this kernel to compare with yet: compared on made-up batches only)")
        return None
    keywords = {k: batch[k] for k in ("rewards", "logps", "old_logps", "mask", "num_generations", "epsilon")}
    try:
        got = _loss_of(func, keywords)
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"on the trainer's last step (step {batch['step']}) it raised {type(e).__name__}: {e}"
    trl = batch["loss"]
    if not math.isclose(got, trl, rel_tol=1e-3, abs_tol=1e-5):
        if not math.isclose(float(_loss_reference(**keywords)), trl, rel_tol=1e-3, abs_tol=1e-5):
            print(f"(the course's reference gives {float(_loss_reference(**keywords)):.6f} on the trainer's last step, "
                  f"where TRL computed {trl:.6f}: a TRL other than 0.24? compared on made-up batches only)")
            return None
        return (f"on the trainer's last step (step {batch['step']}: {len(batch['rewards'])} completions, "
                f"{int(batch['mask'].sum())} tokens), your loss is {got:.6f}, the trainer's {trl:.6f}")
    tokens = int(torch.as_tensor(batch["mask"]).sum())
    print(f"On the trainer's last step (step {batch['step']}: {len(batch['rewards'])} completions, {tokens} tokens) "
          f"your loss is {got:.6f} and TRL's {trl:.6f}.")
    return None


def _loss_references() -> tuple:
    """The exercise's answer as others wrote it: the course's reference and, when the learner's kernel loaded it,
    TRL's own loss methods (called with a stand-in for the trainer, they compute the answer for you)."""
    references = [_loss_reference]
    grpo_trainer = sys.modules.get("trl.trainer.grpo_trainer")  # loaded only if the learner's code could use it
    trainer = getattr(grpo_trainer, "GRPOTrainer", None)
    references += [getattr(trainer, name) for name in ("_compute_loss", "compute_loss") if hasattr(trainer, name)]
    return tuple(references)


def _trainer_batch() -> dict | None:
    """The last step's batch and loss of a ServerRolloutGRPOTrainer in this kernel (None: no such step yet), when
    it was computed as this exercise computes it (beta 0, 'dapo', the same epsilon both sides, 'group')."""
    from helpers.grpo import server_rollouts

    batch = server_rollouts.last_loss_batch
    if batch is None:
        return None
    if (batch["beta"], batch["loss_type"], batch["scale_rewards"]) != (0.0, "dapo", "group") \
            or batch["epsilon"] != batch["epsilon_high"]:
        print(f"(the trainer's last step used beta={batch['beta']}, loss_type={batch['loss_type']!r}, "
              f"scale_rewards={batch['scale_rewards']!r}: this exercise's loss is for beta 0, 'dapo' and 'group', so "
              "it was compared on made-up batches only)")
        return None
    return batch
