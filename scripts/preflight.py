"""Pre-flight for a learner's machine: can it run the course? One table of check / ok / found / fix.

    bash scripts/preflight.sh        (or: .venv/bin/python scripts/preflight.py)

Under a minute: it starts the packaged model once on 127.0.0.1, loads GSM8K (from GSM8K_DIR, or
like the notebooks from the HF hub or its cache) and starts a Jupyter kernel.
Exit code 0 when every check passes, 1 otherwise.

    bash scripts/preflight.sh --notebook-04    also checks what notebook 04 (the appendix) needs: its own
                                               environment .venv-v1 and a package index for uv
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = "bash scripts/setup_env.sh"
# What the course needs. Memory: helpers.install_check.notebook_02_memory (from notebook 02's result file).
# Disk: one notebook 02 run left 2.6 GB in runs/ (a 1.6 GB checkpoint with optimizer state, the 0.5 GB final
# model, the 0.5 GB converted start model), and saving briefly holds a second checkpoint.
RUNS_NEED_GB = 5.0
MEASURED_CORES = 2  # the course's minutes are measured on 2 cores
COLUMNS = (("check", 16), ("ok", 4), ("found", 46), ("fix", 56))


@dataclass
class Check:
    check: str
    ok: bool
    found: str
    fix: str


def python_venv() -> tuple[bool, str]:
    version = ".".join(map(str, sys.version_info[:3]))
    in_venv = sys.prefix != sys.base_prefix
    where = _shown(Path(sys.prefix)) if in_venv else f"not in a virtual environment ({sys.prefix})"
    return sys.version_info[:2] == (3, 11) and in_venv, f"Python {version}, {where}"


def pinned_packages() -> tuple[bool, str]:
    from helpers.install_check import versions_table

    table = versions_table()
    wrong = table[~table["ok"]]
    if wrong.empty:
        return True, f"all {len(table)} key packages at their pinned versions"
    return False, "; ".join(f"{name} {row.installed} (pinned {row.pinned})" for name, row in wrong.iterrows())


def local_model() -> tuple[bool, str]:
    from helpers.serving.llama_server import LocalModelServer

    with LocalModelServer(parallel=1, startup_timeout_s=30) as server:
        endpoint = server.endpoint()
        started = time.monotonic()
        answer = endpoint.client.with_options(timeout=30).chat.completions.create(
            model=endpoint.model, messages=[{"role": "user", "content": "Say hello in three words."}],
            max_tokens=12, temperature=0.0)
        latency = time.monotonic() - started
    reply = " ".join((answer.choices[0].message.content or "").split())
    return bool(reply), f"{endpoint.model} up in {server.startup_s:.1f} s, replied in {latency:.1f} s: {reply!r}"


def gsm8k() -> tuple[bool, str]:
    import datasets
    from gsm8k_course import load_gsm8k

    datasets.disable_progress_bars()
    source = f"GSM8K_DIR={os.environ['GSM8K_DIR']}" if os.environ.get("GSM8K_DIR") else "openai/gsm8k (HF hub)"
    rows = {split: len(load_gsm8k(split)) for split in ("train", "test")}
    return True, f"train {rows['train']} and test {rows['test']} rows from {source}"


def disk() -> tuple[bool, str]:
    from helpers.paths import runs_dir

    runs = runs_dir()
    free_gb = shutil.disk_usage(runs).free / 2**30
    return free_gb >= RUNS_NEED_GB, f"{free_gb:.1f} GB free for {_shown(runs)}/ (needs {RUNS_NEED_GB:.0f} GB)"


@functools.cache
def this_machine():
    """Read once: notebook 02's verdicts all judge the same reading of this machine."""
    from helpers.install_check import this_machine

    return this_machine()


def notebook_02(verdict: str) -> Callable[[], tuple[bool, str]]:
    """A check made of one of helpers.install_check's verdicts on notebook 02 (notebook 00's table shows them)."""
    def check() -> tuple[bool, str]:
        from helpers import install_check

        return getattr(install_check, verdict)(this_machine())
    return check


def cpu_cores() -> tuple[bool, str]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()  # macOS: no affinity
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""  # Windows: none
    return cores >= MEASURED_CORES, f"{cores} cores{load}"


def jupyter_kernel() -> tuple[bool, str]:
    from jupyter_client.manager import start_new_kernel

    from helpers.paths import runs_dir

    started = time.monotonic()
    with open(runs_dir("logs") / "preflight-kernel.log", "wb") as log:  # the kernel's own chatter
        manager, client = start_new_kernel(kernel_name="python3", startup_timeout=30, stderr=log)
    lines: list[str] = []
    try:
        client.execute_interactive(
            "import sys; print(sys.prefix)", timeout=15,
            output_hook=lambda msg: lines.append(msg["content"]["text"]) if msg["msg_type"] == "stream" else None)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    kernel_prefix = Path("".join(lines).strip())
    found = f"python3 kernel up in {time.monotonic() - started:.1f} s, runs {_shown(kernel_prefix)}"
    same = kernel_prefix.resolve() == Path(sys.prefix).resolve()
    return same, found if same else f"{found}, not this venv"


# (check, function, fix). A function returns (ok, what it found); one that raises fails its check
# with the error's first line (the course's own errors name their fix in plain words).
CHECKS: list[tuple[str, Callable[[], tuple[bool, str]], str]] = [
    ("Python 3.11 venv", python_venv,
     f"{SETUP} (PYTHON=/path/to/python3.11), then use .venv/bin/python"),
    ("pinned packages", pinned_packages, f"rm -rf .venv && {SETUP}"),
    ("local model", local_model,
     f"{SETUP}; the server's log is under runs/logs/"),
    ("GSM8K", gsm8k, "set GSM8K_DIR to a folder with train.jsonl and test.jsonl"),
    ("disk", disk, f"free {RUNS_NEED_GB:.0f} GB, or set COURSE_RUNS_DIR to a folder on a bigger disk"),
    ("CPU cores", cpu_cores,
     (f"the course's minutes are measured on {MEASURED_CORES} cores: expect longer runs, or use the "
     "1-hour parameters (INSTRUCTOR_GUIDE.md)")),
    # What notebook 02's training will do here, as notebook 00's hardware table says it. Only memory can fail,
    # and its verdict says what to do.
    ("precision", notebook_02("notebook_02_precision"), ""),
    ("training time", notebook_02("notebook_02_minutes"), ""),
    ("memory", notebook_02("notebook_02_memory"), ""),
    ("platform", notebook_02("platform_known"), ""),
    ("Jupyter kernel", jupyter_kernel,
     ("another 'python3' kernelspec shadows this venv's (.venv/bin/jupyter kernelspec list shows "
     "where): .venv/bin/jupyter kernelspec remove python3; its log: runs/logs/preflight-kernel.log")),
]


V1_SETUP = "bash scripts/setup_v1_env.sh (it installs from a package index: the internet or a mirror)"


def notebook_04_env() -> tuple[bool, str]:
    import json
    import subprocess

    python = ROOT / ".venv-v1" / "bin" / "python"
    if not python.exists():
        return False, ".venv-v1 is missing"
    version = subprocess.run([str(python), "-c", "import verifiers; print(verifiers.__version__)"],
                             capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    spec = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "verifiers-v1" / "kernel.json"
    registered = spec.is_file() and json.loads(spec.read_text())["argv"][0] == str(python)
    found = f".venv-v1 with verifiers {version or '(not importable)'}; kernel 'verifiers-v1' " + \
        ("registered" if registered else "not registered in this venv")
    return version == "0.4.0" and registered, found


def uv_index() -> tuple[bool, str]:
    """Notebook 04's first evaluation prepares verifiers' chat program with `uv sync --script`: uv resolves
    its packages from UV_DEFAULT_INDEX (or UV_INDEX_URL), else PyPI."""
    import urllib.request

    index = os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple"
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/openai/", timeout=5) as reply:
            return reply.status == 200, f"uv's index {index} answers"
    except OSError as e:
        return False, f"uv's index {index} cannot be reached ({getattr(e, 'reason', e)})"


NOTEBOOK_04_CHECKS: list[tuple[str, Callable[[], tuple[bool, str]], str]] = [
    ("notebook 04 env", notebook_04_env, V1_SETUP),
    ("uv's index", uv_index,
     ("notebook 04 needs the internet, or a package mirror named by UV_DEFAULT_INDEX before Jupyter starts "
      "(the offline kit does not cover it); otherwise skip notebook 04, the appendix")),
]


def run_checks(checks: list | None = None) -> list[Check]:
    """Every check, in order; a broken install still gets its table."""
    results = []
    for name, function, fix in CHECKS if checks is None else checks:
        try:
            ok, found = function()
        except Exception as e:  # noqa: BLE001 - whatever breaks, the learner gets a row saying what
            ok, found = False, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        results.append(Check(name, ok, found, fix))
    return results


def format_table(results: list[Check]) -> str:
    """Fixed-width columns; long cells wrap onto continuation lines. The fix shows on failures only."""
    rows = [[name for name, _ in COLUMNS]]
    rows += [[r.check, "yes" if r.ok else "no", r.found, "" if r.ok else r.fix] for r in results]
    lines = []
    for row in rows:
        cells = [textwrap.wrap(text, width) or [""] for text, (_, width) in zip(row, COLUMNS)]
        for i in range(max(map(len, cells))):
            parts = [(cell[i] if i < len(cell) else "").ljust(width) for cell, (_, width) in zip(cells, COLUMNS)]
            lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebook-04", action="store_true", help="also check what notebook 04 needs")
    args = parser.parse_args(argv)
    started = time.monotonic()
    print("preflight: checking this machine for the course (under a minute) ...", flush=True)
    results = run_checks(CHECKS + NOTEBOOK_04_CHECKS if args.notebook_04 else CHECKS)
    print(format_table(results))
    passed = sum(r.ok for r in results)
    print(f"preflight: {passed} of {len(results)} checks passed in {time.monotonic() - started:.0f} s")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
