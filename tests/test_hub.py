"""The workshop hub (workshop/jupyterhub_config.py) for real, on 127.0.0.1: JupyterHub and its proxy as
installed by scripts/setup_hub.sh, three learners created through the hub's REST API, their servers
started, and in each learner's own kernel a short notebook-01 evaluation against one shared llama.cpp
server (scripts/serve_room.py's). Each learner's runs and traces must land in their own folder, no
learner may read another's, and the limits must hold.

Needs root (it creates Unix users, as the hub does for a room) and cgroups; CI runs as root. Everything
binds to 127.0.0.1; the hub, its proxy, the learners' servers and their kernels all live in one cgroup
tree, and a watcher process removes that tree, the test's users and their group if this test process
dies, so nothing is left running even when the test is killed.
"""

from __future__ import annotations

import asyncio
import grp
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "workshop"), str(ROOT / "scripts")]
HUB_HOME = Path(os.environ.get("COURSE_HUB_TEST_HOME", "/opt/course-hub-test"))  # where the hub's course is installed
HUB_PYTHON = Path(os.environ.get("COURSE_HUB_TEST_PYTHON", "/usr/bin/python3.11"))  # Debian's: readable by learners

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or not Path("/sys/fs/cgroup").is_dir(),
                                 reason="the hub test creates Unix users and cgroups: run it as root on Linux (CI "
                                        "does)")]

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MEM_LIMIT = 6 * 2**30  # the config's default, COURSE_HUB_MEM_LIMIT=6G
CPU_LIMIT = 2.0

# Runs in each learner's kernel: notebook 01's calls (tracing, endpoint from the environment, the course's
# GSM8K environment, env.evaluate, a saved run), kept short; then it tries to read the other learners' runs.
LEARNER_CELL = """
import getpass, json, os
from pathlib import Path
import verifiers as vf
import helpers

tracing = helpers.init_tracing("verifiers-course", quiet=True)
endpoint = helpers.get_client(quiet=True)
env_args = {"variant": "hash", "eval_split": "test", "num_eval_examples": 2, "seed": 0}
env = vf.load_environment("gsm8k-course", **env_args)
sampling_args = {"temperature": 0.7, "max_tokens": 24}
results = helpers.in_worker_thread(env.evaluate, endpoint.client, endpoint.model, sampling_args=sampling_args,
                                   num_examples=2, rollouts_per_example=1, max_concurrent=2)
run = helpers.record_evaluation(results, env, endpoint, name="hub_test", rollouts_per_example=1, wall_s=0.0,
                                max_concurrent=2, sampling_args=sampling_args, env_args=env_args)
saved = run.save()
tracing.flush()
others = {}
for other in OTHERS:
    try:
        os.listdir(f"/home/{other}/runs")
        others[other] = "read"
    except PermissionError:
        others[other] = "PermissionError"
print("RESULT " + json.dumps({
    "user": getpass.getuser(), "pid": os.getpid(), "runs_dir": os.environ.get("COURSE_RUNS_DIR"),
    "store": str(tracing.store_path),
    "gsm8k_dir": os.environ.get("GSM8K_DIR"), "kind": endpoint.kind, "model": endpoint.model,
    "run_model": json.loads((saved / "run.json").read_text())["model"], "saved": str(saved),
    "rollouts": len(run.rollouts), "others": others,
}))
"""

# If the test process dies, this removes what the test made (it is started in its own session, so it
# outlives a killed test).
WATCHER = """
import os, subprocess, sys, time
sys.path.insert(0, {workshop!r})
from hub_cgroups import Cgroups
test_pid = {test_pid}
while True:
    try:
        os.kill(test_pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
Cgroups({cgroup!r}).kill()
for user in {users!r}:
    subprocess.run(["userdel", "--remove", user], capture_output=True)
subprocess.run(["groupdel", {group!r}], capture_output=True)
subprocess.run(["rm", "-rf", {data!r}])
"""


@dataclass
class Hub:
    url: str
    token: str
    learners: list[str]
    group: str
    cgroups: object  # hub_cgroups.Cgroups
    process: subprocess.Popen
    log: Path
    room_key: str = ""
    setup_s: float = 0.0
    admin: str = ""
    admin_password: str = ""

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, dict]:
        request = urllib.request.Request(f"{self.url}/hub/api{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with NO_PROXY.open(request, timeout=timeout) as reply:
                text = reply.read().decode()
                return reply.status, json.loads(text) if text else {}
        except urllib.error.HTTPError as e:
            return e.code, {"error": e.read().decode(errors="replace")}
        except (urllib.error.URLError, ConnectionError) as e:  # not listening (yet)
            return 0, {"error": str(e)}

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def _install_where_learners_can_read() -> Path:
    """The course as an instructor installs it for a room (INSTRUCTOR_GUIDE.md): this working tree's files
    copied to HUB_HOME (only what changed), whose .venv is made from a Python outside any home folder.
    Learners' servers run as their own users: they must be able to read the course and its Python without
    anyone opening another user's home (this checkout's Python lives under /root). Kept between runs."""
    if not HUB_PYTHON.exists():
        pytest.skip(f"the hub test needs a Python 3.11 outside /root at {HUB_PYTHON} (COURSE_HUB_TEST_PYTHON)")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, HUB_HOME / name
        if not source.is_file():
            continue  # deleted in the working tree
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return HUB_HOME


def _remove_users(users: list[str], group: str) -> None:
    for user in users:
        subprocess.run(["userdel", "--remove", user], capture_output=True, check=False)
    subprocess.run(["groupdel", group], capture_output=True, check=False)


@pytest.fixture(scope="module")
def hub(tmp_path_factory, gsm8k_dir):
    from hub_cgroups import Cgroups
    from serve_room import room_server

    started = time.monotonic()
    home = _install_where_learners_can_read()
    tag = uuid.uuid4().hex[:6]
    learners = [f"hubtest{tag}{i}" for i in range(1, 4)]
    group, cgroup_root = f"hubtest{tag}", f"course-hub-test-{tag}"
    admin = f"{group}admin"  # the hub creates the instructor's account at start
    data = tmp_path_factory.mktemp("hub")
    cgroups = Cgroups(cgroup_root)
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER.format(workshop=str(ROOT / "workshop"), test_pid=os.getpid(), cgroup=cgroup_root,
                                              users=[*learners, admin], group=group, data=str(data))],
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    token, admin_password = secrets.token_hex(32), secrets.token_urlsafe(16)
    port, hub_port, proxy_port = _free_ports(3)
    config = data / "test_config.py"
    config.write_text(f"""
load_subconfig({str(home / "workshop" / "jupyterhub_config.py")!r})
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.JupyterHub.services.append({{"name": "course-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append({{"name": "course-test", "services": ["course-test"],
    "scopes": ["admin:users", "admin:servers", "access:servers", "list:users", "read:users", "list:services",
               "read:services"]}})
""")
    log = data / "jupyterhub.log"
    try:
        setup = subprocess.run(["bash", "scripts/setup_hub.sh"], check=False, cwd=home, capture_output=True,
                               text=True, stdin=subprocess.DEVNULL, timeout=1200,
                               env={**os.environ, "PYTHON": str(HUB_PYTHON), "COURSE_HUB_DATA": str(data / "hub"),
                                    "COURSE_HUB_ADMIN": admin, "COURSE_HUB_ADMIN_PASSWORD": admin_password})
        assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
        with room_server(parallel=4, key=secrets.token_urlsafe(24)) as room:
            env = {**os.environ, "OPENAI_BASE_URL": room.base_url, "OPENAI_API_KEY": room.api_key,
                   "OPENAI_MODEL": room.alias, "GSM8K_DIR": str(gsm8k_dir), "COURSE_HUB_DATA": str(data / "hub"),
                   "COURSE_HUB_CGROUP": cgroup_root, "COURSE_HUB_GROUP": group,
                   "COURSE_HUB_ADMIN": admin}
            # The hub joins its own cgroup before it starts: its proxy, services and learners' servers inherit it.
            join = " ".join(f"echo $$ > {f};" for f in cgroups.procs_files("hub"))
            with open(log, "wb") as out:
                process = subprocess.Popen(
                    ["sh", "-c", f'{join} exec "$@"', "hub", str(home / ".venv" / "bin" / "jupyterhub"),
                     "-f", str(config)], cwd=data, env=env, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL)
            hub = Hub(f"http://127.0.0.1:{port}", token, learners, group, cgroups, process, log, room.api_key,
                      admin=admin, admin_password=admin_password)
            deadline = time.monotonic() + 120
            while hub.api("GET", "/")[0] != 200:
                assert process.poll() is None, f"the hub exited:\n{hub.log_tail()}"
                assert time.monotonic() < deadline, f"the hub did not answer in 120 s:\n{hub.log_tail()}"
                time.sleep(0.5)
            hub.setup_s = time.monotonic() - started
            print(f"\nhub test: setup_hub.sh and the hub's start took {hub.setup_s:.0f} s")
            yield hub
            process.terminate()  # the hub stops every learner's server (cleanup_servers)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    finally:
        cgroups.kill()
        _remove_users([*learners, admin], group)
        watcher.kill()
        watcher.wait()
        print(f"\nhub test: {(time.monotonic() - started) / 60:.1f} min in all")


async def _run_in_kernel(hub: Hub, user: str, code: str, timeout_s: float = 600) -> tuple[str, list]:
    """Start a kernel in `user`'s server through the hub's proxy, run `code`, return its stdout and errors."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    headers = {"Authorization": f"token {hub.token}"}
    status, kernel = await asyncio.to_thread(_server_api, hub, user, "POST", "/api/kernels", {"name": "python3"})
    assert status == 201, (status, kernel)
    ws_url = f"{hub.url.replace('http', 'ws', 1)}/user/{user}/api/kernels/{kernel['id']}/channels"
    socket = await websocket_connect(HTTPRequest(ws_url, headers=headers, connect_timeout=60))
    msg_id = uuid.uuid4().hex
    socket.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex,
                   "username": user, "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    stdout, errors = [], []
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{user}'s kernel did not finish in {timeout_s:.0f} s; stdout so far: {''.join(stdout)}"
        raw = await asyncio.wait_for(socket.read_message(), remaining)
        assert raw is not None, f"{user}'s kernel connection closed; stdout so far: {''.join(stdout)}"
        message = json.loads(raw)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = message["msg_type"]
        if kind == "stream" and message["content"]["name"] == "stdout":
            stdout.append(message["content"]["text"])
        elif kind == "error":
            errors.append("\n".join(message["content"]["traceback"])[-3000:])
        elif kind == "status" and message["content"]["execution_state"] == "idle":
            break
    socket.close()
    return "".join(stdout), errors


def _server_api(hub: Hub, user: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(f"{hub.url}/user/{user}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"token {hub.token}"})
    try:
        with NO_PROXY.open(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")}


def _start_servers(hub: Hub) -> None:
    for user in hub.learners:
        status, reply = hub.api("POST", f"/users/{user}/server")
        assert status in (201, 202), (status, reply, hub.log_tail())
    deadline = time.monotonic() + 180
    waiting = set(hub.learners)
    while waiting:
        for user in sorted(waiting):
            status, model = hub.api("GET", f"/users/{user}")
            if model.get("servers", {}).get("", {}).get("ready"):
                waiting.discard(user)
        assert time.monotonic() < deadline, f"servers of {waiting} not ready in 180 s:\n{hub.log_tail()}"
        time.sleep(1)


def test_three_learners_share_one_endpoint_and_cannot_read_each_other(hub):
    status, created = hub.api("POST", "/users", {"usernames": hub.learners})
    assert status == 201, (status, created, hub.log_tail())
    members = grp.getgrnam(hub.group).gr_mem
    assert all(pwd.getpwnam(user) and user in members for user in hub.learners)  # Unix users, made by the hub
    _start_servers(hub)

    async def all_learners():
        cells = [LEARNER_CELL.replace("OTHERS", repr([o for o in hub.learners if o != user])) for user in hub.learners]
        return await asyncio.gather(*(_run_in_kernel(hub, user, cell) for user, cell in zip(hub.learners, cells)))

    outputs = asyncio.run(all_learners())
    for user, (stdout, errors) in zip(hub.learners, outputs):
        assert not errors, f"{user}'s kernel raised:\n{errors[0]}"
        result = json.loads(stdout.split("RESULT ", 1)[1])
        home = Path(pwd.getpwnam(user).pw_dir)
        # The learner's own kernel, as the learner's own Unix user, on the room's endpoint.
        assert result["user"] == user
        assert result["kind"] == "custom" and result["model"] == result["run_model"] == "SmolLM2-135M-Instruct"
        assert result["rollouts"] == 2
        assert result["gsm8k_dir"]
        # Runs and traces in the learner's own folder, owned by the learner.
        assert result["runs_dir"] == str(home / "runs")
        saved = Path(result["saved"])
        assert saved.parent.parent == home / "runs" and (saved / "rollouts.jsonl").is_file()
        store = Path(result["store"])
        assert store.is_relative_to(home / "runs"), store
        assert any(p.is_file() and p.stat().st_size > 0 for p in store.rglob("*")), f"no traces in {store}"
        assert saved.stat().st_uid == pwd.getpwnam(user).pw_uid
        # No learner can read another's folder; the home is private.
        assert set(result["others"].values()) == {"PermissionError"}, result["others"]
        assert home.stat().st_mode & 0o777 == 0o700
        # The course was delivered to the learner.
        assert (home / "course" / "notebooks" / "01_traced_gsm8k_eval.ipynb").is_file()
        # The limits hold for the learner's kernel.
        assert result["pid"] in hub.cgroups.pids(user)
        assert hub.cgroups.limits(user) == {"memory": MEM_LIMIT, "cpu": CPU_LIMIT}

    # The room's key reaches the learners' environments, never the hub's log.
    assert hub.room_key not in hub.log.read_text(errors="replace")

    # The idle culler runs as a hub service.
    status, services = hub.api("GET", "/services")
    assert status == 200 and "idle-culler" in services, services
    culler_pid = services["idle-culler"].get("pid")
    assert culler_pid and Path(f"/proc/{culler_pid}").exists(), services["idle-culler"]

    # Stopping a learner's server stops everything it started (its kernel too).
    first = hub.learners[0]
    status, _ = hub.api("DELETE", f"/users/{first}/server")
    assert status in (202, 204)
    deadline = time.monotonic() + 60
    while hub.cgroups.pids(first) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not hub.cgroups.pids(first)


def test_an_existing_account_cannot_be_claimed(hub):
    """A name that is already a Unix account outside the learners' group (root) cannot become a learner."""
    status, reply = hub.api("POST", "/users", {"usernames": ["root"]})
    assert status == 400, (status, reply)
    assert shutil.which("useradd"), "useradd is what the hub creates learners with"


def _browser(hub: Hub, page: str = "/hub/login", browser=None):
    """A browser on one of the hub's pages: an opener that keeps cookies and does not follow redirects (a new
    one, or `browser`), and the page's _xsrf value (every form post needs it; a login changes it)."""
    import http.cookiejar

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    if browser is None:
        browser = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                              urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                              NoRedirect())
    with browser.open(f"{hub.url}{page}", timeout=30) as reply:
        reply.read()
    jar = next(h.cookiejar for h in browser.handlers if isinstance(h, urllib.request.HTTPCookieProcessor))
    return browser, next(cookie.value for cookie in jar if cookie.name == "_xsrf")


def _post(browser, url: str, fields: dict) -> tuple[int, str]:
    """A form post; the reply's status (302: logged in) and page."""
    import urllib.parse

    try:
        with browser.open(urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode()),
                          timeout=60) as reply:
            return reply.status, reply.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _log_in(hub: Hub, name: str, password: str) -> int:
    """A browser's login through the hub's form (with its _xsrf cookie); the reply's status: 302 logged in."""
    browser, xsrf = _browser(hub)
    return _post(browser, f"{hub.url}/hub/login", {"username": name, "password": password, "_xsrf": xsrf})[0]


def test_the_admin_account_is_made_at_setup_not_by_whoever_logs_in_first(hub, tmp_path):
    """With FirstUseAuthenticator alone, the first login as `instructor` set its password and made that
    person admin. setup_hub.sh sets the admin's password; a guess is refused, the real one works, and a hub
    whose admin has no password refuses to start."""
    assert _log_in(hub, hub.admin, "a-first-comer's-guess") != 302
    assert _log_in(hub, hub.admin, hub.admin_password) == 302
    assert hub.admin_password not in hub.log.read_text(errors="replace")

    no_admin = subprocess.run([str(HUB_HOME / ".venv" / "bin" / "jupyterhub"), "-f",
                               str(HUB_HOME / "workshop" / "jupyterhub_config.py")],
                              cwd=tmp_path, env={**os.environ, "COURSE_HUB_DATA": str(tmp_path / "hub"),
                                                 "COURSE_HUB_ADMIN": hub.admin},
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert no_admin.returncode != 0 and "has no password yet" in no_admin.stderr + no_admin.stdout


def test_a_link_planted_in_the_home_hands_over_nothing(hub, tmp_path):
    """prepare_home ran as root at every server start and changed the owner of everything under ~/course,
    following links: a learner's link to a root-owned file made that file the learner's. Links to a root-owned
    file and folder are planted in ~/course and ~/runs; after a restart both still belong to root."""
    user = hub.learners[1]
    account = pwd.getpwnam(user)
    home = Path(account.pw_dir)
    targets = tmp_path / "root-owned"
    targets.mkdir()
    secret_file, secret_folder = targets / "file", targets / "folder"
    secret_file.write_text("root's")
    secret_folder.mkdir()
    (secret_folder / "inside").write_text("root's")
    before = {path: (path.stat().st_uid, path.stat().st_mode)
              for path in (secret_file, secret_folder, secret_folder / "inside")}
    for name, target in (("file-link", secret_file), ("folder-link", secret_folder)):
        for place in (home / "course", home / "course" / "notebooks", home / "runs"):
            link = place / name
            link.symlink_to(target)
            os.lchown(link, account.pw_uid, account.pw_gid)  # as the learner would have made it

    status, _ = hub.api("DELETE", f"/users/{user}/server")
    assert status in (202, 204)
    deadline = time.monotonic() + 60
    while hub.api("GET", f"/users/{user}")[1].get("servers") and time.monotonic() < deadline:
        time.sleep(0.5)
    status, reply = hub.api("POST", f"/users/{user}/server")
    assert status in (201, 202), (status, reply, hub.log_tail())
    deadline = time.monotonic() + 120
    while not hub.api("GET", f"/users/{user}")[1].get("servers", {}).get("", {}).get("ready"):
        assert time.monotonic() < deadline, f"{user}'s server did not start again:\n{hub.log_tail()}"
        time.sleep(1)

    after = {path: (path.stat().st_uid, path.stat().st_mode) for path in before}
    assert after == before, "a planted link handed its target to the learner"
    # The course the learner got is the learner's own, made by the learner's user, not chowned by root.
    notebook = home / "course" / "notebooks" / "01_traced_gsm8k_eval.ipynb"
    assert notebook.stat().st_uid == account.pw_uid and (home / "runs").stat().st_uid == account.pw_uid


def test_setup_refuses_a_course_learners_cannot_reach_and_opens_no_home():
    """COURSE_HUB_OPEN_PARENTS=1 used to chmod o+x the folders above the course and its Python (here /root,
    where pyenv lives), letting every learner into root's home. That switch is gone: setup_hub.sh stops and
    says where to install instead, and no folder's mode changes."""
    base = Path(subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
                               capture_output=True, text=True, check=True).stdout.strip())
    closed = [f for f in (ROOT, *ROOT.parents, base, *base.parents) if f != Path("/") and not f.stat().st_mode & 0o001]
    if not closed:
        pytest.skip("this checkout and its Python are readable by every user: nothing to refuse here")
    modes = {folder: folder.stat().st_mode for folder in closed}
    done = subprocess.run(["bash", "scripts/setup_hub.sh"], cwd=ROOT, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=600, env={**os.environ, "COURSE_HUB_OPEN_PARENTS": "1"})
    assert done.returncode == 1 and "without opening anyone's home" in done.stderr, done.stderr[-2000:]
    assert {folder: folder.stat().st_mode for folder in closed} == modes


def test_a_learner_password_longer_than_bcrypt_reads_is_refused_with_a_message(hub):
    """requirements-hub.txt installs bcrypt 5, which raises for a password over 72 bytes: FirstUseAuthenticator
    let that out of a learner's first login (the login page gave a 500 error) and out of the change-password
    page. 37 accented letters (74 bytes) now get the login page again (403, as any refused login) with a message
    saying why; 36 (72 bytes) become the learner's password; the change-password page refuses 74 bytes the same
    way."""
    learner, log_before = hub.learners[2], len(hub.log.read_text(errors="replace"))
    browser, xsrf = _browser(hub)
    status, page = _post(browser, f"{hub.url}/hub/login", {"username": learner, "password": "é" * 37, "_xsrf": xsrf})
    assert status == 403 and "the password is 74 bytes long; bcrypt reads at most 72" in page, (status, page[-2000:])
    status, _ = _post(browser, f"{hub.url}/hub/login", {"username": learner, "password": "é" * 36, "_xsrf": xsrf})
    assert status == 302, hub.log_tail()
    browser, xsrf = _browser(hub, "/hub/auth/change-password", browser)
    status, page = _post(browser, f"{hub.url}/hub/auth/change-password", {"password": "é" * 37, "_xsrf": xsrf})
    assert status == 200 and "Password not changed: the password is 74 bytes long" in page, (status, page[-2000:])
    assert _log_in(hub, learner, "é" * 36) == 302  # unchanged
    log = hub.log.read_text(errors="replace")[log_before:]
    assert " 500 " not in log and "Traceback" not in log, log[-3000:]
