"""Per-token log-probabilities for TRL's GRPO loss without a whole batch of logits in memory (CPU training).

TRL 0.24 computes a step's log-probabilities from the model's logits: completions x tokens x vocabulary, kept
for the backward pass. For notebook 02's step (32 completions of up to 48 tokens, SmolLM2's 49,152-token
vocabulary) that is about 0.3 GB per float32 copy, and the backward pass of log_softmax holds several copies at
once: the largest item of a CPU step's peak after the weights and Adam's state.

`ChunkedLogpsMixin` replaces TRL's `_get_per_token_logps_and_entropies` with the same computation done a chunk of
token positions at a time: the decoder's last hidden states go through the output layer one chunk at a time,
only the hidden states are kept for the backward pass, and each chunk's logits are computed again there (one
more output-layer product per step). Forward values are TRL's own functions (`selective_log_softmax`,
`entropy_from_logits`) on the same logits; the gradient is log-softmax's, in float32.
The batch, the loss and the optimizer step are TRL's, unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

CHUNK_TOKENS = 256  # token positions per chunk: 256 x 49,152 x 4 bytes = 50 MB of float32 logits


class _ChunkedLogps(torch.autograd.Function):
    """Log-probabilities (and entropies) of `ids` under `hidden @ weight.T / temperature`, a chunk of positions
    at a time. Only the inputs are kept for the backward pass, which computes each chunk's logits again and the
    gradient of log-softmax directly (d log p(id) / d logits = onehot(id) - softmax(logits)), adding the output
    layer's gradient into one float32 tensor: no whole-batch logits, and no weight-sized tensor per chunk."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")  # the backward pass runs under the forward's autocast (bfloat16)
    def forward(ctx, hidden, weight, ids, temperature: float, chunk_tokens: int):
        logps, entropies = [], []
        with torch.no_grad():
            for start in range(0, ids.numel(), chunk_tokens):
                logits = F.linear(hidden[start:start + chunk_tokens], weight) / temperature
                # as one sequence: TRL's bfloat16 path loops over the first dimension, one log-softmax each
                logps.append(selective_log_softmax(logits[None], ids[None, start:start + chunk_tokens])[0])
                entropies.append(entropy_from_logits(logits))
        ctx.save_for_backward(hidden, weight, ids)
        ctx.temperature, ctx.chunk_tokens = temperature, chunk_tokens
        entropies = torch.cat(entropies)
        ctx.mark_non_differentiable(entropies)
        return torch.cat(logps), entropies

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad_logps, _grad_entropies):
        hidden, weight, ids = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32)
        weight32 = weight.float()
        for start in range(0, ids.numel(), ctx.chunk_tokens):
            part = slice(start, start + ctx.chunk_tokens)
            logits = (F.linear(hidden[part], weight) / ctx.temperature).float()
            grad_logits = -torch.softmax(logits, dim=-1)  # onehot(id) - softmax, times the incoming gradient / T
            grad_logits.scatter_add_(1, ids[part, None], torch.ones_like(ids[part, None], dtype=grad_logits.dtype))
            grad_logits.mul_(grad_logps[part, None].float() / ctx.temperature)
            grad_hidden[part] = grad_logits @ weight32
            grad_weight.addmm_(grad_logits.T, hidden[part].float())
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
