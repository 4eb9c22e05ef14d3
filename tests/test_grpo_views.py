"""Notebook 02's views and its loss exercise, without a model: the verdict's words against its intervals (a test per
branch, on constructed tables), the signs of a reward earned another way, the result-file tables (per seed, "rose
in k of n seeds", "not measured yet"), which reward trains, the live view's charts, the loss check's reference
against TRL 0.24's own `_compute_loss`, and the out-of-memory advice."""

import json
from collections import defaultdict
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from helpers.charts import figure
from helpers.checks import CHECKS, _load_checks
from helpers.checks import notebook_02_loss as checks_02
from helpers.evaluation import EvalRun
from helpers.grpo import run_folder, server_rollouts
from helpers.grpo.gpu_recipes import recipe_settings, train_with_verifiers
from helpers.grpo.training_log import _draw_cut, _draw_rewards, plot_metrics
from helpers.grpo.verdict import (
    CONSTANT,
    CUT,
    FORMAT,
    MULTI,
    RIGHT,
    RIGHT_HASH,
    SIGNS,
    WRONG_HASH,
    behaviour,
    verdict,
    what_it_learned,
)
from helpers.results import KINDS, arms_table, result_record, seeds_table
from helpers.reward_choice import fix_runs, reward_note, which_reward

# ----------------------------------------------------------------------------- the verdict, branch by branch


def _table(right=(0.2, 0.4, 0.1, 0.3), **signs) -> pd.DataFrame:
    """A `changes` table: (before, after, low, high) for the right number and each sign (no change by default)."""
    rows = {RIGHT: right, RIGHT_HASH: (0.1, 0.1, -0.05, 0.05),
            FORMAT: (0.4, 0.4, -0.05, 0.05)}
    for column in SIGNS:
        rows[column] = (0.1, 0.1, -0.05, 0.05)
    names = {"cut": CUT, "multi": MULTI, "constant": CONSTANT,
             "wrong": WRONG_HASH}
    rows.update({names[key]: value for key, value in signs.items()})
    return pd.DataFrame({name: {"before": b, "after": a, "change": a - b, "low": lo, "high": hi, "examples": 50}
                         for name, (b, a, lo, hi) in rows.items()}).T


def test_right_up_and_no_sign_rose():
    said = verdict(_table())
    assert "It answers more of these problems right, beyond chance." in said
    assert "None of the signs of a reward earned another way" in said and "Beyond chance, these rose" not in said


def test_right_down_beyond_chance():
    said = verdict(_table(right=(0.4, 0.2, -0.3, -0.1)))
    assert "It answers fewer of these problems right, beyond chance." in said


def test_right_within_chance_is_not_called_a_rise():
    said = verdict(_table(right=(0.2, 0.25, -0.02, 0.12)))
    assert "not significant on these examples (the interval includes no change)" in said
    assert "It answers more" not in said and "It answers fewer" not in said


def test_a_sign_that_rose_beyond_chance_while_right_answers_fell_is_named_as_such():
    """The placeholder's run (issue 40): cut replies 67% -> 100%, interval +24 to +42, right answers down. The old
    verdict said the interval 'includes no change'; the words now follow the interval."""
    said = verdict(_table(right=(0.21, 0.085, -0.2, -0.05), cut=(0.67, 1.0, 0.24, 0.42)))
    assert "completions cut at max_tokens: 67% -> 100% (+33%, 95% interval +24% to +42%)" in said
    assert "Beyond chance, these rose too: completions cut at max_tokens." in said
    assert "did not rise with them" in said
    assert "Rose by 20% or more, but the interval includes no change" not in said


def test_a_sign_that_rose_with_the_right_answers_asks_to_read_the_replies():
    said = verdict(_table(constant=(0.1, 0.5, 0.3, 0.5)))
    assert "Beyond chance, these rose too: completions whose last number is the run's most common one." in said
    assert "The right answers rose with them" in said


def test_a_large_rise_whose_interval_includes_zero_is_called_not_significant_and_nothing_more():
    said = verdict(_table(multi=(0.0, 0.25, 0.0, 0.75)))
    assert "Rose by 20% or more, but the interval includes no change (not significant on 50 examples): " \
           "completions with 2+ '####' lines." in said
    assert "Beyond chance, these rose" not in said and "None of the signs" not in said


def test_a_sign_that_fell_is_not_a_rise():
    said = verdict(_table(cut=(0.6, 0.0, -0.7, -0.5)))
    assert "None of the signs of a reward earned another way" in said


def _eval_run(completions, answers, finish="stop"):
    rows = [{"example": i, "rollout": 0, "answer": gold, "completion": text, "finish_reason": finish,
             "completion_tokens": len(text.split()), "correct_answer": 0.0, "reward": 0.0}
            for i, (text, gold) in enumerate(zip(completions, answers))]
    return EvalRun(name="run", rollouts=pd.DataFrame(rows))


def test_a_constant_answer_and_wrong_answer_lines_are_measured_from_the_replies():
    answers = [str(n) for n in range(3, 23)]
    before = _eval_run([f"{a} + 0 = {a}" for a in answers], answers)
    after = _eval_run(["#### 9"] * 20, answers)
    table = behaviour({"before": before, "after": after})
    assert table.loc["after", CONSTANT] == 1.0 and table.loc["before", CONSTANT] == 0.05
    assert table.loc["after", WRONG_HASH] == 0.95  # '#### 9' is right for the gold 9 only
    assert table.loc["before", "numbers per completion"] == 3.0
    said = what_it_learned(before, after)
    assert "completions whose last number is the run's most common one: 5% -> 100%" in said
    assert "It answers fewer of these problems right, beyond chance." in said


# ----------------------------------------------------------------------------- the result files


def _summary_entry(before, after_per_seed, per_seed, boot=(0.01, 0.2), t=(-0.1, 0.4)):
    return {"meaning": "", "before": before, "after": sum(after_per_seed) / len(after_per_seed),
            "after_per_seed": after_per_seed, "change": {"mean": sum(per_seed) / len(per_seed),
                                                         "bootstrap_95": list(boot), "t_95_over_seeds": list(t),
                                                         "per_seed": per_seed},
            "rose_in": sum(x > 0 for x in per_seed), "fell_in": sum(x < 0 for x in per_seed), "seeds": len(per_seed)}


@pytest.fixture
def results(tmp_path):
    signs = {"pass1": _summary_entry(0.2, [0.5, 0.4, 0.1], [0.3, 0.2, -0.1]),
             "constant": _summary_entry(0.1, [0.9, 0.1, 0.1], [0.8, 0.0, 0.0], boot=(0.1, 0.4), t=(-0.5, 1.0))}
    confirm = {"problems": 248, "samples": 8, "greedy": _summary_entry(0.3, [0.4, 0.4], [0.1, 0.1])}
    record = {"base": {"n": 100}, "summary": {"seeds": [0, 1, 2], "steps": 36, "signs": signs, "confirm": confirm}}
    (tmp_path / "learnability-fake-2026-12-06.json").write_text(json.dumps(record))
    return tmp_path


def test_seeds_table_gives_each_seed_and_how_many_rose(results):
    table = seeds_table("fake", results=results)
    row = table.loc[KINDS["pass1"]]
    assert row["seeds"] == "rose in 2 of 3 seeds, fell in 1" and row["per seed"] == "+30%, +20%, -10%"
    assert row["95% interval over problems"] == "+1.0% to +20.0%"
    assert row["95% interval over seeds"] == "-10.0% to +40.0%, not significant"
    assert KINDS["greedy"] not in table.index  # not in this file's signs: the table shows what the file measured
    asked = seeds_table("fake", kinds=["pass1", "greedy"], results=results)
    assert asked.loc[KINDS["greedy"], "before"] == "not measured yet"  # asked for by name, and missing
    assert table.index.name == "learnability-fake-2026-12-06.json: 3 seeds, 36 steps, 100 problems"  # its file
    confirm = seeds_table("fake", block="confirm", results=results)
    assert confirm.loc[KINDS["greedy"], "seeds"] == "rose in 2 of 2 seeds"
    heading = "learnability-fake-2026-12-06.json: 3 seeds, 36 steps, 248 problems, greedy + 8 samples each"
    assert confirm.index.name == heading
    record = json.loads((results / "learnability-fake-2026-12-06.json").read_text())
    record.update(cpu="AMD EPYC", runs=[{"machine": {"cpu_flags": {"avx2": True, "avx512f": False}}}] * 3)
    (results / "learnability-fake-2026-12-06.json").write_text(json.dumps(record))
    assert seeds_table("fake", results=results).index.name == \
        "learnability-fake-2026-12-06.json: 3 seeds on AMD EPYC (avx2), 36 steps, 100 problems"  # the CPU they ran on


def test_a_missing_file_or_block_says_not_measured_yet(results, tmp_path):
    assert "not measured yet" in seeds_table("absent", results=results).columns
    old_file = {"base": {"n": 100}, "summary": {"seeds": [0]}}
    (tmp_path / "learnability-old-2026-12-05.json").write_text(json.dumps(old_file))
    said = seeds_table("old", block="confirm", results=results)
    assert said.loc["old", "not measured yet"] == "no 'confirm' block in its file"
    arms = arms_table({"here": "fake", "not yet": "absent"}, ["pass1", "greedy"], results=results)
    assert arms.loc["not yet", "seeds"] == "not measured yet"
    assert arms.loc["here", KINDS["pass1"]] == "20% -> 33% (+13.3%; rose in 2 of 3 seeds, fell in 1)"
    assert arms.loc["here", "file"] == "learnability-fake-2026-12-06.json"
    assert arms.loc["here", KINDS["greedy"]] == "not measured"


def test_older_files_give_their_measures_with_seeds_too():
    """Files written before the 'signs' block (e.g. notebook 02's design before issue 40) still give pass@1 and
    greedy per seed, from their diff_* keys."""
    table = seeds_table("arith-short-bf16-36")
    record = result_record("arith-short-bf16-36")
    per_seed = record["summary"]["diff_lenient"]["per_seed"]
    greedy = table.loc[KINDS["greedy"]]
    assert greedy["seeds"] == f"rose in {sum(x > 0 for x in per_seed)} of {len(per_seed)} seeds, fell in 1"


# ----------------------------------------------------------------------------- which reward trains


def test_which_reward_says_the_placeholder_trains_and_shows_its_runs(gsm8k_dir, capsys, monkeypatch):
    from word_arithmetic import gold_anywhere

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: print("TABLE", *a))

    def placeholder(completion, answer, **kwargs):
        return gold_anywhere(completion, answer)

    assert which_reward(placeholder) is False
    said = capsys.readouterr().out
    assert "the exercise's placeholder, as committed" in said and "TABLE" in said
    # its committed runs in each precision, on the confirmation problems
    assert said.count("TABLE") == 3 and "learnability-nb02-placeholder-2026" in said and "-fp32-avx2-2026" in said
    assert "learnability-nb02-placeholder-fp32-2026" in said
    assert "not yet" not in said  # the check ran quietly

    def other(completion, answer, **kwargs):
        return 0.0

    assert which_reward(other) is False
    assert "your function as written (it does not pass its check yet)" in capsys.readouterr().out

    def yours(completion, answer, **kwargs):  # the learner's own code, as solutions/02 writes it (a call to the
        # course's reference is refused by the check as not the learner's work)
        import re

        from gsm8k_course import canonical_number

        numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", completion[-1]["content"])
        return 1.0 if numbers and canonical_number(numbers[-1]) == canonical_number(answer) else 0.0

    assert which_reward(yours) is True
    assert "uses your last_number_right" in capsys.readouterr().out


def test_the_note_after_training_reads_the_reward_from_the_run_not_the_cells(tmp_path, capsys, monkeypatch):
    """Issue 43: the run's folder records which reward it started with; the note reads that record."""
    from helpers.grpo import run_folder

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: print("TABLE", *a))
    record = tmp_path / "course_run.json"
    record.write_text('{"identity": {"rewards": [{"name": "last_number_right"}]}, "reward_is_yours": false}')
    assert reward_note(tmp_path) is False
    assert "numbers per completion" in capsys.readouterr().out
    record.write_text('{"identity": {"rewards": [{"name": "last_number_right"}]}, "reward_is_yours": true}')
    assert reward_note(tmp_path) is True
    assert "trained on your last_number_right" in capsys.readouterr().out
    assert run_folder.trained_reward(tmp_path / "nowhere") == {"reward_is_yours": None, "reward_functions": []}
    assert reward_note(tmp_path / "nowhere") is False
    assert "does not record which reward" in capsys.readouterr().out


def test_section_12_trains_only_the_finished_fix(gsm8k_dir, capsys):
    """Issue 43, item 2: the committed placeholder (any one '#### N' line pays) is not trained as 'the fix'."""
    from gsm8k_course import extract_hash_answer

    def placeholder(completion, answer, **kwargs):
        reply = completion[-1]["content"]
        return 1.0 if reply.count("####") == 1 and extract_hash_answer(reply) else 0.0

    assert fix_runs(placeholder, hack_steps=12) is False
    said = capsys.readouterr().out
    assert "skipped: right_answer_line is not finished" in said and "not yet" not in said
    assert fix_runs(placeholder, hack_steps=0) is False
    assert "hack_steps = 0" in capsys.readouterr().out

    def right_answer_line(completion, answer, **kwargs):
        reply = completion[-1]["content"]
        found = extract_hash_answer(reply) if reply.count("####") == 1 else None
        return 1.0 if found is not None and canonical(found) == canonical(answer) else 0.0

    from gsm8k_course import canonical_number as canonical

    assert fix_runs(right_answer_line, hack_steps=12) is True
    assert "your right_answer_line (its check passed) for 12 steps" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the live view's charts


def test_the_reward_chart_has_its_rolling_mean_and_the_cut_share_its_own_panel():
    metrics = pd.DataFrame({"reward": [0.1, 0.6, 0.0, 0.5, 0.2, 0.4], "clipped_ratio": [0.6, 0.5, 0.4, 0.2, 0.1, 0.0]},
                           index=range(1, 7))
    _, axes = figure(10, 3, 1, 2)
    _draw_rewards(axes[0, 0], metrics, [])
    _draw_cut(axes[0, 1], metrics)
    raw, mean = axes[0, 0].get_lines()
    assert list(raw.get_ydata()) == [0.1, 0.6, 0.0, 0.5, 0.2, 0.4]
    assert mean.get_ydata()[-1] == pytest.approx((0.6 + 0.0 + 0.5 + 0.2 + 0.4) / 5)
    assert len(axes[0, 1].get_lines()) == 2 and "cut" in axes[0, 1].get_title()
    assert len(plot_metrics(metrics, []).axes) == 8


# ----------------------------------------------------------------------------- the loss exercise


def _trl_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2) -> float:
    """TRL 0.24's GRPOTrainer._compute_loss itself, on a stand-in trainer whose model gives `logps`: the
    advantages as TRL's _generate_and_score_completions computes them (group mean, group std + 1e-4)."""
    from trl import GRPOTrainer

    grouped = rewards.view(-1, num_generations)
    std = grouped.std(dim=1).repeat_interleave(num_generations)
    advantages = (rewards - grouped.mean(dim=1).repeat_interleave(num_generations)) / (std + 1e-4)
    accelerator = SimpleNamespace(num_processes=1, gather=lambda x: x)
    trainer = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, torch.zeros_like(logps)), top_entropy_quantile=1.0,
        beta=0.0, importance_sampling_level="token", epsilon_low=epsilon, epsilon_high=epsilon,
        args=SimpleNamespace(delta=None), use_vllm=False, loss_type="dapo", accelerator=accelerator,
        model=SimpleNamespace(training=True), _metrics={"train": defaultdict(list)})
    n, tokens = logps.shape
    inputs = {"prompt_ids": torch.zeros(n, 2, dtype=torch.long), "prompt_mask": torch.ones(n, 2, dtype=torch.long),
              "completion_ids": torch.zeros(n, tokens, dtype=torch.long), "completion_mask": mask,
              "advantages": advantages, "old_per_token_logps": old_logps, "num_items_in_batch": mask.sum()}
    return float(GRPOTrainer._compute_loss(trainer, None, inputs))


def test_the_loss_reference_is_trls_own_loss_where_clipping_and_padding_matter():
    for keywords, what in checks_02._loss_inputs():
        assert float(checks_02._loss_reference(**keywords)) == pytest.approx(_trl_loss(**keywords), rel=1e-5), what
        clipped = torch.exp(keywords["logps"] - keywords["old_logps"])
        assert ((clipped < 1 - keywords["epsilon"]) | (clipped > 1 + keywords["epsilon"])).any(), what


def _right_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    grouped = rewards.view(-1, num_generations)
    advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1, 1)
    ratio = torch.exp(logps - old_logps)
    per_token = -torch.min(ratio * advantages, ratio.clamp(1 - epsilon, 1 + epsilon) * advantages)
    return (per_token * mask).sum() / mask.sum()


def _trainer_batch(loss_offset: float = 0.0) -> dict:
    """A step's batch as ServerRolloutGRPOTrainer keeps it (old log-probabilities the same values), with the loss
    TRL's _compute_loss gives it."""
    keywords, _ = checks_02._loss_inputs()[0]
    keywords = {**keywords, "old_logps": keywords["logps"].clone(), "epsilon": 0.2}
    return {**keywords, "advantages": None, "num_items_in_batch": int(keywords["mask"].sum()), "epsilon_high": 0.2,
            "loss_type": "dapo", "beta": 0.0, "scale_rewards": "group", "step": 7,
            "loss": _trl_loss(**keywords) + loss_offset}


def test_the_loss_check_compares_with_the_trainers_own_loss(monkeypatch, capsys):
    _load_checks()
    check = CHECKS["02-grpo-loss"]
    monkeypatch.setattr(server_rollouts, "last_loss_batch", None)
    assert check(_right_loss) is None
    assert "compared on made-up batches only" in capsys.readouterr().out
    monkeypatch.setattr(server_rollouts, "last_loss_batch", _trainer_batch())
    assert check(_right_loss) is None
    assert "On the trainer's last step (step 7" in capsys.readouterr().out

    def off_by_a_bit_on_real_steps(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
        loss = _right_loss(rewards, logps, old_logps, mask, num_generations, epsilon)
        return loss + 0.01 if torch.equal(logps, old_logps) else loss

    assert "on the trainer's last step (step 7" in check(off_by_a_bit_on_real_steps)
    monkeypatch.setattr(server_rollouts, "last_loss_batch", {**_trainer_batch(), "beta": 0.04})
    assert check(_right_loss) is None and "beta=0.04" in capsys.readouterr().out
    monkeypatch.setattr(server_rollouts, "last_loss_batch", _trainer_batch(loss_offset=1.0))
    assert check(_right_loss) is None and "a TRL other than 0.24?" in capsys.readouterr().out


# ----------------------------------------------------------------------------- running out of memory


def test_out_of_memory_advice_says_which_changes_restart_the_run(tmp_path):
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text("{}")
    said = run_folder.out_of_memory_advice(tmp_path)
    assert "same settings: it resumes from checkpoint-10" in said
    assert "these are training settings, so the run starts over from step 0" in said
    assert all(field in run_folder.TRAINING_FIELDS and field in said for field in run_folder.MEMORY_FIELDS)
    assert "no checkpoint was saved yet" in run_folder.out_of_memory_advice(tmp_path / "empty")
    with pytest.raises(run_folder.TrainingOutOfMemory, match="free memory"), run_folder.explain_failures(tmp_path):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")


# ----------------------------------------------------------------------------- notebook 02 on GPUs (never run there)


def test_the_gpu_paths_take_the_notebooks_settings(monkeypatch, tmp_path):
    """helpers.grpo.gpu_recipes, checked on the CPU: the one-GPU recipe's settings are parameters the notebook has,
    and the 2-GPU recipe is built from the notebook's own GRPOConfig."""
    from trl import GRPOConfig

    from helpers.parameters import GRPO_PARAMETERS

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))
    assert recipe_settings("cpu") == {} == recipe_settings("verifiers")
    monkeypatch.setattr("helpers.grpo.gpu_recipes.one_gpu_plan",
                        lambda: SimpleNamespace(per_device_train_batch_size=4, table=lambda: "a table"))
    monkeypatch.setattr("IPython.display.display", lambda *args: None)
    settings = recipe_settings("gpu")
    assert set(settings) <= set(GRPO_PARAMETERS) and settings["per_device_train_batch_size"] == 4

    seen = {}

    def train(plan):
        seen["plan"] = plan
        return tmp_path / "final", [{"loss": 0.0, "step": 1}]

    monkeypatch.setattr("helpers.grpo.launcher.train_with_verifiers", train)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", lambda *args, **kwargs: "the model")
    config = GRPOConfig(output_dir=str(tmp_path / "out"), run_name="r", max_steps=7, learning_rate=1e-5,
                        num_generations=4, per_device_train_batch_size=8, max_completion_length=64, seed=3,
                        use_cpu=True, bf16=False)
    server = SimpleNamespace(stop=lambda: seen.setdefault("server stopped", True))
    trained, final_dir, history, _ = train_with_verifiers(server, "a/model", config, 100, 20)
    assert (trained, final_dir, history) == ("the model", tmp_path / "final", [{"loss": 0.0, "step": 1}])
    command = seen["plan"].train_cmd
    given = {flag: command[command.index(flag) + 1] for flag in
             ("--max-steps", "--learning-rate", "--num-generations", "--per-device-batch-size", "--max-tokens",
              "--seed",
              "--num-train-examples", "--num-eval-examples", "--variant", "--model")}
    assert given == {"--max-steps": "7", "--learning-rate": "1e-05", "--num-generations": "4",
                     "--per-device-batch-size": "8", "--max-tokens": "64", "--seed": "3", "--num-train-examples": "100",
                     "--num-eval-examples": "20", "--variant": "think", "--model": "a/model"}
    assert seen["server stopped"]
