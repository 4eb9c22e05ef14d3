"""Every numbered notebook, executed headlessly with papermill against the real local stack."""

import json
from pathlib import Path

import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, tmp_path: Path, **parameters) -> dict:
    """Run notebooks/<name>.ipynb with `parameters`; return the executed notebook as JSON."""
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=parameters,
        cwd=str(NOTEBOOKS), kernel_name="python3", progress_bar=False,
    )
    return json.loads(out.read_text())


def outputs_text(notebook: dict) -> str:
    """All text a reader would see in the executed notebook."""
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.append("".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.notebook
def test_00_setup(tmp_path):
    notebook = execute("00_setup", tmp_path, max_tokens=24)
    text = outputs_text(notebook)
    assert "Traceback" not in text
    assert "SmolLM2-135M-Instruct answered in" in text
    versions = next(part for part in text.split("\n\n") if "pinned" in part)
    assert "False" not in versions and "missing" not in versions, versions  # pins installed
