"""What notebook 02's cells pass to TRL's GRPOTrainer, and what they need around it.

The cells build `trl.GRPOConfig(...)` and `trl.GRPOTrainer(...)` themselves and call
`trainer.train()`; this module holds the pieces they pass in:

- `choose_backend("auto")`: "cpu" (no CUDA GPU), "gpu" (one), "verifiers" (two or more);
- `RubricRewards(env.rubric)`: a verifiers rubric as TRL reward functions (one per rubric
  function, so TRL logs each); every batch is scored once, in a Weave-traced call;
- `StepTimer`: a TrainerCallback that splits each step's time into generation, weight sync,
  scoring and update, and logs it with TRL's own metrics (wandb, trainer.state.log_history), with the
  share of completions that game the '####' format;
- `eval_setup`, `weight_change`, `save_summary`: the before/after evaluation and the run's figures.

Resuming a run and explaining an interrupt or running out of memory: helpers.local.run_folder.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import weave
from transformers import TrainerCallback

from helpers.local.gguf_convert import convert_gguf
from helpers.local.scrubbing import write_json
from helpers.worker_thread import run_sync

log = logging.getLogger("helpers.grpo")
BACKENDS = ("auto", "cpu", "gpu", "verifiers")


class BackendUnavailable(RuntimeError):
    """The requested training backend cannot run on this machine; the message says why."""


class RewardFunctionFailing(RuntimeError):
    """A reward function raised on too many rollouts of a step: training on zeros would teach nothing."""


# ----------------------------------------------------------------------------- backend


def gpu_capabilities() -> list[tuple[int, int]]:
    """The compute capability of each CUDA GPU here, e.g. [(7, 5), (7, 5)] on Kaggle's 2 x T4."""
    import torch

    from helpers.install_check import cuda_gpu_count

    return [tuple(torch.cuda.get_device_capability(i)) for i in range(cuda_gpu_count())]


def choose_backend(backend: str = "auto", gpus: int | None = None,
                   capabilities: list[tuple[int, int]] | None = None) -> str:
    """"cpu" (no CUDA GPU), "gpu" (TRL on one CUDA GPU) or "verifiers" (verifiers' recipe on 2+ GPUs).

    The verifiers recipe needs compute capability 8.0+ on every GPU: its trainer loads the model in
    bfloat16 with flash_attention_2 (verifiers/utils/model_utils.py get_model) and
    training/zero3.yaml trains in bf16, neither of which a T4 (7.5) has. So "auto" picks it only on
    2+ such GPUs; on others (Kaggle's 2 x T4) it picks "gpu", which trains on GPU 0, and says why.

    gpus, capabilities: the CUDA GPU count and each GPU's (major, minor) compute capability; None
    reads them from this machine. A count alone (tests, what-ifs) stands for GPUs of 8.0+.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if gpus is None:
        capabilities = gpu_capabilities() if capabilities is None else capabilities
        gpus = len(capabilities)
    elif capabilities is None:
        capabilities = [(8, 0)] * gpus
    too_old = [f"GPU {i}: {major}.{minor}" for i, (major, minor) in enumerate(capabilities) if (major, minor) < (8, 0)]
    why_not_verifiers = (f"the verifiers recipe trains in bfloat16 with flash-attention, which needs compute "
                         f"capability 8.0+ on every GPU ({', '.join(too_old)})")
    if backend == "auto":
        if gpus >= 2 and too_old:
            print(f"backend: gpu (TRL on GPU 0), not verifiers: {why_not_verifiers}.")
            return "gpu"
        return "cpu" if gpus == 0 else "gpu" if gpus == 1 else "verifiers"
    needed = {"cpu": 0, "gpu": 1, "verifiers": 2}[backend]
    if gpus < needed:
        raise BackendUnavailable(
            f"backend={backend!r} needs at least {needed} CUDA GPU{'s' if needed > 1 else ''}"
            + (" (one for the vLLM inference server, one for training)" if needed == 2 else "")
            + f", and this machine has {gpus}. Use backend='auto' to pick what this machine can run "
            "(the CPU here: TRL's GRPOTrainer, no GPU needed).")
    if backend == "verifiers" and too_old:
        raise BackendUnavailable(f"backend='verifiers' cannot run here: {why_not_verifiers}. "
                                 "Use backend='gpu' (TRL on one GPU, float16 on these) or backend='auto'.")
    return backend


def default_threads(sample_s: float = 2.0) -> int:
    """Cores that other programs are not using right now. On a shared machine, 2 torch threads
    fighting other processes for 2 cores ran 5x slower than 1 thread (measured), so busy cores are
    left alone. Measured over `sample_s` while this process waits: the load average would count
    this process's own work of the last minute (loading the model) and leave a core idle. A core
    counts as busy when at least 75% of it is used: a short burst of another program (a shell
    command, a background flush) must not halve the speed of a whole training run."""
    import psutil

    cores = os.cpu_count() or 1
    busy = int(psutil.cpu_percent(interval=sample_s) / 100 * cores + 0.25)
    return max(1, cores - busy)


GPU_MODEL = "Qwen/Qwen3-0.6B-Base"  # the one-GPU backend's model (see start_model)
# What a transformers model folder holds: weights, configs, tokenizer files, and the chat template,
# which transformers 4.57 saves as chat_template.jinja (no longer inside tokenizer_config.json).
MODEL_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]


def start_model(backend: str = "cpu") -> Path:
    """The folder of the weights training starts from.

    cpu: the SmolLM2-135M GGUF the local endpoint serves, converted once to a transformers folder.
    gpu: Qwen3-0.6B-Base from the Hugging Face hub (downloaded once into its cache). The base model,
    as in the published small-model anchor (31.1% -> 57.1% GSM8K after 100 GRPO steps, tenstorrent
    tt-metal PR 54390); the course has not run it on a GPU yet.
    verifiers: willcb/Qwen3-0.6B, the model of verifiers' own recipe (from the hub too).
    """
    if backend == "cpu":
        return convert_gguf(quiet=True)
    from huggingface_hub import snapshot_download

    from helpers.gpu.launcher import DEFAULT_MODEL

    hub_id = GPU_MODEL if backend == "gpu" else DEFAULT_MODEL
    try:
        return Path(snapshot_download(hub_id, allow_patterns=MODEL_FILES))
    except Exception as e:  # network errors come in many types; all mean the same here
        raise BackendUnavailable(f"{hub_id} could not be downloaded from the Hugging Face hub "
                                 f"({type(e).__name__}: {e}). The GPU backends need the hub once.") from e


def device_settings(backend: str, tokenizer=None, capability: tuple[int, int] | None = None,
                    vllm_installed: bool | None = None, memory_gib: float | None = None) -> dict:
    """The GRPOConfig arguments that differ between the CPU and a GPU, and where generation stops.

    cpu: float32. TRL's GRPOConfig turns bfloat16 autocast on by default, which was ~35% slower than
    float32 for generation on an AVX-512 CPU (../shared/DESIGN.md) and 14x slower for an update on an
    AVX2 one with no bfloat16 instructions (1 x 330 tokens: 77.4 s instead of 5.5 s on 2 cores,
    benchmarks/results/update-batch1-2026-12-03.json, written by scripts/bench_update.py --bf16).
    Gradient checkpointing (TRL's default) stays on: without it an update of the default batch was
    barely faster (24.3 s instead of 25.3 s on 2 cores) and peak memory rose from 5.0 to 8.7 GB
    (benchmarks/results/update-batch8-2026-12-03.json, written by scripts/bench_update.py).
    gpu: what `one_gpu_plan` decides for this GPU (capability, memory_gib: None reads GPU 0):
    bfloat16 autocast on 8.0+ GPUs, else float16 (Colab's T4, 7.5); gradient accumulation over
    small micro-batches; vLLM colocate where vllm is installed and the GPU has bfloat16.

    tokenizer: when its chat template ends a turn with another token than its eos (Qwen3-0.6B-Base:
    <|im_end|>, eos <|endoftext|>), that token becomes the tokenizer's eos (TRL cuts each completion
    after its first eos) and generation stops at both (`generation_kwargs`); otherwise a completion
    could run on into invented turns that skip_special_tokens hides.
    """
    if backend == "cpu":
        settings = {"use_cpu": True, "bf16": False, "fp16": False, "use_vllm": False}
    elif backend == "verifiers":  # its trainer script trains in bf16 under DeepSpeed (training/zero3.yaml)
        settings = {"use_cpu": False, "bf16": True, "fp16": False, "use_vllm": False}
    elif backend == "gpu":
        settings = one_gpu_plan(memory_gib, capability, vllm_installed).settings()
    else:
        raise ValueError(f"backend must be 'cpu', 'gpu' or 'verifiers', not {backend!r}")
    return {**settings, **_stop_settings(tokenizer, settings["use_vllm"])}


def _stop_settings(tokenizer, use_vllm: bool) -> dict:
    """GRPOConfig(generation_kwargs=...) that stop at every end token of `tokenizer` (see device_settings)."""
    from helpers.local.hf_child import stop_token_ids

    if tokenizer is None:
        return {}
    ids = stop_token_ids(tokenizer)
    if len(ids) < 2:
        return {}
    # TRL 0.24 masks each completion after its first `eos_token_id` (grpo_trainer.py, _generate_single_turn):
    # the turn's end, which the completions end with. (A completion that ends with <|endoftext|> instead,
    # rare after a chat prompt, keeps generate's padding after it in the loss: TRL takes a single eos.)
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(ids[0])
    # vLLM's SamplingParams takes stop_token_ids (it stops at its own tokenizer's eos anyway);
    # transformers' GenerationConfig takes a list of eos ids.
    return {"generation_kwargs": {"stop_token_ids": ids} if use_vllm else {"eos_token_id": ids}}


# Qwen3-0.6B-Base's shape (its config.json: 28 layers, hidden 1024, 8 KV heads of 128, vocabulary
# 151,936, tied embeddings); tests/test_gpu_backend.py checks these counts against transformers and peft.
GPU_MODEL_SHAPE = {"params": 596_049_920, "lora_params": 20_185_088, "layers": 28, "hidden": 1024,
                   "kv_values_per_token": 28 * 2 * 8 * 128, "vocab": 151_936}
GIB = 2**30
VLLM_BUDGET_GIB = 6.0  # vLLM colocate: bf16 weights 1.1 GiB, its profiling run, CUDA graphs, KV cache of a step (1.3 GiB)
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
        return (f"{self.gpu} ({self.memory_gib:.1f} GiB, compute capability {self.capability[0]}.{self.capability[1]}): "
                f"{self.completions_per_step} completions per step in micro-batches of {self.per_device_train_batch_size} "
                f"(gradient_accumulation_steps={self.gradient_accumulation_steps}), {'bf16' if self.bf16 else 'fp16'} autocast, "
                f"{'vLLM colocate at ' + str(self.vllm_gpu_memory_utilization) if self.use_vllm else 'generation by transformers'}; "
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
            raise BackendUnavailable("No CUDA GPU to plan for: pass memory_gib and capability to plan for one.")
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
        return {"logits of a micro-batch (3 float32 copies)": 3 * batch * max_completion_length * shape["vocab"] * 4 / GIB,
                "checkpointed activations": 2 * batch * seq * shape["hidden"] * 4 * shape["layers"] / GIB}

    batches = [b for b in range(completions_per_step, 0, -1) if completions_per_step % b == 0]
    batch = next((b for b in batches if sum(fixed.values()) + max(generation, sum(update(b).values()))
                  <= PLAN_HEADROOM * memory_gib), 1)
    estimate = {**fixed, **({} if use_vllm else {"generation KV cache (transformers, freed before the update)": generation}),
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
    return GpuPlan(gpu or "GPU", memory_gib, capability, completions_per_step, batch, completions_per_step // batch, bf16,
                   use_vllm, vllm_util, server_dtype, estimate, notes)


def release_trainer(trainer):
    """The trained model (LoRA merged) moved to the CPU, and what else training held on the GPU
    freed: the optimizer, accelerate's references, vLLM colocate's engine. On one GPU the final
    evaluation's server needs that memory; on the CPU it frees the optimizer's RAM."""
    import gc

    import torch

    model = merged(trainer.model).to("cpu")
    llm = getattr(trainer, "llm", None)
    if llm is not None:  # vLLM colocate holds vllm_gpu_memory_utilization of the GPU until it is gone
        trainer.llm = None
        del llm
        try:
            from vllm.distributed.parallel_state import (
                destroy_distributed_environment,
                destroy_model_parallel,
            )

            destroy_model_parallel()
            destroy_distributed_environment()
        except Exception as e:  # noqa: BLE001 - freeing is best effort; say what was left
            log.warning("vLLM's process groups were not destroyed (%s: %s)", type(e).__name__, e)
    trainer.accelerator.free_memory()
    trainer.model = trainer.model_wrapped = trainer.optimizer = trainer.lr_scheduler = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return model


def lora_config(backend: str):
    """LoRA for the one-GPU backend (rank 32 on every linear layer: 20M trainable weights, so that
    Qwen3-0.6B trains on a 16 GB GPU, see one_gpu_plan); None on the CPU, where every weight of the 135M
    model is trained."""
    if backend != "gpu":
        return None
    from peft import LoraConfig

    return LoraConfig(r=32, lora_alpha=64, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


def merged(model):
    """The model with a LoRA adapter merged into its weights (what a server loads); others as they are."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


# ----------------------------------------------------------------------------- rewards


def hash_lines(text: str) -> int:
    """How many lines of a completion hold a '####' answer marker: 2 or more is the gamed format
    (a list of '#### N' lines instead of one answer)."""
    return sum("####" in line for line in str(text).splitlines())


def _text(completion: Any) -> str:
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return str(completion)


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
        key = (tuple(_text(c) for c in completions), tuple(answers))  # by content: the same batch, scored once
        with self._lock:
            if key == self._cache_key:
                return self.last_batch["scores"]
            self.scoring_started = time.monotonic()
            scores = self.score(prompts, completions, answers)
            self.scoring_ended = time.monotonic()
            self._cache_key = key
            self.last_batch = {"completions": [_text(c) for c in completions], "answers": list(answers),
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
            log.warning("reward function %s raised %s: rollout %s scores 0", error["reward_func"], error["error"], index)
        return result


# ----------------------------------------------------------------------------- trainer


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
            **({"memory/peak_gpu_gb": torch.cuda.max_memory_allocated() / 1024**3} if torch.cuda.is_available() else {}),
        }.items():
            metrics[key].append(value)
        self._errors = errors

    def _multi_hash_share(self) -> float:
        """The share of this step's completions with 2+ '####' lines (the gamed format)."""
        completions = (self.rewards.last_batch or {}).get("completions") or []
        return sum(hash_lines(c) >= 2 for c in completions) / len(completions) if completions else float("nan")


# ----------------------------------------------------------------------------- results


@dataclass
class EvalSetup:
    """Which held-out examples, sampling and env arguments the before/after evaluations share."""

    env_args: dict
    num_examples: int
    rollouts_per_example: int
    sampling_args: dict
    reference: Any | None  # notebook 01's EvalRun of the same task (llama.cpp, 4-bit), shown beside them
    source: str  # in words: where the setup came from


def eval_setup(before_run: str, variant: str, num_eval_examples: int, eval_max_tokens: int,
               seed: int = 0, system_prompt: str | None = None) -> EvalSetup:
    """Reuse notebook 01's examples and sampling when it saved a run; otherwise (e.g. a fresh clone
    running this notebook alone) take the first `num_eval_examples` test examples, greedy.

    At most `num_eval_examples` examples are kept: GSM8K subsets are a shuffle with `seed` and then
    the first n rows, so the first k of 01's examples are exactly the examples of n=k. 01's results
    are kept as `reference` when they are of the same task (variant and prompt).
    """
    from helpers.evaluation import EvalRun, load_eval_run, summarize

    extra = {"system_prompt": system_prompt} if system_prompt else {}
    try:
        saved = load_eval_run(before_run)
    except FileNotFoundError:
        env_args = {"variant": variant, "eval_split": "test", "num_eval_examples": num_eval_examples,
                    "seed": seed, **extra}
        return EvalSetup(env_args, num_eval_examples, 1, {"max_tokens": eval_max_tokens, "temperature": 0.0},
                         None, f"no saved run {before_run!r} (run notebook 01 to reuse its examples): the "
                         f"first {num_eval_examples} test examples, greedy")
    env01 = dict(saved.info.get("env_args", {}))
    params = saved.info.get("params", {})
    n = min(num_eval_examples, int(params.get("num_examples") or num_eval_examples))
    env_args = {"variant": variant, "eval_split": env01.get("eval_split", "test"), "num_eval_examples": n,
                "seed": env01.get("seed", seed), **extra}
    setup = EvalSetup(env_args, n, int(params.get("rollouts_per_example") or 1),
                      dict(params.get("sampling_args") or {"max_tokens": eval_max_tokens}), None, "")
    if env01.get("variant", "think") == variant and env01.get("system_prompt") == system_prompt:
        rollouts = saved.rollouts[saved.rollouts["example"] < n].reset_index(drop=True)
        metrics = [c for c in saved.info.get("summary", {}) if c in rollouts and c != "reward"]
        info = {**saved.info, "summary": summarize(rollouts, metrics), "params": {**params, "num_examples": n}}
        setup.reference = EvalRun(name=saved.name, rollouts=rollouts, info=info)
        setup.source = f"notebook 01's saved run {saved.name!r} (its first {n} examples)"
    else:
        setup.source = (f"notebook 01's examples; its results are of another prompt or variant "
                        f"({env01.get('variant')!r}), so they are not shown beside these")
    return setup


def weight_change(before_dir: str | Path, after_dir: str | Path) -> dict:
    """How much training moved the weights: tensors changed, largest change, relative L2 change."""
    import torch
    from safetensors.torch import load_file

    before = load_file(str(Path(before_dir) / "model.safetensors"))
    after = load_file(str(Path(after_dir) / "model.safetensors"))
    changed, max_abs, diff_sq, norm_sq = 0, 0.0, 0.0, 0.0
    for name, a in after.items():
        b = before.get(name)
        if b is None:
            continue
        d = a.float() - b.float()
        changed += int(bool(torch.any(d != 0)))
        max_abs = max(max_abs, float(d.abs().max()))
        diff_sq += float((d * d).sum())
        norm_sq += float((b.float() ** 2).sum())
    return {"tensors": len(after), "tensors_changed": changed, "max_abs_change": max_abs,
            "relative_l2_change": (diff_sq / norm_sq) ** 0.5 if norm_sq else 0.0}


def save_summary(output_dir: str | Path, figures: dict) -> Path:
    """Write the figures a notebook run produced to <output_dir>/summary.json (tests read it)."""
    return write_json(Path(output_dir) / "summary.json", figures)
