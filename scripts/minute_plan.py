"""The workshop's minute plan, written from one file: workshop/minute_plan.json.

That file holds each notebook's rows as taught in full (which sections' measured run minutes they add up,
the suggested teaching minutes, each exercise's time-box), the blocks around them, and two plans built from
them in workshop order: the 150-minute session and its 3-hour variant, with what the session leaves out
named as take-home. The run minutes come from the result file each notebook names (benchmarks/results/,
written by benchmarks/bench_notebooks.py or benchmarks/bench_grpo.py). A row takes its teaching time or its run
time, whichever is longer, plus its exercises, in whole minutes; a notebook's total is the sum of its rows,
a plan's the sum of its rows, each row starting where the one before ended.

A plan that breaks the workshop's rules is refused with a message naming the rule: a section or exercise
counted twice in a plan, the session over session_minutes, its training row starting after
training_starts_by, the variant over its minutes, an exercise in a training row (the learners' kernels are
busy then), an exercise of before_training after the training row, or a take-home list that is not exactly
what the session leaves out.

    .venv/bin/python scripts/minute_plan.py            # print every table
    .venv/bin/python scripts/minute_plan.py --write    # put them into the notebooks and INSTRUCTOR_GUIDE.md

The tables sit between `<!-- minute-plan:NAME -->` and `<!-- /minute-plan -->` (a notebook's first markdown
cell that has them; the guide's agenda (the session), agenda-3h (the variant) and take-home, a notebook's own
table where its plan block says "table_in": "guide", and a copy named NOTEBOOK-guide where it says "guide_copy");
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
    runs_cells: bool = True  # False: a row of exercises only (its run column says so)

    def __post_init__(self) -> None:
        # JSON reads 1e999 as inf and NaN as nan: either (or a negative) would reach the tables as nonsense
        for what, value in [("teach", self.teach), *((f"exercise {e!r}", m) for e, m in self.exercises.items())]:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"row {self.label!r}: {what} is {value!r}, not a number of minutes")
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"row {self.label!r}: {what} is {value!r} minutes; give a number from 0 up")

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


def _row(row: dict, data: dict, measured: dict[str, float]) -> Row:
    parts: list[float] = []
    run = None
    missing = [s for s in row.get("sections", []) if s not in measured]
    if "sections" in row and len(missing) < len(row["sections"]):
        parts = [measured[s] for s in row["sections"] if s in measured]
        run = sum(parts)
    for term in row.get("run_terms", []):
        runs = [r for r in data["runs"] if all(r.get(k) == v for k, v in term.get("where", {}).items())]
        run = (run or 0.0) + _mean([r[term["key"]] for r in runs]) * term.get("scale", 1.0)
    runs_cells = bool(row.get("sections") or row.get("run_terms") or "sections" not in row)
    return Row(row["label"], run, parts, missing, row["teach"], row.get("exercises", {}), runs_cells)


def _measured(notebook: dict) -> tuple[dict, dict[str, float]]:
    data, record = _run_record(notebook)
    return data, {s["section"]: s["minutes"] for s in record.get("sections", [])}


def rows(notebook: dict) -> list[Row]:
    data, measured = _measured(notebook)
    return [_row(row, data, measured) for row in notebook["rows"]]


def notebook_run_minutes(notebook: dict) -> float:
    data, record = _run_record(notebook)
    if record:
        return record["minutes"]
    return _mean([r["notebook_minutes"] for r in data["runs"] if r.get("rollouts") == "server"])


def _run_text(row: Row) -> str:
    if not row.runs_cells:
        return "— (no cells to run)"
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


# ---------------------------------------------------------------- the session and its 3-hour variant


def row_id(row: dict) -> str:
    """How a plan names a notebook row: its "id", else its label before the first '. ' ("1–3", "8")."""
    return row.get("id") or row["label"].split(". ", 1)[0]


@dataclass
class PlanRow:
    notebook: str | None  # None: a block (opening, break, close)
    row: Row
    sections: list[str]  # run by the learners
    shown: list[tuple[str, str]]  # (notebook, section) the instructor shows from the projector
    start: int = 0


def _notebooks(plan: dict) -> dict[str, dict]:
    return {b["notebook"]: b for b in plan["blocks"] if "notebook" in b}


def plan_rows(plan: dict, key: str) -> list[PlanRow]:
    """The rows of plan[key] ("session" or "three_hours") in order, each with its start minute. A row that names
    a block, notebook row, section or exercise the plan's blocks do not have is a PlanError."""
    title = plan[key]["title"]
    notebooks, blocks = _notebooks(plan), {b["block"]: b for b in plan["blocks"] if "block" in b}
    out, minute = [], 0
    for number, entry in enumerate(plan[key]["rows"], start=1):
        where = f"{title}, row {number}"
        if "block" in entry:
            if "teach" not in entry and entry["block"] not in blocks:
                raise PlanError(f"{where} names the block {entry['block']!r}, which 'blocks' does not have: "
                                f"give it a \"teach\" or name one of {', '.join(map(repr, blocks))}")
            teach = entry.get("teach", blocks.get(entry["block"], {}).get("teach"))
            found = PlanRow(None, Row(entry["block"], None, [], [], teach, {}, False), [], [])
        else:
            name = entry["notebook"]
            if name not in notebooks:
                raise PlanError(f"{where} names the notebook {name!r}, which 'blocks' does not have")
            notebook = notebooks[name]
            own = {row_id(r): r for r in notebook["rows"]}
            timeboxes = {e: m for r in notebook["rows"] for e, m in r.get("exercises", {}).items()}
            if "row" in entry:
                if entry["row"] not in own:
                    raise PlanError(f"{where}: {name} has no row {entry['row']!r} (its rows: {', '.join(own)})")
                row = {**own[entry["row"]], **{k: v for k, v in entry.items() if k in ("label", "teach")}}
                exercises = entry.get("exercises", list(row.get("exercises", {})))
            else:
                row, exercises = dict(entry), entry.get("exercises", [])
            sections_known = [s for r in notebook["rows"] for s in r.get("sections", [])]
            for section in row.get("sections", []):
                if section not in sections_known:
                    raise PlanError(f"{where}: {name} has no section {section!r} in its rows")
            for exercise in exercises:
                if exercise not in timeboxes:
                    raise PlanError(f"{where}: {name} has no exercise {exercise!r} in its rows")
            row["exercises"] = {e: timeboxes[e] for e in exercises}  # the time-boxes of the notebook's rows
            shown = []
            for part in entry.get("shown", []):
                if part["notebook"] not in notebooks:
                    raise PlanError(f"{where} shows the notebook {part['notebook']!r}, which 'blocks' does not have")
                known = [s for r in notebooks[part["notebook"]]["rows"] for s in r.get("sections", [])]
                for section in part["sections"]:
                    if section not in known:
                        raise PlanError(f"{where}: {part['notebook']} has no section {section!r} to show")
                    shown.append((part["notebook"], section))
            data, measured = _measured(notebook)
            found = PlanRow(name, _row(row, data, measured), list(row.get("sections", [])), shown)
        found.start = minute
        minute += found.row.minutes
        out.append(found)
    return out


def training_row(plan: dict, found: list[PlanRow]) -> int | None:
    """The index of the row that holds the training (plan["training"]: a notebook and its section), or None."""
    training = plan["training"]
    return next((i for i, r in enumerate(found)
                 if r.notebook == training["notebook"] and training["section"] in r.sections), None)


def training_start(plan: dict, found: list[PlanRow]) -> int | None:
    """The minute the training row starts at, or None when no row holds it."""
    at = training_row(plan, found)
    return None if at is None else found[at].start


def plan_problems(plan: dict, key: str, found: list[PlanRow]) -> list[str]:
    """What in plan[key] breaks the workshop's rules (empty when nothing does)."""
    title, problems = plan[key]["title"], []
    seen: dict[tuple, int] = {}
    for number, r in enumerate(found, start=1):
        things = [("section", r.notebook, s) for s in r.sections] + [("section", n, s) for n, s in r.shown]
        things += [("exercise", r.notebook, e) for e in r.row.exercises]
        for thing in things:
            if thing in seen:
                kind, notebook, name = thing
                problems.append(f"{kind} {name!r} of {notebook} is counted twice (rows {seen[thing]} and {number}): "
                                "a plan counts each section and exercise at most once")
            seen.setdefault(thing, number)
    total = sum(r.row.minutes for r in found)
    limit = plan["session_minutes"] if key == "session" else plan[key]["minutes"]
    if total > limit:
        problems.append(f"it sums to {total} minutes, more than its {limit}")
    training, at = plan["training"], training_row(plan, found)
    if at is None:
        problems.append(f"no row holds the training, section {training['section']!r} of {training['notebook']}")
    else:
        start = found[at].start
        if key == "session" and start > plan["training_starts_by"]:
            problems.append(f"the training (section {training['section']!r} of {training['notebook']}) starts at "
                            f"minute {start}, later than minute {plan['training_starts_by']}")
        if found[at].row.exercises:
            problems.append(f"the training row holds the exercises {', '.join(found[at].row.exercises)}: the "
                            "learners' kernels are busy while it trains, so what happens then is teaching")
        before = {e for r in found[:at] for e in r.row.exercises}
        for exercise in plan.get("before_training", []):
            if exercise not in before:
                problems.append(f"the exercise {exercise!r} is not done before the training (training uses it)")
    return [f"{title}: {p}" for p in problems]


def take_home_problems(plan: dict, found: list[PlanRow]) -> list[str]:
    """Whether 'take_home' names exactly what the session leaves out of the notebooks' rows."""
    every = {("section", b["notebook"],
              s) for b in _notebooks(plan).values() for r in b["rows"] for s in r.get("sections", [])}
    every |= {("exercise", b["notebook"],
               e) for b in _notebooks(plan).values() for r in b["rows"] for e in r.get("exercises", {})}
    session = {("section", r.notebook, s) for r in found for s in r.sections}
    session |= {("section", n, s) for r in found for n, s in r.shown}
    session |= {("exercise", r.notebook, e) for r in found for e in r.row.exercises}
    named = [(kind, item["notebook"], name) for item in plan["take_home"]
             for kind, names in (("section", item.get("sections", [])), ("exercise", item.get("exercises", [])))
             for name in names]
    problems = [f"take_home names the {k} {n!r} of {nb}, which no notebook row has" for k, nb, n in named
                if (k, nb, n) not in every]
    problems += [f"take_home names the {k} {n!r} of {nb}, which the session has" for k, nb, n in named
                 if (k, nb, n) in session]
    problems += [f"the {k} {n!r} of {nb} is neither in the session nor named in take_home"
                 for k, nb, n in sorted(every - session - set(named))]
    return problems


def checked_plans(plan: dict) -> dict[str, list[PlanRow]]:
    """Both plans' rows, or a PlanError that names every rule they break."""
    found = {key: plan_rows(plan, key) for key in ("session", "three_hours")}
    problems = [p for key, rows_ in found.items() for p in plan_problems(plan, key, rows_)]
    problems += take_home_problems(plan, found["session"])
    if problems:
        raise PlanError(f"{_shown(PLAN)} breaks the workshop's rules: " + "; ".join(problems))
    return found


def _short(notebook: str) -> str:
    return notebook.split("_", 1)[0]


def _run_files(plan: dict) -> str:
    by_file: dict[str, list[str]] = {}
    for b in _notebooks(plan).values():
        by_file.setdefault(b["run_file"], []).append(_short(b["notebook"]))
    return "; ".join(f"{', '.join(names)}: [{name}](benchmarks/results/{name})" for name, names in by_file.items())


def render_plan(plan: dict, key: str, found: list[PlanRow]) -> str:
    lines = []
    if key == "session":
        lines += [(f"*Run* is what the learners' cells compute with the default parameters, measured per section "
                   f"({_run_files(plan)}); *teach* and the exercises' time-boxes are suggestions. A row takes its "
                   "teaching time or its run time, whichever is longer, plus its exercises, and starts where the "
                   "row before it ended; a section shown from the projector is not run by the learners and adds "
                   "no run time. Each section and exercise is counted once."), ""]
    lines += ["| starts at | notebook | rows (sections) | run | teach | exercises (minutes) | minutes |",
              "|---|---|---|---|---|---|---|"]
    for r in found:
        if r.notebook is None:
            lines.append(f"| {r.start} | — | {r.row.label} | — | {r.row.teach} min | — | {r.row.minutes} |")
            continue
        run = _run_text(r.row)
        if r.shown:
            shown: dict[str, list[str]] = {}
            for n, section in r.shown:
                shown.setdefault(n, []).append(section.split(".")[0])
            run += "; shown, not run: " + "; ".join(f"`{n}` {', '.join(s)}" for n, s in shown.items())
        lines.append(f"| {r.start} | `{r.notebook}` | {r.row.label} | {run} | {r.row.teach} min | "
                     f"{_exercise_text(r.row.exercises)} | {r.row.minutes} |")
    total = sum(r.row.minutes for r in found)
    exercises = sum(sum(r.row.exercises.values()) for r in found)
    training = plan["training"]
    start = training_start(plan, found)
    if key == "session":
        limit = plan["session_minutes"]
        by = plan["training_starts_by"]
        rule = (f"; the plan requires it by minute {by}, so the rows before it have {by - start} "
                f"minute{'' if by - start == 1 else 's'} of slack")
    else:
        limit, rule = plan[key]["minutes"], ""
    lines += ["", (f"**{plan[key]['title']}: {total} minutes in all**, {exercises} of them exercises, against "
                   f"{limit} ({limit - total} to spare). **Training** (`{training['notebook']}`, section "
                   f"{training['section'].split('.')[0]}) **starts at minute {start}**{rule}.")]
    return "\n".join(lines)


def render_take_home(plan: dict, found: dict[str, list[PlanRow]]) -> str:
    variant = {("section", r.notebook, s) for r in found["three_hours"] for s in r.sections}
    variant |= {("exercise", r.notebook, e) for r in found["three_hours"] for e in r.row.exercises}
    timeboxes = {e: m for b in _notebooks(plan).values() for r in b["rows"] for e, m in r.get("exercises", {}).items()}
    lines = ["| notebook | sections | exercises (minutes) | in the 3-hour variant |", "|---|---|---|---|"]
    for item in plan["take_home"]:
        name = item["notebook"]
        sections, exercises = item.get("sections", []), item.get("exercises", [])
        inside = [s.split(".")[0] for s in sections if ("section", name, s) in variant]
        inside += [f"`{e}`" for e in exercises if ("exercise", name, e) in variant]
        lines.append(f"| `{name}` | {'; '.join(sections) or '—'} | "
                     f"{_exercise_text({e: timeboxes[e] for e in exercises})} | {', '.join(inside) or 'no'} |")
    full = ", ".join(f"`{_short(b['notebook'])}` {sum(r.minutes for r in rows(b))}" for b in _notebooks(plan).values())
    lines += ["", (f"Each notebook taught in full, by its own minute plan: {full} minutes. The plans above take "
                   "parts of them; these totals are not added to either plan.")]
    return "\n".join(lines)


def _described(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no {error} in it"
    if isinstance(error, ZeroDivisionError):
        return "no run in its run file matches a run_terms 'where'"
    return f"{type(error).__name__}: {error}"


def rendered(plan: dict | None = None) -> dict[str, str]:
    """Every table, by block name, from `plan` (default: the plan file). A plan or run file of the wrong shape is a
    PlanError naming the block; a plan that breaks the workshop's rules, a PlanError naming each rule."""
    plan = read_json(PLAN, RESTORE) if plan is None else plan
    where = _shown(PLAN)
    try:
        out = {}
        for number, block in enumerate(plan["blocks"], start=1):
            if "notebook" in block:
                where = f"{_shown(PLAN)}, block {number} ({block['notebook']})"
                in_guide = block.get("table_in") == "guide"  # the guide's links start at the repository's root
                out[block["notebook"]] = render_notebook(block, link_prefix="" if in_guide else "../")
                if block.get("guide_copy"):  # the notebook's own table, and a copy in the guide
                    out[f"{block['notebook']}-guide"] = render_notebook(block, link_prefix="")
        where = _shown(PLAN)
        found = checked_plans(plan)
        out["agenda"] = render_plan(plan, "session", found["session"])
        out["agenda-3h"] = render_plan(plan, "three_hours", found["three_hours"])
        out["take-home"] = render_take_home(plan, found)
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
    """Every table into its file; each new text is made first, so a damaged input leaves every file as it was,
    and every file to change is opened for writing before any is written, so one that cannot be written (read-only)
    leaves them all as they were too."""
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
    changed = {path: text for path, text in texts.items() if path.read_text(encoding="utf-8") != text}
    opened = {}
    try:
        for path in changed:
            try:
                opened[path] = path.open("r+", encoding="utf-8")  # "r+": opening writes nothing yet
            except OSError as e:
                raise PlanError(f"{_shown(path)} cannot be written ({e.strerror or e}); nothing was written: make it "
                                "writable and run this again") from None
        for path, file in opened.items():
            file.write(changed[path])
            file.truncate()
    finally:
        for file in opened.values():
            file.close()


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
