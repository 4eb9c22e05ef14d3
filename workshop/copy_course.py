"""Copies the course into a learner's home, run *as the learner* by workshop/course_hub.py, so every file
it makes is the learner's from the start: root never walks or changes the owner of anything in a home
that a learner can write (a link planted there would hand its target to the learner).

    python copy_course.py SOURCE_ROOT HOME FOLDER [FOLDER ...]

Makes HOME/runs, and HOME/course/FOLDER for each FOLDER of SOURCE_ROOT when HOME/course does not exist
yet (first login only: a learner's edits are never overwritten). Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def not_course_files(folder: str, names: list[str]) -> set[str]:
    """Leave out sockets of running kernels, caches and checkpoints: only the course's files are copied."""
    return {name for name in names if name in ("__pycache__", ".ipynb_checkpoints")
            or not (os.path.isfile(os.path.join(folder, name)) or os.path.isdir(os.path.join(folder, name)))}


def copy_course(source_root: Path, home: Path, folders: list[str]) -> None:
    course = home / "course"
    if not os.path.lexists(course):
        for folder in folders:
            shutil.copytree(source_root / folder, course / folder, ignore=not_course_files)
    (home / "runs").mkdir(exist_ok=True)


if __name__ == "__main__":
    copy_course(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
