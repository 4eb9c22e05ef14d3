"""Do the pinned stacks resolve where they are meant to run? pip's own dry-run resolution against the
package registry, for each requirements file and target Python, with wheels only. Prints a table and
writes benchmarks/results/pins-<date>.json.

    .venv/bin/python scripts/check_pins.py        # Colab (Python 3.12) and the multi-GPU stack (3.11)

Colab: requirements-colab.txt (+ requirements-nodeps.txt, --no-deps) on CPython 3.12, manylinux
x86_64 wheels (torch is left to Colab's own CUDA build, so the torch pip would pick is only
reported). GPU: `pip install -r requirements-gpu.txt` exactly as its header says to run it, build
isolation included (deepspeed is published as source only; its metadata builds in isolation, where
flash-attn's setup.py fails for want of torch: that is why flash-attn is not in the file).
Each target's result lists every package pip would install (tests/test_gpu_launcher.py checks the
trainer script's imports against the GPU list).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.results import machine_info, write_result

WHEELS_FOR = ["--only-binary=:all:", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
              "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64"]
TARGETS = {  # name: (files resolved together, files installed --no-deps, pip options)
    "colab (CPython 3.12)": (["requirements-colab.txt"], ["requirements-nodeps.txt"],
                             ["--python-version", "3.12", *WHEELS_FOR]),
    # on this Python (3.11, the GPU stack's), with pip's default build isolation, as the file is installed
    "multi-GPU (CPython 3.11)": (["requirements-gpu.txt"], [], []),
}


def pins(path: Path) -> list[str]:
    """A file's name==version lines (requirements-nodeps.txt follows each with its --hash lines)."""
    lines = (line.split("#")[0].strip().removesuffix("\\").strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def dry_run(wanted: list[str], options: list[str], tmp: str) -> tuple[dict | None, list[str]]:
    report = Path(tmp) / "report.json"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                          "--report", str(report), "--target", str(Path(tmp) / "target"), *options, *wanted],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None, [line for line in out.stderr.splitlines() if line.startswith("ERROR")][-3:]
    return {_name(item["metadata"]["name"]): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}, []


def _name(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")  # PEP 503: liger_kernel is liger-kernel


def resolve(files: list[str], no_deps_files: list[str], options: list[str]) -> dict:
    wanted = [pin for name in files for pin in pins(ROOT / name)]
    no_deps = [pin for name in no_deps_files for pin in pins(ROOT / name)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        chosen, error = dry_run(wanted, options, tmp)
        if chosen is not None and no_deps:
            extra, error = dry_run(no_deps, ["--no-deps", *options], tmp)
            chosen = None if extra is None else {**chosen, **extra}
    if chosen is None:
        return {"resolves": False, "error": error, "seconds": round(time.monotonic() - started)}
    mismatched = {pin: chosen.get(_name(pin.split("==")[0])) for pin in wanted + no_deps
                  if chosen.get(_name(pin.split("==")[0])) != pin.split("==")[1]}
    return {"resolves": not mismatched, "packages": len(chosen), "mismatched": mismatched,
            "torch": chosen.get("torch"), "seconds": round(time.monotonic() - started),
            "installed": dict(sorted(chosen.items()))}


def main() -> None:
    info = machine_info()
    results = {name: resolve(*target) for name, target in TARGETS.items()}
    for name, result in results.items():
        status = "resolves" if result["resolves"] else "DOES NOT RESOLVE"
        shown = {k: v for k, v in result.items() if k not in ("resolves", "installed")}
        print(f"{name:28s} {status}: {json.dumps(shown)}")
    write_result("pins", info, {"targets": results})


if __name__ == "__main__":
    main()
