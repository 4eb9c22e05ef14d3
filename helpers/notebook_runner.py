"""Run a course notebook headlessly with papermill: for the tests, `scripts/run_notebooks.sh` and
the notebooks benchmark.

    python -m helpers.notebook_runner notebooks/01_traced_gsm8k_eval.ipynb runs/notebooks/01.ipynb \\
        -p num_examples 4

The kernel talks to papermill over IPC (a socket file in Jupyter's runtime folder) instead of TCP
on 127.0.0.1: no port is opened, and the kernel has no reason to warn about unencrypted TCP.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import papermill
from traitlets.config import Config

from helpers.paths import PROJECT_ROOT

NOTEBOOKS = PROJECT_ROOT / "notebooks"
IPC_KERNEL = Config({"KernelManager": {"transport": "ipc"}})


def execute(notebook: str | Path, out: str | Path, parameters: dict | None = None, *,
            progress_bar: bool = False, kernel_name: str | None = None) -> dict:
    """Run `notebook` with `parameters` (cwd: notebooks/), save the executed copy to `out`, return it.

    `kernel_name`: the Jupyter kernel to run it in; None: the one the notebook names (`python3`, this
    environment, for notebooks 00-03; `verifiers-v1`, made by scripts/setup_v1_env.sh, for notebook 04)."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        str(notebook), str(out), parameters=parameters or {}, cwd=str(NOTEBOOKS), kernel_name=kernel_name,
        progress_bar=progress_bar, config=IPC_KERNEL,
        # one output per stream, carriage returns applied: a progress bar is saved as its last line, not as a
        # line per refresh (verifiers' "Running N rollouts" bar from a worker thread), as JupyterLab shows it
        coalesce_streams=True,
    )
    return json.loads(Path(out).read_text())


LEARNER_MODULE = "my-gsm8k-feedback"  # notebook 03 installs it (editable) from its runs folder


def uninstall_learner_module(runs_dir: str | Path) -> None:
    """Undo notebook 03's editable install when it points into `runs_dir` (a temporary runs folder):
    left behind, it would point at a deleted folder, and the next install in a new kernel fails."""
    try:
        url = metadata.distribution(LEARNER_MODULE).read_text("direct_url.json") or ""
    except metadata.PackageNotFoundError:
        return
    if str(runs_dir) in url:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", LEARNER_MODULE], check=False,
                       capture_output=True, stdin=subprocess.DEVNULL)


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a plain string


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook")
    parser.add_argument("out")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = parser.parse_args()
    execute(args.notebook, args.out, {name: _value(value) for name, value in args.parameter}, progress_bar=True)


if __name__ == "__main__":
    main()
