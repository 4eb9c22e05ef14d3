"""`RubricRewards(env.rubric)`: a verifiers rubric as the reward functions TRL's GRPOTrainer calls, one per
rubric function so that TRL logs each. Every batch is scored once, in one Weave-traced call; a reward function
that raises scores that rollout 0, and one that raises on most of a batch stops training
(`RewardFunctionFailing`) instead of letting it learn from zeros."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time

import weave
from word_arithmetic import reply_text

from helpers.worker_thread import run_sync

log = logging.getLogger(__name__)


class RewardFunctionFailing(RuntimeError):
    """A reward function raised on too many rollouts of a step: training on zeros would teach nothing."""


@weave.op(name="grpo_reward_batch", postprocess_inputs=lambda inputs: {k: v for k, v in inputs.items()
                                                                         if k != "rewards"})
def _traced_batch(rewards: RubricRewards, prompts, completions, answers, batch: int) -> dict:
    """One Weave call per batch: its output keeps the rewards and any reward-function errors."""
    return rewards._score(prompts, completions, answers)


def _guarded(func, errors: list):
    """`func`, but an exception is recorded before the rubric turns it into a 0 for that function."""

    @functools.wraps(func)  # keeps the signature that verifiers inspects
    def guarded(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as e:
            errors.append({"reward_func": func.__name__, "error": f"{type(e).__name__}: {e}",
                           "completion": kwargs.get("completion")})
            raise

    return guarded


class RubricRewards:
    """A verifiers rubric as TRL reward functions.

    `reward_funcs` go to `GRPOTrainer(reward_funcs=...)`, `weights` to
    `GRPOConfig(reward_weights=...)`, so TRL's reward is the rubric's weighted sum. TRL calls every
    reward function with the same batch; the batch is scored once (`rubric.score_rollout` for each
    rollout, all inside one traced `grpo_reward_batch` call). A reward function that raises makes
    that rollout score 0 (logged, counted, kept in the trace); when one raises on more than
    `max_error_share` of a batch, training stops with RewardFunctionFailing instead of learning from zeros.
    """

    def __init__(self, rubric, max_error_share: float = 0.5):
        import verifiers as vf

        self.names = rubric.get_reward_func_names()
        self.functions = list(rubric.get_reward_funcs())  # the learner's own, unwrapped: the run's identity reads them
        self.weights = [float(w) for w in rubric.get_reward_weights()]
        self.max_error_share = max_error_share
        self._errors: list[dict] = []  # filled by the guarded functions while one batch is scored
        # Same functions, weights and parser as the env's rubric (and the same class, so Weave's
        # verifiers integration traces its calls); each function records what it raises.
        self.rubric = vf.Rubric(funcs=[_guarded(f, self._errors) for f in rubric.get_reward_funcs()],
                                weights=list(self.weights), parser=rubric.parser)
        self.rubric.logger.setLevel(logging.CRITICAL)  # errors are reported here, once each
        self.batches = 0
        self.error_log: list[dict] = []  # every error so far, with its batch number
        self.last_batch: dict | None = None  # the texts and scores of the latest batch (the live view shows one)
        self.scoring_started = self.scoring_ended = 0.0  # monotonic clock, for StepTimer
        self._cache_key: tuple | None = None
        self._lock = threading.RLock()

    @property
    def reward_funcs(self) -> list:
        funcs = []
        for name in self.names:
            def reward(prompts, completions, answer, _name=name, **kwargs) -> list[float]:
                return self._batch(prompts, completions, answer)[_name]

            reward.__name__ = name  # TRL logs rewards/<name>/mean
            funcs.append(reward)
        return funcs

    def score(self, prompts: list, completions: list, answers: list[str]) -> dict:
        """{"reward": [...], "<function>": [...], "errors": [...]} for a batch of rollouts (traced)."""
        with self._lock:
            self.batches += 1
            self._errors.clear()
            return _traced_batch(self, prompts, completions, answers, self.batches)

    def _batch(self, prompts, completions, answers) -> dict:
        key = (tuple(reply_text(c) for c in completions), tuple(answers))  # by content: the same batch, scored once
        with self._lock:
            if key == self._cache_key:
                return self.last_batch["scores"]
            self.scoring_started = time.monotonic()
            scores = self.score(prompts, completions, answers)
            self.scoring_ended = time.monotonic()
            self._cache_key = key
            self.last_batch = {"completions": [reply_text(c) for c in completions], "answers": list(answers),
                               "scores": scores}
            self.error_log.extend({"batch": self.batches, **error} for error in scores["errors"])
        for func in {error["reward_func"] for error in scores["errors"]}:
            failed = [e for e in scores["errors"] if e["reward_func"] == func]
            if len(failed) > self.max_error_share * len(completions):
                raise RewardFunctionFailing(
                    f"The reward function {func} raised on {len(failed)} of the {len(completions)} rollouts of "
                    f"this step ({failed[0]['error']}); training on their zeros would teach nothing, so it "
                    "stopped here, before the update. Fix the function (the traced grpo_reward_batch call "
                    "shows the completions), then run the training cell again: it resumes from the last checkpoint.")
        return scores

    def _score(self, prompts, completions, answers) -> dict:
        states = [{"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}} for _ in completions]

        async def score_all():  # what rubric.score_rollouts does, without its per-batch progress bar
            return await asyncio.gather(*(
                self.rubric.score_rollout(prompt, completion, answer, state)
                for prompt, completion, answer, state in zip(prompts, completions, answers, states)))

        scores = run_sync(score_all())
        result = {"reward": [s.reward for s in scores],
                  **{name: [s.metrics[name] for s in scores] for name in self.names}, "errors": []}
        for error in self._errors:  # a rollout with a failing reward function scores 0 in total
            index = next((i for i, c in enumerate(completions) if c is error["completion"]), None)
            if index is not None:
                for name in ("reward", *self.names):
                    result[name][index] = 0.0
            result["errors"].append({"rollout": index, "reward_func": error["reward_func"], "error": error["error"]})
            log.warning("reward function %s raised %s: rollout %s scores 0", error["reward_func"], error["error"],
                        index)
        return result


# ----------------------------------------------------------------------------- results


