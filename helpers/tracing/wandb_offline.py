"""Reading an offline wandb run (local mode: wandb writes run-*.wandb files under runs/wandb instead
of sending them to W&B) back into a notebook, with wandb's own reader. Notebooks call it as
`helpers.wandb_history()`; in cloud mode the same metrics are on the run's W&B page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from helpers.paths import runs_dir


def latest_wandb_run(base: str | Path | None = None) -> Path:
    """The newest offline run folder (offline-run-*) under WANDB_DIR (runs/wandb by default)."""
    base = Path(base) if base else runs_dir("wandb")
    runs = sorted(base.glob("**/offline-run-*"), key=lambda p: p.name)  # names start with the date
    if not runs:
        raise FileNotFoundError(f"no offline wandb run under {base}")
    return runs[-1]


def wandb_history(run_dir_or_latest: str | Path | None = None) -> pd.DataFrame:
    """The metrics an offline wandb run logged (one row per step), read from its run-*.wandb file
    with `wandb leet inspect --json` (wandb's own reader; no network, no W&B UI)."""
    path = Path(run_dir_or_latest) if run_dir_or_latest else latest_wandb_run()
    if path.is_dir() and not list(path.glob("run-*.wandb")):
        path = latest_wandb_run(path)
    files = [path] if path.is_file() else sorted(path.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {path}")
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(files[0])],
                         check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"wandb leet inspect failed on {files[0]}: {out.stderr.strip()[-500:]}")
    rows = []
    for line in out.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "history":
            rows.append(record["history"]["item"])
    history = pd.DataFrame(rows)
    if "_step" in history:
        history = history.sort_values("_step").set_index("_step")
    return history


def wandb_table(run_dir: str | Path, key: str) -> pd.DataFrame:
    """A wandb.Table that an offline run logged under `key` (its last version), as a DataFrame: the
    run's history names the table's file, which wandb wrote under the run's files/ folder."""
    history = wandb_history(run_dir)
    column = f"{key}.path"
    if column not in history or history[column].dropna().empty:
        logged = sorted({c.removesuffix(".path") for c in history.columns if c.endswith(".path")})
        raise KeyError(f"the run logged no table {key!r}; its tables: {logged}")
    run = Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent
    table = json.loads((run / "files" / history[column].dropna().iloc[-1]).read_text())
    return pd.DataFrame(table["data"], columns=table["columns"])
