"""The one-GPU backend, checked on a CPU: the backend choice, the device settings and memory plan per
GPU, where generation stops, the model files downloaded, and the GPU path's trainer (LoRA, TRL's
generate, the checkpoint server for before/after) run for one step with the device forced to the CPU
and the local 135M model, so only CUDA-specific lines stay untested. (Whether the pins resolve is
checked by scripts/check_pins.py, which needs the registry; scripts/gpu_smoke.py runs it all on a GPU.)"""

import dataclasses
import fnmatch
import os

import pytest
import torch
import verifiers as vf
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from helpers.grpo.backends import (
    GPU_MODEL,
    BackendUnavailable,
    choose_backend,
    cpu_has_bf16,
    cpu_precision,
    device_settings,
    lora_config,
    release_trainer,
    start_model,
)
from helpers.grpo.gpu_plan import (
    GIB,
    GPU_MODEL_SHAPE,
    PLAN_HEADROOM,
    eval_server_dtype,
    one_gpu_plan,
)
from helpers.grpo.rewards import RubricRewards
from helpers.grpo.step_timer import StepTimer
from helpers.serving import hf_child
from helpers.serving.gguf_convert import convert_gguf

T4, L4, A100, H100 = (7, 5), (8, 9), (8, 0), (9, 0)


def qwen3_base_like(folder):
    """The local SmolLM2's files, its tokenizer and generation config set up as Qwen3-0.6B-Base's are:
    eos <|endoftext|> (id 0 here) while the chat template ends each turn with <|im_end|> (id 2)."""
    model_dir = convert_gguf(quiet=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.eos_token = "<|endoftext|>"
    tokenizer.save_pretrained(folder)
    for name in ("config.json", "model.safetensors"):
        (folder / name).symlink_to(model_dir / name)
    (folder / "generation_config.json").write_text('{"bos_token_id": 0, "eos_token_id": 0}')
    return folder


def test_auto_picks_cpu_gpu_or_verifiers_by_gpu_count():
    assert [choose_backend("auto", gpus=n) for n in (0, 1, 2, 8)] == ["cpu", "gpu", "verifiers", "verifiers"]
    assert choose_backend("cpu", gpus=8) == "cpu" and choose_backend("gpu", gpus=4) == "gpu"
    with pytest.raises(BackendUnavailable, match="backend='gpu' needs at least 1 CUDA GPU, and this machine has 0"):
        choose_backend("gpu", gpus=0)
    with pytest.raises(BackendUnavailable, match="needs at least 2 CUDA GPUs .*vLLM.*has 1"):
        choose_backend("verifiers", gpus=1)
    with pytest.raises(ValueError, match="backend must be one of"):
        choose_backend("tpu")


def test_the_verifiers_recipe_needs_bf16_gpus(capsys):
    """Kaggle's 2 x T4: verifiers forces bf16 + flash_attention_2 and zero3.yaml is bf16, so "auto" trains
    with TRL on GPU 0 and says why; asking for the verifiers backend there is refused in plain words."""
    assert choose_backend("auto", capabilities=[T4, T4]) == "gpu"
    assert "not verifiers" in capsys.readouterr().out
    assert choose_backend("auto", capabilities=[A100, H100]) == "verifiers"
    assert choose_backend("auto", gpus=2, capabilities=[A100, T4]) == "gpu"
    assert choose_backend("auto", capabilities=[T4]) == "gpu"
    with pytest.raises(BackendUnavailable, match="compute capability 8.0.*GPU 0: 7.5.*backend='gpu'"):
        choose_backend("verifiers", capabilities=[T4, T4])


@pytest.mark.parametrize("capability, bf16", [(T4, False), (A100, True), (H100, True)])
def test_dtype_follows_the_gpu(capability, bf16):
    settings = device_settings("gpu", capability=capability, vllm_installed=False, memory_gib=15)
    assert settings["bf16"] is bf16 and settings["fp16"] is (not bf16)  # Colab's T4 (7.5) has no bfloat16
    assert settings["use_cpu"] is False and settings["use_vllm"] is False
    assert eval_server_dtype(capability) == ("bfloat16" if bf16 else "float32")  # never pure float16


def test_vllm_colocate_when_vllm_is_installed_and_the_gpu_has_bf16():
    settings = device_settings("gpu", capability=A100, vllm_installed=True, memory_gib=39.4)
    assert settings["use_vllm"] and settings["vllm_mode"] == "colocate"
    assert 0 < settings["vllm_gpu_memory_utilization"] <= 0.3  # the trainer needs the rest of the GPU
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    for backend in ("cpu", "verifiers"):
        assert set(device_settings(backend)) <= fields
    assert set(settings) <= fields
    # A T4: vLLM 0.11 would fall back from bfloat16 to pure float16 (TRL passes it no dtype): no vLLM.
    plan = one_gpu_plan(memory_gib=14.57, capability=T4, vllm_installed=True)
    assert not plan.use_vllm and "float16" in " ".join(plan.notes)


@pytest.mark.parametrize("gpu, memory_gib, capability, vllm, micro_batch", [
    ("T4", 14.57, T4, True, 4), ("L4", 22.03, L4, True, 4), ("L4", 22.03, L4, False, 8),
    ("A100 40GB", 39.39, A100, True, 16), ("H100 80GB", 79.18, H100, True, 16)])
def test_memory_plan_per_gpu(gpu, memory_gib, capability, vllm, micro_batch):
    """16 completions x 512 tokens per step in micro-batches that fit: TRL computes float32 logits over
    the whole micro-batch (16 x 512 x 151,936 x 4 B = 4.6 GiB a copy, 3 copies at peak), which a T4
    cannot hold next to the weights; gradient accumulation makes up the step."""
    plan = one_gpu_plan(memory_gib=memory_gib, capability=capability, vllm_installed=vllm, gpu=gpu)
    assert plan.per_device_train_batch_size == micro_batch
    assert plan.per_device_train_batch_size * plan.gradient_accumulation_steps == 16
    assert plan.estimate_gib["training peak"] <= PLAN_HEADROOM * memory_gib
    assert plan.estimate_gib["evaluation server, alone"] < memory_gib
    settings = plan.settings()
    assert settings["gradient_accumulation_steps"] == plan.gradient_accumulation_steps
    config = GRPOConfig(output_dir="unused", per_device_train_batch_size=plan.per_device_train_batch_size,
                        num_generations=4, **{**settings, "use_cpu": True, "bf16": False, "fp16": False})
    assert config.generation_batch_size == 16  # 4 prompts x 4 completions per optimizer step, as before
    if memory_gib < 16:  # the old plan: 16 completions in one pass, 3 copies of float32 logits alone
        assert 3 * 16 * 512 * 151_936 * 4 / GIB > PLAN_HEADROOM * memory_gib


def test_the_memory_plan_counts_the_real_model_and_lora():
    """GPU_MODEL_SHAPE against transformers' Qwen3 with Qwen3-0.6B's config (on the meta device: no
    download, no memory) and peft's LoRA of lora_config("gpu")."""
    from peft import get_peft_model
    from transformers import Qwen3Config

    config = Qwen3Config(vocab_size=151_936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                         num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    shape = GPU_MODEL_SHAPE
    assert sum(p.numel() for p in model.parameters()) == shape["params"]
    assert shape["kv_values_per_token"] == 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim
    peft_model = get_peft_model(model, lora_config("gpu"))
    assert sum(p.numel() for p in peft_model.parameters() if p.requires_grad) == shape["lora_params"]


def test_generation_stops_where_the_chat_template_ends_a_turn(tmp_path):
    """Qwen3-0.6B-Base ends text with <|endoftext|> but turns with <|im_end|>: stop at both, and make
    <|im_end|> TRL's eos (it cuts each completion after its first eos)."""
    tokenizer = AutoTokenizer.from_pretrained(qwen3_base_like(tmp_path / "qwen-like"))
    assert tokenizer.eos_token == "<|endoftext|>"
    assert hf_child.stop_token_ids(tokenizer) == [2, 0]
    settings = device_settings("gpu", tokenizer, capability=T4, vllm_installed=False, memory_gib=15)
    assert settings["generation_kwargs"] == {"eos_token_id": [2, 0]}
    assert tokenizer.eos_token == "<|im_end|>" and hf_child.stop_token_ids(tokenizer) == [2, 0]  # idempotent
    vllm = device_settings("gpu", tokenizer, capability=A100, vllm_installed=True, memory_gib=40)
    assert vllm["generation_kwargs"] == {"stop_token_ids": [2, 0]}  # vLLM's SamplingParams name
    smollm2 = AutoTokenizer.from_pretrained(convert_gguf(quiet=True))  # eos is already <|im_end|>
    assert "generation_kwargs" not in device_settings("cpu", smollm2) and smollm2.eos_token == "<|im_end|>"


def test_the_evaluation_server_stops_at_the_end_of_the_turn(tmp_path):
    """The checkpoint server's generator with a Qwen3-Base-like model: stopping only at the tokenizer's
    eos, SmolLM2 ran on here into invented turns ('The answer is 4.\nsystem\n\nuser\nI'm planning...'),
    hidden by skip_special_tokens."""
    torch.set_num_threads(1)
    generator = hf_child._Generator(str(qwen3_base_like(tmp_path / "qwen-like")), 1, "cpu", "float32")
    assert generator.stop_ids == [2, 0]
    reply = generator._generate([{"messages": [{"role": "user",
                                                "content": "Answer with a single number: what is 2 + 2?"}]}],
                                (48, 0.0, 1.0, 1, None))[0]
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop" and reply["usage"]["completion_tokens"] < 48, choice
    assert "user" not in choice["message"]["content"]


def test_start_model_downloads_every_file_of_a_model_folder(tmp_path, monkeypatch):
    """transformers 4.57 saves the chat template as chat_template.jinja: start_model must fetch it."""
    import huggingface_hub

    asked = {}
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, allow_patterns:
                        asked.update(repo=repo_id, patterns=allow_patterns) or str(tmp_path))
    assert start_model("gpu") == tmp_path and asked["repo"] == GPU_MODEL
    saved = tmp_path / "saved"
    AutoTokenizer.from_pretrained(convert_gguf(quiet=True)).save_pretrained(saved)
    config = transformers_tiny_config()
    AutoModelForCausalLM.from_config(config).save_pretrained(saved)
    files = sorted(path.name for path in saved.iterdir())
    assert "chat_template.jinja" in files
    assert [name for name in files if not any(fnmatch.fnmatch(name, p) for p in asked["patterns"])] == []


def transformers_tiny_config():
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=8)


def test_the_cpu_autocasts_to_bfloat16_only_with_bfloat16_instructions():
    """TRL's GRPOConfig turns bf16 on by default; on a CPU without bfloat16 instructions that is ~14x slower,
    on one with them about 1.7x faster (device_settings' docstring)."""
    assert device_settings("cpu", cpu_bf16=False)["bf16"] is False
    assert GRPOConfig(output_dir="unused", **device_settings("cpu", cpu_bf16=False)).bf16 is False
    assert device_settings("cpu")["bf16"] is cpu_has_bf16()
    assert GRPOConfig(output_dir="unused", **device_settings("cpu", cpu_bf16=True)).bf16 is True


def test_bfloat16_instructions_are_read_from_the_cpu_flags():
    amd_avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
    epyc_bf16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
    xeon_amx = "processor\t: 0\nflags\t\t: avx2 avx512f amx_bf16 amx_tile\n"
    assert not cpu_has_bf16(amd_avx2) and cpu_has_bf16(epyc_bf16) and cpu_has_bf16(xeon_amx)
    assert not cpu_has_bf16("")  # no flags line: float32
    assert not cpu_has_bf16("flags\t: avx512_bf16x\n")  # whole flags only


def test_the_precision_parameter_picks_the_cpus_precision_and_refuses_what_cannot_run():
    """notebook 02's `precision`: "auto" follows the CPU's flags, or the learner's own ACCELERATE_MIXED_PRECISION
    (set before the course was imported); "bfloat16" without the instructions (emulated, ~14x slower) and an
    ACCELERATE_MIXED_PRECISION CPU training cannot use are refused with what to set instead."""
    avx2, amx = "flags\t: avx2 fma\n", "flags\t: avx2 avx512f amx_bf16 amx_tile\n"
    assert [cpu_precision("auto", cpu, None) for cpu in (avx2, amx, "")] == ["float32", "bfloat16", "float32"]
    assert cpu_precision("float32", amx, None) == "float32" and cpu_precision("bfloat16", amx, None) == "bfloat16"
    assert cpu_precision("auto", amx, "no") == "float32" and cpu_precision("auto", amx, " BF16") == "bfloat16"
    assert cpu_precision("float32", amx, "bf16") == "float32"  # the parameter, said explicitly, wins
    with pytest.raises(ValueError, match="precision='float32'"):
        cpu_precision("bfloat16", avx2, None)
    with pytest.raises(ValueError, match="ACCELERATE_MIXED_PRECISION='bf16' .your environment. needs a CPU with"):
        cpu_precision("auto", avx2, "bf16")  # the learner's bf16 on a CPU without it: emulated, refused too
    with pytest.raises(ValueError, match="'fp16'.*Unset it"):
        cpu_precision("auto", amx, "fp16")
    with pytest.raises(ValueError, match="one of"):
        cpu_precision("fp16", amx, None)


def test_a_bf16_config_earlier_in_the_process_leaves_the_cpu_in_float32(monkeypatch):
    """transformers writes ACCELERATE_MIXED_PRECISION=bf16 into os.environ for a bf16 config (TRL's default, a
    GPU plan) and a later config with bf16=False keeps it: accelerate then autocast the CPU run to bfloat16,
    ~10x slower on an AVX2 CPU (notebook 02 took over 35 minutes in CI). The CPU settings say float32 there."""
    from unittest import mock

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    with mock.patch("transformers.training_args.is_torch_bf16_gpu_available", return_value=True):
        assert GRPOConfig(output_dir="unused", use_cpu=True).bf16  # TRL's default, as a learner might build it
    assert os.environ["ACCELERATE_MIXED_PRECISION"] == "bf16"  # what transformers leaves behind
    config = GRPOConfig(output_dir="unused", **device_settings("cpu", cpu_bf16=False))
    assert not config.bf16 and os.environ["ACCELERATE_MIXED_PRECISION"] == "no"


def test_lora_only_on_the_gpu():
    assert lora_config("cpu") is None
    config = lora_config("gpu")
    assert config.r == 32 and config.target_modules == "all-linear"


@pytest.mark.slow
def test_gpu_path_trains_a_step_with_lora_and_frees_the_trainer(gsm8k_dir, tmp_path):
    """The notebook's GPU branch with the device forced to the CPU: TRL's GRPOTrainer (generate) with
    LoRA and the GPU's settings but float32 on the CPU, then the merged model, with the trainer freed
    for the evaluation server (which serves the merged weights in tests/test_gpu_smoke.py's dry run)."""
    model_dir = convert_gguf(quiet=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(qwen3_base_like(tmp_path / "qwen-like"))  # stops as Qwen3-Base's
    env = vf.load_environment("gsm8k-course", variant="hash", num_examples=8, num_eval_examples=2)

    def length_parity(completion, **kwargs) -> float:  # a reward that differs within every group
        return float(len(completion[-1]["content"]) % 2)

    rewards = RubricRewards(vf.Rubric(funcs=[length_parity], weights=[1.0]))
    device = {**device_settings("gpu", tokenizer, capability=A100, vllm_installed=False, memory_gib=40),
              "use_cpu": True, "bf16": False}  # forced to the CPU: the only change from a GPU run
    config = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=8, learning_rate=1e-3, logging_steps=1,
                        save_strategy="no", report_to="none", reward_weights=rewards.weights, **device)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
                          train_dataset=env.dataset.select_columns(["prompt", "answer"]),
                          peft_config=lora_config("gpu"))
    trainer.add_callback(StepTimer(trainer, rewards))
    assert trainer.generation_config.eos_token_id == [2, 0] and trainer.eos_token_id == 2  # <|im_end|> first
    trainer.train()
    assert trainer.state.global_step == 1
    import gc
    import weakref

    adam_moment = weakref.ref(next(iter(trainer.optimizer.state.values()))["exp_avg"])
    trained = release_trainer(trainer)  # what the notebook does before the final evaluation
    gc.collect()
    assert adam_moment() is None, "Adam's state outlived the trainer (transformers' CallbackHandler keeps it)"
    assert not hasattr(trained, "merge_and_unload")  # a plain transformers model again
    assert trainer.optimizer is None and trainer.model is None and trained.device.type == "cpu"
    original = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()
    assert any(not torch.equal(original[k], v) for k, v in trained.state_dict().items() if k in original)
