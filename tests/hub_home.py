"""The course as an instructor installs it for a room (INSTRUCTOR_GUIDE.md), where the hub test's learners can
read it: this working tree's files copied to HUB_HOME (only what changed), its .venv made from a Python outside
any home folder, JupyterHub and its proxy installed (scripts/setup_hub.sh). Kept between runs.

Run as a script, it does the install ahead of tests/test_hub.py: the test command starts it beside the first
tests (scripts/test.sh), and the test's own calls wait on the same locks and find the work done."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HUB_HOME = Path(os.environ.get("COURSE_HUB_TEST_HOME", "/opt/course-hub-test"))  # where the hub's course is installed
HUB_PYTHON = Path(os.environ.get("COURSE_HUB_TEST_PYTHON", "/usr/bin/python3.11"))  # Debian's: readable by learners


def why_not() -> str | None:
    """Why the hub test cannot run here (it is then skipped), or None."""
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup").is_dir():
        return "the hub test creates Unix users and cgroups: run it as root on Linux (CI does)"
    if not HUB_PYTHON.exists():
        return f"the hub test needs a Python 3.11 outside /root at {HUB_PYTHON} (COURSE_HUB_TEST_PYTHON)"
    return None


def copy_course() -> Path:
    """This working tree's files in HUB_HOME. Learners' servers run as their own users: they must be able to read
    the course and its Python without anyone opening another user's home (this checkout's Python lives under
    /root). One copy at a time (the background install and the test may overlap)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    with open(Path(tempfile.gettempdir()) / "course-hub-home.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in filter(None, listed):
            source, target = ROOT / name, HUB_HOME / name
            if not source.is_file():
                continue  # deleted in the working tree
            if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    return HUB_HOME


def install() -> subprocess.CompletedProcess:
    """The copy, then setup_hub.sh's installs (not the instructor's password: the test sets its own)."""
    home = copy_course()
    return subprocess.run(["bash", "scripts/setup_hub.sh", "--install-only"], cwd=home, capture_output=True,
                          text=True, check=False, stdin=subprocess.DEVNULL, timeout=1200,
                          env={**os.environ, "PYTHON": str(HUB_PYTHON)})


if __name__ == "__main__":
    if reason := why_not():
        sys.exit(f"hub_home: nothing to install ({reason})")
    done = install()
    print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    sys.exit(done.returncode)
