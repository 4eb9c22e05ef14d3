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
import pwd
import subprocess
import sys
from pathlib import Path

from admin_password import has_password, too_long
from firstuseauthenticator import FirstUseAuthenticator
from hub_cgroups import CGROUP_FS, Cgroups
from jupyterhub.auth import LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import List, Unicode

PROJECT_ROOT = Path(__file__).resolve().parent.parent
COPY_COURSE = Path(__file__).resolve().parent / "copy_course.py"


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

    async def authenticate(self, handler, data):
        """The admin's name logs in only with the password set at set-up (workshop/admin_password.py):
        never by first use, where whoever came first would become the room's admin. A password longer than
        bcrypt reads is refused with a message (bcrypt 5 raised, and the login page gave a 500 error); no
        error of bcrypt's leaves this method."""
        name = self.normalize_username(data.get("username", ""))
        if name in self.admin_users and not has_password(self.dbm_path, name):
            self.log.warning("Login as the admin %r refused: its password is set at set-up "
                             "(workshop/admin_password.py), not at a first login.", name)
            return None
        if problem := too_long(data.get("password", "")):
            if handler is not None:
                handler.custom_login_error = f"Login refused: {problem}."  # the login page shows it
            self.log.warning("Login as %r refused: %s", name, problem)
            return None
        try:
            return await super().authenticate(handler, data)
        except ValueError as e:  # bcrypt's, e.g. a damaged stored hash ("Invalid salt")
            self.log.error("Login as %r refused: the password could not be checked (%s).", name, e)
            return None

    def reset_password(self, username: str, new_password: str) -> str:
        """The change-password page: a password longer than bcrypt reads gets a message, not an error."""
        if problem := too_long(new_password):
            return f"Password not changed: {problem}."
        return super().reset_password(username, new_password)

    def add_system_user(self, user) -> None:
        subprocess.run(["groupadd", "--force", self.learner_group], check=True, capture_output=True)
        super().add_system_user(user)


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
        """Home 0700 (no other learner can read it); the course copied in once and the runs folder made,
        both by the learner's own Unix user (workshop/copy_course.py): root never walks or changes the owner
        of anything in a folder the learner can write, where a planted link would hand over its target."""
        account = pwd.getpwnam(self.user.name)
        home = Path(account.pw_dir)
        home.chmod(0o700)  # the home itself: made by useradd in a root-owned /home, never a learner's link
        copy = subprocess.run(
            [sys.executable, "-I", str(COPY_COURSE), str(PROJECT_ROOT), str(home), *self.course_folders],
            user=account.pw_uid, group=account.pw_gid, extra_groups=[], cwd=home, stdin=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, capture_output=True, text=True, timeout=300, check=False)
        if copy.returncode:
            raise RuntimeError(f"copying the course into {home} as {self.user.name} failed: {copy.stderr[-2000:]}")

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
