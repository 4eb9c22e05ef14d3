"""Figures that cannot drift: each figure a reader sees that comes from a result file is listed here, with
where it is stated (a file and the words around the number), the result file and the value there, and the
tolerance of its rounding. A figure that no longer matches its file, or text that no longer states it,
fails. (The registry starts with the figures of the test command and the thread rule; every notebook's,
the README's and the guide's figures belong here too.)"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Claim:
    stated_in: str  # a file of the project
    pattern: str  # a regular expression whose first group is the figure as stated
    result: str  # a file in benchmarks/results/
    value: Callable[[dict], float]  # the figure, read from the result file
    tolerance: float  # how far the stated figure may be from it (its rounding)

    def __str__(self) -> str:
        return f"{self.stated_in}: /{self.pattern}/ <- {self.result}"


def case(**match) -> Callable[[dict], float]:
    """seconds_per_update of the one case whose fields equal `match`."""
    def read(data: dict) -> float:
        (found,) = [c for c in data["cases"] if all(c.get(k) == v for k, v in match.items())]
        return found["seconds_per_update"]
    return read


def signal_row(max_tokens: int, key: str, scale: float = 1.0) -> Callable[[dict], float]:
    return lambda data: next(r[key] for r in data["rows"] if r["max_tokens"] == max_tokens) * scale


THREADS = "update-threads-2026-12-05.json"
CLAIMS = [
    # the test command (README)
    Claim("README.md", r"a real local model server \(([\d.]+) minutes on 2 cores", "tests-quick-2026-12-05.json",
          lambda d: d["wall_minutes"], 0.05),
    Claim("README.md", r"the whole suite ([\d.]+), and", "tests-2026-12-05.json", lambda d: d["wall_minutes"], 0.05),
    Claim("README.md", r"and ([\d.]+) from a fresh clone", "tests-fresh-2026-12-05.json", lambda d: d["wall_minutes"], 0.05),
    # the rule for torch threads (helpers/grpo.py)
    Claim("helpers/grpo.py", r"idle, 2 threads ([\d.]+) s", THREADS, case(busy_processes=0, threads=2), 0.005),
    Claim("helpers/grpo.py", r"idle, 2 threads [\d.]+ s and 1 thread ([\d.]+) s", THREADS, case(busy_processes=0, threads=1), 0.005),
    Claim("helpers/grpo.py", r"beside 1 busy process, 2 threads ([\d.]+) s", THREADS, case(busy_processes=1, threads=2), 0.005),
    Claim("helpers/grpo.py", r"beside 1 busy process, 2 threads [\d.]+ s and 1 thread ([\d.]+) s", THREADS,
          case(busy_processes=1, threads=1), 0.005),
    Claim("helpers/grpo.py", r"beside 2, ([\d.]+) s", THREADS, case(busy_processes=2, threads=2), 0.005),
    Claim("helpers/grpo.py", r"beside 2, [\d.]+ s and ([\d.]+) s", THREADS, case(busy_processes=2, threads=1), 0.005),
    # float32 on the CPU (helpers/gpu/backend.py)
    Claim("helpers/gpu/backend.py", r"1 x 330 tokens: ([\d.]+) s instead of", "update-batch1-2026-12-03.json",
          case(bf16=True), 0.05),
    Claim("helpers/gpu/backend.py", r"1 x 330 tokens: [\d.]+ s instead of ([\d.]+) s", "update-batch1-2026-12-03.json",
          case(bf16=False, gradient_checkpointing=True), 0.05),
    # notebook 02's CI parameters (tests/test_notebook_02.py)
    Claim("tests/test_notebook_02.py", r"signal-2026-12-03.json: ([\d.]+)% of groups", "signal-2026-12-03.json",
          signal_row(128, "groups_with_signal", 100), 0.05),
    Claim("tests/test_notebook_02.py", r"within 64 tokens ([\d.]+)%", "signal-ci-short-2026-12-05.json",
          signal_row(64, "groups_with_signal", 100), 0.5),
]


@pytest.mark.parametrize("claim", CLAIMS, ids=str)
def test_every_stated_figure_matches_its_result_file(claim):
    text = (ROOT / claim.stated_in).read_text()
    found = re.search(claim.pattern, text, flags=re.DOTALL)
    assert found, f"{claim.stated_in} no longer states this figure (/{claim.pattern}/): update the registry"
    stated = float(found.group(1))
    actual = claim.value(json.loads((RESULTS / claim.result).read_text()))
    assert abs(stated - actual) <= claim.tolerance + 1e-9, f"{claim.stated_in} says {stated}, {claim.result} says {actual}"


def test_every_result_file_records_the_cpu_it_ran_on():
    """A figure's file says which machine made it; files written from today on also say the CPU's flags."""
    for path in RESULTS.glob("*.json"):
        data = json.loads(path.read_text())
        assert data.get("cpu") or data.get("device") or data.get("cpu_flags") is not None, path.name
        if data.get("date", "") >= "2026-12-05":
            assert "cpu_flags" in data, f"{path.name} does not record the CPU's flags"
