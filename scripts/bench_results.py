"""Where every benchmark script keeps its result: benchmarks/results/<bench>-<date>.json.

Each file records when, on what and from which commit it was measured (date, commit, CPU model,
cores, load average before the run), next to the figures the script printed. README and notebook
headers cite these files for every figure they state.

    from bench_results import machine_info, write_result   # scripts/ is on sys.path for a script
    info = machine_info()           # before the run: the load average is read now
    ...
    write_result("grpo", info, {"table": {...}, ...})

Also the argparse types the scripts share (`whole_number`, `positive_number`): a bad value is refused by
name before anything runs, and 0 is never read as "not given" (`args.steps or default` starts a full run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def whole_number(at_least: int = 1, at_most: int | None = None, what: str = ""):
    """An argparse type: a whole number from `at_least` to `at_most`; `what` says what it counts."""
    about = f" ({what})" if what else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{about}") from None
        if value < at_least or (at_most is not None and value > at_most):
            bounds = f"at least {at_least}" + (f" and at most {at_most}" if at_most is not None else "")
            raise argparse.ArgumentTypeError(f"{value} is out of range: it must be {bounds}{about}")
        return value
    return parse


def positive_number(what: str = ""):
    """An argparse type: a finite number above 0; `what` says what it is."""
    about = f" ({what})" if what else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number{about}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be a number above 0{about}")
        return value
    return parse
