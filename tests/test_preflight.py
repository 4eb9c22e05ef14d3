"""scripts/preflight.py: one real run on this machine (model, GSM8K, Jupyter kernel), and a check that fails."""

import importlib.util
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PREFLIGHT = ROOT / "scripts" / "preflight.py"
# What any machine that runs this test suite has (its other rows depend on the machine's load).
MUST_PASS = ("Python 3.11 venv", "pinned packages", "local model", "GSM8K", "Jupyter kernel")


def load_preflight():
    spec = importlib.util.spec_from_file_location("preflight", PREFLIGHT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def table_rows(output: str, names: list[str]) -> dict[str, str]:
    """check name -> 'yes'/'no', from the printed table."""
    rows = {}
    for name in names:
        match = re.search(rf"^{re.escape(name)}\s+(yes|no)\s", output, re.MULTILINE)
        assert match, f"no row for {name!r} in:\n{output}"
        rows[name] = match.group(1)
    return rows


@pytest.mark.slow
def test_preflight_prints_one_table_and_exits_by_it(gsm8k_dir):
    names = [name for name, _, _ in load_preflight().CHECKS]
    result = subprocess.run([sys.executable, str(PREFLIGHT)], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, check=False)
    assert re.search(r"^check\s+ok\s+found\s+fix$", result.stdout, re.MULTILINE), result.stdout
    rows = table_rows(result.stdout, names)
    for name in MUST_PASS:
        assert rows[name] == "yes", result.stdout
    passed = sum(ok == "yes" for ok in rows.values())
    assert f"preflight: {passed} of {len(names)} checks passed in" in result.stdout
    assert result.returncode == (0 if passed == len(names) else 1), result.stdout


def test_a_failing_check_gets_its_error_and_fix_and_exit_code_1(tmp_path, monkeypatch, capsys):
    preflight = load_preflight()
    monkeypatch.setattr(preflight, "CHECKS", [c for c in preflight.CHECKS if c[0] == "GSM8K"])
    monkeypatch.setenv("GSM8K_DIR", str(tmp_path))  # a folder without train.jsonl / test.jsonl
    [result] = preflight.run_checks()
    assert not result.ok
    assert result.found == f"GSM8KUnavailable: {tmp_path / 'train.jsonl'} is missing: " \
                           "GSM8K_DIR must hold train.jsonl (and the other split)."
    assert result.fix == "set GSM8K_DIR to a folder with train.jsonl and test.jsonl"
    assert preflight.main([]) == 1
    output = capsys.readouterr().out
    assert table_rows(output, ["GSM8K"]) == {"GSM8K": "no"}
    assert "preflight: 0 of 1 checks passed" in output


def test_notebook_04s_checks_say_what_is_missing_and_the_fix(tmp_path, monkeypatch):
    with socket.socket() as sock:  # a loopback port that nothing listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        unused_port = sock.getsockname()[1]
    preflight = load_preflight()
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"http://127.0.0.1:{unused_port}/simple")  # nothing listens there
    monkeypatch.setattr(preflight, "ROOT", tmp_path)  # a checkout without .venv-v1
    env, index = preflight.run_checks(preflight.NOTEBOOK_04_CHECKS)
    assert (env.ok, env.found) == (False, ".venv-v1 is missing")
    assert "setup_v1_env.sh" in env.fix
    assert not index.ok and f"127.0.0.1:{unused_port}" in index.found and "cannot be reached" in index.found
    assert "UV_DEFAULT_INDEX" in index.fix and "skip notebook 04" in index.fix


def test_notebook_02s_verdicts_are_rows_and_memory_that_will_not_fit_fails(monkeypatch, capsys):
    """The rows notebook 00's hardware table shows, on a faked machine: an Apple laptop with 0.5 GB free."""
    from helpers.install_check import Machine

    preflight = load_preflight()
    laptop = Machine(system="Darwin", arch="arm64", cpuinfo=None, available_gb=0.5, total_gb=8.0)
    monkeypatch.setattr(preflight, "this_machine", lambda: laptop)
    rows = ["precision", "training time", "memory", "platform"]
    monkeypatch.setattr(preflight, "CHECKS", [c for c in preflight.CHECKS if c[0] in rows])
    results = {r.check: r for r in preflight.run_checks()}
    assert list(results) == rows
    assert results["precision"].ok and results["precision"].found.startswith("float32: no /proc/cpuinfo on macOS")
    assert results["training time"].ok and "min" in results["training time"].found
    assert not results["memory"].ok and results["memory"].found.startswith("will not fit: 0.5 of 8.0 GB available")
    assert "instructor's trained run" in results["memory"].found
    platform = results["platform"]
    assert platform.ok and "no result file was measured on macOS or Apple Silicon" in platform.found
    assert preflight.main([]) == 1
    output = capsys.readouterr().out
    assert table_rows(output, rows) == {"precision": "yes", "training time": "yes", "memory": "no", "platform": "yes"}


def test_cpu_cores_without_affinity_or_load_average(monkeypatch):
    """macOS has no os.sched_getaffinity, Windows no os.getloadavg: the row still answers."""
    import os

    preflight = load_preflight()
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.delattr(os, "getloadavg")
    ok, found = preflight.cpu_cores()
    assert found == f"{os.cpu_count()} cores" and ok == (os.cpu_count() >= preflight.MEASURED_CORES)
