"""CPU GRPO helpers: the reward adapter, the GGUF conversion, resume after an interruption, tables."""

import asyncio
import json

import pandas as pd
import pytest
import verifiers as vf
from transformers import TrainerCallback

from helpers import grpo
from helpers.env import build_gsm8k_env

COMPLETIONS = [
    "3 + 5 = 8 apples.\n#### 8",          # right format, right answer (gold is set below)
    "The answer is 9.\n#### 9",            # right format, wrong answer
    "I think the answer is eight.",       # no format
    "#### 1,200.00",                       # format with a number written the long way
]


@pytest.fixture(scope="module")
def env(gsm8k_dir):
    return build_gsm8k_env(variant="hash", num_examples=8, num_eval_examples=2)


def _batch(env):
    example = env.dataset[0]
    prompts = [example["prompt"]] * len(COMPLETIONS)
    completions = [[{"role": "assistant", "content": text}] for text in COMPLETIONS]
    answers = ["8", "8", "8", "1200"]
    return prompts, completions, answers


def test_adapter_gives_the_rubric_numbers(env):
    prompts, completions, answers = _batch(env)
    n = len(completions)
    expected = asyncio.run(env.rubric.score_rollouts(
        prompts=prompts, completions=completions, answers=answers,
        states=[{"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}} for _ in range(n)],
        tasks=["default"] * n, infos=[{}] * n))
    adapter = grpo.RubricRewards(env.rubric)
    scored = adapter.score(prompts, completions, answers)
    assert scored["reward"] == pytest.approx(expected.reward)
    for name, values in expected.metrics.items():
        assert scored[name] == pytest.approx(values)
    assert scored["reward"] == pytest.approx([1.5, 0.5, 0.0, 1.5])
    # As TRL calls them: one function per component, weighted by the rubric's weights.
    batches_before = adapter.batches
    per_func = [f(prompts=prompts, completions=completions, answer=answers, question=None)
                for f in adapter.reward_funcs]
    assert [f.__name__ for f in adapter.reward_funcs] == env.rubric.get_reward_func_names()
    weighted = [sum(w * v[i] for w, v in zip(adapter.weights, per_func)) for i in range(n)]
    assert weighted == pytest.approx(expected.reward)
    assert adapter.batches == batches_before + 1  # one scoring call for all the components of a batch


def test_a_raising_reward_function_scores_that_rollout_zero_and_training_goes_on():
    def correct(completion, answer, **kwargs) -> float:
        return float(answer in completion[-1]["content"])

    def fragile(completion, **kwargs) -> float:
        if "boom" in completion[-1]["content"]:
            raise ValueError("cannot parse boom")
        return 1.0

    adapter = grpo.RubricRewards(vf.Rubric(funcs=[correct, fragile], weights=[1.0, 0.5]))
    completions = [[{"role": "assistant", "content": t}] for t in ("8", "8 boom", "7")]
    scored = adapter.score([[]] * 3, completions, ["8"] * 3)
    assert scored["reward"] == pytest.approx([1.5, 0.0, 0.5])
    assert scored["correct"] == [1.0, 0.0, 0.0] and scored["fragile"] == [1.0, 0.0, 1.0]
    assert scored["errors"] == [{"rollout": 1, "reward_func": "fragile", "error": "ValueError: cannot parse boom"}]
    # The next batch is scored normally.
    assert adapter.score([[]], completions[:1], ["8"])["reward"] == [1.5]


def test_conversion_matches_the_llama_cpp_server(local_server):
    from helpers.local.gguf_convert import check_against_server, convert_gguf

    folder = convert_gguf()
    config = json.loads((folder / "config.json").read_text())
    assert config["rope_theta"] == 100000.0 and "rope_parameters" not in config
    assert "quantization_config" not in config
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "GPT2Tokenizer"
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    check = check_against_server(folder, local_server.endpoint(), max_new_tokens=24)
    print(json.dumps(check, indent=1))
    # llama.cpp computes with the 4-bit blocks, transformers with float32 copies: a near-tie between
    # two tokens may go either way later on, but the start of the answer must be the same.
    assert check["common_prefix_chars"] >= 15, check
    assert "3 + 5 = 8" in check["transformers"] and "3 + 5 = 8" in check["llama.cpp"], check


def test_tokenizer_has_no_extra_bos_or_token_type_ids():
    from transformers import AutoTokenizer

    from helpers.local.gguf_convert import convert_gguf

    tokenizer = AutoTokenizer.from_pretrained(convert_gguf(quiet=True))
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert ids[0] == 1 and ids[1] != 1  # one <|im_start|>, not two
    assert "token_type_ids" not in tokenizer("hi")


class _InterruptAfterFirstSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt


def test_interrupted_run_resumes_from_last_checkpoint(env, tmp_path, monkeypatch):
    from helpers.local.gguf_convert import convert_gguf

    model_dir = convert_gguf(quiet=True)  # the shared cache, before runs/ moves to tmp
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    settings = grpo.GRPOSettings(max_steps=2, prompts_per_step=1, num_generations=2, max_completion_tokens=8,
                                 save_steps=1, run_name="resume_test", threads=1)
    trainer = grpo.build_trainer(env, settings, model_dir=model_dir, callbacks=[_InterruptAfterFirstSave()])
    with pytest.raises(KeyboardInterrupt):
        grpo.train(trainer, quiet=True)
    assert grpo.last_checkpoint(settings.output_dir()).name == "checkpoint-1"

    trainer = grpo.build_trainer(env, settings, model_dir=model_dir)
    result = grpo.train(trainer, quiet=True)
    assert result.resumed_from.name == "checkpoint-1"
    assert trainer.state.global_step == 2
    assert list(result.metrics.index) == [1, 2]  # step 1 from the checkpoint's log, step 2 new
    assert {"generation_s", "update_s", "reward", "correct_answer", "hash_format"} <= set(result.metrics.columns)
    assert (result.model_dir / "model.safetensors").is_file()

    # Other settings are another run: the old checkpoints are not resumed.
    other = grpo.GRPOSettings(**{**settings.__dict__, "learning_rate": 2e-5})
    grpo.build_trainer(env, other, model_dir=model_dir)
    assert grpo.last_checkpoint(other.output_dir()) is None


def test_metrics_table_and_summary():
    history = [
        {"loss": 0.0, "reward": r, "rewards/hash_format/mean": r * 2, "completions/mean_length": 100 + s,
         "timing/generation_s": 3.0, "timing/update_s": 1.0, "step": s}
        for s, r in enumerate([0.0, 0.1, 0.0, 0.2, 0.1, 0.3, 0.4, 0.5, 0.5, 0.6, 0.7], start=1)
    ] + [{"train_loss": 0.0, "step": 11}]
    table = grpo.metrics_table(history)
    assert list(table.index) == list(range(1, 12))
    assert table.loc[3, "hash_format"] == 0.0 and table.loc[11, "completion_length"] == 111
    summary = grpo.learning_summary(table)
    assert summary["first"] == pytest.approx(0.08) and summary["last"] == pytest.approx(0.54)
    fig = grpo.plot_metrics(table)
    assert len(fig.axes) >= 5


def test_compare_evals_table():
    from helpers.evaluation import EvalRun

    def run(reward):
        return EvalRun(name="x", rollouts=pd.DataFrame({"reward": [reward]}),
                       info={"model": "m", "endpoint": "local", "params": {"num_examples": 1},
                             "summary": {"reward": reward, "hash_format": reward,
                                         "accuracy": {"mean": 0.0, "ci95": [0.0, 0.5], "n": 1}}})

    table = grpo.compare_evals({"before": run(0.1), "after": run(0.4), "notebook 01": None})
    assert list(table.index) == ["before", "after"]  # a missing reference run is left out
    assert table.loc["after", "reward"] == 0.4
    grpo.plot_before_after(table)
