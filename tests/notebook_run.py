"""Run a course notebook headlessly with papermill and read back what a reader would see."""

import json
from pathlib import Path

import papermill

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, out: Path, **parameters) -> dict:
    """Run notebooks/<name>.ipynb with `parameters`, save the executed copy to `out`, return it as JSON."""
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=parameters,
        cwd=str(NOTEBOOKS), kernel_name="python3", progress_bar=False,
    )
    return json.loads(Path(out).read_text())


def outputs_text(notebook: dict, html: bool = False) -> str:
    """All text a reader would see in the executed notebook (with `html`, tables' HTML too)."""
    kinds = ("text/plain", "text/html") if html else ("text/plain",)
    parts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.extend("".join(output.get("data", {}).get(kind, "")) for kind in kinds)
    return "\n".join(parts)
