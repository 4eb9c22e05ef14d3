"""Per-token log-probabilities for TRL's GRPO loss without a whole batch of logits in memory (CPU training).

TRL 0.24 computes a step's log-probabilities from the model's logits: completions x tokens x vocabulary, kept
for the backward pass. For notebook 02's step (32 completions of up to 48 tokens, SmolLM2's 49,152-token
vocabulary) that is about 0.3 GB per float32 copy, and the backward pass of log_softmax holds several copies at
once: the largest item of a CPU step's peak after the weights and Adam's state.

`ChunkedLogpsMixin` replaces TRL's `_get_per_token_logps_and_entropies` with the same computation done a chunk of
token positions at a time: the decoder's last hidden states go through the output layer one chunk at a time,
only the hidden states are kept for the backward pass, and each chunk's logits are computed again there (one
more output-layer product per step, only at the positions that carry a gradient). Forward values are TRL's
(`selective_log_softmax`, `entropy_from_logits`) to float32 rounding, computed in float32 from the logits of the
autocast dtype (TRL's bfloat16 path rounds them to bfloat16); the gradient is log-softmax's, in float32.
The batch, the loss and the optimizer step are TRL's, unchanged. tests/test_chunked_logps.py compares values and
gradients with TRL's; benchmarks/bench_trainer_memory.py times the step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_TOKENS = 256  # token positions per chunk: 256 x 49,152 x 4 bytes = 50 MB of float32 logits


def _logits(hidden: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
    """A chunk's logits over the temperature, in float32: the output layer's product in the autocast dtype (as TRL's
    model computes it), then float32 for the softmax (as TRL's float32 path)."""
    return F.linear(hidden, weight).float().div_(temperature)


class _ChunkedLogps(torch.autograd.Function):
    """Log-probabilities (and entropies) of `ids` under `hidden @ weight.T / temperature`, a chunk of positions
    at a time. Only the inputs are kept for the backward pass, which computes the logits again, only at positions
    whose incoming gradient is not zero (padding, and completions with a zero advantage, add nothing), and the
    gradient of log-softmax directly (d log p(id) / d logits = onehot(id) - softmax), adding the output layer's
    gradient into one float32 tensor: no whole-batch logits, no weight-sized tensor per chunk. A chunk's
    log-probabilities and entropies come from one exponentiation of its logits (TRL's two functions take several
    passes over the vocabulary for the same values)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")  # the backward pass runs under the forward's autocast (bfloat16)
    def forward(ctx, hidden, weight, ids, temperature: float, chunk_tokens: int):
        logps, entropies = (torch.empty(ids.numel(), dtype=torch.float32) for _ in range(2))
        with torch.no_grad():
            for start in range(0, ids.numel(), chunk_tokens):
                part = slice(start, start + chunk_tokens)
                logits = _logits(hidden[part], weight, temperature)
                top = logits.amax(dim=-1, keepdim=True)
                shifted = logits.sub_(top)  # <= 0: exp cannot overflow, and the entropy's terms stay small
                exps = shifted.exp()
                total = exps.sum(dim=-1)
                log_total = total.log()
                logps[part] = shifted.gather(1, ids[part, None])[:, 0] - log_total
                # entropy = -E_p[log p] = log(total) - E_p[shifted]; E_p as one dot product a position
                entropies[part] = log_total - torch.bmm(exps[:, None, :], shifted[:, :, None])[:, 0, 0] / total
        ctx.save_for_backward(hidden, weight, ids)
        ctx.temperature, ctx.chunk_tokens = temperature, chunk_tokens
        ctx.mark_non_differentiable(entropies)
        return logps, entropies

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad_logps, _grad_entropies):
        hidden, weight, ids = ctx.saved_tensors
        grad_hidden = torch.zeros_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32)
        weight32 = weight.float()
        scale = grad_logps.float() / ctx.temperature  # the incoming gradient, through the temperature
        rows = scale.nonzero()[:, 0]  # positions whose gradient is exactly zero contribute nothing
        for start in range(0, rows.numel(), ctx.chunk_tokens):
            at = rows[start:start + ctx.chunk_tokens]
            grad_logits = _logits(hidden[at], weight, ctx.temperature)
            # softmax, normalised over these logits themselves: a log-sum-exp saved from the forward pass's chunks
            # can differ from them in the last bits, and 1 - p for a near-certain token would carry that error
            grad_logits.sub_(grad_logits.amax(dim=-1, keepdim=True)).exp_()
            grad_logits.div_(grad_logits.sum(dim=-1, keepdim=True))
            grad_logits.mul_(-scale[at, None])  # (onehot(id) - softmax) x the incoming gradient / T
            grad_logits.scatter_add_(1, ids[at, None], scale[at, None])
            grad_hidden[at] = (grad_logits @ weight32).to(hidden.dtype)
            grad_weight.addmm_(grad_logits.T, hidden[at].float())
        return grad_hidden, grad_weight.to(weight.dtype), None, None, None


def chunked_logps(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor, temperature: float,
                  chunk_tokens: int = CHUNK_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities and entropies (each batch x tokens) of `ids` (batch x tokens) given the
    hidden states that predict them (batch x tokens x hidden) and the output layer's `weight`."""
    batch, tokens, width = hidden.shape
    logps, entropies = _ChunkedLogps.apply(hidden.reshape(-1, width), weight, ids.reshape(-1), temperature,
                                           chunk_tokens)
    return logps.view(batch, tokens), entropies.view(batch, tokens)


class ChunkedLogpsMixin:
    """For a subclass of TRL's GRPOTrainer training a causal language model on the CPU: log-probabilities
    computed a chunk at a time (`chunked_logps`). Anything else (a GPU, images) goes to TRL's own method."""

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, **extra):
        if input_ids.device.type != "cpu" or any(value is not None for value in extra.values()):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, **extra)
        unwrapped = self.accelerator.unwrap_model(model)
        decoder = getattr(unwrapped, unwrapped.base_model_prefix)  # the transformer below the output layer
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        # the positions that predict the last logits_to_keep tokens, as TRL slices its logits
        hidden = hidden[:, -logits_to_keep - 1:-1, :]
        logps, entropies = chunked_logps(hidden, unwrapped.get_output_embeddings().weight,
                                         input_ids[:, -logits_to_keep:], self.temperature)
        return logps, entropies if compute_entropy else None
