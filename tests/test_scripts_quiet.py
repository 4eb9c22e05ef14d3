"""What a newcomer sees when running the README's commands: no warning that is not actionable."""

import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def test_running_a_notebook_does_not_warn_about_unencrypted_tcp(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell("print(x + 1)")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "tiny.ipynb"
    nbformat.write(notebook, source)
    out = subprocess.run([sys.executable, "-m", "helpers.notebook_runner", str(source),
                          str(tmp_path / "out.ipynb"), "-p", "x", "41"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "42" in (tmp_path / "out.ipynb").read_text()
    assert "without encryption" not in out.stderr + out.stdout


def test_the_browser_install_shows_no_wrapper_noise(tmp_path):
    noisy = tmp_path / "chromium"  # behaves like Debian's wrapper on a machine where its /dev/shm check trips
    noisy.write_text("#!/bin/sh\necho '/usr/bin/chromium: 9: [: 25275973632: unexpected operator' >&2\n"
                     "echo 'Chromium 156.0 built on Debian'\n")
    noisy.chmod(0o755)
    out = subprocess.run(["bash", "scripts/install_browser.sh"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "CHROMIUM": str(noisy)}, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "Chromium 156.0" in out.stdout
    assert "unexpected operator" not in out.stdout + out.stderr
