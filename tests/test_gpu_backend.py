"""The one-GPU backend, checked on a CPU: the backend choice, the device settings per GPU, and the
GPU path's trainer (LoRA, TRL's generate, the checkpoint server for before/after) run for one step
with the device forced to the CPU and the local 135M model, so only CUDA-specific lines stay untested.
(Whether the pins resolve is checked by scripts/check_pins.py, which needs the registry.)"""

import dataclasses

import pytest
import torch
import verifiers as vf
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from helpers import grpo
from helpers.local.gguf_convert import convert_gguf
from helpers.local.policy_server import CheckpointServer


def test_auto_picks_cpu_gpu_or_verifiers_by_gpu_count():
    assert [grpo.choose_backend("auto", gpus=n) for n in (0, 1, 2, 8)] == ["cpu", "gpu", "verifiers", "verifiers"]
    assert grpo.choose_backend("cpu", gpus=8) == "cpu" and grpo.choose_backend("gpu", gpus=4) == "gpu"
    with pytest.raises(grpo.BackendUnavailable, match="backend='gpu' needs at least 1 CUDA GPU, and this machine has 0"):
        grpo.choose_backend("gpu", gpus=0)
    with pytest.raises(grpo.BackendUnavailable, match="needs at least 2 CUDA GPUs .*vLLM.*has 1"):
        grpo.choose_backend("verifiers", gpus=1)
    with pytest.raises(ValueError, match="backend must be one of"):
        grpo.choose_backend("tpu")


@pytest.mark.parametrize("capability, bf16", [((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_dtype_follows_the_gpu(capability, bf16):
    settings = grpo.device_settings("gpu", capability=capability, vllm_installed=False)
    assert settings["bf16"] is bf16 and settings["fp16"] is (not bf16)  # Colab's T4 (7.5) has no bfloat16
    assert settings["use_cpu"] is False and settings["use_vllm"] is False


def test_vllm_colocate_when_vllm_is_installed():
    settings = grpo.device_settings("gpu", capability=(8, 0), vllm_installed=True)
    assert settings["use_vllm"] and settings["vllm_mode"] == "colocate"
    assert 0 < settings["vllm_gpu_memory_utilization"] <= 0.5  # the trainer needs the rest of the GPU
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    for backend in ("cpu", "verifiers"):
        assert set(grpo.device_settings(backend)) <= fields
    assert set(settings) <= fields


def test_the_cpu_never_autocasts_to_bfloat16():
    """TRL's GRPOConfig turns bf16 on by default; on a CPU without bfloat16 instructions that is ~20x slower."""
    assert grpo.device_settings("cpu")["bf16"] is False
    assert GRPOConfig(output_dir="unused", **grpo.device_settings("cpu")).bf16 is False


def test_lora_only_on_the_gpu():
    assert grpo.lora_config("cpu") is None
    config = grpo.lora_config("gpu")
    assert config.r == 32 and config.target_modules == "all-linear"


def test_gpu_path_trains_a_step_with_lora_and_serves_the_merged_weights(gsm8k_dir, tmp_path):
    """The notebook's GPU branch with the device forced to the CPU: TRL's GRPOTrainer (generate) with
    LoRA and the GPU's settings but float32 on the CPU, then the merged model through the checkpoint
    server that evaluates before and after training."""
    model_dir = convert_gguf(quiet=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    env = vf.load_environment("gsm8k-course", variant="hash", num_examples=8, num_eval_examples=2)

    def length_parity(completion, **kwargs) -> float:  # a reward that differs within every group
        return float(len(completion[-1]["content"]) % 2)

    rewards = grpo.RubricRewards(vf.Rubric(funcs=[length_parity], weights=[1.0]))
    device = {**grpo.device_settings("gpu", capability=(8, 0), vllm_installed=False),
              "use_cpu": True, "bf16": False}  # forced to the CPU: the only change from a GPU run
    config = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=8, learning_rate=1e-3, logging_steps=1,
                        save_strategy="no", report_to="none", reward_weights=rewards.weights, **device)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
                          train_dataset=env.dataset.select_columns(["prompt", "answer"]),
                          peft_config=grpo.lora_config("gpu"))
    trainer.add_callback(grpo.StepTimer(trainer, rewards))
    trainer.train()
    assert trainer.state.global_step == 1
    trained = grpo.merged(trainer.model)
    assert not hasattr(trained, "merge_and_unload")  # a plain transformers model again
    original = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()
    assert any(not torch.equal(original[k], v) for k, v in trained.state_dict().items() if k in original)
    with CheckpointServer(folder=tmp_path / "served", tokenizer=tokenizer, name="gpu-path", device="cpu",
                          dtype="float32", max_batch=2) as server:
        server.sync(trained, step=1)
        endpoint = server.endpoint()
        reply = endpoint.client.chat.completions.create(model=endpoint.model, max_tokens=4,
                                                        messages=[{"role": "user", "content": "2 + 2 ="}])
    assert reply.choices[0].message.content and server.step == 1
