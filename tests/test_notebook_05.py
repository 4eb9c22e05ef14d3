"""Notebook 05, notebook 02's appendix, under papermill: it reads the committed result files, trains nothing and
starts no model server, so it runs in seconds; with a folder that lacks the result files, each table it cannot
make says "not measured yet" instead of failing."""

import json
import shutil

import pytest
from notebook_run import NOTEBOOKS, execute, outputs_text

NOTEBOOK = NOTEBOOKS / "05_appendix_grpo_designs.ipynb"
CELLS_SECONDS = 60  # what its cells may take, all together (kernel start not counted)


def _cells_seconds(notebook: dict) -> float:
    return sum(float((c.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0) for c in notebook["cells"])


@pytest.mark.notebook
def test_05_reads_the_committed_files_in_under_a_minute(tmp_path, monkeypatch):
    from helpers.results import result_record

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))
    notebook = execute(NOTEBOOK.stem, tmp_path / "05.ipynb")
    text = outputs_text(notebook, html=True)
    assert "Traceback" not in text and "Error" not in text
    assert _cells_seconds(notebook) < CELLS_SECONDS, _cells_seconds(notebook)
    written = [p.name for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert not written, written  # it trains nothing, saves nothing (the 2-GPU plan only names its folder)
    # each committed file it reads is shown from that file: the screen, the designs, the format terms
    assert "arith-1step-20-short" in text and "expert iteration: keep the right ones" in text
    record = result_record("arith-hack-one-line")
    per_seed = ", ".join(f"{g:+.1%}" for g in record["summary"]["diff_sampled_lenient"]["per_seed"])
    assert per_seed in text
    settings = ("nb02-bf16", "nb02-fp32", "nb02-fp32-avx2", "nb02-fix-right-line", "nb02-placeholder",
                "nb02-fix-right-line-fp32-avx2", "nb02-placeholder-fp32-avx2", "nb02-placeholder-fp32")
    for setting in settings:
        if result_record(setting) is None:  # files still being measured say so
            assert "not measured yet" in text
            assert setting in ("nb02-fp32", "nb02-fp32-avx2", "nb02-fix-right-line") or \
                f"no learnability-{setting}-*.json" in text
    if all(result_record(setting) for setting in settings):  # every file committed: every table shows its runs
        assert "not measured yet" not in text
    assert any("image/png" in o.get("data", {}) for c in notebook["cells"] for o in c.get("outputs", []))


@pytest.mark.notebook
def test_05_says_not_measured_yet_where_a_file_is_missing(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    from helpers.results import RESULTS_DIR

    for name in ("screen-2026-12-05.json", "learnability-arith-hack-format-2026-12-05.json"):
        shutil.copy(RESULTS_DIR / name, folder / name)
    notebook = execute(NOTEBOOK.stem, tmp_path / "05.ipynb", results_folder=str(folder))
    text = outputs_text(notebook, html=True)
    assert "Traceback" not in text
    assert text.count("not measured yet") >= 4
    assert "no learnability-nb02-bf16-*.json" in text


def test_05_has_a_parameters_cell_the_rules_know():
    from helpers.parameters import NOTEBOOK_PARAMETERS

    cell = next(c for c in json.loads(NOTEBOOK.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    assert "results_folder" in "".join(cell["source"]) and "results_folder" in NOTEBOOK_PARAMETERS["05"]
