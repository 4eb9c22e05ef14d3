"""What a learner's first `bash scripts/setup_env.sh` costs: a fresh clone of this repository's HEAD in a
temporary folder, installed with an empty pip cache and timed (minutes, .venv size, packages, which torch
build), and the size of the wheels of each lock (requirements.lock: torch's CPU build; requirements-cuda.lock:
PyPI's CUDA build, not installed here) from the sizes the package index publishes. Prints a summary and
writes benchmarks/results/install-<date>.json.

    .venv/bin/python benchmarks/bench_install.py               # the install and the sizes (~5-10 minutes)
    .venv/bin/python benchmarks/bench_install.py --sizes-only  # only the published sizes (~1 minute)

The clone is installed with this machine's pip configuration, as CI installs it; where that reads local
mirrors, downloads are faster than a learner's (the result file names the sources).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared modules

from lockfile import read_lock
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from url_shown import shown

from helpers.results import machine_info, write_result

INDEX = "https://pypi.org/simple"  # where the sizes come from: the public index's JSON pages (PEP 691/700)
LOCAL_TORCH = Path("/opt/wheels")  # this project's machines keep torch's CPU wheel here (not on PyPI)
# The tags pip accepts for CPython 3.11 on Linux x86-64 with glibc 2.28 (torch 2.13's minimum), best first.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
TAGS = [*cpython_tags((3, 11), platforms=PLATFORMS), *compatible_tags((3, 11), "cp311", PLATFORMS)]
RANK = {tag: i for i, tag in enumerate(TAGS)}


def published_files(name: str) -> list[dict]:
    request = urllib.request.Request(f"{INDEX}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.load(reply)["files"]


def wheel_pip_takes(name: str, version: str) -> tuple[str, int] | None:
    """The wheel of name==version that pip would install here, and its published size in bytes."""
    best = None
    for file in published_files(name):
        try:
            _, wheel_version, _, tags = parse_wheel_filename(file["filename"])
        except InvalidWheelFilename:  # an sdist, or a wheel name pip would not read either
            continue
        rank = min((RANK[tag] for tag in tags if tag in RANK), default=None)
        if str(wheel_version) == version and rank is not None and (best is None or rank < best[0]):
            best = (rank, file["filename"], file["size"])
    return best and best[1:]


def sizes(lock_name: str) -> dict:
    """Every package's wheel and size, as the index publishes them (torch's CPU build: the file on disk)."""
    wheels, missing = {}, []
    for name, entry in sorted(read_lock(ROOT / lock_name).items()):
        found = wheel_pip_takes(name, entry.version)
        local = list(LOCAL_TORCH.glob(f"{name}-{entry.version}-cp311-*.whl"))
        if found is None and local:
            found = (local[0].name, local[0].stat().st_size)
        if found is None:
            missing.append(f"{name}=={entry.version}")
        else:
            wheels[name] = {"wheel": found[0], "bytes": found[1]}
    return {"packages": len(wheels) + len(missing), "wheel_bytes": sum(w["bytes"] for w in wheels.values()),
            "no_size_for": missing, "wheels": wheels}


def pip_sources() -> dict:
    """Where this machine's pip looks (index, extra indexes, find-links), any user:password hidden."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=False).stdout
    wanted = ("index-url", "extra-index-url", "find-links")
    return {key: shown(value.strip("'"))
            for key, value in (line.split("=", 1) for line in listed.splitlines() if "=" in line)
            if key.rsplit(".", 1)[-1] in wanted}


def fresh_install() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "pip-cache"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        env = {**os.environ, "PIP_CACHE_DIR": str(cache)}  # an empty cache: every wheel downloaded
        started = time.monotonic()
        log = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=clone, env=env, capture_output=True, text=True,
                             check=False)
        seconds = time.monotonic() - started
        if log.returncode != 0:
            sys.exit(f"bench_install: setup_env.sh failed:\n{log.stdout[-3000:]}\n{log.stderr[-3000:]}")
        venv = clone / ".venv"
        listed = json.loads(subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                                           capture_output=True, text=True, check=True).stdout)
        torch = next(p["version"] for p in listed if p["name"] == "torch")
        venv_bytes = int(subprocess.run(["du", "-s", "-B1", str(venv)], capture_output=True, text=True,
                                        check=True).stdout.split()[0])  # disk usage, as `du -sh` shows it
        lock_line = next(line for line in log.stdout.splitlines() if line.startswith("setup: installing requirements"))
    return {"clone_of": head, "pip_cache": "empty", "minutes": round(seconds / 60, 1), "seconds": round(seconds),
            "venv_bytes": venv_bytes, "venv_gb": round(venv_bytes / 1e9, 2), "installed_packages": len(listed),
            "torch": torch, "lock_installed": lock_line.split()[2], "pip_sources": pip_sources()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-only", action="store_true", help="skip the fresh install")
    args = parser.parse_args()
    info = machine_info()
    locks = {name: sizes(name) for name in ("requirements.lock", "requirements-cuda.lock")}
    cpu, cuda = locks["requirements.lock"], locks["requirements-cuda.lock"]
    extra = {name: w for name, w in cuda["wheels"].items() if name not in cpu["wheels"] or name == "torch"}
    result = {
        "locks": {name: {k: v for k, v in lock.items() if k != "wheels"} for name, lock in locks.items()},
        "cpu_build_wheels": cpu["wheels"],
        # torch's CUDA build and what it adds, in place of the CPU build's torch wheel
        "cuda_build_wheels": extra,
        "cuda_build_extra_bytes": sum(w["bytes"] for w in extra.values()) - cpu["wheels"]["torch"]["bytes"],
        "sizes_from": f"{INDEX} (JSON pages' published file sizes; CUDA build not downloaded or installed here)",
    }
    if not args.sizes_only:
        result["fresh_install"] = fresh_install()
    for name, lock in result["locks"].items():
        print(f"{name}: {lock['packages']} packages, wheels {lock['wheel_bytes'] / 1e9:.2f} GB"
              + (f" (no published size for {lock['no_size_for']})" if lock["no_size_for"] else ""))
    print(f"torch's CUDA build adds {result['cuda_build_extra_bytes'] / 1e9:.2f} GB of wheels to download")
    if "fresh_install" in result:
        run = result["fresh_install"]
        print(f"fresh install: {run['minutes']} min, .venv {run['venv_gb']} GB, {run['installed_packages']} "
              f"packages, torch {run['torch']} ({run['lock_installed']})")
    write_result("install", info, result)


if __name__ == "__main__":
    main()
