"""helpers.grpo.chunked_logps: the GRPO loss's log-probabilities a chunk at a time give TRL's values and
gradients, on the course's real model and real completions."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from helpers.grpo.backends import start_model
from helpers.grpo.chunked_logps import chunked_logps

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_and_batch():
    model_dir = start_model("cpu")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = ["Tom has 7 apples and buys 5 more. How many apples does he have?",
               "A box holds 12 pens. 4 are taken out. How many are left?"]
    replies = ["7 + 5 = 12\n#### 12", "12 - 4 = 8, so 8 pens are left in the box.\n#### 8"]
    rows = [tokenizer.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": r}])
            for p, r in zip(prompts, replies)]
    width = max(map(len, rows))  # left padding, as TRL pads prompts
    input_ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(r)) + r for r in rows])
    attention_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return model, input_ids, attention_mask


def _trl_way(model, input_ids, attention_mask, keep: int, temperature: float):
    """What TRL 0.24's _get_per_token_logps_and_entropies computes for a text model (one chunk)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep + 1, use_cache=False).logits
    logits = logits[:, :-1, :][:, -keep:, :] / temperature
    return selective_log_softmax(logits, input_ids[:, -keep:]), entropy_from_logits(logits.detach())


def _chunked_way(model, input_ids, attention_mask, keep: int, temperature: float, chunk_tokens: int):
    hidden = model.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    return chunked_logps(hidden[:, -keep - 1:-1, :], model.get_output_embeddings().weight, input_ids[:, -keep:],
                         temperature, chunk_tokens=chunk_tokens)


def _run(model, way: str, bf16: bool, input_ids, attention_mask, keep: int, temperature: float, weights=None):
    """Log-probabilities, entropies and every weight's gradient of a loss with signs (like advantages)."""
    if weights is None:
        weights = torch.linspace(-1.0, 1.0, keep).expand(input_ids.shape[0], keep)
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        if way == "trl":
            logps, entropies = _trl_way(model, input_ids, attention_mask, keep, temperature)
        else:  # chunks of 7 positions: uneven, and crossing from one completion to the next
            logps, entropies = _chunked_way(model, input_ids, attention_mask, keep, temperature, chunk_tokens=7)
        (logps.float() * weights).sum().backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    return logps.detach().float(), entropies.float(), grads


def test_chunked_logps_match_trl_values_and_gradients(model_and_batch):
    """float32: TRL's values and gradients, to float32 rounding."""
    model, input_ids, attention_mask = model_and_batch
    trl_logps, trl_entropies, trl_grads = _run(model, "trl", False, input_ids, attention_mask, 20, 0.6)
    logps, entropies, grads = _run(model, "chunked", False, input_ids, attention_mask, 20, 0.6)
    assert torch.allclose(logps, trl_logps, atol=1e-4, rtol=0)
    assert torch.allclose(entropies, trl_entropies, atol=1e-4, rtol=0)
    assert grads.keys() == trl_grads.keys() and "model.embed_tokens.weight" in grads  # the tied output layer too
    for name, grad in grads.items():
        assert (grad - trl_grads[name]).abs().max().item() <= 1e-4 * trl_grads[name].abs().max().item(), name


def test_positions_with_a_zero_gradient_change_nothing(model_and_batch):
    """The backward pass skips positions whose incoming gradient is exactly zero (padding, a group whose rewards
    are all equal): the gradients are still TRL's, whole completions and single positions skipped alike."""
    model, input_ids, attention_mask = model_and_batch
    weights = torch.linspace(-1.0, 1.0, 20).repeat(input_ids.shape[0], 1)
    weights[0] = 0.0  # a completion with a zero advantage
    weights[1, 5:9] = weights[1, -3:] = 0.0  # masked positions, inside a chunk of 7 and at the end
    _, _, trl_grads = _run(model, "trl", False, input_ids, attention_mask, 20, 0.6, weights)
    _, _, grads = _run(model, "chunked", False, input_ids, attention_mask, 20, 0.6, weights)
    assert grads.keys() == trl_grads.keys()
    for name, grad in grads.items():
        assert (grad - trl_grads[name]).abs().max().item() <= 1e-4 * trl_grads[name].abs().max().item(), name


def test_chunked_logps_under_bfloat16_are_as_close_to_float32_as_trl(model_and_batch):
    """bfloat16 autocast: forward values and gradients no further from float32's than TRL's own bfloat16 ones are
    (the chunked way takes the softmax of the bfloat16 logits in float32; TRL's bfloat16 path in bfloat16)."""
    model, input_ids, attention_mask = model_and_batch
    ref_logps, ref_entropies, reference = _run(model, "trl", False, input_ids, attention_mask, 20, 0.6)
    trl_logps, trl_entropies, trl_grads = _run(model, "trl", True, input_ids, attention_mask, 20, 0.6)
    logps, entropies, grads = _run(model, "chunked", True, input_ids, attention_mask, 20, 0.6)
    for ours, trls, ref in ((logps, trl_logps, ref_logps), (entropies, trl_entropies, ref_entropies)):
        assert (ours - ref).abs().max() <= 1.25 * (trls - ref).abs().max() + 1e-3

    def error(g: dict) -> float:  # the largest gradient error of any weight, relative to that weight's largest
        return max((g[name] - ref).abs().max().item() / (ref.abs().max().item() or 1.0) for name,
                   ref in reference.items())

    assert grads.keys() == reference.keys()
    assert error(grads) <= 1.25 * error(trl_grads) + 1e-3, (error(grads), error(trl_grads))


def test_the_trainer_method_is_trls_on_the_same_batch(model_and_batch, tmp_path):
    """The mixin's _get_per_token_logps_and_entropies (what the course's CPU trainer runs) against TRL's own, on
    a trainer built as the course builds one: the same positions, values and entropies."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from helpers.grpo.chunked_logps import ChunkedLogpsMixin

    class Chunked(ChunkedLogpsMixin, GRPOTrainer):
        pass

    model, input_ids, attention_mask = model_and_batch
    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, temperature=0.6,
                        use_cpu=True, bf16=False, report_to="none", max_steps=1)
    trainer = Chunked(model=model, processing_class=AutoTokenizer.from_pretrained(start_model("cpu")),
                      args=config, reward_funcs=[lambda completions, **kwargs: [0.0] * len(completions)],
                      train_dataset=Dataset.from_dict({"prompt": ["x"] * 2}))
    with torch.no_grad():
        ours = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, 12, compute_entropy=True)
        theirs = GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, input_ids, attention_mask, 12,
                                                                compute_entropy=True)
    assert torch.allclose(ours[0], theirs[0], atol=1e-4) and torch.allclose(ours[1], theirs[1], atol=1e-4)
    assert trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, 12)[1] is None
