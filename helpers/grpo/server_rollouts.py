"""Server rollouts for CPU GRPO: TRL's GRPOTrainer sampling from a PolicyServer
(helpers.grpo.policy_server), a llama.cpp server holding the trainer's latest weights, instead of
running model.generate itself; and how far that server's policy is from the trainer's model.

Notebook 02 builds `ServerRolloutGRPOTrainer(..., policy_server=server)` where it would build
`trl.GRPOTrainer(...)`, and shows the one method that differs. Each step's loss inputs and the loss TRL computed
from them are kept (detached, `last_loss_batch`) for notebook 02's loss exercise, which checks a learner's loss
against the trainer's own.
"""

from __future__ import annotations

import torch
from trl import GRPOTrainer
from trl.data_utils import maybe_apply_chat_template

from helpers.grpo.chunked_logps import ChunkedLogpsMixin
from helpers.grpo.memory import HeapTrimmer, gradients_at_once


class ServerRolloutGRPOTrainer(ChunkedLogpsMixin, GRPOTrainer):
    """TRL's GRPOTrainer, with one method replaced: completions come from `policy_server`, a llama.cpp
    server that gets the trainer's weights after every optimizer step (exported to GGUF), the way
    verifiers' trainer pushes weights to its vLLM server. The loss is TRL's, on the sampled token
    ids; the server's per-token log-probabilities are kept in `last_sampling_logprobs`. For memory, the loss's
    log-probabilities are computed a chunk of tokens at a time (helpers.grpo.chunked_logps: the same values,
    without a whole batch of logits), the gradients are taken in one block as the backward pass starts
    (helpers.grpo.memory.gradients_at_once), and the server is stopped while the update runs. The last step's
    loss inputs and loss are kept in `last_loss_batch` (and the module's `last_loss_batch`)."""

    def __init__(self, *args, policy_server, **kwargs):
        super().__init__(*args, **kwargs)
        # The heap's freed pages go back to the system at decoder-layer boundaries once it grew by a slack, so an
        # update's peak stays near what it uses (an 8 GB laptop; helpers.grpo.memory.HeapTrimmer)
        self.heap_trimmer = HeapTrimmer()
        self.heap_trimmer.attach(self.model)
        self.policy_server = policy_server
        self.last_sampling_logprobs: list[list[float]] = []
        self.last_loss_batch: dict | None = None
        self._last_logps = self._last_rewards = None

    # ---- the last step's loss, kept for notebook 02's loss exercise (nothing here changes what TRL computes)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        weights = self.reward_weights.to(per_func.device).unsqueeze(0)
        self._last_rewards = (per_func * weights).nansum(dim=1).detach().float().clone()  # TRL's own weighted sum
        return per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self._last_rewards is not None and len(self._last_rewards) == len(output["advantages"]):
            # TRL shuffles a batch's rows before the loss: these two travel with them, so the kept batch is put back
            # in the order it was sampled in (each prompt's group together)
            output["course_rewards"], output["course_order"] = self._last_rewards, torch.arange(len(self._last_rewards))
        return output

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        logps, entropies = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        self._last_logps = logps.detach().float().clone()
        return logps, entropies

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """TRL's loss, unchanged; what it was computed from (each completion's reward, the per-token
        log-probabilities and the old ones, the completion mask, the advantages, num_items_in_batch), in the order
        the completions were sampled, and its value are kept, detached, for the loss exercise (32 x 48 numbers)."""
        global last_loss_batch
        self._last_logps = None
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if loss.requires_grad:  # the gradients in one block when the backward pass starts (helpers.grpo.memory)
            loss.register_hook(lambda grad: gradients_at_once(model))
        if self._last_logps is not None and "course_order" in inputs:
            back = torch.argsort(inputs["course_order"])
            old = inputs.get("old_per_token_logps")
            old = self._last_logps if old is None else old.detach().float()  # TRL's own choice (_compute_loss)
            self.last_loss_batch = last_loss_batch = {
                "rewards": inputs["course_rewards"][back], "num_generations": self.num_generations,
                "logps": self._last_logps[back], "old_logps": old[back],
                "advantages": inputs["advantages"].detach().float()[back], "mask": inputs["completion_mask"][back],
                "num_items_in_batch": int(inputs["num_items_in_batch"]), "epsilon": self.epsilon_low,
                "epsilon_high": self.epsilon_high, "loss_type": self.loss_type, "beta": self.beta,
                "scale_rewards": self.scale_rewards, "loss": float(loss.detach()), "step": self.state.global_step + 1}
        return loss

    def _generate_single_turn(self, prompts: list, images: list | None):
        if images is not None:
            raise ValueError("the llama.cpp rollout server serves text models only")
        self.heap_trimmer.trim()  # the update's freed memory goes back before the server takes its share
        # Sync when the weights changed since the last sync, or the server stopped (the Train cell run again).
        if self.policy_server.step != self.state.global_step or not self.policy_server.is_running():
            self.policy_server.sync(self.model, step=self.state.global_step)
        texts = [maybe_apply_chat_template({"prompt": p}, self.processing_class)["prompt"] for p in prompts]
        prompt_ids = self.processing_class(text=texts, add_special_tokens=False, truncation=True,
                                           max_length=self.max_prompt_length)["input_ids"]
        # TRL's sampler repeats each prompt num_generations times in a row: sample n per prompt.
        completions = self.policy_server.complete(
            prompt_ids[:: self.num_generations], n=self.num_generations, max_tokens=self.max_completion_length,
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k or 0, min_p=self.min_p or 0.0,
            repetition_penalty=self.repetition_penalty, seed=self.args.seed * 100_003 + self.state.global_step * 1000)
        self.last_sampling_logprobs = [c.logprobs for c in completions]
        # Nothing samples until the next step, whose sync starts the server again on the new weights: stopped
        # now, its memory is free for the update, the step's peak (notebook 02 must fit an 8 GB laptop).
        self.policy_server.stop()
        return prompt_ids, [c.token_ids for c in completions], None, {}


last_loss_batch: dict | None = None  # the latest step's, of any ServerRolloutGRPOTrainer in this process


def sampling_mismatch(server, model, prompt_ids: list[list[int]], n: int = 4, max_tokens: int = 64,
                      seed: int = 0) -> dict:
    """How far the server's policy (llama.cpp, the exported precision) is from the trainer's model:
    per sampled token, |log p_server - log p_trainer| at temperature 1, over `n` samples per prompt."""
    import torch

    completions = server.complete(prompt_ids, n=n, max_tokens=max_tokens, temperature=1.0, seed=seed)
    diffs = []
    with torch.no_grad():
        for prompt, completion in zip((p for p in prompt_ids for _ in range(n)), completions):
            logits = model(torch.tensor([prompt + completion.token_ids])).logits[0, len(prompt) - 1: -1].float()
            ours = torch.log_softmax(logits, -1).gather(1, torch.tensor(completion.token_ids)[:, None])[:, 0]
            diffs += [abs(float(a) - b) for a, b in zip(ours, completion.logprobs) if b is not None]
    diff = torch.tensor(diffs)
    return {"tokens": len(diffs), "mean_abs_logprob_diff": float(diff.mean()),
            "max_abs_logprob_diff": float(diff.max()), "mean_prob_ratio_minus_1": float((torch.exp(diff) - 1).mean())}
