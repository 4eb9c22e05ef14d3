"""How notebook 02's one-GPU backend shares a GPU's memory: the micro-batches, the precision, vLLM colocate or
not, and the evaluation server's dtype, estimated from the model's shape (`one_gpu_plan`, `GpuPlan`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


# Qwen3-0.6B-Base's shape (its config.json: 28 layers, hidden 1024, 8 KV heads of 128, vocabulary
# 151,936, tied embeddings); tests/test_gpu_backend.py checks these counts against transformers and peft.
GPU_MODEL_SHAPE = {"params": 596_049_920, "lora_params": 20_185_088, "layers": 28, "hidden": 1024,
                   "kv_values_per_token": 28 * 2 * 8 * 128, "vocab": 151_936}
GIB = 2**30
# vLLM colocate: bf16 weights 1.1 GiB, its profiling run, CUDA graphs, KV cache of a step (1.3 GiB)
VLLM_BUDGET_GIB = 6.0
PLAN_HEADROOM = 0.75  # an estimate never measured on a GPU: plan for 3/4 of the memory torch reports


@dataclass
class GpuPlan:
    """How notebook 02's one-GPU backend shares the GPU's memory, estimated from the model's shape.
    Not yet measured on a GPU: scripts/gpu_smoke.py records `torch.cuda.max_memory_reserved()`."""

    gpu: str
    memory_gib: float
    capability: tuple[int, int]
    completions_per_step: int
    per_device_train_batch_size: int  # completions per forward/backward pass (the micro-batch)
    gradient_accumulation_steps: int  # micro-batches per optimizer step
    bf16: bool  # else float16 autocast (float32 weights either way)
    use_vllm: bool
    vllm_gpu_memory_utilization: float | None
    server_dtype: str  # the evaluation server's dtype (eval_server_dtype)
    estimate_gib: dict[str, float]
    notes: list[str]

    def settings(self) -> dict:
        """GRPOConfig's arguments for this plan, except per_device_train_batch_size (the notebook's parameter)."""
        settings = {"use_cpu": False, "bf16": self.bf16, "fp16": not self.bf16, "gradient_checkpointing": True,
                    "gradient_accumulation_steps": self.gradient_accumulation_steps, "use_vllm": self.use_vllm}
        if self.use_vllm:
            settings.update(vllm_mode="colocate", vllm_gpu_memory_utilization=self.vllm_gpu_memory_utilization)
        return settings

    def table(self):
        """The estimate, one row per part, in GiB (a notebook shows it as a table)."""
        import pandas as pd

        return pd.DataFrame({"GiB": {part: round(gib, 2) for part, gib in self.estimate_gib.items()}})

    def __str__(self) -> str:
        return (f"{self.gpu} ({self.memory_gib:.1f} GiB, compute capability "
                f"{self.capability[0]}.{self.capability[1]}): "
                f"{self.completions_per_step} completions per step in micro-batches of "
                f"{self.per_device_train_batch_size} "
                f"(gradient_accumulation_steps={self.gradient_accumulation_steps}), {'bf16' if self.bf16 else 'fp16'} "
                "autocast, "
                + (f"vLLM colocate at {self.vllm_gpu_memory_utilization}" if self.use_vllm
                   else "generation by transformers") + "; "
                f"estimated peak {self.estimate_gib['training peak']:.1f} GiB. " + " ".join(self.notes))


def eval_server_dtype(capability: tuple[int, int] | None = None) -> str:
    """The evaluation server's dtype: bfloat16 on 8.0+ GPUs, else float32. Pure float16 is known to
    give NaN or "!!!!" outputs for bf16-trained Qwen models (activations beyond float16's range)."""
    if capability is None:
        import torch

        capability = torch.cuda.get_device_capability()
    return "bfloat16" if tuple(capability) >= (8, 0) else "float32"


def one_gpu_plan(memory_gib: float | None = None, capability: tuple[int, int] | None = None,
                 vllm_installed: bool | None = None, gpu: str | None = None, completions_per_step: int = 16,
                 max_completion_length: int = 512, max_prompt_length: int = 256,
                 eval_batch: int = 32) -> GpuPlan:
    """The one-GPU backend's batch and memory plan for GPU 0 (or for the GPU described: memory_gib
    as torch reports it, capability, vllm_installed, name): the largest micro-batch whose estimated
    peak fits in PLAN_HEADROOM of the memory, with gradient accumulation making up
    `completions_per_step`.

    The estimate (GPU_MODEL_SHAPE, LoRA rank 32 on every linear layer, gradient checkpointing):
    float32 weights; LoRA weights, gradients and Adam state; 1 GiB of CUDA context and allocator
    slack; generation: vLLM's share of the GPU (held all along), or transformers' KV cache of the
    whole step (freed before the update); the update: TRL 0.24 computes float32 logits over the
    micro-batch (accelerate returns autocast outputs in float32), up to 3 copies at its peak
    (logits, their gradient, the gradient through the temperature division), plus the checkpointed
    activations. The evaluation server runs alone (stopped during training, started after the
    trainer is freed): its weights and the KV cache of `eval_batch` sequences.
    """
    import importlib.util

    if memory_gib is None or capability is None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("No CUDA GPU to plan for: pass memory_gib and capability to plan for one.")
        props = torch.cuda.get_device_properties(0)
        memory_gib = props.total_memory / GIB if memory_gib is None else memory_gib
        capability = (props.major, props.minor) if capability is None else capability
        gpu = gpu or props.name
    if vllm_installed is None:
        vllm_installed = importlib.util.find_spec("vllm") is not None
    capability = tuple(capability)
    bf16 = capability >= (8, 0)
    use_vllm = vllm_installed and bf16
    notes = []
    if not bf16:
        notes.append("No bfloat16 below compute capability 8.0: float16 autocast over float32 weights.")
    if vllm_installed and not bf16:
        notes.append("vLLM colocate is off: vLLM 0.11 would fall back from the model's bfloat16 to pure float16 "
                     "here (vllm/config/model.py, _resolve_auto_dtype; TRL 0.24 passes it no dtype).")
    if not vllm_installed:
        notes.append("vllm is not installed: TRL generates with the training model (transformers).")
    shape, seq = GPU_MODEL_SHAPE, max_prompt_length + max_completion_length
    vllm_util = round(min(0.3, VLLM_BUDGET_GIB / memory_gib), 2) if use_vllm else None
    fixed = {"model weights (float32)": shape["params"] * 4 / GIB,
             "LoRA weights, gradients, Adam state": shape["lora_params"] * 16 / GIB,
             "CUDA context, allocator slack": 1.0}
    if use_vllm:
        fixed["vLLM colocate (its share of the GPU)"] = vllm_util * memory_gib
    generation = 0.0 if use_vllm else completions_per_step * seq * shape["kv_values_per_token"] * 4 / GIB

    def update(batch: int) -> dict:
        logits = 3 * batch * max_completion_length * shape["vocab"] * 4 / GIB
        return {"logits of a micro-batch (3 float32 copies)": logits,
                "checkpointed activations": 2 * batch * seq * shape["hidden"] * 4 * shape["layers"] / GIB}

    batches = [b for b in range(completions_per_step, 0, -1) if completions_per_step % b == 0]
    batch = next((b for b in batches if sum(fixed.values()) + max(generation, sum(update(b).values()))
                  <= PLAN_HEADROOM * memory_gib), 1)
    estimate = {**fixed,
                **({} if use_vllm else {"generation KV cache (transformers, freed before the update)": generation}),
                **update(batch)}
    estimate["training peak"] = sum(fixed.values()) + max(generation, sum(update(batch).values()))
    server_dtype = eval_server_dtype(capability)
    server_bytes = 2 if server_dtype == "bfloat16" else 4
    estimate["evaluation server, alone"] = 1.0 + shape["params"] * server_bytes / GIB + (
        eval_batch * seq * shape["kv_values_per_token"] * server_bytes / GIB)
    if estimate["training peak"] > PLAN_HEADROOM * memory_gib:
        notes.append(f"Even one completion per micro-batch may not fit ({estimate['training peak']:.1f} GiB "
                     "estimated): lower max_completion_length.")
    notes.append(f"The evaluation server runs in {server_dtype}; stop it before training and free the trainer "
                 "(release_trainer) before the final evaluation.")
    return GpuPlan(gpu or "GPU", memory_gib, capability, completions_per_step, batch, completions_per_step // batch,
                   bf16,
                   use_vllm, vllm_util, server_dtype, estimate, notes)
