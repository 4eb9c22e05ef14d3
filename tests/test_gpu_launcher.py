"""The verifiers (>= 2 GPU) backend, checked on a CPU: commands, config, pins, the trainer script's
imports against what requirements-gpu.txt installs, and notebook 02's views on a verifiers log.
Nothing runs on a GPU."""

import ast
import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pandas as pd
import pytest
import yaml

from helpers.grpo import launcher as gpu_plan
from helpers.grpo.training_log import learning_summary, logged_steps, metrics_table

ROOT = Path(__file__).resolve().parent.parent


def _train_script():
    spec = importlib.util.spec_from_file_location("train_gsm8k_verifiers",
                                                  ROOT / "training" / "train_gsm8k_verifiers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plan_follows_the_verifiers_recipe():
    plan = gpu_plan.build_plan(run_name="plan_test")
    server = " ".join(plan.server_cmd)
    assert Path(plan.server_cmd[0]).name == "vf-vllm"
    assert "--model willcb/Qwen3-0.6B" in server and "--enforce-eager" in server
    assert "--host 127.0.0.1" in server  # never listens beyond this machine
    assert plan.server_env["CUDA_VISIBLE_DEVICES"] == "0"
    train = plan.train_cmd
    assert Path(train[0]).name == "accelerate" and train[1] == "launch"
    assert train[train.index("--num-processes") + 1] == "1"
    assert Path(train[train.index("--config-file") + 1]) == ROOT / "training" / "zero3.yaml"
    assert Path(train[train.index("--config-file") + 2]) == ROOT / "training" / "train_gsm8k_verifiers.py"
    assert plan.train_env["CUDA_VISIBLE_DEVICES"] == "1"
    for env in (plan.server_env, plan.train_env):  # both ends of the NCCL weight sync (vllm 0.11 sets neither)
        assert env["NCCL_CUMEM_ENABLE"] == "0" and env["NCCL_CUMEM_HOST_ENABLE"] == "0"
    assert "vf-vllm" in plan.shell() and plan.shell().count("NCCL_CUMEM_ENABLE=0") == 2
    # The trainer's arguments are the script's own.
    args = _train_script().parse_args(train[train.index("--config-file") + 3:])
    assert args.model == "willcb/Qwen3-0.6B" and args.vllm_host == "127.0.0.1" and args.vllm_port == plan.port


def test_plan_can_train_another_environment():
    """The multi-turn feedback environment (notebook 03) goes to the same recipe by id and arguments."""
    plan = gpu_plan.build_plan(run_name="plan_test", env_id="gsm8k-feedback", env_args={"max_turns": 3})
    train = plan.train_cmd
    args = _train_script().parse_args(train[train.index("--config-file") + 3:])
    assert args.env_id == "gsm8k-feedback" and args.env_args == {"max_turns": 3}
    default = _train_script().parse_args([])
    assert default.env_id == "gsm8k-course" and default.env_args == {}
    # the default plan still trains gsm8k-course
    train = gpu_plan.build_plan(run_name="plan_test").train_cmd
    assert train[train.index("--env-id") + 1] == "gsm8k-course"
    source = (ROOT / "training" / "train_gsm8k_verifiers.py").read_text()
    assert "vf.load_environment(args.env_id, **args.env_args)" in source


def test_checks_say_what_is_missing_on_a_cpu_machine():
    plan = gpu_plan.build_plan(run_name="plan_test")
    checks = plan.checks(gpus=0)
    assert not checks.loc["2+ CUDA GPUs", "ok"]
    assert "backend='auto'" in checks.loc["2+ CUDA GPUs", "if not ok"]
    assert checks.loc["file training/zero3.yaml", "ok"] and checks.loc["file requirements-gpu.txt", "ok"]
    # flash-attn is optional (sdpa without it) and installed on its own, never through the -r file
    assert checks.loc["python package flash_attn (optional)", "ok"]
    assert "--no-build-isolation" in checks.loc["python package flash_attn (optional)", "if not ok"]


def test_checks_refuse_gpus_without_bfloat16():
    """Kaggle's 2 x T4 (compute capability 7.5): verifiers' trainer loads bf16 + flash_attention_2."""
    checks = gpu_plan.build_plan(run_name="plan_test").checks(capabilities=[(7, 5), (7, 5)])
    assert checks.loc["2+ CUDA GPUs", "ok"] and not checks.loc["compute capability 8.0+ (bfloat16)", "ok"]
    assert "backend='gpu'" in checks.loc["compute capability 8.0+ (bfloat16)", "if not ok"]
    assert gpu_plan.build_plan(run_name="plan_test").checks(capabilities=[(8, 0), (9, 0)]).loc[
        "compute capability 8.0+ (bfloat16)", "ok"]


def test_run_plan_refuses_without_gpus_and_starts_nothing(monkeypatch):
    started = []
    monkeypatch.setattr(gpu_plan.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr("helpers.grpo.backends.cuda_gpu_count", lambda: 0)
    with pytest.raises(RuntimeError, match="cannot start here"):
        gpu_plan.run_plan(gpu_plan.build_plan(run_name="plan_test"))
    assert started == []


def test_zero3_config():
    config = yaml.safe_load((ROOT / "training" / "zero3.yaml").read_text())
    assert config["distributed_type"] == "DEEPSPEED"
    assert config["deepspeed_config"]["zero_stage"] == 3
    assert config["num_processes"] == 1 and config["mixed_precision"] == "bf16"


def test_training_script_uses_the_verifiers_api():
    source = (ROOT / "training" / "train_gsm8k_verifiers.py").read_text()
    tree = ast.parse(source)
    attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
             and isinstance(node.value, ast.Name) and node.value.id == "vf"}
    assert {"GRPOTrainer", "grpo_defaults", "lora_defaults", "load_environment", "get_model_and_tokenizer"} <= attrs
    assert 'vf.load_environment("gsm8k-course"' in source
    assert "init_tracing(" in source


def _config(argv: list[str]):
    """The trainer script's vf.GRPOConfig, built on this CPU (use_cpu: bf16 is then allowed; vf.grpo_defaults
    itself asks for bf16 on a GPU, so the check for one answers yes here)."""
    module = _train_script()
    with mock.patch("transformers.training_args.is_torch_bf16_gpu_available", return_value=True):
        return module, module.training_config(module.parse_args(argv), use_cpu=True)


def test_the_config_is_built_from_the_final_batch_settings():
    """vf.GRPOConfig derives the generation batch in __post_init__: set after building, the batch stayed
    vf.grpo_defaults' (8 x 4 = 32 completions, 8 distinct prompts for a step of 64). Built from the final
    values, a step is the notebook's: 16 prompts x 4 completions in 8 micro-batches of 8."""
    module, config = _config(["--per-device-batch-size", "8", "--num-generations", "4",
                              "--gradient-accumulation-steps", "8", "--max-tokens", "512"])
    assert config.generation_batch_size == 64 and config.steps_per_generation == 8
    assert config.generation_batch_size // config.num_generations == 16
    assert "16 prompts x 4 completions = 64, trained in 8 micro-batches of 8" in module.describe(config)
    assert (config.learning_rate, config.max_grad_norm, config.warmup_steps) == (1e-6, 0.01, 10)  # vf.grpo_defaults'
    # verifiers cuts completions to max_seq_len - prompt length: room for a whole completion after any prompt
    assert config.max_tokens == 512 and config.max_seq_len == config.max_prompt_length + 512
    _, config = _config([])  # the script's own defaults are valid too (12 x 8 = 96: 8 prompts x 12)
    assert config.generation_batch_size == 96 and config.per_device_eval_batch_size % config.num_generations == 0


@pytest.mark.slow
def test_the_trainer_script_imports_only_what_requirements_gpu_installs(tmp_path, gsm8k_dir):
    """The script's whole import chain (verifiers, the trainer, helpers.tracing.session and its tracing start, the
    environment, the config), run with every package that `pip install -r requirements-gpu.txt` does not
    install hidden (the list pip's dry run reported: scripts/check_pins.py's newest result), as in the
    GPU environment. Optional imports (tornado for tenacity, aiodns for aiohttp) fail quietly there too;
    a hard one (matplotlib or IPython from helpers' notebook modules: checked by adding
    `import helpers.eval_views` to prepare()) fails this test."""
    pins = max((ROOT / "benchmarks" / "results").glob("pins-*.json"))
    gpu = json.loads(pins.read_text())["targets"]["multi-GPU (CPython 3.11)"]
    assert gpu["resolves"], pins
    code = f"""
import importlib.machinery, importlib.metadata, importlib.util, json, sys
from unittest import mock
installed = set(json.loads({json.dumps(json.dumps(sorted(gpu["installed"])))})) | {{"course-helpers", "gsm8k-course"}}
norm = lambda name: name.lower().replace("_", "-").replace(".", "-")
hidden = {{module for module, dists in importlib.metadata.packages_distributions().items()
          if not any(norm(d) in installed for d in dists)}}
class GpuEnvironment(importlib.machinery.PathFinder):  # site-packages as requirements-gpu.txt would fill it
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] in hidden else super().find_spec(name, path, target)
sys.meta_path[:] = [GpuEnvironment if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
spec = importlib.util.spec_from_file_location("train", {str(ROOT / "training" / "train_gsm8k_verifiers.py")!r})
train = importlib.util.module_from_spec(spec); spec.loader.exec_module(train)
args = train.parse_args(["--num-train-examples", "8", "--num-eval-examples", "4", "--project", "import-check"])
import verifiers, transformers.trainer_utils, verifiers.trainers.grpo_trainer
with mock.patch("transformers.training_args.is_torch_bf16_gpu_available", return_value=True):
    env, config = train.prepare(args, use_cpu=True)
train.model_kwargs()
"""
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path,
                         env={**os.environ, "COURSE_RUNS_DIR": str(tmp_path / "runs"), "GSM8K_DIR": str(gsm8k_dir)})
    assert out.returncode == 0, out.stderr[-3000:]  # e.g. ModuleNotFoundError: No module named 'matplotlib'


def test_notebook_views_read_a_verifiers_log():
    """verifiers 0.1.5 logs each reward function as rewards/<name> (TRL: rewards/<name>/mean). The log is
    made by verifiers' own code: _log_reward_metrics_primary fills _metrics, log() averages them into the
    Trainer's entry (loss, grad_norm, learning_rate, epoch)."""
    from verifiers.trainers.grpo_trainer import GRPOTrainer

    history = []
    for step in (1, 2, 3, 4):
        stub = SimpleNamespace(_metrics={"train": defaultdict(list)}, num_generations=2)
        rewards = [0.0, 1.0, 0.0, float(step > 2)]
        GRPOTrainer._log_reward_metrics_primary(
            stub, "train", {"reward": rewards, "correct_answer": rewards, "format_reward": [0.5] * 4},
            __import__("torch").tensor(rewards), 4)
        metrics = {key: sum(values) / len(values) for key, values in stub._metrics["train"].items()}
        history.append({"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-6, "epoch": step / 10, **metrics,
                        "step": step})
    history.append({"eval_reward": 0.3, "eval_rewards/correct_answer": 0.3, "step": 4})
    history.append({"train_runtime": 60.0, "train_loss": 0.01, "step": 4})
    assert "rewards/correct_answer" in history[0] and "rewards/correct_answer/mean" not in history[0]
    metrics = metrics_table(history)
    assert list(metrics.index) == [1, 2, 3, 4]
    assert {"reward", "grad_norm", "correct_answer", "format_reward"} <= set(metrics.columns)
    summary = learning_summary(metrics, n=2, column="correct_answer")
    assert (summary["first"], summary["last"]) == (0.25, 0.5)
    missing = learning_summary(metrics, column="no_such_reward")  # no KeyError: nothing logged
    assert missing["steps"] == 0 and pd.isna(missing["gain"])
    assert logged_steps(pd.DataFrame()) == []  # no wandb run in this kernel


def test_train_with_verifiers_reads_the_whole_runs_log(tmp_path, monkeypatch):
    """The trainer script saves trainer_state.json at the end; a checkpoint's copy stops at its step."""
    plan = gpu_plan.build_plan(run_name="plan_test")
    plan.output_dir = tmp_path / "run"
    (plan.output_dir / "checkpoint-1").mkdir(parents=True)
    (plan.output_dir / "checkpoint-1" / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1}]}))
    (plan.output_dir / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1}, {"step": 2}]}))
    (plan.output_dir / "final").mkdir()
    monkeypatch.setattr(gpu_plan, "run_plan", lambda plan: 0)
    final_dir, history = gpu_plan.train_with_verifiers(plan)
    assert final_dir == plan.output_dir / "final" and history == [{"step": 1}, {"step": 2}]
    assert "trainer.save_state()" in (ROOT / "training" / "train_gsm8k_verifiers.py").read_text()


def test_training_overrides_are_verifiers_config_fields():
    from verifiers.trainers.grpo_config import GRPOConfig

    module = _train_script()
    overrides = module.training_overrides(module.parse_args([]))
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(overrides) <= names, set(overrides) - names
    assert overrides["report_to"] == "wandb"
    assert overrides["vllm_server_host"] == "127.0.0.1"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.\-+]+)", line)
            assert match, f"{path.name}: not an exact pin: {line!r}"
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_gpu_requirements_are_exact_and_consistent():
    gpu = _pins(ROOT / "requirements-gpu.txt")
    cpu = _pins(ROOT / "requirements.txt")
    for package in ("vllm", "deepspeed", "transformers", "trl", "verifiers"):
        assert package in gpu, f"requirements-gpu.txt must pin {package}"
    # flash-attn is source only and its setup.py imports torch: in `pip install -r` its isolated build fails
    # ("Getting requirements to build wheel") and aborts the whole install. It is a separate, optional step.
    assert "flash-attn" not in gpu
    assert "pip install flash-attn==2.8.3 --no-build-isolation" in (ROOT / "requirements-gpu.txt").read_text()
    # Same version wherever both files pin a package, except torch, which vllm pins itself
    # (explained at the top of requirements-gpu.txt).
    differ = {p: (cpu[p], gpu[p]) for p in set(cpu) & set(gpu) if cpu[p] != gpu[p] and p != "torch"}
    assert not differ, differ
    assert "torch" in (ROOT / "requirements-gpu.txt").read_text().split("verifiers==")[0]  # the reason is written


def test_the_plan_carries_the_notebooks_settings():
    plan = gpu_plan.build_plan(run_name="plan_test", max_steps=30, learning_rate=2e-6, num_generations=8,
                               per_device_batch_size=16, max_tokens=512, seed=3, num_train_examples=500,
                               num_eval_examples=50, variant="think")
    train = plan.train_cmd
    args = _train_script().parse_args(train[train.index("--config-file") + 3:])
    assert (args.max_steps, args.learning_rate, args.num_generations, args.per_device_batch_size) == (30, 2e-6, 8, 16)
    assert (args.max_tokens, args.seed, args.num_train_examples, args.num_eval_examples) == (512, 3, 500, 50)
    assert args.variant == "think"


def test_pins_are_checked_as_the_files_are_installed():
    """scripts/check_pins.py resolves requirements-gpu.txt with pip's defaults (build isolation on), as
    `pip install -r requirements-gpu.txt` runs, and its newest result says it resolves."""
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("check_pins", ROOT / "scripts" / "check_pins.py")
    check_pins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_pins)
    files, _, options = check_pins.TARGETS["multi-GPU (CPython 3.11)"]
    assert files == ["requirements-gpu.txt"] and "--no-build-isolation" not in options
    newest = json.loads(max((ROOT / "benchmarks" / "results").glob("pins-*.json")).read_text())
    gpu = newest["targets"]["multi-GPU (CPython 3.11)"]
    assert gpu["resolves"] and set(_pins(ROOT / "requirements-gpu.txt")) <= set(gpu["installed"])
