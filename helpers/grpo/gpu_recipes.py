"""Notebook 02's GPU and 2-GPU paths, one call each, so that a learner on a CPU does not read through them.

The notebook is written for the CPU (one-step word problems, SmolLM2-135M, TRL's GRPOTrainer with a llama.cpp
policy server). On GPUs the same cells train GSM8K, and where they differ they call one function here:

- `recipe_settings(backend)`: the one-GPU recipe's settings (100 steps of 16 completions x 512 tokens, in
  micro-batches that fit the GPU: `one_gpu_plan`), which replace the parameters cell's CPU defaults;
- `gsm8k_task(...)`: the GSM8K environment and the held-out examples (notebook 01's, when it saved its run);
- `eval_server(...)`: the evaluation server of a GPU run (a checkpoint served by transformers);
- `free_the_gpu(backend, server)`: training gets the whole GPU (the server restarts for the final evaluation);
- `train_with_verifiers(...)`: 2+ GPUs: verifiers' own `vf.GRPOTrainer` with `vf-vllm` (helpers.grpo.launcher);
- `verifiers_plan(...)`: that recipe's commands, and what this machine lacks for it.

Neither GPU path has been run on a GPU by the course yet (scripts/gpu_smoke.py checks one on a GPU).
"""

from __future__ import annotations

from helpers.grpo import launcher
from helpers.grpo.gpu_plan import eval_server_dtype, one_gpu_plan


def recipe_settings(backend: str) -> dict:
    """The parameters the one-GPU recipe sets instead of the CPU defaults (none on the CPU or on 2+ GPUs, whose
    recipe takes the parameters as they are): `globals().update(recipe_settings(backend))`."""
    if backend != "gpu":
        return {}
    from IPython.display import display

    plan = one_gpu_plan()  # 16 completions per step, in micro-batches that fit this GPU (an estimate)
    print(plan)
    display(plan.table())
    return {"max_steps": 100, "max_completion_length": 512, "learning_rate": 5e-5, "num_generations": 4,
            "temperature": 0.9, "per_device_train_batch_size": plan.per_device_train_batch_size,
            "num_eval_examples": 200, "eval_max_tokens": 512, "before_run": ""}


def gsm8k_task(before_run: str, backend: str, num_eval_examples: int, eval_max_tokens: int, seed: int,
               system_prompt: str | None, num_train_examples: int):
    """(env, setup) for GSM8K on GPUs, evaluated as notebook 01 evaluates it (its examples when it saved its run).
    willcb/Qwen3-0.6B (2+ GPUs) writes <think> tags: the "think" variant there, "hash" on one GPU."""
    import verifiers as vf

    from helpers.grpo.before_after import eval_setup

    variant = "think" if backend == "verifiers" else "hash"
    setup = eval_setup(before_run, variant=variant, num_eval_examples=num_eval_examples,
                       eval_max_tokens=eval_max_tokens, seed=seed, system_prompt=system_prompt)
    env = vf.load_environment("gsm8k-course", **setup.env_args, num_examples=num_train_examples)
    return env, setup


def eval_server(run_name: str, tokenizer):
    """The server of a GPU run's evaluations: the synced checkpoint served by transformers on the GPU (float32
    below compute capability 8.0: Qwen in pure float16 can give NaN or '!!!!')."""
    from helpers.grpo.policy_server import CheckpointServer
    from helpers.paths import runs_dir

    return CheckpointServer(folder=runs_dir("models", run_name), tokenizer=tokenizer, name=run_name,
                            dtype=eval_server_dtype())


def free_the_gpu(backend: str, server) -> None:
    """On one GPU, training gets the whole GPU (the plan of recipe_settings): the evaluation server stops, and its
    next sync starts it again. On the CPU nothing happens (the trainer stops and starts its own server)."""
    if backend == "gpu":
        server.stop()


def train_with_verifiers(server, model_dir, config, num_train_examples: int, num_eval_examples: int):
    """2+ GPUs: vf-vllm on GPU 0 and verifiers' GRPOTrainer on GPU 1 (helpers.grpo.launcher), with the settings of
    `config` (the notebook's GRPOConfig). Returns (trained model on the CPU, its folder, log history, the folder of
    its offline wandb run or None)."""
    import torch
    from transformers import AutoModelForCausalLM

    server.stop()  # GPU 0 goes to vf-vllm
    plan = launcher.build_plan(
        model=str(model_dir), run_name=config.run_name, variant="think", max_steps=config.max_steps,
        learning_rate=config.learning_rate, num_generations=config.num_generations,
        per_device_batch_size=config.per_device_train_batch_size, max_tokens=config.max_completion_length,
        seed=config.seed, num_train_examples=num_train_examples, num_eval_examples=num_eval_examples)
    final_dir, log_history = launcher.train_with_verifiers(plan)
    trained = AutoModelForCausalLM.from_pretrained(final_dir, dtype=torch.float32)
    return trained, final_dir, log_history, plan.train_env.get("WANDB_DIR")  # None with WANDB_API_KEY: see W&B


def verifiers_plan(run_name: str, max_steps: int, num_generations: int, num_eval_examples: int, seed: int):
    """The 2-GPU recipe's two commands (printed) and a table of what this machine has and lacks for them."""
    plan = launcher.build_plan(run_name=run_name + "_gpus", max_steps=max_steps, num_generations=num_generations,
                               num_eval_examples=num_eval_examples, seed=seed)
    print(plan.shell())
    return plan.checks()
