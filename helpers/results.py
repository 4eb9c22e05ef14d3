"""The result files in benchmarks/results/<bench>-<date>.json: how a benchmark writes one, and how the
notebooks read them back.

Each file records when, on what and from which commit it was measured (date, commit, CPU model and
flags, cores, load average before and after the run), next to the figures the benchmark printed. The
README, the guides and the notebook headers cite these files for every figure they state.

    from helpers.results import machine_info, write_result
    info = machine_info()           # before the run: the load average is read now
    ...
    write_result("grpo", info, {"table": {...}, ...})
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path

from helpers.local.paths import PROJECT_ROOT as ROOT

RESULTS_DIR = ROOT / "benchmarks" / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")  # what decides float32 vs bfloat16 speed


def cpu_flags() -> dict:
    """Which of CPU_FLAGS this CPU has (bfloat16 is ~14x slower than float32 without avx512_bf16/AMX)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return {flag: flag in flags for flag in CPU_FLAGS}


def machine_info() -> dict:
    """The facts a reader needs to judge a figure; call it before the run (load average now)."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "cpu": _cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def write_result(bench: str, info: dict, result: dict, *, suffix: str = "") -> Path:
    """Write benchmarks/results/<bench>[-<suffix>]-<date>.json and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    day = info["date"][:10]
    name = f"{bench}-{suffix}-{day}" if suffix else f"{bench}-{day}"
    path = RESULTS_DIR / f"{name}.json"
    record = {"bench": bench, **info, "load_avg_after": [round(x, 2) for x in os.getloadavg()], **result}
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"\nresult written to {path.relative_to(ROOT)}")
    return path
