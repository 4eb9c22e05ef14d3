"""JupyterHub for a workshop room on one machine: every learner gets the course in their own Jupyter,
as their own Unix user, with memory/CPU limits, talking to one shared model server.

    bash scripts/setup_env.sh && bash scripts/setup_hub.sh       # once, as root
    .venv/bin/python scripts/serve_room.py &                     # the room's model server (prints its variables)
    set -a; . runs/room/room.env; set +a                         # OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL
    export GSM8K_DIR=/srv/gsm8k                                  # a folder learners can read
    .venv/bin/jupyterhub -f workshop/jupyterhub_config.py        # as root: it creates the learners' Unix users

Settings (environment variables of the hub; the defaults in brackets):
    COURSE_HUB_URL [http://127.0.0.1:8000]   where learners' browsers connect; name the machine's address
                                             to open it to the room (then put TLS in front: passwords travel)
    COURSE_HUB_DATA [/srv/course-hub]        the hub's database, cookie secret and password hashes (0700)
    COURSE_HUB_ADMIN [instructor]            the instructor's name; its password is set at set-up
                                             (COURSE_HUB_ADMIN_PASSWORD or typed, workshop/admin_password.py)
    COURSE_HUB_MEM_LIMIT [6G], COURSE_HUB_CPU_LIMIT [2]   per learner (INSTRUCTOR_GUIDE.md: sizing)
    COURSE_HUB_IDLE_TIMEOUT_S [3600]         servers idle this long are stopped (jupyterhub-idle-culler)
    COURSE_HUB_CGROUP [course-hub]           parent cgroup of the learners' cgroups
    COURSE_HUB_GROUP [course-learners]       the Unix group of the learners' accounts

What each learner gets (workshop/course_hub.py): a Unix user in the group `course-learners` with a
private home (0700), the course's notebooks copied to ~/course on first login, COURSE_RUNS_DIR=~/runs,
and the room's OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL / GSM8K_DIR in their environment, so the
notebooks run unchanged against the shared server. Tested by tests/test_hub.py (three learners).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from admin_password import admin_name, has_password, passwords_path
from admin_password import data_dir as hub_data_dir
from course_hub import PROJECT_ROOT, LearnerAuthenticator, LearnerSpawner

c = get_config()  # noqa: F821 - JupyterHub's config loader provides it

VENV_BIN = Path(sys.executable).parent  # the hub runs from the course's .venv: learners' kernels do too
PROXY = PROJECT_ROOT / ".venv" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
ROOM_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "GSM8K_DIR")
LEARNER_GROUP = os.environ.get("COURSE_HUB_GROUP", "course-learners")

data_dir = hub_data_dir()
data_dir.mkdir(parents=True, exist_ok=True)
data_dir.chmod(0o700)
if not PROXY.exists():
    sys.exit(f"course hub: {PROXY} is missing. Run `bash scripts/setup_hub.sh` first.")
ADMIN = admin_name()
if not has_password(passwords_path(data_dir), ADMIN):
    sys.exit(f"course hub: the instructor's account {ADMIN!r} has no password yet. Set it first (as root): "
             "COURSE_HUB_ADMIN_PASSWORD=... bash scripts/setup_hub.sh, or .venv/bin/python workshop/admin_password.py")
room = {name: os.environ[name] for name in ROOM_VARIABLES if os.environ.get(name)}
if "OPENAI_BASE_URL" not in room:
    print("course hub: OPENAI_BASE_URL is not set, so every learner's kernel starts its own model server "
          "(one per kernel: see INSTRUCTOR_GUIDE.md, sizing). Start the shared one with scripts/serve_room.py "
          "and `set -a; . runs/room/room.env; set +a` before starting the hub.", file=sys.stderr)
if "GSM8K_DIR" not in room:
    print("course hub: GSM8K_DIR is not set, so every learner downloads GSM8K from the HF hub.", file=sys.stderr)

# --- the hub itself
c.JupyterHub.bind_url = os.environ.get("COURSE_HUB_URL", "http://127.0.0.1:8000")
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.db_url = f"sqlite:///{data_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(data_dir / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [str(PROXY)]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:8001"
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every learner's server

# --- who logs in: each learner picks a name and a password at first login; later logins need it
c.JupyterHub.authenticator_class = LearnerAuthenticator
c.LearnerAuthenticator.dbm_path = str(passwords_path(data_dir))
c.LearnerAuthenticator.create_users = True  # or list the names: c.Authenticator.allowed_users = {...}
c.LearnerAuthenticator.min_password_length = 8
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {ADMIN}
# Names become Unix users: lowercase letters, digits, '-' and '_'. Existing accounts outside the
# learner group (root, the instructor's own login, ...) can never be claimed: see LearnerAuthenticator.
c.Authenticator.username_pattern = r"^[a-z][a-z0-9_-]{1,31}$"
c.LearnerAuthenticator.create_system_users = True
c.LearnerAuthenticator.learner_group = LEARNER_GROUP
c.LearnerAuthenticator.add_user_cmd = ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", LEARNER_GROUP]

# --- each learner's server: their own Unix user, limits, the course, the room's endpoint
c.JupyterHub.spawner_class = LearnerSpawner
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.notebook_dir = "~/course"
c.Spawner.default_url = "/lab/tree/notebooks"
c.Spawner.mem_limit = os.environ.get("COURSE_HUB_MEM_LIMIT", "6G")
c.Spawner.cpu_limit = float(os.environ.get("COURSE_HUB_CPU_LIMIT", "2"))
c.Spawner.start_timeout = 120  # a busy room: many servers start at once
c.Spawner.http_timeout = 120
c.LearnerSpawner.cgroup_root = os.environ.get("COURSE_HUB_CGROUP", "course-hub")
c.Spawner.environment = {
    **room,
    "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",  # vf-eval and friends in the learner's terminal
    "WANDB_ERROR_REPORTING": "false",
}

# --- idle servers are stopped (their memory is freed); the learner's files stay
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                f"--timeout={os.environ.get('COURSE_HUB_IDLE_TIMEOUT_S', '3600')}", "--cull-every=300"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
