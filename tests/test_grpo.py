"""CPU GRPO pieces: the reward adapter, GGUF conversion both ways, the llama.cpp policy server, the
server-rollout trainer, the step timer, resume after an interruption, and the run folder's rules."""

import asyncio
import json
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import verifiers as vf
from fake_completion_server import FakeCompletionServer
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from word_arithmetic import hash_lines

from helpers.grpo import run_folder
from helpers.grpo.backends import default_threads, device_settings
from helpers.grpo.policy_server import PolicyServer
from helpers.grpo.rewards import RewardFunctionFailing, RubricRewards
from helpers.grpo.server_rollouts import ServerRolloutGRPOTrainer, sampling_mismatch
from helpers.grpo.step_timer import StepTimer
from helpers.grpo.training_log import learning_summary, metrics_table, plot_metrics
from helpers.grpo.verdict import (
    CUT,
    FORMAT,
    MULTI,
    RIGHT,
    behaviour,
    changes,
    compare_evals,
    plot_before_after,
    side_by_side,
    what_it_learned,
)
from helpers.gsm8k_env import build_gsm8k_env
from helpers.results import design_table, hack_table, plot_sampled_accuracy
from helpers.serving.child_process import EndpointError
from helpers.serving.gguf_convert import CHECK_PROMPT, convert_gguf, greedy_continuation
from helpers.serving.llama_server import THREADS_VARIABLE

COMPLETIONS = [
    "3 + 5 = 8 apples.\n#### 8",          # right format, right answer (gold is set below)
    "The answer is 9.\n#### 9",            # right format, wrong answer
    "I think the answer is eight.",       # no format
    "#### 1,200.00",                       # format with a number written the long way
]


@pytest.fixture(scope="module")
def env(gsm8k_dir):
    return build_gsm8k_env(variant="hash", num_examples=8, num_eval_examples=2)


@pytest.fixture(scope="module")
def model_dir():
    return convert_gguf(quiet=True)


def _batch(env):
    example = env.dataset[0]
    prompts = [example["prompt"]] * len(COMPLETIONS)
    completions = [[{"role": "assistant", "content": text}] for text in COMPLETIONS]
    answers = ["8", "8", "8", "1200"]
    return prompts, completions, answers


# ----------------------------------------------------------------------------- rewards


def test_adapter_gives_the_rubric_numbers(env):
    prompts, completions, answers = _batch(env)
    n = len(completions)
    expected = asyncio.run(env.rubric.score_rollouts(
        prompts=prompts, completions=completions, answers=answers,
        states=[{"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}} for _ in range(n)],
        tasks=["default"] * n, infos=[{}] * n))
    adapter = RubricRewards(env.rubric)
    scored = adapter.score(prompts, completions, answers)
    assert scored["reward"] == pytest.approx(expected.reward) == [1.5, 0.5, 0.0, 1.5]
    for name, values in expected.metrics.items():
        assert scored[name] == pytest.approx(values)
    # As TRL calls them: one function per component, weighted by the rubric's weights.
    batches_before = adapter.batches
    per_func = [f(prompts=prompts, completions=completions, answer=answers, question=None)
                for f in adapter.reward_funcs]
    assert [f.__name__ for f in adapter.reward_funcs] == env.rubric.get_reward_func_names()
    weighted = [sum(w * v[i] for w, v in zip(adapter.weights, per_func)) for i in range(n)]
    assert weighted == pytest.approx(expected.reward)
    assert adapter.batches == batches_before + 1  # one scoring call for all the components of a batch


def test_a_new_batch_is_scored_anew_even_in_a_reused_list(env):
    """TRL may hand over a new batch in a list object at the address of the last one: the adapter
    recognises batches by their content, not by id()."""
    prompts, completions, answers = _batch(env)
    adapter = RubricRewards(env.rubric)
    first = adapter.reward_funcs[0](prompts=prompts, completions=completions, answer=answers)
    completions[:] = list(reversed(completions))  # same list object, other completions
    answers[:] = list(reversed(answers))
    second = adapter.reward_funcs[0](prompts=prompts, completions=completions, answer=answers)
    assert second == list(reversed(first)) and adapter.batches == 2


def test_a_raising_reward_function_scores_that_rollout_zero_and_training_goes_on():
    def correct(completion, answer, **kwargs) -> float:
        return float(answer in completion[-1]["content"])

    def fragile(completion, **kwargs) -> float:
        if "boom" in completion[-1]["content"]:
            raise ValueError("cannot parse boom")
        return 1.0

    adapter = RubricRewards(vf.Rubric(funcs=[correct, fragile], weights=[1.0, 0.5]))
    completions = [[{"role": "assistant", "content": t}] for t in ("8", "8 boom", "7")]
    scored = adapter.reward_funcs[0](prompts=[[]] * 3, completions=completions, answer=["8"] * 3)
    assert scored == [1.0, 0.0, 0.0]
    assert adapter.last_batch["scores"]["reward"] == pytest.approx([1.5, 0.0, 0.5])
    assert adapter.error_log == [{"batch": 1, "rollout": 1, "reward_func": "fragile",
                                  "error": "ValueError: cannot parse boom"}]


def test_a_reward_function_failing_on_most_rollouts_stops_training():
    def broken(completion, **kwargs) -> float:
        raise KeyError("answer")

    adapter = RubricRewards(vf.Rubric(funcs=[broken], weights=[1.0]))
    completions = [[{"role": "assistant", "content": str(i)}] for i in range(4)]
    with pytest.raises(RewardFunctionFailing, match=r"broken raised on 4 of the 4 rollouts"):
        adapter.reward_funcs[0](prompts=[[]] * 4, completions=completions, answer=["1"] * 4)


# ----------------------------------------------------------------------------- GGUF both ways, policy server


@pytest.mark.slow
def test_conversion_matches_the_llama_cpp_server(local_server, model_dir):
    from helpers.serving.gguf_convert import check_against_server

    config = json.loads((model_dir / "config.json").read_text())
    assert config["rope_theta"] == 100000.0 and "rope_parameters" not in config
    assert "quantization_config" not in config
    tokenizer_config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "GPT2Tokenizer"
    assert tokenizer_config["eos_token"] == "<|im_end|>"
    check = check_against_server(model_dir, local_server.endpoint(), max_new_tokens=24)
    print(json.dumps(check, indent=1))
    # llama.cpp computes with the 4-bit blocks, transformers with float32 copies: a near-tie between
    # two tokens may go either way later on, but the start of the answer must be the same.
    assert check["common_prefix_chars"] >= 15, check
    assert "3 + 5 = 8" in check["transformers"] and "3 + 5 = 8" in check["llama.cpp"], check


def test_tokenizer_has_no_extra_bos_or_token_type_ids(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert ids[0] == 1 and ids[1] != 1  # one <|im_start|>, not two
    assert "token_type_ids" not in tokenizer("hi")


@pytest.fixture(scope="module")
def model(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["F16", "F32"])
def test_exported_weights_generate_the_same_text_on_llama_cpp(model, model_dir, tmp_path, precision):
    """The weight sync: the trainer's weights, written as GGUF, give llama.cpp the same greedy text."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ours = greedy_continuation(model, tokenizer, max_new_tokens=32)
    with PolicyServer(folder=tmp_path, name="export-test", precision=precision, parallel=1) as server:
        server.sync(model, step=0)
        endpoint = server.endpoint()
        reply = endpoint.client.chat.completions.create(model=endpoint.model, messages=CHECK_PROMPT,
                                                        max_tokens=32, temperature=0)
    assert reply.choices[0].message.content.strip() == ours.strip()


@pytest.mark.slow
def test_policy_server_samples_token_ids_with_log_probabilities(model, model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = tokenizer.apply_chat_template(CHECK_PROMPT, add_generation_prompt=True)
    with PolicyServer(folder=tmp_path, name="sample-test") as server:
        took = server.sync(model, step=3)
        assert server.step == 3 and server.syncs == 1 and took > 0
        completions = server.complete([prompt, prompt[:-3]], n=3, max_tokens=24, temperature=0.9, seed=7)
        assert len(completions) == 6
        for completion in completions:
            assert 0 < len(completion.token_ids) <= 25 and len(completion.logprobs) == len(completion.token_ids)
            assert all(lp <= 0 for lp in completion.logprobs if lp is not None)
            assert sum(lp is not None for lp in completion.logprobs) >= len(completion.token_ids) // 2
            assert completion.finished == (completion.token_ids[-1] == tokenizer.eos_token_id)
        # the same seed gives the same samples; float16 on the server, float32 here: close policies
        again = server.complete([prompt], n=1, max_tokens=24, temperature=0.9, seed=7)
        assert again[0].token_ids == completions[0].token_ids
        mismatch = sampling_mismatch(server, model, [prompt], n=2, max_tokens=24)
    assert mismatch["tokens"] > 10 and mismatch["mean_abs_logprob_diff"] < 0.05, mismatch


# ----------------------------------------------------------------------------- trainer, run folder


def _varied_rubric() -> vf.Rubric:
    """A reward that differs within every group (the completions' lengths differ), so one step always
    has signal: the trainer tests need weights that move, not a model that learns GSM8K."""
    def length_parity(completion, **kwargs) -> float:
        return float(len(completion[-1]["content"]) % 2)

    return vf.Rubric(funcs=[length_parity], weights=[1.0])


def _config(output_dir, **overrides) -> GRPOConfig:
    settings = {"output_dir": str(output_dir), "max_steps": 2, "per_device_train_batch_size": 4,
                "num_generations": 4, "max_completion_length": 12, "learning_rate": 1e-4, "temperature": 1.0,
                "seed": 0, "logging_steps": 1, "save_strategy": "steps", "save_steps": 1, "save_total_limit": 1,
                "report_to": "none", "lr_scheduler_type": "constant", "max_prompt_length": 256,
                **device_settings("cpu")}  # bfloat16 autocast only where the CPU has the instructions
    return GRPOConfig(**{**settings, **overrides})


@pytest.mark.slow
def test_server_rollouts_train_and_log_the_time_split(env, model_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rewards = RubricRewards(_varied_rubric())
    config = _config(tmp_path / "run", reward_weights=rewards.weights, save_strategy="no")
    run_folder.prepare_run_dir(config)
    with PolicyServer(folder=tmp_path, name="trainer-test", parallel=4) as server:
        server.sync(model, step=0)
        trainer = ServerRolloutGRPOTrainer(
            model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
            train_dataset=env.dataset.select_columns(["prompt", "answer"]), policy_server=server)
        trainer.add_callback(StepTimer(trainer, rewards, server))
        trainer.train()
        assert server.syncs == 2  # step 0's weights before training, step 1's after the first update
    metrics = metrics_table(trainer.state.log_history)
    assert list(metrics.index) == [1, 2]
    assert metrics.loc[2, "sync_s"] > 0 and metrics.loc[1, "sync_s"] == 0  # step 1 used the weights synced before
    assert (metrics[["generation_s", "scoring_s", "update_s", "step_s"]] > 0).all().all()
    assert len(trainer.last_sampling_logprobs) == 4 and all(trainer.last_sampling_logprobs)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


class _InterruptAfterFirstSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt


@pytest.mark.slow
def test_interrupted_run_resumes_from_last_checkpoint(env, model_dir, tmp_path, capsys):
    rewards = RubricRewards(_varied_rubric())

    def trainer_for(config, callbacks=None):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        trainer = GRPOTrainer(model=model, processing_class=AutoTokenizer.from_pretrained(model_dir),
                              args=config, reward_funcs=rewards.reward_funcs, callbacks=callbacks,
                              train_dataset=env.dataset.select_columns(["prompt", "answer"]))
        trainer.add_callback(StepTimer(trainer, rewards))
        return trainer

    config = _config(tmp_path / "run", reward_weights=rewards.weights)
    run_folder.prepare_run_dir(config, resume="auto", variant="hash")
    trainer = trainer_for(config, [_InterruptAfterFirstSave()])
    with pytest.raises(KeyboardInterrupt), run_folder.explain_failures(config.output_dir):
        trainer.train(resume_from_checkpoint=run_folder.last_checkpoint(config.output_dir))
    assert "The last checkpoint is checkpoint-1: run this cell again" in capsys.readouterr().out

    run_folder.prepare_run_dir(config, resume="auto", variant="hash")  # same settings: kept for resuming
    assert "will resume from checkpoint-1" in capsys.readouterr().out
    trainer = trainer_for(config)
    trainer.train(resume_from_checkpoint=run_folder.last_checkpoint(config.output_dir))
    assert trainer.state.global_step == 2
    metrics = metrics_table(trainer.state.log_history)
    assert list(metrics.index) == [1, 2]  # step 1 from the checkpoint's log, step 2 new
    assert {"generation_s", "update_s", "reward", "length_parity"} <= set(metrics.columns)


def test_other_settings_move_the_earlier_run_aside_and_never_delete_it(tmp_path, capsys):
    config = _config(tmp_path / "run")
    run_folder.prepare_run_dir(config, variant="hash")
    (tmp_path / "run" / "final").mkdir()
    (tmp_path / "run" / "final" / "model.safetensors").write_text("weights")
    run_folder.prepare_run_dir(_config(tmp_path / "run", learning_rate=2e-5), variant="hash")
    said = capsys.readouterr().out
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("run-")]
    assert len(kept) == 1 and (kept[0] / "final" / "model.safetensors").read_text() == "weights"
    assert "starting over (the settings learning_rate differ); the earlier run is kept in" in said
    assert not (tmp_path / "run" / "final").exists()


class _Rewards:
    """What prepare_run_dir reads of a RubricRewards: the functions, their names and weights."""

    def __init__(self, *functions, weights=None):
        self.functions, self.names = list(functions), [f.__name__ for f in functions]
        self.weights = weights or [1.0] * len(functions)


def _kernel_function(source: str):
    """A function defined from `source`, as a notebook cell would define it (no file behind it)."""
    names: dict = {}
    exec(compile(source, "<cell>", "exec"), names)  # noqa: S102 - a cell's function, made as the kernel makes it
    return next(v for k, v in names.items() if not k.startswith("__"))


PLACEHOLDER_SOURCE = ("def last_number_right(completion, answer, **kwargs):\n"
                      "    return 1.0 if answer in completion[-1]['content'] else 0.0\n")
SOLVED_SOURCE = ("def last_number_right(completion, answer, **kwargs):\n"
                 "    return 1.0 if completion[-1]['content'].split()[-1] == answer else 0.0\n")


def test_another_reward_starts_the_run_over_and_the_same_one_resumes(tmp_path, capsys):
    """Issue 43, item 1: a run trained on the placeholder is not resumed for the learner's finished reward."""
    config = _config(tmp_path / "run")
    placeholder = _Rewards(_kernel_function(PLACEHOLDER_SOURCE))
    run_folder.prepare_run_dir(config, rewards=placeholder, reward_is_yours=False)
    (tmp_path / "run" / "checkpoint-2").mkdir()
    assert run_folder.trained_reward(tmp_path / "run")["reward_is_yours"] is False

    again = _Rewards(_kernel_function(PLACEHOLDER_SOURCE))  # the same code, defined again (a new kernel)
    run_folder.prepare_run_dir(config, rewards=again, reward_is_yours=False)
    assert "will resume from checkpoint-2" in capsys.readouterr().out

    solved = _Rewards(_kernel_function(SOLVED_SOURCE))  # same name, other code
    run_folder.prepare_run_dir(config, rewards=solved, reward_is_yours=True)
    said = capsys.readouterr().out
    assert "starting over (the reward functions differ)" in said
    assert not (tmp_path / "run" / "checkpoint-2").exists()
    assert run_folder.trained_reward(tmp_path / "run") == {"reward_is_yours": True,
                                                          "reward_functions": ["last_number_right"]}
    (tmp_path / "run" / "checkpoint-2").mkdir()
    run_folder.prepare_run_dir(config, rewards=_Rewards(solved.functions[0], weights=[0.5]), reward_is_yours=True)
    assert "starting over (the reward functions differ)" in capsys.readouterr().out  # a weight is the reward too


def test_code_identity_tells_rewards_apart_by_their_code():
    import functools

    first, second = _kernel_function(PLACEHOLDER_SOURCE), _kernel_function(SOLVED_SOURCE)
    assert run_folder.code_identity(first) == run_folder.code_identity(_kernel_function(PLACEHOLDER_SOURCE))
    assert run_folder.code_identity(first) != run_folder.code_identity(second)

    @functools.wraps(second)
    def wrapped(*args, **kwargs):
        return second(*args, **kwargs)

    assert run_folder.code_identity(wrapped) == run_folder.code_identity(second)  # decorators unwrapped
    assert run_folder.code_identity(test_code_identity_tells_rewards_apart_by_their_code) != \
        run_folder.code_identity(first)  # functions with a source file are read from it


@pytest.mark.slow
def test_a_finished_run_is_loaded_and_not_trained_past_max_steps(env, model_dir, tmp_path, capsys):
    """Issue 43, item 1: resuming from a checkpoint at max_steps trains no further step (transformers' train()
    would run one), and the trainer holds the checkpoint's weights and log."""
    from safetensors.torch import load_file

    rewards = RubricRewards(_varied_rubric())

    def trainer_for(config):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        return GRPOTrainer(model=model, processing_class=AutoTokenizer.from_pretrained(model_dir), args=config,
                           reward_funcs=rewards.reward_funcs,
                           train_dataset=env.dataset.select_columns(["prompt", "answer"]))

    config = _config(tmp_path / "run", reward_weights=rewards.weights, save_steps=2)
    run_folder.prepare_run_dir(config, rewards=rewards)
    first = trainer_for(config)
    assert not run_folder.load_if_finished(first, run_folder.last_checkpoint(config.output_dir))
    first.train()
    checkpoint = run_folder.last_checkpoint(config.output_dir)
    assert Path(checkpoint).name == "checkpoint-2"

    run_folder.prepare_run_dir(config, rewards=rewards)
    assert "will resume from checkpoint-2" in capsys.readouterr().out
    second = trainer_for(config)
    assert run_folder.load_if_finished(second, checkpoint)
    assert "already holds all 2 steps" in capsys.readouterr().out
    assert second.state.global_step == 2 and list(metrics_table(second.state.log_history).index) == [1, 2]
    saved = load_file(str(Path(checkpoint) / "model.safetensors"))
    loaded = second.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in saved.items())
    assert not any((tmp_path / "run").glob("checkpoint-3"))


def test_a_run_trained_in_bfloat16_is_resumed_on_a_cpu_without_it(tmp_path, capsys):
    """The instructor's run (a CPU with bfloat16 instructions) handed to a learner's laptop (float32) resumes."""
    run_folder.prepare_run_dir(_config(tmp_path / "run", **device_settings("cpu", cpu_bf16=True)), variant="hash")
    (tmp_path / "run" / "checkpoint-2").mkdir()
    run_folder.prepare_run_dir(_config(tmp_path / "run", **device_settings("cpu", cpu_bf16=False)), variant="hash")
    assert (tmp_path / "run" / "checkpoint-2").is_dir() and [p.name for p in tmp_path.iterdir()] == ["run"]
    assert "starting over" not in capsys.readouterr().out


def test_restarts_within_the_same_second_keep_every_earlier_run(tmp_path, monkeypatch, capsys):
    from datetime import datetime

    class SameSecond(datetime):  # the aside folder's name has 1 s resolution
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 4, 15, 0, 0)

    monkeypatch.setattr(run_folder, "datetime", SameSecond)
    for i, learning_rate in enumerate((1e-5, 2e-5, 3e-5)):
        run_folder.prepare_run_dir(_config(tmp_path / "run", learning_rate=learning_rate), variant="hash")
        (tmp_path / "run" / "weights.txt").write_text(f"run {i}")
    kept = {p.name: (p / "weights.txt").read_text() for p in tmp_path.iterdir() if p.name != "run"}
    assert kept == {"run-20261204-150000": "run 0", "run-20261204-150000-2": "run 1"}
    said = capsys.readouterr().out.splitlines()
    assert said[-1].endswith(f"the earlier run is kept in {tmp_path / 'run-20261204-150000-2'}")


@pytest.mark.parametrize("override, named", [
    ({"per_device_train_batch_size": 0}, "per_device_train_batch_size=0"),
    ({"per_device_train_batch_size": 6}, "multiple of num_generations=4"),
    ({"max_steps": 0}, "max_steps=0"),
    ({"temperature": 0.0}, "temperature=0.0"),
])
def test_settings_that_cannot_train_are_refused_before_any_folder_is_touched(tmp_path, override, named):
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("an earlier run")
    config = _config(run)
    for key, value in override.items():
        setattr(config, key, value)  # as if GRPOConfig had accepted it
    with pytest.raises(ValueError, match=named):
        run_folder.prepare_run_dir(config)
    assert (run / "keep.txt").read_text() == "an earlier run" and len(list(tmp_path.iterdir())) == 1


# ----------------------------------------------------------------------------- tables


def test_metrics_table_and_summary():
    history = [
        {"loss": 0.0, "reward": r, "rewards/hash_format/mean": r * 2, "completions/mean_length": 100 + s,
         "timing/generation_s": 3.0, "timing/update_s": 1.0, "timing/sync_s": 0.5, "step": s}
        for s, r in enumerate([0.0, 0.1, 0.0, 0.2, 0.1, 0.3, 0.4, 0.5, 0.5, 0.6, 0.7], start=1)
    ] + [{"train_loss": 0.0, "step": 11}]
    table = metrics_table(history)
    assert list(table.index) == list(range(1, 12))
    assert table.loc[3, "hash_format"] == 0.0 and table.loc[11, "completion_length"] == 111
    summary = learning_summary(table)
    assert summary["first"] == pytest.approx(0.08) and summary["last"] == pytest.approx(0.54)
    fig = plot_metrics(table, ["hash_format"])
    assert len(fig.axes) == 8


def _eval_run(name, completions, finish_reasons, correct=0.0):
    from gsm8k_course import extract_hash_answer

    from helpers.evaluation import EvalRun

    rows = [{"example": i, "rollout": 0, "answer": "72", "completion": text, "finish_reason": reason,
             "completion_tokens": len(text.split()), "correct_answer": correct,
             "hash_format": float(bool(extract_hash_answer(text))), "reward": 0.0}
            for i, (text, reason) in enumerate(zip(completions, finish_reasons))]
    return EvalRun(name=name, rollouts=pd.DataFrame(rows))


def test_what_it_learned_names_the_signs_from_the_numbers_with_intervals():
    solved = ["48 + 24 = 72\n#### 72", "I think 70.", "Half is 24, total 72\n#### 72", "It is 72."]
    hacked = ["#### 72\n#### 72\n#### 72\n#### 7", "#### 1\n#### 1\n#### 1", "#### 72\n#### 72", "#### 5\n#### 5"]
    before = _eval_run("before", solved * 5, ["stop"] * 20)
    after = _eval_run("after", hacked * 5, ["length"] * 20)
    table = behaviour({"before": before, "after": after})
    assert table.loc["after", MULTI] == 1.0 and table.loc["before", MULTI] == 0.0
    assert table.loc["after", CUT] == 1.0 and table.loc["before", FORMAT] == 0.5
    verdict = what_it_learned(before, after)
    assert "2+ '####' lines: 0% -> 100% (+100%, 95% interval +100% to +100%)" in verdict
    assert ("Beyond chance, these rose too: completions cut at max_tokens and completions with 2+ '####' lines"
            in verdict)
    assert "On 20 held-out examples" in verdict
    honest = _eval_run("after", solved[:2] * 10, ["stop"] * 20)
    assert "None of the signs of a reward earned another way" in what_it_learned(before, honest)
    shown = side_by_side(before, after, ["hash_format"], n=2)
    assert list(shown["gold"]) == ["72", "72"] and "⏎" in shown.loc[0, "after: completion"]


def test_what_it_learned_says_not_significant_when_the_interval_spans_zero():
    """A 25-point rise in cut completions over 4 examples is a sign, not a finding: the verdict says so."""
    before = _eval_run("before", ["#### 72"] * 4, ["stop"] * 4)
    after = _eval_run("after", ["#### 72"] * 4, ["length", "stop", "stop", "stop"])
    verdict = what_it_learned(before, after)
    assert "Beyond chance, these rose" not in verdict and "not significant" in verdict
    assert "cut at max_tokens: 0% -> 25% (+25%, 95% interval +0% to +75%, not significant)" in verdict
    row = changes(before, after).loc[CUT]
    assert row["low"] == 0.0 and row["examples"] == 4


def test_what_it_learned_reads_the_right_number_from_the_replies_whatever_the_format():
    """The right number is the reply's last (as notebook 02's reward reads it), '####' or not: a run that
    drops the '####' line while answering right shows both, each with its interval."""
    before = _eval_run("before", ["4 + 3 = 7\n#### 7", "It is 70.", "#### 70", "About 12."] * 5, ["stop"] * 20)
    after = _eval_run("after", ["4 + 3 = 72", "It is 72.", "So 72", "72 apples."] * 5, ["stop"] * 20)
    table = changes(before, after)
    assert table.loc[RIGHT, "before"] == 0.0 and table.loc[RIGHT, "after"] == 1.0
    assert table.loc[FORMAT, "before"] == 0.5 and table.loc[FORMAT, "after"] == 0.0
    verdict = what_it_learned(before, after)
    assert "the right number (the reply's last, whatever the format): 0% -> 100%" in verdict
    assert "It answers more of these problems right, beyond chance." in verdict
    assert "the '#### N' format: 50% -> 0% (-50%, 95% interval -" in verdict
    assert "It answers fewer" in what_it_learned(after, before)
    assert behaviour({"after": after}).loc["after", RIGHT] == 1.0


def test_paired_bootstrap_interval():
    from helpers.evaluation import paired_bootstrap

    low, high = paired_bootstrap([1.0] * 30 + [0.0] * 70)
    assert 0.2 < low < 0.3 < high < 0.4
    assert paired_bootstrap([0.5] * 10) == (0.5, 0.5)


def test_compare_evals_table():
    from helpers.evaluation import EvalRun

    def run(reward):
        return EvalRun(name="x", rollouts=pd.DataFrame({"reward": [reward]}),
                       info={"model": "m", "endpoint": "local", "params": {"num_examples": 1},
                             "summary": {"reward": reward, "hash_format": reward,
                                         "accuracy": {"mean": 0.0, "ci95": [0.0, 0.5], "n": 1}}})

    table = compare_evals({"before": run(0.1), "after": run(0.4), "notebook 01": None})
    assert list(table.index) == ["before", "after"]  # a missing reference run is left out
    assert table.loc["after", "reward"] == 0.4
    plot_before_after(table, ["hash_format"])


def test_training_threads_leave_busy_cores_alone_but_ignore_short_bursts(monkeypatch):
    import psutil

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    for samples, threads in [([5, 5, 5, 5], 2), ([30, 30, 30, 30], 2),  # 30%: a program using part of a core
                             ([100, 5, 5, 5], 2), ([5, 100, 100, 5], 2),  # bursts shorter than the sample
                             ([60, 55, 70, 65], 1), ([100, 100, 100, 100], 1)]:  # a core busy all along
        answers = iter(samples)
        monkeypatch.setattr(psutil, "cpu_percent", lambda interval, answers=answers: next(answers))
        assert default_threads() == threads, samples


def test_a_fixed_thread_count_is_never_sampled(monkeypatch):
    """Tests and CI set COURSE_THREADS to the cores: a busy moment cannot halve a notebook's training speed."""
    import psutil

    monkeypatch.setattr(psutil, "cpu_percent", lambda interval: 100)
    monkeypatch.setenv(THREADS_VARIABLE, "2")
    assert default_threads() == 2
    for wrong in ("0", "two", "-1"):
        monkeypatch.setenv(THREADS_VARIABLE, wrong)
        with pytest.raises(ValueError, match="COURSE_THREADS"):
            default_threads()


class _SlowCompletionServer(FakeCompletionServer):
    """Each reply of n_cmpl completions of 8 tokens comes after `delay_s` seconds (None: never, as far as the test
    waits). What PolicyServer.complete reads of the real one."""

    HUNG_S = 30.0  # the test gives up long before; the server thread is a daemon

    def __init__(self, tmp_path):
        self.delay_s: float | None = 0.02
        super().__init__(tmp_path, self._answer)

    def _answer(self, body: dict):
        replies = [{"index": i, "tokens": list(range(10, 18)), "completion_probabilities": [], "stop_type": "limit"}
                   for i in range(body.get("n_cmpl", 1))]
        return 200, replies, self.HUNG_S if self.delay_s is None else self.delay_s


def test_a_slow_policy_server_is_waited_for_and_a_hung_one_named(tmp_path):
    """The policy server waited a fixed 600 s and then raised a bare TimeoutError, ending the run. Now the
    wait follows max_tokens and the rate the server has shown: a server 8x slower than in the batch before
    still completes the step (no retry needed), and one that never answers is asked once more, then named
    with its log in an EndpointError, in seconds here."""
    fake = _SlowCompletionServer(tmp_path)
    policy = PolicyServer(folder=tmp_path, parallel=2)
    policy.server, policy.MIN_WAIT_S = fake, 0.2
    try:
        prompts = [[1, 2, 3], [4, 5, 6]]
        assert len(policy.complete(prompts, n=2, max_tokens=8, temperature=1.0)) == 4
        fast_wait = policy.request_wait_s(8)
        fake.delay_s = 8 * 0.02  # throttled: another program took the cores
        started = time.monotonic()
        assert len(policy.complete(prompts, n=2, max_tokens=8, temperature=1.0)) == 4
        assert time.monotonic() - started < 2 * fast_wait  # completed at the first try
        assert policy.request_wait_s(8) > fast_wait  # the next wait follows the slower rate
        fake.delay_s = None  # hung
        wait = policy.request_wait_s(8)
        started = time.monotonic()
        with pytest.raises(EndpointError, match="policy.log") as refused:
            policy.complete(prompts[:1], n=1, max_tokens=8, temperature=1.0)
        assert "when asked again" in str(refused.value)
        assert time.monotonic() - started < 3 * wait + 5
    finally:
        policy.server = None
        fake.stop()


def test_design_table_and_curves_from_a_committed_learnability_file():
    from helpers.paths import PROJECT_ROOT

    result = PROJECT_ROOT / "benchmarks/results/learnability-arith-short-last-number-2026-12-05.json"
    record = json.loads(result.read_text())
    table = design_table({"GRPO": record["summary"], "expert iteration": record["summary_expert_iteration"]})
    gain = record["summary_expert_iteration"]["diff_sampled_lenient"]
    assert table.loc["expert iteration", "gain"] == gain["mean"] and table.loc["GRPO", "seeds"] == len(record["runs"])
    assert table.loc["GRPO", "gain, 95% interval"].endswith("not significant")
    assert not table.loc["expert iteration", "gain, 95% interval"].endswith("not significant")
    fig = plot_sampled_accuracy(record, record)
    curves = fig.axes[0].get_lines()
    assert len(curves) == len(record["runs"]) + len(record["expert_iteration_runs"])
    assert len(curves[0].get_xdata()) == record["steps"] and curves[0].get_xdata()[-1] == 32 * record["steps"]


@pytest.fixture
def bl():
    """benchmarks/bench_learnability, imported as its own script imports (benchmarks/ and scripts/ on the path)."""
    import sys

    from helpers.paths import PROJECT_ROOT

    sys.path[:0] = [str(PROJECT_ROOT / "benchmarks"), str(PROJECT_ROOT / "scripts")]
    import bench_learnability as module

    return module


def test_the_hack_rate_counts_every_line_that_holds_a_marker_and_gets_an_interval(bl):
    """bench_learnability's multi_marker uses word_arithmetic.hash_lines (what notebook 02 counts), which sees the
    hack of 2026-12-05 that the older multi_hash (lines starting with '####') missed; its summary gives the
    hack rate's parts a paired interval over problems."""
    hack = '#### 66\nThe answer is "#### 66'
    assert hash_lines(hack) == 2 and bl.lines_starting_with_hash(hack) == 1
    assert hash_lines("3 + 5 = 8\n#### 8") == 1

    def evaluation(multi: list[int], cut: list[int]) -> dict:
        n = len(multi)
        return {"n": n, "strict": 0.0, "lenient": 0.0, "format": 1.0, "one_answer_line": 0.0, "multi_hash": 0.0,
                "cut": sum(cut) / n, "hack": 0.0, "mean_tokens": 10.0, "strict_per_problem": [0] * n,
                "lenient_per_problem": [0] * n, "multi_marker": sum(multi) / n, "multi_marker_per_problem": multi,
                "cut_per_problem": cut}

    base = evaluation([0] * 10, [1] * 10)
    runs = [{"seed": seed, "steps": 3, "train_minutes": 1.0, "training": {},
             "after": evaluation([1] * 10, [0] * 10)} for seed in range(3)]
    summary = bl.summarize({"base": base, "runs": runs})
    assert summary["diff_multi_marker"]["mean"] == 1.0 and summary["diff_multi_marker"]["bootstrap_95"] == [1.0, 1.0]
    assert summary["diff_cut"]["mean"] == -1.0 and summary["diff_cut"]["per_seed"] == [-1.0] * 3
    assert "diff_sampled_multi_marker" not in summary  # not in these evaluations: no figure made up


def test_hack_table_from_the_committed_hack_files():
    """Notebook 02's section-12 table: every arm's figures as its result file's summary says, per seed too."""
    from helpers.paths import PROJECT_ROOT

    results = PROJECT_ROOT / "benchmarks" / "results"
    records = {name: json.loads(max(results.glob(f"learnability-{name}-2*.json")).read_text())
               for name in ("arith-hack-format", "arith-hack-one-line")}
    table = hack_table(records)
    for name, record in records.items():
        s, row = record["summary"], table.loc[name]
        assert row["seeds"] == len(record["runs"]) >= 3
        assert row["2+ '####' lines"].startswith(f"{s['base_sampled_multi_marker']:.0%} -> "
                                                 f"{s['after_sampled_multi_marker']:.0%}")
        per_seed = [f"{r['after']['sampled_multi_marker']:.0%} / {r['after']['sampled_cut']:.0%}"
                    for r in record["runs"]]
        assert row["per seed after: 2+ lines / cut"] == ", ".join(per_seed)


def test_bench_learnability_shares_a_base_evaluation_only_where_the_evaluation_is_the_same(bl, tmp_path, monkeypatch):
    """nb02-fp32, the fix arm and the placeholder start from the same weights and are evaluated on the same problems
    with the same samples: one base evaluation serves them all; a setting evaluated otherwise, or a file of an older
    configuration, gives none."""
    import dataclasses

    monkeypatch.setattr(bl, "RESULTS_DIR", tmp_path)
    base = {"strict": 0.25, "lenient": 0.5, "machine": {"cpu_flags": bl.cpu_flags()}}
    source = tmp_path / "learnability-nb02-bf16-2026-12-06.json"
    source.write_text(json.dumps({"setting": "nb02-bf16", **dataclasses.asdict(bl.SETTINGS["nb02-bf16"]),
                                  "base": base}))
    shared = bl.shared_base("nb02-fp32", bl.SETTINGS["nb02-fp32"])
    assert shared == {**base, "from": source.name}
    assert bl.shared_base("nb02-placeholder", bl.SETTINGS["nb02-placeholder"])["from"] == source.name
    assert bl.shared_base("arith-short-bf16-36", bl.SETTINGS["arith-short-bf16-36"]) is None  # no confirmation
    assert bl.shared_base("nb02-bf16", bl.SETTINGS["nb02-bf16"]) is None  # not its own
    older = {"setting": "nb02-bf16", **dataclasses.asdict(bl.SETTINGS["nb02-bf16"]), "confirm_samples": 8, "base": base}
    source.write_text(json.dumps(older))
    assert bl.shared_base("nb02-fp32", bl.SETTINGS["nb02-fp32"]) is None  # evaluated with 8 samples
    source.write_text(json.dumps({"setting": "nb02-bf16", **dataclasses.asdict(bl.SETTINGS["nb02-bf16"]),
                                  "base": base}))
    assert bl.shared_base("nb02-fix-right-line-fp32", bl.SETTINGS["nb02-fix-right-line-fp32"]) is None  # lean


def test_committed_learnability_files_still_match_their_settings(bl):
    """A field added to Setting (lean_eval) keeps its old value's meaning: it changes no committed file's match with
    its setting, and notebook 02's files still match theirs, so a new seed extends a file instead of starting it
    afresh."""
    import dataclasses

    def matches(record: dict, fields: dict) -> bool:
        return {k: record.get(k) for k in fields} == fields

    for name, setting in bl.SETTINGS.items():
        path = bl.result_path(name)
        if path is not None:
            record, fields = json.loads(path.read_text()), dataclasses.asdict(setting)
            older = {k: v for k, v in fields.items() if k != "lean_eval"}
            assert matches(record, fields) == matches(record, older), path.name
    for name in ("nb02-fp32", "nb02-bf16", "nb02-fix-right-line", "nb02-placeholder", "nb02-fp32-avx2",
                 "nb02-fix-right-line-fp32-avx2", "nb02-placeholder-fp32-avx2", "nb02-placeholder-fp32"):
        record = json.loads(bl.result_path(name).read_text())
        assert matches(record, dataclasses.asdict(bl.SETTINGS[name.removesuffix("-avx2")])), name


def test_bench_learnability_keeps_each_class_of_cpu_in_its_own_file(bl, tmp_path, monkeypatch):
    """Seeds are pooled, and before compared with after, only within one class of CPU: a file whose base or runs ran
    on another class is refused with the flag that fixes it, and --cpu-file's files share bases only among
    themselves."""
    import dataclasses

    from helpers.results import cpu_class

    here = bl.cpu_flags()
    other = {**dict.fromkeys(here, False), "avx2": True, "avx512f": True, "avx512_bf16": not here.get("avx512_bf16")}
    assert cpu_class(other) != cpu_class(here)
    assert [cpu_class(f) for f in ({"amx_bf16": True, "avx512_bf16": True}, {"avx512_bf16": True, "avx2": True},
                                   {"avx512f": True, "avx2": True}, {"avx2": True}, {})] == \
        ["amx", "avx512_bf16", "avx512", "avx2", "no-avx2"]
    monkeypatch.setattr(bl, "RESULTS_DIR", tmp_path)
    setting = bl.SETTINGS["nb02-fp32"]
    record = {"setting": "nb02-fp32", **dataclasses.asdict(setting), "cpu_flags": other,
              "base": {"strict": 0.25}, "runs": [{"seed": 0, "machine": {"cpu_flags": other}}]}
    (tmp_path / "learnability-nb02-fp32-2026-12-06.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="--cpu-file"):
        bl.load_record("learnability", "nb02-fp32", setting)
    record["runs"][0]["machine"]["cpu_flags"] = record["cpu_flags"] = here  # the base alone ran elsewhere
    record["base"]["machine"] = {"cpu_flags": other}
    (tmp_path / "learnability-nb02-fp32-2026-12-06.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="--cpu-file"):
        bl.load_record("learnability", "nb02-fp32", setting)
    assert bl.load_record("learnability", f"nb02-fp32-{cpu_class()}", setting)["runs"] == []  # a file of its own
    bf16 = {"setting": "nb02-bf16", **dataclasses.asdict(bl.SETTINGS["nb02-bf16"]),
            "base": {"strict": 0.5, "machine": {"cpu_flags": here}}}
    (tmp_path / "learnability-nb02-bf16-2026-12-06.json").write_text(json.dumps(bf16))
    suffix = f"-{cpu_class()}"
    assert bl.shared_base("nb02-fp32" + suffix, setting, suffix) is None  # that file is not among this CPU's own
    (tmp_path / f"learnability-nb02-bf16{suffix}-2026-12-07.json").write_text(json.dumps(bf16))
    assert bl.shared_base("nb02-fp32" + suffix, setting, suffix)["strict"] == 0.5
    bf16["base"]["machine"]["cpu_flags"] = other
    (tmp_path / "learnability-nb02-bf16-2026-12-06.json").write_text(json.dumps(bf16))
    assert bl.shared_base("nb02-fp32", setting) is None  # evaluated on another class of CPU
