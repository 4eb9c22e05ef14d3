"""The workshop's minute plan, written from one file: workshop/minute_plan.json.

That file holds, in workshop order, each notebook's rows (which sections' measured run minutes they add
up, the suggested teaching minutes, each exercise's time-box) and the blocks around them. The run minutes
come from the result file each notebook names (benchmarks/results/, written by scripts/bench_notebooks.py
or scripts/bench_grpo.py). A row takes its teaching time or its run time, whichever is longer, plus its
exercises, in whole minutes; a notebook's total is the sum of its rows, the session's the sum of its blocks.

    .venv/bin/python scripts/minute_plan.py            # print every table
    .venv/bin/python scripts/minute_plan.py --write    # put them into the notebooks and INSTRUCTOR_GUIDE.md

The tables sit between `<!-- minute-plan:NAME -->` and `<!-- /minute-plan -->` (a notebook's first markdown
cell that has them; the guide's agenda); tests/test_figures.py fails when the committed text differs from
what this script writes.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "workshop" / "minute_plan.json"
RESULTS = ROOT / "benchmarks" / "results"
GUIDE = ROOT / "INSTRUCTOR_GUIDE.md"
NOTEBOOKS = ROOT / "notebooks"
BLOCK = re.compile(r"<!-- minute-plan:(?P<name>[\w-]+) -->\n.*?<!-- /minute-plan -->", re.DOTALL)


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
    data = json.loads((RESULTS / notebook["run_file"]).read_text())
    if "notebooks" in data:
        (record,) = [n for n in data["notebooks"] if n["notebook"] == notebook["notebook"]]
        return data, record
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
    lines += ["", (f"**In all: {core} minutes** for the opening, notebooks 00–03 and the close, against a "
                   f"{session}-minute session ({core - session:+d}); notebook 04, the appendix, adds {appendix}. "
                   "Each notebook's own minute plan (at its top) splits its minutes by section.")]
    return "\n".join(lines)


def rendered() -> dict[str, str]:
    plan = json.loads(PLAN.read_text())
    out = {b["notebook"]: render_notebook(b) for b in plan["blocks"] if "notebook" in b}
    out["agenda"] = render_agenda(plan)
    return out


def replace_blocks(text: str, blocks: dict[str, str]) -> tuple[str, set[str]]:
    """`text` with each marked block replaced by its rendering, and the names it held."""
    seen: set[str] = set()

    def swap(match: re.Match) -> str:
        name = match["name"]
        seen.add(name)
        return f"<!-- minute-plan:{name} -->\n{blocks[name]}\n<!-- /minute-plan -->"

    return BLOCK.sub(swap, text), seen


def targets() -> dict[Path, list[int]]:
    """Each file with minute-plan blocks: the guide, and each notebook (with the cells that hold them)."""
    found: dict[Path, list[int]] = {GUIDE: []}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        found[path] = [i for i, c in enumerate(cells) if BLOCK.search("".join(c["source"]))]
    return found


def stale() -> list[str]:
    """What differs from what this script would write (empty when every table is up to date)."""
    blocks, problems, seen = rendered(), [], set()
    for path, cell_indices in targets().items():
        if path == GUIDE:
            text = GUIDE.read_text()
            new, names = replace_blocks(text, blocks)
            seen |= names
            if new != text:
                problems.append(f"{path.name}: the agenda differs from the plan")
            continue
        cells = json.loads(path.read_text())["cells"]
        for i in cell_indices:
            text = "".join(cells[i]["source"])
            new, names = replace_blocks(text, blocks)
            seen |= names
            if new != text:
                problems.append(f"{path.name}, cell {i}: its minute plan differs from the plan")
    problems += [f"no file has the minute-plan block {name!r}" for name in sorted(set(blocks) - seen)]
    return problems


def write() -> None:
    blocks = rendered()
    for path, cell_indices in targets().items():
        if path == GUIDE:
            GUIDE.write_text(replace_blocks(GUIDE.read_text(), blocks)[0])
            continue
        if not cell_indices:
            continue
        notebook = json.loads(path.read_text())
        for i in cell_indices:
            text = replace_blocks("".join(notebook["cells"][i]["source"]), blocks)[0]
            notebook["cells"][i]["source"] = text.splitlines(keepends=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the tables into the notebooks and the guide")
    args = parser.parse_args()
    if args.write:
        write()
        for problem in stale():
            print(problem)
        return
    for name, text in rendered().items():
        print(f"## {name}\n\n{text}\n")


if __name__ == "__main__":
    main()
