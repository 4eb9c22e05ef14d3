"""Benchmark of the course as a learner runs it: every notebook, in order, with its default
parameters, in one fresh runs folder (so notebook 02 reuses notebook 01's examples, as in class).
Prints minutes per notebook and per section, and writes benchmarks/results/notebooks-<date>.json:
the figures the README, the notebooks' headers and INSTRUCTOR_GUIDE.md's agenda cite, and notebook 02's
own figures (before/after, what it learned) as measured in workshop order.

    .venv/bin/python benchmarks/bench_notebooks.py                 # all notebooks (~40 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_notebooks.py 00 01            # some of them: notebooks-00-01-<date>.json
    .venv/bin/python benchmarks/bench_notebooks.py 04 --fresh-v1-env  # notebook 04, its environment made anew
    .venv/bin/python benchmarks/bench_notebooks.py 01 02 --solved   # with every exercise solved (solutions/)
    .venv/bin/python benchmarks/bench_notebooks.py 02 --solved -p precision float32   # as a laptop without bfloat16

-p NAME VALUE sets a parameter of every notebook run that has it (papermill's -p); the result file's name and
its "parameters" key say which were set.

With --solved each exercise cell holds its solution (tests/notebook_run.py's solved_copy), as a learner who
solved them runs the notebook: notebook 02 then trains with the learner's reward as the solution writes it
(as committed, its reward exercise is a blank that pays for the wrong thing).

A section is a "## " heading and the cells under it; its minutes are the sum of its cells' run times
as papermill records them. Notebook 04 runs in its own kernel (.venv-v1): scripts/setup_v1_env.sh
makes it first (a no-op when it is up to date; with --fresh-v1-env it is deleted and made anew, and the
setup's seconds and the environment's size are recorded).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from helpers.machine_speed import machine_record
from helpers.results import machine_info, write_result

V1_ENV = ROOT / ".venv-v1"


def setup_v1_env(fresh: bool) -> dict:
    """Make notebook 04's environment with the project's script; its seconds and size in MB."""
    import shutil
    import subprocess

    if fresh and V1_ENV.exists():
        shutil.rmtree(V1_ENV)
    started = time.monotonic()
    subprocess.run(["bash", str(ROOT / "scripts" / "setup_v1_env.sh")], check=True, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    size = subprocess.run(["du", "-sm", str(V1_ENV)], check=True, capture_output=True, text=True).stdout.split()[0]
    return {"fresh": fresh, "setup_s": round(seconds, 1), "size_mb": int(size),
            "note": "pip's cache was as this machine had it (packages downloaded before are not downloaded again)"}


def sections(notebook: dict) -> list[dict]:
    """(heading, minutes) for each "## " section of an executed notebook, the title cell's part as "start"."""
    found = [{"section": "start", "seconds": 0.0}]
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("## "):
            found.append({"section": source.splitlines()[0][3:].strip(), "seconds": 0.0})
        found[-1]["seconds"] += float((cell.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0)
    return [{"section": s["section"], "minutes": round(s["seconds"] / 60, 2)} for s in found]


GRPO_FIGURES = ("steps", "train_minutes", "sec_per_step", "generation_s_sec_per_step", "sync_s_sec_per_step",
                "scoring_s_sec_per_step", "update_s_sec_per_step", "before_source", "before_reward", "after_reward",
                "before_accuracy", "after_accuracy", "held_out", "reward_first", "reward_last",
                "last_number_right_first", "last_number_right_last", "correct_answer_first", "correct_answer_last",
                "behaviour", "verdict", "yours_steps", "peak_rss_gb")


def grpo_figures(runs: Path, path: Path) -> dict:
    """Notebook 02's own figures (its summary.json), measured in the order a workshop runs the notebooks:
    after notebook 01, whose examples and sampling it reuses for before/after."""
    import json

    summary = runs / "grpo" / "02_grpo_cpu" / "summary.json"
    if not path.name.startswith("02") or not summary.is_file():
        return {}
    figures = json.loads(summary.read_text())
    return {"grpo": {key: figures.get(key) for key in GRPO_FIGURES}}


def parameters_of(path: Path, given: dict) -> dict:
    """The given parameters that the notebook at `path` has (its cell tagged "parameters"); a name that no notebook
    to run has is refused before anything runs (main)."""
    import json

    cells = json.loads(path.read_text())["cells"]
    source = "".join("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return {name: value for name, value in given.items() if f"\n{name} =" in f"\n{source}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    numbers = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

    def number(text: str) -> str:  # (argparse's choices refuse an empty list of a positional nargs="*")
        if text not in numbers:
            raise argparse.ArgumentTypeError(f"there is no notebook {text!r}; the notebooks are {' '.join(numbers)}")
        return text

    parser.add_argument("numbers", nargs="*", type=number, help="notebook numbers, e.g. 00 02 (default: all)")
    parser.add_argument("--fresh-v1-env", action="store_true",
                        help="delete .venv-v1 and time making it anew (notebook 04's environment)")
    parser.add_argument("--solved", action="store_true", help="every exercise cell replaced by its solution")
    parser.add_argument("--suffix", default="", help="added to the file's name, so a new run keeps an older one")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a notebook parameter, as papermill's -p (default: each notebook's own)")
    args = parser.parse_args()
    import os

    from helpers.grpo.memory import PeakMemory
    from helpers.notebook_runner import NOTEBOOKS, _value, execute, uninstall_learner_module
    from helpers.parameters import NOTEBOOK_PARAMETERS, problems

    sys.path.insert(0, str(ROOT / "tests"))
    from notebook_run import solved_copy

    given = {name: _value(value) for name, value in args.parameter}
    paths = [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if not args.numbers or p.name[:2] in args.numbers]
    unknown = set(given) - {name for path in paths for name in parameters_of(path, given)}
    if unknown:
        parser.error(f"no notebook to run has the parameter(s) {', '.join(sorted(unknown))}")
    # each value by the rules of every notebook that has it, now: the notebook's first cell refused it only after
    # the notebooks before it had run (as bench_grpo.py's notebook_overrides does for notebook 02)
    for path in paths:
        rules = NOTEBOOK_PARAMETERS.get(path.name[:2], {})
        own = {name: value for name, value in parameters_of(path, given).items() if name in rules}
        if found := problems(own, {name: rules[name] for name in own}):
            parser.error(f"-p, notebook {path.name[:2]}: " + "; ".join(found))
    if args.suffix and not re.fullmatch(r"[a-z0-9][a-z0-9-]*", args.suffix):
        parser.error(f"--suffix {args.suffix!r}: lower-case letters, digits and '-' only (a file name)")
    info = machine_info()
    # this machine's matrix speed before the runs: notebook 00 scales notebook 02's minutes by it (machine_speed)
    extra = {"machine_speed": machine_record()}
    if any(p.name.startswith("04") for p in paths):
        print("bench_notebooks: notebook 04's environment (scripts/setup_v1_env.sh) ...", flush=True)
        extra["v1_env"] = setup_v1_env(args.fresh_v1_env)
        print(f"  {extra['v1_env']}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as runs:
        os.environ["COURSE_RUNS_DIR"] = runs  # the kernels inherit it
        (Path(runs) / "solved").mkdir()
        for path in paths:
            print(f"bench_notebooks: {path.name} ...", flush=True)
            started = time.monotonic()
            source = solved_copy(path, Path(runs) / "solved") if args.solved else path
            with PeakMemory() as peak:  # the kernel and its model servers: this process's children
                executed = execute(source, Path(runs) / path.name, parameters_of(path, given))
            results.append({"notebook": path.stem, "minutes": round((time.monotonic() - started) / 60, 2),
                            "sections": sections(executed), **grpo_figures(Path(runs), path),
                            "peak_kernel_and_servers_gb": peak.record()["children_gb"]})
            print(f"  {results[-1]['minutes']} min, peak {results[-1]['peak_kernel_and_servers_gb']} GB resident "
                  "(kernel and servers)", flush=True)
        uninstall_learner_module(runs)
    print(f"\n{info['cpu']}, {info['cores']} cores, load before {info['load_avg_before']}")
    for result in results:
        print(f"\n{result['notebook']}: {result['minutes']} min")
        for section in result["sections"]:
            print(f"  {section['minutes']:6.2f}  {section['section']}")
    write_result("notebooks", info, {"notebooks": results, **extra, "solved": args.solved, "parameters": given,
                                     "total_minutes": round(sum(r["minutes"] for r in results), 2)},
                 # a subset does not replace the all-notebooks file
                 suffix="-".join([*args.numbers, *(f"{k}-{v}" for k, v in given.items()),
                                  *filter(None, [args.suffix])]))


if __name__ == "__main__":
    main()
