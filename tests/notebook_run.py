"""Run a course notebook headlessly with papermill and read back what a reader would see; find its
exercises and their solutions (solutions/<notebook>.md), and put the solutions in.

Two ways to run a notebook with its solutions:
- `solved_copy`: the solution replaces each exercise cell, and everything after it sees the solution;
- `probed_copy`: the notebook as committed, with one *probe* cell after each exercise's check that runs
  the solution, the code cells between the exercise and its check, and the check again, in a copy of the
  kernel's names. The check cells as committed say "not yet", each probe says "correct", and every cell
  after a probe goes on with the blank exercise, exactly as a learner who skipped it would run it. So one
  run proves both that the committed notebook runs end to end and that every solution passes its check
  in context (notebooks 00-02; 03 and 04 show the solved module and task *downstream*, so they run twice).
"""

import json
import re
from pathlib import Path

from helpers.notebook_runner import NOTEBOOKS
from helpers.notebook_runner import execute as run_notebook

SOLUTIONS = NOTEBOOKS.parent / "solutions"
CHECK_CALL = re.compile(r"""helpers\.check\(\s*["']([0-9]{2}-[a-z0-9-]+)["']""")
PROBE_TAG = "solution-probe"


def execute(name: str, out: Path, **parameters) -> dict:
    """Run notebooks/<name>.ipynb with `parameters`, save the executed copy to `out`, return it as JSON."""
    return run_notebook(NOTEBOOKS / f"{name}.ipynb", out, parameters)


def execute_probed(name: str, out: Path, kernel_name: str | None = None, **parameters) -> dict:
    """Run notebooks/<name>.ipynb as committed, with a solution probe after each exercise's check."""
    return run_notebook(probed_copy(NOTEBOOKS / f"{name}.ipynb", out.parent), out, parameters,
                        kernel_name=kernel_name)


def outputs_text(notebook: dict, html: bool = False) -> str:
    """All text a reader would see in the executed notebook (with `html`, tables' HTML too)."""
    kinds = ("text/plain", "text/html") if html else ("text/plain",)
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.extend("".join(output.get("data", {}).get(kind, "")) for kind in kinds)
    return "\n".join(parts)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def is_exercise(cell: dict) -> bool:
    return "exercise" in cell.get("metadata", {}).get("tags", [])


def exercises(path: Path) -> list[tuple[int, str, int]]:
    """(index of the exercise cell, exercise name, index of its check): the check is the first
    helpers.check(...) after the exercise, before the next exercise: usually the next cell; a prediction
    is checked once the notebook has measured it."""
    found = []
    all_cells = cells(path)
    for index, cell in enumerate(all_cells):
        if not is_exercise(cell):
            continue
        match = None
        for check_index in range(index + 1, len(all_cells)):
            later = all_cells[check_index]
            if is_exercise(later):
                break
            match = CHECK_CALL.search("".join(later["source"])) if later["cell_type"] == "code" else None
            if match:
                break
        assert match, f"{path.name}: the exercise cell {index} is not followed by a helpers.check(...) cell"
        found.append((index, match.group(1), check_index))
    return found


def solutions(path: Path) -> tuple[dict[str, str], str]:
    """The solution code of each exercise of a notebook, and the text of its review answers."""
    text = (SOLUTIONS / f"{path.stem}.md").read_text()
    blocks = dict(re.findall(r"^## Exercise (\S+)\n.*?```python\n(.*?)```", text, flags=re.MULTILINE | re.DOTALL))
    review = text.split("## Review questions", 1)[1] if "## Review questions" in text else ""
    return blocks, review


def solved_copy(path: Path, folder: Path) -> Path:
    """The notebook with each exercise cell replaced by its solution."""
    notebook = json.loads(path.read_text())
    blocks, _ = solutions(path)
    for index, name, _ in exercises(path):
        notebook["cells"][index]["source"] = blocks[name]
    copy = folder / path.name
    copy.write_text(json.dumps(notebook, indent=1))
    return copy


def probed_copy(path: Path, folder: Path) -> Path:
    """The notebook as committed, with a solution probe (tagged PROBE_TAG) after each exercise's check."""
    notebook = json.loads(path.read_text())
    blocks, _ = solutions(path)
    probes = []
    for index, name, check_index in exercises(path):
        between = [notebook["cells"][i] for i in range(index + 1, check_index + 1)]
        sources = [blocks[name], *("".join(c["source"]) for c in between if c["cell_type"] == "code")]
        probes.append((check_index, {
            "cell_type": "code", "id": f"probe-{name}", "execution_count": None, "outputs": [],
            "metadata": {"tags": [PROBE_TAG], "exercise": name},
            "source": (f"# tests only: {name}'s solution and its check, in a copy of this kernel's names\n"
                       "__probe = dict(globals())\n"
                       f"for __source in {sources!r}:\n"
                       f"    exec(compile(get_ipython().transform_cell(__source), '<solution {name}>', 'exec'), "
                       "__probe)\n"
                       "del __probe, __source\n"),
        }))
    for check_index, probe in sorted(probes, key=lambda item: -item[0]):  # from the end: indexes stay valid
        notebook["cells"].insert(check_index + 1, probe)
    copy = folder / f"{path.stem}.probed.ipynb"
    copy.write_text(json.dumps(notebook, indent=1))
    return copy


def checks_said(notebook: dict) -> dict[str, dict[str, str]]:
    """What each exercise's check said in an executed probed copy: {name: {"blank": ..., "solution": ...}}."""
    said: dict[str, dict[str, str]] = {}
    for cell in notebook["cells"]:
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
        if PROBE_TAG in cell["metadata"].get("tags", []):
            said.setdefault(cell["metadata"]["exercise"], {})["solution"] = text
        elif cell["cell_type"] == "code":
            for name in CHECK_CALL.findall("".join(cell["source"])):
                said.setdefault(name, {})["blank"] = text
    return said


def assert_every_check(notebook: dict, path: Path) -> None:
    """Each exercise as committed got "not yet", and its solution "correct", in one probed run."""
    said = checks_said(notebook)
    for _, name, _ in exercises(path):
        assert f"not yet — {name}" in said[name].get("blank", ""), f"{name} as committed: {said[name].get('blank')!r}"
        solution = said[name].get("solution", "")
        assert f"correct — {name}" in solution and "not yet" not in solution, f"{name}'s solution: {solution[-1500:]!r}"
