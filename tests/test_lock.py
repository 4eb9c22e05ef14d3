"""The locks (scripts/lock.sh): requirements.lock, every package of the CPU stack pinned with its hashes,
agrees with requirements.txt's top-level pins; requirements-cuda.lock is the same stack with torch's
CUDA build; the .venv that runs these tests holds exactly what the lock pins."""

import hashlib
import json
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from lockfile import TOP_LEVEL, normalized, read_lock

LOCKS = ("requirements.lock", "requirements-cuda.lock")
REGENERATE = "bash scripts/lock.sh"
# What torch's CUDA build adds on Linux (torch 2.13.0's Requires-Dist for platform_system == "Linux").
CUDA_ONLY = ("nvidia-", "cuda-", "triton")


def top_level_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[normalized(name)] = version
    return pins


def disagreements(pins: dict[str, str], lock: dict, lock_name: str) -> list[str]:
    """Where a lock does not install what requirements.txt pins; [] when they agree. A local label (torch's
    +cpu) is the build, not another version."""
    fix = f": regenerate the locks with `{REGENERATE}`"
    found = [f"requirements.txt pins {name}=={version}, {lock_name} "
             + (f"has {lock[name].version}" if name in lock else "does not have it") + fix
             for name, version in pins.items() if name not in lock or lock[name].version.split("+")[0] != version]
    found += [f"{lock_name} installs {name} for requirements.txt, which no longer pins it{fix}"
              for name, entry in lock.items() if TOP_LEVEL in entry.via and name not in pins]
    return found


@pytest.mark.parametrize("lock_name", LOCKS)
def test_the_lock_installs_what_requirements_txt_pins(lock_name):
    problems = disagreements(top_level_pins(ROOT / "requirements.txt"), read_lock(ROOT / lock_name), lock_name)
    assert not problems, "\n".join(problems)


def test_a_lock_that_disagrees_with_requirements_txt_is_caught():
    pins, lock = top_level_pins(ROOT / "requirements.txt"), read_lock(ROOT / "requirements.lock")
    bumped = {**pins, "trl": "0.25.0"}
    added = {**pins, "rich-click": "1.8.0"}
    removed = {name: version for name, version in pins.items() if name != "ruff"}
    assert disagreements(bumped, lock, "requirements.lock") == [
        ("requirements.txt pins trl==0.25.0, requirements.lock has 0.24.0: regenerate the locks with "
         "`bash scripts/lock.sh`")]
    assert "requirements.txt pins rich-click==1.8.0, requirements.lock does not have it" in \
        disagreements(added, lock, "requirements.lock")[0]
    assert disagreements(removed, lock, "requirements.lock") == [
        ("requirements.lock installs ruff for requirements.txt, which no longer pins it: regenerate the locks "
         "with `bash scripts/lock.sh`")]


@pytest.mark.parametrize("path", [*LOCKS, "requirements-nodeps.txt"])
def test_every_package_is_pinned_with_its_hashes(path):
    lock = read_lock(ROOT / path)
    assert lock
    for name, entry in lock.items():
        assert entry.hashes and all(h.startswith("sha256:") and len(h) == 71 for h in entry.hashes), name


def test_each_lock_says_how_to_regenerate_it_and_the_tool_is_not_installed():
    for name in LOCKS:
        header = (ROOT / name).read_text().split("\n\n")[0].splitlines()[:6]
        assert any(line.strip("# ").endswith(REGENERATE) for line in header), (name, header)
    script = (ROOT / "scripts" / "lock.sh").read_text()
    assert "UV=uv==" in script and "--generate-hashes" in script
    assert "uv" not in read_lock(ROOT / "requirements.lock"), "uv regenerates the locks; installing needs pip only"


def test_the_cuda_lock_is_the_cpu_lock_with_torchs_cuda_build():
    cpu, cuda = read_lock(ROOT / "requirements.lock"), read_lock(ROOT / "requirements-cuda.lock")
    assert cpu["torch"].version.endswith("+cpu") and cuda["torch"].version == cpu["torch"].version.removesuffix("+cpu")
    assert not set(cpu["torch"].hashes) & set(cuda["torch"].hashes), "one file cannot be both builds"
    assert {name: cpu[name].version for name in cpu if name != "torch"} == \
        {name: cuda[name].version for name in cpu if name != "torch"}
    extra = set(cuda) - set(cpu)
    assert extra and all(name.startswith(CUDA_ONLY) for name in extra), sorted(extra)
    assert not [name for name in cpu if name.startswith(CUDA_ONLY)], "the CPU lock holds CUDA packages"


@pytest.mark.slow  # pip asks the package index
def test_the_lock_has_the_hash_of_the_torch_wheel_pip_takes_here(tmp_path):
    """The CPU wheel pip picks with this machine's configuration (here a file on disk, not PyPI's, which
    is the CUDA build) is one the lock accepts; setup_env.sh relies on it."""
    lock = read_lock(ROOT / "requirements.lock")
    entry = tmp_path / "torch.txt"
    entry.write_text("\n".join(lock["torch"].lines) + "\n")
    report = tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                             "--ignore-installed", "--report", str(report), "-r", str(entry)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    [chosen] = json.loads(report.read_text())["install"]
    url = chosen["download_info"]["url"]
    known = chosen["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
    if url.startswith("file:"):
        known = hashlib.sha256(Path(unquote(urlparse(url).path)).read_bytes()).hexdigest()
    assert known, f"pip's report gives no sha256 for {url}"
    assert f"sha256:{known}" in lock["torch"].hashes, f"{url} is not a torch wheel the lock accepts"


def test_this_venv_holds_what_the_lock_pins():
    """What setup_env.sh installed into the .venv running the tests (more may be added later, e.g. the hub)."""
    installed = {normalized(d.metadata["Name"]): d.version for d in distributions()}
    lock_name = "requirements.lock" if installed.get("torch", "").endswith("+cpu") else "requirements-cuda.lock"
    lock = read_lock(ROOT / lock_name)
    wrong = {name: (entry.version, installed.get(name)) for name, entry in lock.items()
             if installed.get(name) != entry.version}
    assert not wrong, (f"{lock_name} (pinned, installed): {wrong}. Re-install: `rm -rf .venv && bash "
                       "scripts/setup_env.sh`")
