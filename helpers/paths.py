"""Where the course keeps what it produces: everything lands under runs/ (git-ignored)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def runs_dir(*parts: str) -> Path:
    """A folder under runs/ (or under $COURSE_RUNS_DIR), created on first use."""
    base = Path(os.environ.get("COURSE_RUNS_DIR") or PROJECT_ROOT / "runs")
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def display_path(path: Path) -> str:
    """A path as a reader would type it: relative to the project when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)

# This course's GitHub path ("owner/name"): the Colab cells, the Colab and Binder links in the notebooks
# and the README carry copies of it, which `python scripts/set_course_repo.py owner/name` rewrites (a test
# checks that every copy agrees). "OWNER/REPO" until the course is published.
COURSE_REPO = "OWNER/REPO"
