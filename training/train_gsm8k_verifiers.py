"""GRPO on GSM8K with verifiers' own trainer (verifiers 0.1.5.post0 recipe), for >= 2 CUDA GPUs of
compute capability 8.0+ (it trains in bfloat16).

GPU 0 serves the policy with vLLM; GPU 1 trains and pushes new weights to vLLM over NCCL after
each step. Start both from the repository root (notebook 02 does this for you, see helpers.grpo.launcher):

    CUDA_VISIBLE_DEVICES=0 NCCL_CUMEM_ENABLE=0 NCCL_CUMEM_HOST_ENABLE=0 \
        vf-vllm --model willcb/Qwen3-0.6B --enforce-eager --host 127.0.0.1 --port 8000
    CUDA_VISIBLE_DEVICES=1 NCCL_CUMEM_ENABLE=0 NCCL_CUMEM_HOST_ENABLE=0 \
        accelerate launch --num-processes 1 --config-file training/zero3.yaml \
        training/train_gsm8k_verifiers.py --model willcb/Qwen3-0.6B

Rewards come from the same `gsm8k-course` environment (and rubric) as the CPU path; Weave traces
the rubric's scoring calls, and metrics go to wandb (`report_to="wandb"`). A rerun with the same
--output-dir resumes from its last checkpoint. The course has not run this script on GPUs yet.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for helpers.* when started by accelerate from anywhere

# The settings vf.grpo_defaults(run_name) passes to vf.GRPOConfig (verifiers/trainers/__init__.py);
# their values are read from it, so this list only names them.
VERIFIERS_DEFAULTS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "max_steps", "bf16", "max_grad_norm",
                      "num_iterations", "max_seq_len", "per_device_train_batch_size", "num_generations",
                      "gradient_accumulation_steps", "gradient_checkpointing", "save_strategy", "save_steps",
                      "save_only_model", "logging_steps", "log_on_each_node", "log_completions", "report_to")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="verifiers GRPO on GSM8K (vLLM on GPU 0, training on GPU 1)")
    p.add_argument("--model", default="willcb/Qwen3-0.6B")
    p.add_argument("--variant", default="think", choices=["think", "hash"],
                   help="gsm8k-course variant; Qwen3 writes <think> tags, so 'think' has signal")
    p.add_argument("--num-train-examples", type=int, default=-1)
    p.add_argument("--num-eval-examples", type=int, default=100)
    p.add_argument("--run-name", default="gsm8k-grpo-qwen3-0.6b")
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "grpo" / "gsm8k-grpo-qwen3-0.6b"))
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-device-batch-size", type=int, default=12,
                   help="completions per forward/backward pass")
    p.add_argument("--num-generations", type=int, default=12, help="completions per prompt (the group)")
    p.add_argument("--gradient-accumulation-steps", type=int, default=8,
                   help="micro-batches per optimizer step: a step trains on per-device-batch-size x this completions")
    p.add_argument("--max-tokens", type=int, default=2048, help="tokens per completion (per turn)")
    p.add_argument("--max-prompt-length", type=int, default=512,
                   help="longer prompts are left out; prompt + completion may be up to this + --max-tokens")
    p.add_argument("--learning-rate", type=float, default=None, help="default: vf.grpo_defaults")
    p.add_argument("--save-steps", type=int, default=50)
    p.add_argument("--eval-steps", type=int, default=10)
    p.add_argument("--vllm-host", default="127.0.0.1")
    p.add_argument("--vllm-port", type=int, default=8000)
    p.add_argument("--no-lora", action="store_true", help="full fine-tuning instead of vf.lora_defaults()")
    p.add_argument("--project", default="verifiers-course", help="Weave / wandb project")
    p.add_argument("--env-id", default="gsm8k-course",
                   help="verifiers environment module to train on, e.g. gsm8k-feedback (multi-turn)")
    p.add_argument("--env-args", type=json.loads, default={},
                   help="its load_environment arguments as JSON; gsm8k-course also gets --variant and the sizes")
    return p.parse_args(argv)


def training_overrides(args: argparse.Namespace) -> dict:
    """What this recipe changes on top of vf.grpo_defaults(run_name) (kept as data so tests can read it)."""
    overrides = {
        "output_dir": args.output_dir,
        "per_device_train_batch_size": args.per_device_batch_size,
        "num_generations": args.num_generations,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "max_tokens": args.max_tokens,
        "max_prompt_length": args.max_prompt_length,
        # verifiers cuts each completion to max_seq_len - its prompt's length (Environment.process_env_results_vllm):
        # room for the longest prompt plus a whole completion, so that every sampled token is trained on.
        "max_seq_len": args.max_prompt_length + args.max_tokens,
        "max_steps": args.max_steps,
        "seed": args.seed,
        "save_strategy": "steps",
        "save_steps": args.save_steps,
        "save_only_model": False,  # keep optimizer state, so an interrupted run can resume
        "eval_strategy": "steps",
        "eval_steps": args.eval_steps,
        # only checked (a multiple of the group) by vf.GRPOConfig: verifiers evaluates with env.evaluate via vLLM
        "per_device_eval_batch_size": args.num_generations,
        "report_to": "wandb",
        "vllm_server_host": args.vllm_host,
        "vllm_server_port": args.vllm_port,
    }
    if args.learning_rate is not None:
        overrides["learning_rate"] = args.learning_rate
    return overrides


def training_config(args: argparse.Namespace, **device):
    """vf.GRPOConfig built once from the final values (vf.grpo_defaults' settings, then this recipe's):
    its __post_init__ derives the generation batch and checks that the groups divide it, so values set
    on an already built config would leave those at the defaults'. `device`: e.g. use_cpu=True in tests."""
    import verifiers as vf

    defaults = vf.grpo_defaults(run_name=args.run_name)
    settings = {name: getattr(defaults, name) for name in VERIFIERS_DEFAULTS}
    return vf.GRPOConfig(run_name=args.run_name, **{**settings, **training_overrides(args), **device})


def describe(config) -> str:
    """One step's shape, in words (printed at the start of a run)."""
    prompts = config.generation_batch_size // config.num_generations
    return (f"each step: {prompts} prompts x {config.num_generations} completions = {config.generation_batch_size}, "
            f"trained in {config.steps_per_generation} micro-batches of {config.per_device_train_batch_size}; "
            f"completions up to {config.max_tokens} tokens (max_seq_len {config.max_seq_len}, prompts up to "
            f"{config.max_prompt_length})")


def load_env(args: argparse.Namespace):
    import verifiers as vf

    if args.env_id == "gsm8k-course":
        return vf.load_environment("gsm8k-course", variant=args.variant, num_examples=args.num_train_examples,
                                   num_eval_examples=args.num_eval_examples, seed=args.seed, **args.env_args)
    return vf.load_environment(args.env_id, **args.env_args)


def model_kwargs() -> dict:
    """vf.get_model's own arguments (bfloat16, no KV cache), with flash_attention_2 only where flash-attn is
    installed (an optional, separate install: requirements-gpu.txt), else PyTorch's sdpa attention."""
    import torch

    attention = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    return {"torch_dtype": torch.bfloat16, "attn_implementation": attention, "use_cache": False}


def prepare(args: argparse.Namespace, **device):
    """Everything before the model: tracing, the environment, the config (tests run this on a CPU)."""
    from helpers.tracing.session import init_tracing

    init_tracing(args.project)  # Weave traces rubric scoring (local store, or W&B with a key)
    env = load_env(args)
    config = training_config(args, **device)
    print(describe(config), flush=True)
    return env, config


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    import verifiers as vf
    from transformers.trainer_utils import get_last_checkpoint

    env, training_args = prepare(args)
    model, tokenizer = vf.get_model_and_tokenizer(args.model, model_kwargs=model_kwargs())
    trainer = vf.GRPOTrainer(
        model=model, processing_class=tokenizer, env=env, args=training_args,
        peft_config=None if args.no_lora else vf.lora_defaults(),
    )
    out = Path(args.output_dir)
    checkpoint = get_last_checkpoint(str(out)) if out.is_dir() else None
    if checkpoint:
        print(f"resuming from {checkpoint}", flush=True)
    trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_state()  # <output-dir>/trainer_state.json: every step's log (checkpoints hold it only up to theirs)
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    print(f"saved the final model to {out / 'final'}", flush=True)


if __name__ == "__main__":
    main()
