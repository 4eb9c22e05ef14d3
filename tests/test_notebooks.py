"""Notebooks 00 and 01, executed headlessly with papermill against the real local stack, once each: as
committed, with a solution probe after each exercise's check (tests/notebook_run.py)."""

import re

import pytest
from notebook_run import NOTEBOOKS, assert_every_check, execute_probed, outputs_text

NOTEBOOK_01_CI = {"num_examples": 4, "rollouts_per_example": 2, "max_tokens": 96}


@pytest.mark.notebook
def test_00_setup(tmp_path):
    notebook = execute_probed("00_setup", tmp_path / "00_setup.ipynb", max_tokens=24)
    assert_every_check(notebook, NOTEBOOKS / "00_setup.ipynb")
    text = outputs_text(notebook)
    assert "Traceback" not in text
    assert "SmolLM2-135M-Instruct answered in" in text
    versions = next(part for part in text.split("\n\n") if "pinned" in part)
    assert "False" not in versions and "missing" not in versions, versions  # pins installed


EVALUATE_TREE = [  # op name endings, parent before child, as Weave's verifiers integration nests them
    "Environment.evaluate", "Environment.generate", "Environment.a_generate",
    "MultiTurnEnv.rollout", "Environment.get_model_response", "openai.chat.completions.create",
]


@pytest.mark.notebook
def test_01_traced_gsm8k_eval(tmp_path, monkeypatch):
    from helpers.evaluation import load_eval_run
    from helpers.tracing.session import open_local_traces
    from helpers.tracing.views import calls_table

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))  # the kernel inherits it
    notebook = execute_probed("01_traced_gsm8k_eval", tmp_path / "01.ipynb", **NOTEBOOK_01_CI)
    assert_every_check(notebook, NOTEBOOKS / "01_traced_gsm8k_eval.ipynb")
    text = outputs_text(notebook)
    for noise in ("Traceback", "Event loop is closed", "Warning", "WARNING"):
        assert noise not in text, f"{noise!r} in the notebook's output"
    images = [o for c in notebook["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the reward-component and rubric-design charts did not render"

    for name, format_metric in (("01_gsm8k_eval", "hash_format"), ("01_gsm8k_eval_think", "format_reward_func")):
        run = load_eval_run(tmp_path / "runs" / "evals" / name)
        assert len(run.rollouts) == 8
        assert set(run.rollouts["example"]) == {0, 1, 2, 3}
        assert run.rollouts["reward"].between(0, 1.5).all()
        assert {"correct_answer", format_metric, "reward", "completion", "parsed"} <= set(run.rollouts)
        assert run.info["params"]["rollouts_per_example"] == 2 and run.info["wall_s"] > 0
        assert run.info["modes"]["model"] == "local"

    session = open_local_traces("verifiers-course", tmp_path / "runs" / "traces" / "verifiers-course")
    calls = calls_table(session=session)
    evaluates = calls[calls["op"].str.endswith("Environment.evaluate")]
    assert len(evaluates) == 2  # the classic run and the '#### N' run
    # the closing count is the store's, not a table made earlier in the notebook
    printed = re.search(r"traced calls in this project: (\d+);", text)
    assert printed and int(printed.group(1)) == len(session.get_calls()), printed
    trace = calls[calls["trace_id"] == evaluates.iloc[-1]["trace_id"]]
    by_id = trace.set_index("call_id")
    for child_op in EVALUATE_TREE[1:]:
        children = trace[trace["op"].str.endswith(child_op)]
        assert len(children), f"no {child_op} call in the evaluate trace"
        parent_op = by_id.loc[children.iloc[0]["parent_id"], "op"]
        assert parent_op.endswith(EVALUATE_TREE[EVALUATE_TREE.index(child_op) - 1]), (child_op, parent_op)
    assert len(trace[trace["op"].str.endswith("openai.chat.completions.create")]) == 8
    assert trace[trace["op"].str.endswith("chat.completions.create")]["completion_tokens"].gt(0).all()
    assert trace["op"].str.contains("score_rollout").any()
