"""`StepTimer`: where each GRPO step's time goes (generation, weight sync, scoring, update), logged with TRL's
own metrics, with the step's peak memory, reward-function errors and the share of completions that game the
'####' format."""

from __future__ import annotations

import time

from transformers import TrainerCallback
from word_arithmetic import hash_lines

from helpers.grpo.memory import peak_rss_gb
from helpers.grpo.rewards import RubricRewards


class StepTimer(TrainerCallback):
    """Splits each optimizer step's time into generation, weight sync, scoring and update, and adds
    them (with peak memory and reward-function errors) to the metrics TRL logs for the step.

    `trainer.add_callback(StepTimer(trainer, rewards, policy_server))`: generation is the time from
    the step's start until scoring starts (minus the weight sync, when the server got new weights),
    update is the time from the end of scoring to the end of the step (forward, backward, optimizer).
    """

    def __init__(self, trainer, rewards: RubricRewards, policy_server=None):
        self.trainer = trainer
        self.rewards = rewards
        self.policy_server = policy_server
        self._started = 0.0
        self._syncs = self._errors = 0

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = time.monotonic()
        self._syncs = self.policy_server.syncs if self.policy_server else 0

    def on_step_end(self, args, state, control, **kwargs):
        import torch

        ended = time.monotonic()
        synced = self.policy_server is not None and self.policy_server.syncs > self._syncs
        sync_s = self.policy_server.last_sync_s if synced else 0.0
        errors = len(self.rewards.error_log)
        metrics = self.trainer._metrics["train"]  # TRL averages these into the step's log entry
        for key, value in {
            "timing/generation_s": self.rewards.scoring_started - self._started - sync_s,
            "timing/sync_s": sync_s,
            "timing/scoring_s": self.rewards.scoring_ended - self.rewards.scoring_started,
            "timing/update_s": ended - self.rewards.scoring_ended,
            "timing/step_s": ended - self._started,
            "memory/peak_rss_gb": peak_rss_gb(),
            "rewards/errors": errors - self._errors,
            "hack/multi_hash": self._multi_hash_share(),
            **({"memory/peak_gpu_gb": torch.cuda.max_memory_allocated() / 1024**3}
               if torch.cuda.is_available() else {}),
        }.items():
            metrics[key].append(value)
        self._errors = errors

    def _multi_hash_share(self) -> float:
        """The share of this step's completions with 2+ '####' lines (the gamed format)."""
        completions = (self.rewards.last_batch or {}).get("completions") or []
        return sum(hash_lines(c) >= 2 for c in completions) / len(completions) if completions else float("nan")
