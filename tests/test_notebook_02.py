"""Notebook 02 under papermill with CI parameters: a few real GRPO steps on the CPU, end to end.

Checks what the notebook claims: the weights changed, the offline wandb run holds the logged
steps, the local trace store holds the rubric's scoring calls, and the before/after table exists.
"""

import ast
import json
import time
from pathlib import Path

import pytest
from notebook_run import NOTEBOOKS, execute, outputs_text

NOTEBOOK = NOTEBOOKS / "02_traced_grpo_training.ipynb"
RUN_NAME = "02_ci"
# A one-line worked example in the system prompt makes SmolLM2 write '#### N' within 40 tokens in
# about 1 of 8 samples (measured), so a 2-step run gets groups with different rewards, i.e. signal.
CI_SYSTEM_PROMPT = ("Answer in one short line, then the final answer as '#### <number>'. Example:\n"
                    "Question: Tom has 3 apples and buys 5 more. How many apples does he have?\n"
                    "Answer: 3 + 5 = 8\n#### 8")
CI_PARAMETERS = {
    "max_steps": 2, "prompts_per_step": 2, "num_generations": 4, "max_completion_tokens": 40, "learning_rate": 1e-5,
    "num_train_examples": 40, "num_eval_examples": 2, "eval_max_tokens": 40, "save_steps": 2, "resume": "never",
    "run_name": RUN_NAME, "system_prompt": CI_SYSTEM_PROMPT, "seed": 0,
}


@pytest.fixture(scope="module")
def executed():
    from helpers.paths import runs_dir

    out = runs_dir("notebooks") / "02_traced_grpo_training.ci.ipynb"  # kept for a look afterwards
    started = time.monotonic()
    notebook = execute(NOTEBOOK.stem, out, **CI_PARAMETERS)
    wall_s = time.monotonic() - started
    summary = json.loads((runs_dir("grpo", RUN_NAME) / "summary.json").read_text())
    return {"notebook": notebook, "summary": summary, "wall_s": wall_s}


@pytest.mark.notebook
def test_runs_clean_within_budget(executed):
    print(f"notebook 02 (CI parameters) ran in {executed['wall_s']:.0f} s")
    assert "Traceback" not in outputs_text(executed["notebook"], html=True)
    assert executed["summary"]["steps"] == CI_PARAMETERS["max_steps"]


@pytest.mark.notebook
def test_weights_changed(executed):
    assert executed["summary"]["weights_changed"] > 0, (
        "no weight moved: every group got equal rewards (no GRPO signal) or the optimizer did not step")


@pytest.mark.notebook
def test_wandb_offline_run_holds_the_steps(executed):
    from helpers.trace_views import wandb_history

    history = wandb_history(executed["summary"]["wandb_dir"])
    steps = set(history["train/global_step"].dropna().astype(int))
    assert set(range(1, CI_PARAMETERS["max_steps"] + 1)) <= steps
    assert history["train/reward"].notna().sum() >= CI_PARAMETERS["max_steps"]


@pytest.mark.notebook
def test_trace_store_holds_rubric_scoring_calls(executed):
    from helpers.tracing import open_local_traces

    store = executed["summary"]["trace_store"]
    session = open_local_traces(store_path=store, project=Path(store).name)
    ops = [call.op_name for call in session.get_calls()]
    assert any("score_rollouts" in op for op in ops), ops[:20]
    assert sum("grpo_reward_batch" in op for op in ops) >= CI_PARAMETERS["max_steps"]


@pytest.mark.notebook
def test_before_after_table(executed):
    from helpers.evaluation import load_eval_run

    before, after = load_eval_run(f"{RUN_NAME}_before"), load_eval_run(f"{RUN_NAME}_after")
    per_example = after.info["params"]["rollouts_per_example"]
    assert len(after.rollouts) == CI_PARAMETERS["num_eval_examples"] * per_example
    # same examples, same sampling, same runtime: only training differs
    assert list(before.rollouts["question"]) == list(after.rollouts["question"])
    assert before.info["params"]["sampling_args"] == after.info["params"]["sampling_args"]
    assert before.info["endpoint"] == after.info["endpoint"] == "local-transformers"
    text = outputs_text(executed["notebook"], html=True)
    assert "before" in text and "after" in text
    summary = executed["summary"]
    assert summary["before_reward"] is not None and summary["after_reward"] is not None


def parameters_cell_values() -> dict:
    """`name = literal` assignments of the notebook's parameters cell (the first code cell)."""
    cell = next(c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code")
    assignments = [node for node in ast.parse("".join(cell["source"])).body
                   if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)]
    return {node.targets[0].id: ast.literal_eval(node.value) for node in assignments}


def test_ci_parameters_exist():
    """papermill only warns about a parameter the notebook lacks; CI's must all be real."""
    values = parameters_cell_values()
    for name in CI_PARAMETERS:
        assert name in values, name


def test_parameters_match_the_measured_defaults():
    """The notebook's GRPO parameters are GRPOSettings' defaults: the run the header's figures describe."""
    from dataclasses import fields

    from helpers.grpo import GRPOSettings

    values = parameters_cell_values()
    defaults = GRPOSettings()
    shared = [f.name for f in fields(GRPOSettings) if f.name in values]
    assert len(shared) >= 8, shared
    for name in shared:
        default = getattr(defaults, name)
        assert values[name] == default, f"{name}: notebook {values[name]!r}, GRPOSettings {default!r}"
