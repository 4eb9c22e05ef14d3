"""How long the test command takes: runs `bash scripts/test.sh` (or `--quick`) as CI does, reads pytest's
own per-test durations (its JUnit XML), prints a table per file and writes
benchmarks/results/tests-<date>.json (tests-quick-<date>.json for the quick tier) with the wall time, the
outcome, every file's seconds, the slowest tests, and the CPU with its flags.

    .venv/bin/python benchmarks/bench_tests.py            # the whole suite (CI's command)
    .venv/bin/python benchmarks/bench_tests.py --quick    # the quick tier
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

from helpers.results import machine_info, write_result


def read_junit(path: Path) -> tuple[dict, list, dict]:
    """Per-file seconds, every test's (seconds, id, outcome), and the outcome counts."""
    files: dict[str, float] = collections.defaultdict(float)
    tests, counts = [], collections.Counter()
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        seconds = float(case.get("time") or 0)
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        files[module] += seconds
        counts[outcome] += 1
        tests.append((seconds, f"{module}::{case.get('name')}", outcome))
    return dict(files), sorted(tests, reverse=True), dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the quick tier (scripts/test.sh --quick)")
    parser.add_argument("--note", default="", help="what else ran on the machine, or anything a reader needs")
    parser.add_argument("--suffix", default="", help="tests-<suffix>-<date>.json (e.g. fresh: a clone with no .venv)")
    args = parser.parse_args()
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        command = ["bash", "scripts/test.sh", *(["--quick"] if args.quick else []), f"--junitxml={junit}"]
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL, check=False,
                              env={**os.environ, "CI": os.environ.get("CI", "true")})
        wall_s = time.monotonic() - started
        files, tests, counts = read_junit(junit)
    print(f"\n{info['cpu']}, {info['cores']} cores; {'quick tier' if args.quick else 'whole suite'}: "
          f"{wall_s / 60:.1f} min wall, exit {done.returncode}, {counts}")
    print("| file | seconds |\n|---|---|")
    for name, seconds in sorted(files.items(), key=lambda item: -item[1]):
        print(f"| {name} | {seconds:.1f} |")
    write_result("tests", info, {
        "command": " ".join(command[:3] if args.quick else command[:2]), "note": args.note,
        "wall_minutes": round(wall_s / 60, 2), "exit_code": done.returncode, "outcomes": counts,
        "pytest_seconds": round(sum(files.values()), 1),
        "files": {name: round(seconds, 1) for name, seconds in sorted(files.items(), key=lambda item: -item[1])},
        "slowest": [{"test": name, "seconds": round(seconds, 1), "outcome": outcome}
                    for seconds, name, outcome in tests[:25]],
    }, suffix="-".join(filter(None, ["quick" if args.quick else "", args.suffix])))
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
