"""Notebook 00's install check: the hardware table names the backend notebook 02 will really pick."""

import pytest

from helpers import grpo, install_check


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_hardware_table_names_the_backend_notebook_02_picks(monkeypatch, gpus):
    monkeypatch.setattr(install_check, "cuda_gpu_count", lambda: gpus)
    real_choose = grpo.choose_backend
    monkeypatch.setattr(grpo, "choose_backend", lambda backend="auto", **kw: real_choose(backend, gpus=gpus))
    shown = install_check.hardware_summary().loc["GRPO backend (auto)", "value"]
    assert shown.split()[0] == real_choose("auto", gpus=gpus), shown


def test_setup_refuses_a_venv_with_another_verifiers_and_says_why(tmp_path):
    """A .venv whose pins look installed (its stamp matches) but that holds verifiers 0.4.0 is refused."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    course = tmp_path / "course"
    for part in ("scripts/setup_env.sh", "requirements.txt", "requirements-nodeps.txt", "pyproject.toml",
                 *[str(p.relative_to(root)) for p in root.glob("environments/*/pyproject.toml")]):
        (course / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / part, course / part)
    fake_python = course / ".venv" / "bin" / "python"
    fake_python.parent.mkdir(parents=True)
    fake_python.write_text("#!/bin/sh\necho 0.4.0\n")
    fake_python.chmod(0o755)
    stamp = subprocess.run("cat requirements.txt requirements-nodeps.txt pyproject.toml environments/*/pyproject.toml"
                           " | sha256sum | cut -c1-16", shell=True, cwd=course, capture_output=True, text=True,
                           check=True).stdout.strip()
    (course / ".venv" / f".installed-{stamp}").touch()
    result = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=course, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verifiers 0.4.0" in result.stderr and "0.1.5.post0" in result.stderr and "verifiers.v1" in result.stderr
