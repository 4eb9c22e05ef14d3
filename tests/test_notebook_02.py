"""Notebook 02 under papermill with CI parameters: a few real GRPO steps on the CPU, end to end.

Checks what the notebook claims: the weights changed, the offline wandb run holds the logged
steps, the local trace store holds the rubric's scoring calls, and the before/after table exists.
"""

import json
import time
from pathlib import Path

import papermill
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "02_traced_grpo_training.ipynb"
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
    papermill.execute_notebook(str(NOTEBOOK), str(out), parameters=CI_PARAMETERS, cwd=str(NOTEBOOK.parent),
                               kernel_name="python3", progress_bar=False)
    wall_s = time.monotonic() - started
    summary = json.loads((runs_dir("grpo", RUN_NAME) / "summary.json").read_text())
    return {"notebook": json.loads(out.read_text()), "summary": summary, "wall_s": wall_s}


def _text(notebook: dict) -> str:
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.append("".join(output.get("data", {}).get("text/plain", "")))
            parts.append("".join(output.get("data", {}).get("text/html", "")))
    return "\n".join(parts)


@pytest.mark.notebook
def test_runs_clean_within_budget(executed):
    print(f"notebook 02 (CI parameters) ran in {executed['wall_s']:.0f} s")
    assert "Traceback" not in _text(executed["notebook"])
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

    after = load_eval_run(f"{RUN_NAME}_after")
    per_example = after.info["params"]["rollouts_per_example"]
    assert len(after.rollouts) == CI_PARAMETERS["num_eval_examples"] * per_example
    text = _text(executed["notebook"])
    assert "before" in text and "after" in text
    summary = executed["summary"]
    assert summary["before_reward"] is not None and summary["after_reward"] is not None


def test_committed_notebook_is_clean():
    """Static checks, no execution: outputs stripped, a parameters cell, nothing that hangs papermill."""
    import re

    notebook = json.loads(NOTEBOOK.read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") is None and not c.get("outputs") for c in code)
    assert "parameters" in code[0]["metadata"].get("tags", [])
    assert notebook["cells"][0]["cell_type"] == "markdown"
    source = "\n".join("".join(c["source"]) for c in code)
    for pattern in (r"^\s*!.*&\s*$", r"\binput\(", r"getpass", r"/work/", r"/tmp/"):
        assert not re.search(pattern, source, re.MULTILINE), pattern
    for name in CI_PARAMETERS:  # every CI parameter exists in the parameters cell
        assert re.search(rf"^{name} = ", "".join(code[0]["source"]), re.MULTILINE), name


def test_notebook_calls_only_existing_helpers():
    """API drift: every `grpo.X` / `gpu_plan.X` the notebook calls exists."""
    import re

    from helpers import gpu_plan, grpo

    source = "\n".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
                       if c["cell_type"] == "code")
    for module, name in re.findall(r"\b(grpo|gpu_plan)\.([A-Za-z_]\w*)", source):
        assert hasattr({"grpo": grpo, "gpu_plan": gpu_plan}[module], name), f"{module}.{name}"
