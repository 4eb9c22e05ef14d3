"""Run a course notebook headlessly with papermill and read back what a reader would see."""

from pathlib import Path

from helpers.local.notebook_runner import NOTEBOOKS
from helpers.local.notebook_runner import execute as run_notebook


def execute(name: str, out: Path, **parameters) -> dict:
    """Run notebooks/<name>.ipynb with `parameters`, save the executed copy to `out`, return it as JSON."""
    return run_notebook(NOTEBOOKS / f"{name}.ipynb", out, parameters)


def outputs_text(notebook: dict, html: bool = False) -> str:
    """All text a reader would see in the executed notebook (with `html`, tables' HTML too)."""
    kinds = ("text/plain", "text/html") if html else ("text/plain",)
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.extend("".join(output.get("data", {}).get(kind, "")) for kind in kinds)
    return "\n".join(parts)
