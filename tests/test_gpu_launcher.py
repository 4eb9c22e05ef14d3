"""The verifiers (>= 2 GPU) backend, checked on a CPU: commands, config, pins, environment. Nothing runs."""

import ast
import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from helpers.gpu import launcher as gpu_plan

ROOT = Path(__file__).resolve().parent.parent


def _train_script():
    spec = importlib.util.spec_from_file_location("train_gsm8k_verifiers", ROOT / "training" / "train_gsm8k_verifiers.py")
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
    assert plan.train_env["NCCL_CUMEM_ENABLE"] == "0" and plan.train_env["NCCL_CUMEM_HOST_ENABLE"] == "0"
    assert "vf-vllm" in plan.shell() and "NCCL_CUMEM_ENABLE=0" in plan.shell()
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
    assert "backend='cpu'" in checks.loc["2+ CUDA GPUs", "if not ok"]
    assert checks.loc["file training/zero3.yaml", "ok"] and checks.loc["file requirements-gpu.txt", "ok"]


def test_run_plan_refuses_without_gpus_and_starts_nothing(monkeypatch):
    started = []
    monkeypatch.setattr(gpu_plan.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr("helpers.install_check.cuda_gpu_count", lambda: 0)
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
    for package in ("vllm", "flash-attn", "deepspeed", "transformers", "trl", "verifiers"):
        assert package in gpu, f"requirements-gpu.txt must pin {package}"
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
