"""Notebook 02 under papermill with CI parameters: a few real GRPO steps on the CPU, end to end,
in a fresh runs folder (it makes its own inputs: no notebook 01 run to borrow examples from).

Checks what the notebook claims: the rollouts came from the llama.cpp server with a weight sync per
step, the weights changed, the offline wandb run holds the logged steps, the trace store holds the
rubric's scoring calls, and before/after were measured on the same examples, sampling and server.
"""

import ast
import json
import re

import pytest
from memory_watch import watched_kernel
from notebook_run import NOTEBOOKS, assert_every_check, execute_probed, outputs_text, solved_copy

NOTEBOOK = NOTEBOOKS / "02_traced_grpo_training.ipynb"
RUN_NAME = "02_ci"
# The CPU task at its own settings, fewer of everything: 2 steps of 4 prompts x 8 (the default group), 48 tokens.
# As committed, the reward exercise pays for the gold number anywhere in the reply (the blank), which every reply
# that earns the right-last-number reward earns too. With that reward, in the first 2 steps of the 3 committed runs
# of notebook 02's design, a share of 0.375 of the groups had equal rewards (frac_reward_zero_std, mean of 6 steps,
# learnability-arith-short-bf16-2026-12-05.json), so 2 steps of 4 groups leave about a 1 in 2,500 chance
# (0.375 ** 8) that no weight moves.
CI_PARAMETERS = {
    "max_steps": 2, "per_device_train_batch_size": 32, "num_generations": 8, "max_completion_length": 48,
    "num_train_examples": 40, "num_eval_examples": 4, "eval_samples": 2, "eval_max_tokens": 48,
    "save_steps": 2, "resume": "never", "run_name": RUN_NAME, "seed": 0, "hack_steps": 1,
}


# An 8 GB laptop with a browser open has about 4 GB to give: the kernel and its llama.cpp server together stay
# under this, or the kernel is killed (tests/memory_watch.py). CI's steps have the default's shape (4 x 8, 48
# tokens), so their peak is the default run's.
MEMORY_LIMIT_GB = 3.5


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch, watched_kernel(tmp_path_factory.mktemp("kernel"),
                                                                MEMORY_LIMIT_GB) as watch:
        patch.setenv("COURSE_RUNS_DIR", str(runs))  # the kernel inherits it
        try:
            notebook = execute_probed(NOTEBOOK.stem, runs / "02.ipynb", kernel_name=watch.kernel_name,
                                      **CI_PARAMETERS)
        except Exception:
            if watch.exceeded_gb is not None:
                pytest.fail(f"notebook 02's kernel and its llama.cpp server went over {MEMORY_LIMIT_GB} GB resident "
                            f"({watch.exceeded_gb:.2f} GB) and the kernel was stopped: an 8 GB laptop would not fit it")
            raise
    summary = json.loads((runs / "grpo" / RUN_NAME / "summary.json").read_text())
    return {"notebook": notebook, "summary": summary, "runs": runs, "peak_gb": watch.peak_gb}


@pytest.mark.notebook
def test_fits_an_8_gb_laptop(executed):
    """Kernel and llama.cpp server stayed under MEMORY_LIMIT_GB resident (read every 0.05 s) all the way."""
    assert 0.5 < executed["peak_gb"] <= MEMORY_LIMIT_GB, executed["peak_gb"]


@pytest.mark.notebook
def test_runs_to_the_end_as_committed(executed):
    text = outputs_text(executed["notebook"], html=True)
    assert "Traceback" not in text and "Error" not in text.replace("RewardFunctionFailing", "")
    assert executed["summary"]["steps"] == CI_PARAMETERS["max_steps"]
    assert text.count("not yet — 02-") == 6  # the exercises as committed: checked, not solved
    assert_every_check(executed["notebook"], NOTEBOOK)  # and each solution, probed in context, is correct
    assert "This run: 2 steps" in text
    # every chart a cell draws is shown (a Figure that is not the cell's last expression is not, unless displayed)
    for cell in executed["notebook"]["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(r"\bplot_\w+\(", source):
            assert any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])), source
    # bfloat16 autocast only on a CPU with bfloat16 instructions, whatever an earlier config left in the
    # environment (a leftover bf16 once made this run ~10x slower on an AVX2 CPU)
    from helpers.grpo.backends import cpu_has_bf16

    assert f"training precision: {'bf16' if cpu_has_bf16() else 'no'}; torch threads: " in text


@pytest.mark.notebook
def test_rollouts_came_from_the_server_with_a_sync_per_step(executed):
    summary = executed["summary"]
    assert summary["rollouts"] == "server"
    assert summary["sync_s_sec_per_step"] > 0  # steps 1 and 2 each synced new weights to llama.cpp
    assert summary["generation_s_sec_per_step"] > 0 and summary["update_s_sec_per_step"] > 0


@pytest.mark.notebook
def test_some_group_had_a_signal(executed):
    """GRPO learns only from groups whose rewards differ; TRL logs the share of groups that did not."""
    zero_std = [step["frac_zero_std"] for step in executed["summary"]["per_step"]]
    assert min(zero_std) < 1, f"every group of every step got equal rewards: frac_reward_zero_std {zero_std}"


@pytest.mark.notebook
def test_weights_changed(executed):
    zero_std = [step["frac_zero_std"] for step in executed["summary"]["per_step"]]
    assert executed["summary"]["weights_changed"] > 0, (
        f"no weight moved; frac_reward_zero_std per step: {zero_std} (1.0 everywhere: no GRPO signal, "
        "otherwise the optimizer did not step)")


@pytest.mark.notebook
def test_wandb_offline_run_holds_the_steps(executed):
    from helpers import wandb_history

    history = wandb_history(executed["summary"]["wandb_dir"].removesuffix("/files"))
    steps = set(history["train/global_step"].dropna().astype(int))
    assert set(range(1, CI_PARAMETERS["max_steps"] + 1)) <= steps
    assert history["train/reward"].notna().sum() >= CI_PARAMETERS["max_steps"]
    assert history["train/timing/sync_s"].notna().sum() >= CI_PARAMETERS["max_steps"]  # StepTimer's split


@pytest.mark.notebook
def test_trace_store_holds_the_scoring_calls(executed):
    from helpers.tracing.session import open_local_traces

    store = executed["summary"]["trace_store"]
    session = open_local_traces(store_path=store, project="verifiers-course")
    ops = [call.op_name for call in session.get_calls()]
    batches = sum("grpo_reward_batch" in op for op in ops)
    assert batches >= CI_PARAMETERS["max_steps"] + 1  # one per step, and the notebook's own example batch
    assert batches == executed["summary"]["reward_batches_traced"]
    assert any("score_rollout" in op for op in ops), ops[:20]


@pytest.mark.notebook
def test_before_and_after_share_examples_sampling_and_server(executed):
    from helpers.evaluation import load_eval_run

    runs = executed["runs"] / "evals"
    before, after = load_eval_run(runs / f"{RUN_NAME}_before"), load_eval_run(runs / f"{RUN_NAME}_after")
    assert len(after.rollouts) == CI_PARAMETERS["num_eval_examples"] * CI_PARAMETERS["eval_samples"]
    assert list(before.rollouts["question"]) == list(after.rollouts["question"])
    assert before.info["params"]["sampling_args"] == after.info["params"]["sampling_args"]
    assert before.info["params"]["sampling_args"]["temperature"] == 0.6  # the training temperature (pass@1)
    greedy = {when: load_eval_run(runs / f"{RUN_NAME}_{when}_greedy") for when in ("before", "after")}
    for run in greedy.values():
        assert run.info["params"]["sampling_args"]["temperature"] == 0.0
        assert list(run.rollouts["question"]) == list(before.rollouts["question"])[:CI_PARAMETERS["num_eval_examples"]]
    assert before.info["endpoint"] == after.info["endpoint"] == "local"  # the llama.cpp policy server
    summary = executed["summary"]
    assert summary["before_reward"] == pytest.approx(before.summary["reward"])
    assert summary["after_reward"] == pytest.approx(after.summary["reward"])


@pytest.mark.notebook
def test_it_says_what_the_run_taught_from_its_own_numbers(executed):
    """Section 11: before/after completions side by side, the behaviour table and a verdict computed from it;
    section 12: the short run with the learner's format term added (here the blank, which any '#### N' earns)."""
    from helpers.grpo.verdict import RIGHT, RIGHT_HASH, SHARES

    summary, text = executed["summary"], outputs_text(executed["notebook"], html=True)
    assert set(summary["behaviour"]) == {"before", "after", "before, greedy", "after, greedy"}
    for row in summary["behaviour"].values():
        assert set(SHARES) - {RIGHT_HASH} <= set(row)
    for kind in ("sampled", "greedy"):  # each share before and after, its change and interval
        assert {"before", "after", "change", "low", "high"} <= set(summary["held_out"][kind][RIGHT])
    assert summary["verdict"].splitlines()[0] in text
    assert "before: completion" in text and "after: completion" in text  # the side-by-side table
    assert all(step.get("multi_hash_share") is not None for step in summary["per_step"])
    # section 12 as committed: its placeholder (any one '#### N' line) is not trained as the fix (issue 43, item 2)
    assert summary["yours_steps"] == 0 and "The run below is skipped: right_answer_line is not finished" in text
    assert not (executed["runs"] / "evals" / f"{RUN_NAME}_fix").exists()


@pytest.mark.notebook
def test_held_out_problems_come_after_the_design_set(executed):
    """Issue 43, item 3: none of the problems before/after is one the course chose its design on."""
    from word_arithmetic import DESIGN_PROBLEMS, generate

    from helpers.evaluation import load_eval_run

    before = load_eval_run(executed["runs"] / "evals" / f"{RUN_NAME}_before")
    design = {p.question for p in generate(DESIGN_PROBLEMS, "eval", "one-step", 20)}
    asked = set(before.rollouts["question"])
    assert len(asked) == CI_PARAMETERS["num_eval_examples"] and not asked & design


@pytest.mark.notebook
def test_it_says_which_reward_trained_before_and_after(executed):
    """Run All as committed trains on the reward exercise's placeholder (issue 40, 2b): section 5 says so before
    training, section 11 explains it after, each with the placeholder's committed runs (or "not measured yet")."""
    summary, text = executed["summary"], outputs_text(executed["notebook"], html=True)
    assert summary["reward_is_yours"] is False
    assert "The training below uses the exercise's placeholder, as committed" in text
    assert "This run trained on the reward exercise's function as written" in text
    assert text.count("nb02-placeholder") >= 2


@pytest.mark.notebook
def test_the_loss_exercise_is_checked_against_the_trainers_own_loss(executed):
    """The solution of 02-grpo-loss, probed after training, agrees with the loss TRL computed on the last step."""
    from notebook_run import checks_said

    said = checks_said(executed["notebook"])["02-grpo-loss"]["solution"]
    assert f"On the trainer's last step (step {CI_PARAMETERS['max_steps']}: 32 completions" in said, said


@pytest.mark.notebook
def test_the_live_view_left_its_final_chart(executed):
    charts = [o for c in executed["notebook"]["cells"] for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    train_cell = next(c for c in executed["notebook"]["cells"] if "trainer.train(" in "".join(c["source"]))
    assert any("image/png" in o.get("data", {}) for o in train_cell["outputs"]), "no live chart in the training cell"
    assert len(charts) >= 3  # live view, metrics, before/after


@pytest.fixture(scope="module")
def solved_rerun(executed, tmp_path_factory):
    """The learner's second Run All (issue 43, item 1): every exercise solved, `resume="auto"`, in a copy of the
    first run's runs folder (its checkpoint trained on the reward exercise's placeholder)."""
    import shutil

    from helpers.notebook_runner import execute as run_notebook

    runs, folder = tmp_path_factory.mktemp("rerun") / "runs", tmp_path_factory.mktemp("solved")
    shutil.copytree(executed["runs"], runs, ignore=shutil.ignore_patterns("*.ipynb"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_RUNS_DIR", str(runs))
        notebook = run_notebook(solved_copy(NOTEBOOK, folder), folder / "02-solved.ipynb",
                                {**CI_PARAMETERS, "resume": "auto"})
    summary = json.loads((runs / "grpo" / RUN_NAME / "summary.json").read_text())
    return {"notebook": notebook, "summary": summary, "runs": runs}


@pytest.mark.notebook
def test_a_fixed_reward_trains_again_and_is_named_from_the_run(solved_rerun):
    """The placeholder's checkpoint is not resumed for the learner's reward: the run starts over (in one line that
    says why), trains every step on the learner's reward, and says so from what the run folder recorded; section 12
    trains the finished right_answer_line."""
    summary, text = solved_rerun["summary"], outputs_text(solved_rerun["notebook"], html=True)
    assert "training: starting over (the reward functions differ)" in text
    assert "will resume" not in text and "Traceback" not in text
    assert [step["step"] for step in summary["per_step"]] == list(range(1, CI_PARAMETERS["max_steps"] + 1))
    assert summary["reward_is_yours"] is True and "This run trained on your last_number_right" in text
    assert summary["yours_steps"] == CI_PARAMETERS["hack_steps"] and "fixed" in summary["behaviour"]
    assert (solved_rerun["runs"] / "evals" / f"{RUN_NAME}_fix" / "run.json").is_file()
    kept = [p.name for p in (solved_rerun["runs"] / "grpo").iterdir() if p.name.startswith(f"{RUN_NAME}-")]
    assert len(kept) == 1  # the placeholder's run, moved aside, not deleted


def parameters_cell_values() -> dict:
    """`name = literal` assignments of the notebook's parameters cell."""
    cell = next(c for c in json.loads(NOTEBOOK.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    assignments = [node for node in ast.parse("".join(cell["source"])).body
                   if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)]
    return {node.targets[0].id: ast.literal_eval(node.value) for node in assignments}


def test_ci_parameters_exist():
    """papermill only warns about a parameter the notebook lacks; CI's must all be real."""
    values = parameters_cell_values()
    for name in CI_PARAMETERS:
        assert name in values, name


def test_the_first_code_cell_checks_every_parameter_before_anything_slow():
    """A wrong parameter (max_steps="abc") stops the first cell by name, before the model and the server start."""
    code = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    first = next(i for i, c in enumerate(code) if "parameters" in c["metadata"].get("tags", [])) + 1
    before_imports = "".join(code[first]["source"]).split("import torch")[0]
    assert 'check_parameters(globals(), "02")' in before_imports
