"""The kernel's cgroups for the workshop hub: each learner's memory and CPU limits, and a way to stop every
process a learner's server started. Stdlib only, so a test (or its clean-up watcher) can use it before
JupyterHub is installed; course_hub.py's spawner uses it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


class Cgroups:
    """Per-learner cgroups under one parent (`root`), in cgroup v2 or v1's memory and cpu hierarchies."""

    def __init__(self, root: str):
        self.root = root
        self.v2 = (CGROUP_FS / "cgroup.controllers").is_file()

    def _dirs(self, name: str = "") -> list[Path]:
        if self.v2:
            return [CGROUP_FS / self.root / name]
        return [CGROUP_FS / hierarchy / self.root / name for hierarchy in ("memory", "cpu")]

    def available(self) -> bool:
        parents = [CGROUP_FS] if self.v2 else [CGROUP_FS / "memory", CGROUP_FS / "cpu"]
        return all(os.access(p, os.W_OK) for p in parents)

    def confine(self, pid: int, name: str, mem_limit: int | None, cpu_limit: float | None) -> None:
        """Put `pid` (and so every process it starts) into `name`'s cgroup with these limits."""
        procs_files = self.procs_files(name)
        if self.v2:
            group = self._dirs(name)[0]
            (group / "memory.max").write_text(str(mem_limit) if mem_limit else "max")
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")  # no swapping past the limit
            quota = f"{int(cpu_limit * CPU_PERIOD_US)} {CPU_PERIOD_US}" if cpu_limit else f"max {CPU_PERIOD_US}"
            (group / "cpu.max").write_text(quota)
        else:
            memory, cpu = self._dirs(name)
            (memory / "memory.limit_in_bytes").write_text(str(mem_limit) if mem_limit else "-1")
            if mem_limit and (memory / "memory.memsw.limit_in_bytes").exists():
                (memory / "memory.memsw.limit_in_bytes").write_text(str(mem_limit))  # no swap beyond it
            (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(int(cpu_limit * CPU_PERIOD_US)) if cpu_limit else "-1")
        for procs in procs_files:
            procs.write_text(str(pid))

    def _enable_v2_controllers(self) -> None:
        parent = CGROUP_FS / self.root
        parent.mkdir(exist_ok=True)
        for folder in (CGROUP_FS, parent):
            (folder / "cgroup.subtree_control").write_text("+memory +cpu")

    def procs_files(self, name: str) -> list[Path]:
        """The files a process writes its pid to to join `name`'s cgroup (created here, no limits)."""
        if self.v2:
            self._enable_v2_controllers()
        for folder in self._dirs(name):
            folder.mkdir(parents=True, exist_ok=True)
        return [folder / "cgroup.procs" for folder in self._dirs(name)]

    def limits(self, name: str) -> dict:
        """The limits in force for `name`: memory in bytes (None: none), CPU in cores (None: none)."""
        if self.v2:
            group = self._dirs(name)[0]
            memory = (group / "memory.max").read_text().strip()
            quota, period = (group / "cpu.max").read_text().split()
            return {"memory": None if memory == "max" else int(memory),
                    "cpu": None if quota == "max" else int(quota) / int(period)}
        memory, cpu = self._dirs(name)
        mem = int((memory / "memory.limit_in_bytes").read_text())
        quota = int((cpu / "cpu.cfs_quota_us").read_text())
        return {"memory": None if mem >= 2**62 else mem,
                "cpu": None if quota < 0 else quota / int((cpu / "cpu.cfs_period_us").read_text())}

    def pids(self, name: str = "") -> set[int]:
        """Every process in `name`'s cgroup, or with no name in all of them (and the parent's)."""
        found: set[int] = set()
        for top in self._dirs(name):
            if top.is_dir():
                for procs in top.rglob("cgroup.procs"):
                    found.update(int(p) for p in procs.read_text().split())
        return found

    def kill(self, name: str = "", grace_s: float = 5.0) -> None:
        """SIGTERM every process in the cgroup(s), SIGKILL what is left after `grace_s`, remove the folders."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            for pid in self.pids(name):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while self.pids(name) and time.monotonic() < deadline:
                time.sleep(0.1)
        for top in self._dirs(name):
            if top.is_dir():
                for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    folder.rmdir()  # cgroup folders are removed with rmdir, their files go with them
                top.rmdir()
