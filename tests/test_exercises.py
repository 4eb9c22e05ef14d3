"""Exercises and review questions: each exercise cell is followed by its check, has a solution in
solutions/<notebook>.md and a registered check; each notebook ends with 5-8 review questions whose
answers are in its solutions file. Under papermill, every notebook runs with the solutions put in
place of its exercise cells, and every check then says "correct" (the notebook tests run them as
committed, where the checks say "not yet")."""

import json
import re
from pathlib import Path

import pytest
from test_notebook_03 import CI_PARAMETERS as NOTEBOOK_03_CI

from helpers.checks import CHECKS, _load_checks
from helpers.local.notebook_runner import NOTEBOOKS, execute

ROOT = NOTEBOOKS.parent
SOLUTIONS = ROOT / "solutions"
NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r"""helpers\.check\(\s*["']([0-9]{2}-[a-z0-9-]+)["']""")
# Small runs: the exercises do not depend on how long anything trains or how many examples run.
FAST_PARAMETERS = {
    "00_setup": {"max_tokens": 24},
    "01_traced_gsm8k_eval": {"num_examples": 2, "rollouts_per_example": 2, "max_tokens": 64},
    "02_traced_grpo_training": {"max_steps": 1, "per_device_train_batch_size": 4, "num_generations": 4,
                                "max_completion_length": 16, "num_train_examples": 8, "num_eval_examples": 1,
                                "eval_max_tokens": 16, "resume": "never", "run_name": "02_exercises"},
    "03_multiturn_and_tools": NOTEBOOK_03_CI,
}


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def is_exercise(cell: dict) -> bool:
    return "exercise" in cell.get("metadata", {}).get("tags", [])


def exercises(path: Path) -> list[tuple[int, str]]:
    """(index of the exercise cell, exercise name from the first helpers.check(...) after it, before the
    next exercise: usually the next cell; a prediction is checked once the notebook has measured it)."""
    found = []
    all_cells = cells(path)
    for index, cell in enumerate(all_cells):
        if not is_exercise(cell):
            continue
        match = None
        for later in all_cells[index + 1:]:
            if is_exercise(later):
                break
            match = CHECK_CALL.search("".join(later["source"])) if later["cell_type"] == "code" else None
            if match:
                break
        assert match, f"{path.name}: the exercise cell {index} is not followed by a helpers.check(...) cell"
        found.append((index, match.group(1)))
    return found


def solutions(path: Path) -> tuple[dict[str, str], str]:
    """The solution code of each exercise of a notebook, and the text of its review answers."""
    text = (SOLUTIONS / f"{path.stem}.md").read_text()
    blocks = dict(re.findall(r"^## Exercise (\S+)\n.*?```python\n(.*?)```", text, flags=re.MULTILINE | re.DOTALL))
    review = text.split("## Review questions", 1)[1] if "## Review questions" in text else ""
    return blocks, review


def review_questions(path: Path) -> list[str]:
    last = "".join(cells(path)[-1]["source"])
    assert last.startswith("## Review questions"), f"{path.name} does not end with its review questions"
    return re.findall(r"^\d+\. ", last, flags=re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_exercises_have_checks_and_solutions(path):
    _load_checks()
    found = exercises(path)
    assert len(found) >= 2, f"{path.name} has {len(found)} exercises; each notebook has at least 2"
    blocks, _ = solutions(path)
    for _, name in found:
        assert name.startswith(path.name[:2] + "-"), f"{name}: exercise names start with the notebook number"
        assert name in CHECKS, f"no check registered for {name} (helpers/checks/notebook_{path.name[:2]}.py)"
        assert name in blocks, f"no solution for {name} in solutions/{path.stem}.md"
        assert "# your code here" in "".join(cells(path)[_]["source"]), f"{name}: the cell needs '# your code here'"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_review_questions_and_their_answers(path):
    questions = review_questions(path)
    assert 5 <= len(questions) <= 8, f"{path.name} has {len(questions)} review questions (5-8)"
    _, review = solutions(path)
    answers = re.findall(r"^\d+\. \*\*", review, flags=re.MULTILINE)
    assert len(answers) == len(questions), f"solutions/{path.stem}.md answers {len(answers)} of {len(questions)}"


def test_every_check_belongs_to_an_exercise():
    _load_checks()
    used = {name for path in NOTEBOOK_PATHS for _, name in exercises(path)}
    assert set(CHECKS) == used, set(CHECKS) ^ used


def solved_copy(path: Path, folder: Path) -> Path:
    notebook = json.loads(path.read_text())
    blocks, _ = solutions(path)
    for index, name in exercises(path):
        notebook["cells"][index]["source"] = blocks[name]
    copy = folder / path.name
    copy.write_text(json.dumps(notebook, indent=1))
    return copy


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_with_the_solutions_every_check_says_correct(path, tmp_path, monkeypatch, uninstall_learner_module):
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))  # the kernel inherits it
    names = [name for _, name in exercises(path)]
    executed = execute(solved_copy(path, tmp_path), tmp_path / "out.ipynb", FAST_PARAMETERS.get(path.stem, {}))
    said = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    for name in names:
        assert f"correct — {name}" in said, f"{name}: {said[-1500:]}"
    assert "not yet —" not in said
