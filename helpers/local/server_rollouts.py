"""Server rollouts for CPU GRPO: TRL's GRPOTrainer sampling from a PolicyServer
(helpers.local.policy_server), a llama.cpp server holding the trainer's latest weights, instead of
running model.generate itself; and how far that server's policy is from the trainer's model.

Notebook 02 builds `ServerRolloutGRPOTrainer(..., policy_server=server)` where it would build
`trl.GRPOTrainer(...)`, and shows the one method that differs.
"""

from __future__ import annotations

from trl import GRPOTrainer
from trl.data_utils import maybe_apply_chat_template

from helpers.local.chunked_logps import ChunkedLogpsMixin


class ServerRolloutGRPOTrainer(ChunkedLogpsMixin, GRPOTrainer):
    """TRL's GRPOTrainer, with one method replaced: completions come from `policy_server`, a llama.cpp
    server that gets the trainer's weights after every optimizer step (exported to GGUF), the way
    verifiers' trainer pushes weights to its vLLM server. The loss is TRL's, on the sampled token
    ids; the server's per-token log-probabilities are kept in `last_sampling_logprobs`. For memory, the
    loss's log-probabilities are computed a chunk of tokens at a time (helpers.local.chunked_logps: the same
    values, without a whole batch of logits) and the server is stopped while the update runs."""

    def __init__(self, *args, policy_server, **kwargs):
        super().__init__(*args, **kwargs)
        self.policy_server = policy_server
        self.last_sampling_logprobs: list[list[float]] = []

    def _generate_single_turn(self, prompts: list, images: list | None):
        if images is not None:
            raise ValueError("the llama.cpp rollout server serves text models only")
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
        # now, its memory (~0.4 GB) is free for the update, the step's peak (issue 39: an 8 GB laptop).
        self.policy_server.stop()
        return prompt_ids, [c.token_ids for c in completions], None, {}


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
