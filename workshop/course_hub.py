"""What workshop/jupyterhub_config.py needs beyond JupyterHub's own classes, for one machine.

- `LearnerAuthenticator`: each learner picks a name and a password at first login
  (FirstUseAuthenticator); later logins need that password, so nobody logs in as someone else.
  Each name becomes a Unix user with a private home (mode 0700), so learners cannot read each
  other's files.
- `LearnerSpawner`: JupyterHub's LocalProcessSpawner (each server runs as its learner's Unix user),
  plus what it does not do itself: the memory and CPU limits, enforced with the kernel's cgroups (what
  SystemdSpawner asks systemd to do, on machines without systemd too); a copy of the course on
  first login; and each learner's own runs folder (COURSE_RUNS_DIR).
- the limits are hub_cgroups.Cgroups (stdlib only).

Imported by jupyterhub_config.py (this folder is put on sys.path there); stdlib and jupyterhub only.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from firstuseauthenticator import FirstUseAuthenticator
from hub_cgroups import CGROUP_FS, Cgroups
from jupyterhub.auth import LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import List, Unicode

PROJECT_ROOT = Path(__file__).resolve().parent.parent


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
