"""The workshop's minute plan, written from one file: workshop/minute_plan.json.

That file holds, in workshop order, each notebook's rows (which sections' measured run minutes they add
up, the suggested teaching minutes, each exercise's time-box) and the blocks around them. The run minutes
come from the result file each notebook names (benchmarks/results/, written by scripts/bench_notebooks.py
or scripts/bench_grpo.py). A row takes its teaching time or its run time, whichever is longer, plus its
exercises, in whole minutes; a notebook's total is the sum of its rows, the session's the sum of its blocks.

    .venv/bin/python scripts/minute_plan.py            # print every table
    .venv/bin/python scripts/minute_plan.py --write    # put them into the notebooks and INSTRUCTOR_GUIDE.md

The tables sit between `<!-- minute-plan:NAME -->` and `<!-- /minute-plan -->` (a notebook's first markdown
cell that has them; the guide's agenda, and a notebook's own table where its plan block says "table_in": "guide");
tests/test_figures.py fails when the committed text differs from
what this script writes. A missing or damaged input (the plan, a run file it names, a notebook) stops it with
a message that names the file and what is wrong, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "workshop" / "minute_plan.json"
RESULTS = ROOT / "benchmarks" / "results"
GUIDE = ROOT / "INSTRUCTOR_GUIDE.md"
NOTEBOOKS = ROOT / "notebooks"
BLOCK = re.compile(r"<!-- minute-plan:(?P<name>[\w-]+) -->\n.*?<!-- /minute-plan -->", re.DOTALL)


class PlanError(Exception):
    """An input this script cannot use; the message names the file and what is wrong with it."""


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def read_json(path: Path, fix: str):
    """A JSON input file, or a PlanError naming it and `fix` (how to get a good copy back)."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise PlanError(f"{_shown(path)} is missing; {fix}") from None
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not JSON, not UTF-8
        raise PlanError(f"{_shown(path)} cannot be read as JSON ({e}); {fix}") from None


RESTORE = "restore it from git (`git checkout -- <file>`)"


@dataclass
class Row:
    label: str
    run: float | None  # measured minutes; None: not measured on its own
    run_parts: list[float]
    unmeasured: list[str]  # sections the run file does not have (added to the notebook after it was measured)
    teach: int
    exercises: dict[str, int]

    @property
    def minutes(self) -> int:
        return math.ceil(max(self.run or 0.0, self.teach) - 1e-9) + sum(self.exercises.values())


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _run_record(notebook: dict) -> tuple[dict, dict]:
    data = read_json(RESULTS / notebook["run_file"], f"{RESTORE}, or name another run file in {_shown(PLAN)}")
    if "notebooks" in data:
        found = [n for n in data["notebooks"] if n["notebook"] == notebook["notebook"]]
        if len(found) != 1:
            raise PlanError(f"benchmarks/results/{notebook['run_file']} has {len(found)} records of notebook "
                            f"{notebook['notebook']}, not one: name a run file of that notebook in {_shown(PLAN)}")
        return data, found[0]
    return data, {}


def rows(notebook: dict) -> list[Row]:
    data, record = _run_record(notebook)
    measured = {s["section"]: s["minutes"] for s in record.get("sections", [])}
    out = []
    for row in notebook["rows"]:
        parts: list[float] = []
        run = None
        missing = [s for s in row.get("sections", []) if s not in measured]
        if "sections" in row and len(missing) < len(row["sections"]):
            parts = [measured[s] for s in row["sections"] if s in measured]
            run = sum(parts)
        for term in row.get("run_terms", []):
            runs = [r for r in data["runs"] if all(r.get(k) == v for k, v in term.get("where", {}).items())]
            run = (run or 0.0) + _mean([r[term["key"]] for r in runs]) * term.get("scale", 1.0)
        out.append(Row(row["label"], run, parts, missing, row["teach"], row.get("exercises", {})))
    return out


def notebook_run_minutes(notebook: dict) -> float:
    data, record = _run_record(notebook)
    if record:
        return record["minutes"]
    return _mean([r["notebook_minutes"] for r in data["runs"] if r.get("rollouts") == "server"])


def _run_text(row: Row) -> str:
    if row.run is None:
        text = "not measured on its own"
    elif len(row.run_parts) > 1:
        text = f"{row.run:.1f} min ({' + '.join(f'{p:.2f}' for p in row.run_parts)})"
    else:
        text = f"{row.run:.1f} min"
    if row.unmeasured and row.run is not None:
        text += f"; not in the run file: {', '.join(row.unmeasured)}"
    return text


def _exercise_text(exercises: dict[str, int]) -> str:
    return ", ".join(f"`{name}` {minutes}" for name, minutes in exercises.items()) or "—"


def render_notebook(notebook: dict, link_prefix: str = "../") -> str:
    data, _ = _run_record(notebook)
    found = rows(notebook)
    total = sum(r.minutes for r in found)
    exercises = sum(sum(r.exercises.values()) for r in found)
    load = data.get("load_avg_before", [None])[0]
    lines = [
        (f"**Minute plan for a workshop: {total} minutes in all, {exercises} of them exercises.** *Run* is what "
        f"the cells compute with the defaults, measured on {data.get('cores')} cores of an {data.get('cpu')} at load "
        f"average {load} ([benchmarks/results/{notebook['run_file']}]({link_prefix}benchmarks/results/"
        f"{notebook['run_file']}), {data.get('date', '')[:10]}); *teach* is a suggestion; a row takes its teaching "
        "time or its run time, whichever is longer, plus its exercises' time-boxes (written by "
        "`scripts/minute_plan.py` from `workshop/minute_plan.json`)."),
    ]
    if notebook.get("run_note"):
        lines.append(f"{notebook['run_note']}.")
    lines += ["", "| section | run | teach | exercises (minutes) | minutes |", "|---|---|---|---|---|"]
    for r in found:
        lines.append(f"| {r.label} | {_run_text(r)} | {r.teach} min | {_exercise_text(r.exercises)} | {r.minutes} |")
    return "\n".join(lines)


def render_agenda(plan: dict) -> str:
    lines = ["| block | run (measured) | minutes | of which exercises |", "|---|---|---|---|"]
    core = appendix = 0
    for block in plan["blocks"]:
        if "notebook" in block:
            found = rows(block)
            minutes = sum(r.minutes for r in found)
            exercises = sum(sum(r.exercises.values()) for r in found)
            name = f"`{block['notebook']}`" + (" (appendix)" if block.get("appendix") else "")
            run = (f"{notebook_run_minutes(block):.1f} min ([{block['run_file']}]"
                   f"(benchmarks/results/{block['run_file']}))")
            lines.append(f"| {name} | {run} | {minutes} | {exercises} |")
        else:
            minutes = block["teach"]
            lines.append(f"| {block['block']} | — | {minutes} | — |")
        if block.get("appendix"):
            appendix += minutes
        else:
            core += minutes
    session = plan["session_minutes"]
    in_guide = [f"`{b['notebook']}`" for b in plan["blocks"] if b.get("table_in") == "guide"]
    where = f" (at its top; {', '.join(in_guide)}'s below, in this guide)" if in_guide else " (at its top)"
    lines += ["", (f"**In all: {core} minutes** for the opening, notebooks 00–03 and the close, against a "
                   f"{session}-minute session ({core - session:+d}); notebook 04, the appendix, adds {appendix}. "
                   f"Each notebook's own minute plan{where} splits its minutes by section.")]
    return "\n".join(lines)


def _described(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no {error} in it"
    if isinstance(error, ZeroDivisionError):
        return "no run in its run file matches a run_terms 'where'"
    return f"{type(error).__name__}: {error}"


def rendered() -> dict[str, str]:
    """Every table, by block name. A plan or run file of the wrong shape is a PlanError naming the block."""
    plan = read_json(PLAN, RESTORE)
    where = _shown(PLAN)
    try:
        out = {}
        for number, block in enumerate(plan["blocks"], start=1):
            if "notebook" in block:
                where = f"{_shown(PLAN)}, block {number} ({block['notebook']})"
                in_guide = block.get("table_in") == "guide"  # the guide's links start at the repository's root
                out[block["notebook"]] = render_notebook(block, link_prefix="" if in_guide else "../")
        where = _shown(PLAN)
        out["agenda"] = render_agenda(plan)
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise PlanError(f"{where}: {_described(e)}; fix the plan (its 'about' says what each block holds) "
                        f"or {RESTORE}") from None
    return out


def replace_blocks(text: str, blocks: dict[str, str]) -> tuple[str, set[str]]:
    """`text` with each marked block replaced by its rendering, and the names it held."""
    seen: set[str] = set()

    def swap(match: re.Match) -> str:
        name = match["name"]
        seen.add(name)
        if name not in blocks:
            raise PlanError(f"a minute-plan block is named {name!r}, and {_shown(PLAN)} has no block of that name: "
                            f"rename it to one of {', '.join(blocks)}")
        return f"<!-- minute-plan:{name} -->\n{blocks[name]}\n<!-- /minute-plan -->"

    return BLOCK.sub(swap, text), seen


def targets() -> dict[Path, list[int]]:
    """Each file with minute-plan blocks: the guide, and each notebook (with the cells that hold them)."""
    found: dict[Path, list[int]] = {GUIDE: []}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        found[path] = [i for i, c in enumerate(_cells(path)) if BLOCK.search("".join(c["source"]))]
    return found


def _guide() -> str:
    try:
        return GUIDE.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:
        raise PlanError(f"{_shown(GUIDE)} cannot be read ({e}); {RESTORE}") from None


def _cells(path: Path) -> list[dict]:
    cells = read_json(path, RESTORE)
    try:
        cells = cells["cells"]
        for cell in cells:
            "".join(cell["source"])
    except (KeyError, TypeError) as e:
        raise PlanError(f"{_shown(path)} is not a notebook ({_described(e)}); {RESTORE}") from None
    return cells


def stale() -> list[str]:
    """What differs from what this script would write (empty when every table is up to date)."""
    blocks, problems, seen = rendered(), [], set()
    for path, cell_indices in targets().items():
        if path == GUIDE:
            text = _guide()
            new, names = replace_blocks(text, blocks)
            seen |= names
            if new != text:
                problems.append(f"{path.name}: the agenda differs from the plan")
            continue
        cells = _cells(path)
        for i in cell_indices:
            text = "".join(cells[i]["source"])
            new, names = replace_blocks(text, blocks)
            seen |= names
            if new != text:
                problems.append(f"{path.name}, cell {i}: its minute plan differs from the plan")
    problems += [f"no file has the minute-plan block {name!r}" for name in sorted(set(blocks) - seen)]
    return problems


def write() -> None:
    """Every table into its file; each new text is made first, so a damaged input leaves every file as it was."""
    blocks, texts = rendered(), {}
    for path, cell_indices in targets().items():
        if path == GUIDE:
            texts[path] = replace_blocks(_guide(), blocks)[0]
        elif cell_indices:
            notebook = read_json(path, RESTORE)
            for i in cell_indices:
                text = replace_blocks("".join(notebook["cells"][i]["source"]), blocks)[0]
                notebook["cells"][i]["source"] = text.splitlines(keepends=True)
            texts[path] = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    for path, text in texts.items():
        path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the tables into the notebooks and the guide")
    args = parser.parse_args()
    try:
        if args.write:
            write()
            for problem in stale():
                print(problem)
            return
        for name, text in rendered().items():
            print(f"## {name}\n\n{text}\n")
    except PlanError as e:
        sys.exit(f"minute_plan: {e}")


if __name__ == "__main__":
    main()
