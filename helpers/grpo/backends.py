"""Where notebook 02 trains, and what differs there: the backend for this machine (the CPU or its GPUs), the CPU's
precision and threads.

- `choose_backend("auto")`: "cpu" (no CUDA GPU), "gpu" (one, or GPU 0 of several without bfloat16),
  "verifiers" (two or more of compute capability 8.0+: verifiers' own recipe, helpers.grpo.launcher);
- `start_model`: the weights training starts from (the local GGUF converted, or the hub's model);
- `cpu_precision`: float32 or bfloat16 autocast on this CPU; `default_threads`: the cores training may use;
- `device_settings`, `lora_config`: the GRPOConfig arguments that differ by backend (on a GPU from
  helpers.grpo.gpu_plan); `release_trainer` frees the trainer's memory after training.

None of the GPU paths has run on a GPU yet (scripts/gpu_smoke.py checks them on one).
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from helpers.grpo.gpu_plan import one_gpu_plan
from helpers.serving.gguf_convert import convert_gguf
from helpers.serving.llama_server import fixed_threads

log = logging.getLogger("helpers.grpo.backends")
BACKENDS = ("auto", "cpu", "gpu", "verifiers")
VERIFIERS_MODEL = "willcb/Qwen3-0.6B"  # the model of verifiers' own recipe (helpers.grpo.launcher)


class BackendUnavailable(RuntimeError):
    """The requested training backend cannot run on this machine; the message says why."""


def cuda_gpu_count() -> int:
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install counts as no GPU
        return 0


def gpu_capabilities() -> list[tuple[int, int]]:
    """The compute capability of each CUDA GPU here, e.g. [(7, 5), (7, 5)] on Kaggle's 2 x T4."""
    import torch

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


GPU_MODEL = "Qwen/Qwen3-0.6B-Base"  # the one-GPU backend's model (see start_model)
# What a transformers model folder holds: weights, configs, tokenizer files, and the chat template,
# which transformers 4.57 saves as chat_template.jinja, beside tokenizer_config.json.
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

    hub_id = GPU_MODEL if backend == "gpu" else VERIFIERS_MODEL
    try:
        return Path(snapshot_download(hub_id, allow_patterns=MODEL_FILES))
    except Exception as e:  # network errors come in many types; all mean the same here
        raise BackendUnavailable(f"{hub_id} could not be downloaded from the Hugging Face hub "
                                 f"({type(e).__name__}: {e}). The GPU backends need the hub once.") from e


CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # bfloat16 in hardware (the Xeons with AMX, some AMD EPYCs)


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 natively (a flag of CPU_BF16_FLAGS in /proc/cpuinfo); False where
    there is no /proc/cpuinfo to read (macOS, Windows): float32 is the safe default there."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return any(flag in flags for flag in CPU_BF16_FLAGS)


PRECISIONS = ("auto", "float32", "bfloat16")  # notebook 02's `precision` parameter, on the CPU
# A learner's own ACCELERATE_MIXED_PRECISION (set before the course was imported): "auto" follows it. Read once
# here, because transformers writes the same variable for every bf16 config later in the process.
_LEARNERS_MIXED_PRECISION = os.environ.get("ACCELERATE_MIXED_PRECISION")
_course_wrote: str | None = None  # what device_settings last wrote there


def learners_mixed_precision() -> str | None:
    """The learner's own ACCELERATE_MIXED_PRECISION: as it was when the course was imported, or "no" set since
    (a cell's `os.environ[...] = "no"` was overwritten with bf16 silently). transformers writes only "bf16" or
    "fp16" there, and the course what `_course_wrote` holds, so a "no" from neither is the learner's; a later
    "bf16" may be transformers' leftover and is not followed."""
    now = os.environ.get("ACCELERATE_MIXED_PRECISION")
    if now is not None and now.strip().lower() == "no" and now != _course_wrote:
        return now
    return _LEARNERS_MIXED_PRECISION


def cpu_precision(precision: str = "auto", cpuinfo: str | None = None,
                  environment: str | None = _LEARNERS_MIXED_PRECISION) -> str:
    """The precision CPU training runs in here: "bfloat16" (autocast) or "float32".

    "auto": ACCELERATE_MIXED_PRECISION where the learner set it ("no" or "bf16"), else bfloat16 where the CPU
    has bfloat16 instructions (`cpu_has_bf16`) and float32 elsewhere. "bfloat16" is refused on a CPU without
    them: it would be emulated, an order of magnitude slower (benchmarks/bench_update.py --bf16 measures it).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    has_bf16 = cpu_has_bf16(cpuinfo)
    chosen_by_environment = precision == "auto" and bool(environment)
    if chosen_by_environment:
        chosen = {"no": "float32", "bf16": "bfloat16"}.get(environment.strip().lower())
        if chosen is None:
            raise ValueError(f"ACCELERATE_MIXED_PRECISION={environment!r} is set in your environment, and CPU "
                             "training runs in 'no' (float32) or 'bf16' only. Unset it, or set notebook 02's "
                             "precision parameter to 'float32' or 'bfloat16'.")
        precision = chosen
    if precision == "bfloat16" and not has_bf16:
        asked = f"ACCELERATE_MIXED_PRECISION={environment!r} (your environment)" if chosen_by_environment \
            else "precision='bfloat16'"
        raise ValueError(f"{asked} needs a CPU with bfloat16 instructions (avx512_bf16 or AMX), and this one has "
                         "none: bfloat16 would be emulated, about 14x slower. Use precision='float32'.")
    if precision == "auto":
        return "bfloat16" if has_bf16 else "float32"
    return precision


def device_settings(backend: str, tokenizer=None, capability: tuple[int, int] | None = None,
                    vllm_installed: bool | None = None, memory_gib: float | None = None,
                    cpu_bf16: bool | None = None, precision: str = "auto") -> dict:
    """The GRPOConfig arguments that differ between the CPU and a GPU, and where generation stops.

    cpu: `precision` ("auto", "float32" or "bfloat16": `cpu_precision`), or bfloat16 iff `cpu_bf16` where that
    is given (what-ifs and tests). With bfloat16 instructions bfloat16 autocast makes a step faster; without
    them bfloat16 is emulated and an update is an order of magnitude slower, and TRL's GRPOConfig turns it on by
    default: so the CPU settings always say which one they use (benchmarks/bench_learnability.py --time-steps
    and benchmarks/bench_update.py --bf16 measure both).
    Gradient checkpointing (TRL's default) stays on: without it an update is barely faster and its peak memory
    far higher (benchmarks/bench_update.py).
    gpu: what `one_gpu_plan` decides for this GPU (capability, memory_gib: None reads GPU 0):
    bfloat16 autocast on 8.0+ GPUs, else float16 (Colab's T4, 7.5); gradient accumulation over
    small micro-batches; vLLM colocate where vllm is installed and the GPU has bfloat16.

    tokenizer: when its chat template ends a turn with another token than its eos (Qwen3-0.6B-Base:
    <|im_end|>, eos <|endoftext|>), that token becomes the tokenizer's eos (TRL cuts each completion
    after its first eos) and generation stops at both (`generation_kwargs`); otherwise a completion
    could run on into invented turns that skip_special_tokens hides.
    """
    if backend == "cpu":
        global _course_wrote
        learners = learners_mixed_precision()
        bf16 = cpu_precision(precision, environment=learners) == "bfloat16" if cpu_bf16 is None else cpu_bf16
        if bf16 and cpu_bf16 is None and learners and learners.strip().lower() == "no":  # precision said so
            warnings.warn(f"ACCELERATE_MIXED_PRECISION={learners!r} (your environment) is replaced by 'bf16' for this "
                          f"training: precision={precision!r} was given", stacklevel=2)
        settings = {"use_cpu": True, "bf16": bf16, "fp16": False, "use_vllm": False}
        # bf16=False alone is not enough: transformers' TrainingArguments writes ACCELERATE_MIXED_PRECISION
        # into os.environ whenever a config has bf16 or fp16 on (TRL's GRPOConfig default, a GPU plan), and a
        # later config with both off keeps what it finds there, so every later CPU trainer in the process
        # (and every kernel it starts) would autocast to bfloat16. Say the precision where accelerate reads it.
        os.environ["ACCELERATE_MIXED_PRECISION"] = _course_wrote = "bf16" if bf16 else "no"
    elif backend == "verifiers":  # its trainer script trains in bf16 under DeepSpeed (training/zero3.yaml)
        settings = {"use_cpu": False, "bf16": True, "fp16": False, "use_vllm": False}
    elif backend == "gpu":
        settings = one_gpu_plan(memory_gib, capability, vllm_installed).settings()
    else:
        raise ValueError(f"backend must be 'cpu', 'gpu' or 'verifiers', not {backend!r}")
    return {**settings, **_stop_settings(tokenizer, settings["use_vllm"])}


def _stop_settings(tokenizer, use_vllm: bool) -> dict:
    """GRPOConfig(generation_kwargs=...) that stop at every end token of `tokenizer` (see device_settings)."""
    from helpers.serving.hf_child import stop_token_ids

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
    # transformers' CallbackHandler keeps its own model, optimizer and scheduler: left there, Adam's state (twice the
    # weights) would outlive the trainer in notebook 02's kernel
    handler = getattr(trainer, "callback_handler", None)
    if handler is not None:
        handler.model = handler.optimizer = handler.lr_scheduler = None
    model.zero_grad(set_to_none=True)
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


def default_threads(samples: int = 4, sample_s: float = 0.5) -> int:
    """How many torch threads (and policy-server threads) to use: $COURSE_THREADS when set, else every core
    except those other programs keep busy through the whole 2-second sample (busy in each of its 4 parts).

    Why: threads that fight other programs for cores slow an update more than a core left idle does
    (benchmarks/bench_update.py --threads 1 2 --busy 0 1 2 measures both), so a busy core is left out; and a
    core counts as busy only when it is busy in all four samples, so a short burst of another program does not
    leave a core idle for a whole training run."""
    import psutil

    fixed = fixed_threads()
    if fixed:
        return fixed
    cores = os.cpu_count() or 1
    busy = min(int(psutil.cpu_percent(interval=sample_s) / 100 * cores + 0.25) for _ in range(samples))
    return max(1, cores - busy)
