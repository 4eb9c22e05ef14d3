"""What workshop/jupyterhub_config.py needs beyond JupyterHub's own classes, for one machine.

- `LearnerAuthenticator`: each learner picks a name and a password at first login
  (FirstUseAuthenticator); later logins need that password, so nobody logs in as someone else.
  Each name becomes a Unix user with a private home (mode 0700), so learners cannot read each
  other's files.
- `LearnerSpawner`: JupyterHub's LocalProcessSpawner (each server runs as its learner's Unix user),
  plus what it does not do itself: the memory and CPU limits, enforced with the kernel's cgroups (what
  SystemdSpawner asks systemd to do, on machines without systemd too); a copy of the course on
  first login; and each learner's own runs folder (COURSE_RUNS_DIR).
- `Cgroups`: the limits, and a way to stop every process a learner's server started.

Imported by jupyterhub_config.py (this folder is put on sys.path there); stdlib and jupyterhub only.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from firstuseauthenticator import FirstUseAuthenticator
from jupyterhub.auth import LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import List, Unicode

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CGROUP_FS = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


class LearnerAuthenticator(LocalAuthenticator, FirstUseAuthenticator):
    """First login sets the learner's password; the learner becomes a Unix user with a private home.

    Only names that are new on the machine, or that belong to the learner group, can log in: an
    existing account (root, the instructor's own login) can never be claimed through the hub.
    """

    learner_group = Unicode("course-learners", config=True, help="the Unix group every learner joins")

    def validate_username(self, name: str) -> bool:
        if not super().validate_username(name):
            return False
        try:
            pwd.getpwnam(name)
        except KeyError:
            return True  # a new learner: add_system_user creates the account in the group
        try:
            return name in grp.getgrnam(self.learner_group).gr_mem
        except KeyError:
            return False  # no learner group yet: every existing account is someone else's

    def add_system_user(self, user) -> None:
        subprocess.run(["groupadd", "--force", self.learner_group], check=True, capture_output=True)
        super().add_system_user(user)


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


def _not_course_files(folder: str, names: list[str]) -> set[str]:
    """Leave out sockets of running kernels, caches and checkpoints: only the course's files are copied."""
    return {name for name in names if name in ("__pycache__", ".ipynb_checkpoints")
            or not (os.path.isfile(os.path.join(folder, name)) or os.path.isdir(os.path.join(folder, name)))}


class LearnerSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with enforced limits, a course copy and a private runs folder per learner."""

    cgroup_root = Unicode("course-hub", config=True, help="parent cgroup of every learner's cgroup")
    course_folders = List(Unicode(), ["notebooks", "solutions", "benchmarks/results"], config=True,
                          help="folders of the course copied into ~/course on first login")

    @property
    def cgroups(self) -> Cgroups:
        return Cgroups(self.cgroup_root)

    def learner_home(self) -> Path:
        return Path(pwd.getpwnam(self.user.name).pw_dir)

    def prepare_home(self) -> None:
        """Home 0700 (no other learner can read it), the course copied in once, the runs folder made."""
        account = pwd.getpwnam(self.user.name)
        home = Path(account.pw_dir)
        home.chmod(0o700)
        course = home / "course"
        if not course.exists():  # first login only: a learner's edits are never overwritten
            for folder in self.course_folders:
                shutil.copytree(PROJECT_ROOT / folder, course / folder, ignore=_not_course_files)
        (home / "runs").mkdir(exist_ok=True)
        for path in [course, *course.rglob("*"), home / "runs"]:
            os.chown(path, account.pw_uid, account.pw_gid)

    def get_env(self):
        env = super().get_env()
        env["COURSE_RUNS_DIR"] = str(self.learner_home() / "runs")
        return env

    async def start(self):
        self.prepare_home()
        url = await super().start()
        if self.cgroups.available():
            # Before the server starts any kernel: every process it starts inherits the cgroup.
            self.cgroups.confine(self.pid, self.user.name, self.mem_limit, self.cpu_limit)
        else:
            self.log.warning("Cannot write to %s: %s's memory/CPU limits are not enforced (run the hub as root, "
                             "or use SystemdSpawner on a machine with systemd).", CGROUP_FS, self.user.name)
        return url

    async def stop(self, now=False):
        await super().stop(now=now)
        if self.cgroups.available():
            self.cgroups.kill(self.user.name)  # kernels and model servers the server left behind
