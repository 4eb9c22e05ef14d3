"""Notebook 00's install check: the hardware table names the backend notebook 02 will really pick."""

import pytest

from helpers import install_check
from helpers.gpu import backend as gpu_backend


@pytest.mark.parametrize(("gpus", "capabilities"), [(0, []), (1, [(7, 5)]), (2, [(7, 5), (7, 5)]), (2, [(8, 0), (8, 0)])])
def test_the_hardware_table_names_the_backend_notebook_02_picks(monkeypatch, gpus, capabilities):
    """Notebook 02 picks with choose_backend("auto"); the table of notebook 00 must say the same."""
    monkeypatch.setattr(gpu_backend, "cuda_gpu_count", lambda: gpus)
    monkeypatch.setattr(gpu_backend, "gpu_capabilities", lambda: capabilities)
    shown = install_check.hardware_summary().loc["GRPO backend (auto)", "value"]
    assert shown.split()[0] == gpu_backend.choose_backend("auto"), shown
    assert install_check.hardware_summary().loc["CUDA GPUs", "value"] == gpus


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
