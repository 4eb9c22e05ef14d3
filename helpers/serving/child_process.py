"""Start/stop of a model server in a child process on 127.0.0.1, shared by the course's two servers.

The child is a plain script started by path (`python -P helpers/serving/<script>.py`), so it does
not import the helpers package (pandas, verifiers, weave: seconds of start-up it does not need).
Each start gets a random API key that only this process knows (the child refuses requests
without it), and the child exits by itself when this process dies, even mid start-up.

A workshop's shared server (scripts/serve_room.py) may bind another address and use a key the
instructor hands out: `check_bind_address` allows that only with such a key, and warns.
"""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from helpers.paths import PROJECT_ROOT, runs_dir
from helpers.scrubbing import register_secret
from helpers.serving.child_guard import KEY_ENV

if TYPE_CHECKING:
    import openai

HOST = "127.0.0.1"  # every server binds here unless an instructor names another address
MIN_KEY_CHARS = 16
HERE = Path(__file__).resolve().parent
# Requests to our own servers never go through a proxy (an HTTP_PROXY without NO_PROXY=127.0.0.1
# would otherwise swallow them, and the server would seem never to start).
NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class EndpointError(RuntimeError):
    """The model endpoint cannot be used; the message says why and what to do."""


@dataclass
class Endpoint:
    """What get_client() resolved: the client, the model name, and where it points."""

    client: openai.OpenAI
    model: str
    kind: str  # "local", "openai" or "custom"
    base_url: str

    def describe(self) -> str:
        if self.kind == "local":
            return (f"model: {self.model} on a local llama.cpp server at {self.base_url} "
                    "(set OPENAI_API_KEY or OPENAI_BASE_URL to use another endpoint)")
        if self.kind == "openai":
            return f"model: {self.model} on OpenAI (OPENAI_API_KEY is set)"
        return f"model: {self.model} on the endpoint at {self.base_url} (OPENAI_BASE_URL is set)"


def how_it_ended(returncode: int | None) -> str:
    """A stopped process's exit in words, e.g. "exit code 1" or "ended by SIGTERM" (something asked it to
    stop) or "ended by SIGKILL" (killed, often by the system when memory ran out)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"ended by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"ended by signal {-returncode}"
    return f"exit code {returncode}"


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            sock.bind((host, port))
            sock.listen()
        except OSError:
            return False
        return True


def connect_host(host: str) -> str:
    """The address a client on this machine uses for a server bound to `host` (a wildcard means loopback)."""
    return {"0.0.0.0": HOST, "": HOST}.get(host, host)


def check_bind_address(host: str, key: str | None) -> None:
    """A server binds an address other than 127.0.0.1 only with a key the instructor hands out, and says so.

    Raises EndpointError (naming the fix) without a key, or with one too short to resist guessing.
    """
    if key is not None and len(key) < MIN_KEY_CHARS:
        raise EndpointError(
            f"The server's key is {len(key)} characters long; use at least {MIN_KEY_CHARS}, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`, or leave it unset for a random one.")
    if host in (HOST, "::1"):  # the loopback addresses: only this machine reaches them
        return
    if not key:
        raise EndpointError(
            f"Serving on {host} (not {HOST}) needs a key that you hand out: set one "
            "(scripts/serve_room.py prints a random one when COURSE_ROOM_KEY is unset), or leave the address "
            f"at {HOST}, which only this machine can reach.")
    warnings.warn(
        f"The model server listens on {host}: every machine that can reach this address and has the key "
        "can use it. Hand the key only to your learners, and stop the server (Ctrl-C) after the workshop.",
        stacklevel=3)


class ChildServer:
    """A subclass provides `port`, `startup_timeout_s`, `process` (None until started), `label`,
    `log_name`, `endpoint_kind` and `served_model`, and calls `_launch(script, args)` from its
    start(). `api_key` is this start's key: `key` when one was given, else a random one."""

    host = HOST
    key: str | None = None
    label = "model server"
    log_name = "model-server"  # runs/logs/<log_name>-<port>.log
    endpoint_kind = "local"
    client_timeout_s = 600.0

    def endpoint(self):
        """A helpers.serving.endpoint.Endpoint whose client holds this start's key."""
        import openai

        client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.client_timeout_s,
                               max_retries=0, http_client=openai.DefaultHttpxClient(trust_env=False))
        return Endpoint(client=client, model=self.served_model, kind=self.endpoint_kind, base_url=self.base_url)

    @property
    def base_url(self) -> str:
        return f"http://{connect_host(self.host)}:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        return runs_dir("logs") / f"{self.log_name}-{self.port}.log"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _launch(self, script: str, args: list[str]) -> None:
        started = time.monotonic()
        self.api_key = self.key or secrets.token_urlsafe(24)
        register_secret(self.api_key)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-P", str(HERE / script), "--parent-pid", str(os.getpid()), *args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(PROJECT_ROOT),
                env={**os.environ, KEY_ENV: self.api_key},
                # Its own session: a kernel shutting down waits for its process group's children, and would
                # wait for this one (exited but not yet reaped) until Jupyter's SIGTERM skips the clean-up.
                # It still stops with its parent (child_guard) and at exit (atexit).
                start_new_session=True,
            )
        atexit.register(self.stop)
        try:
            self._wait_until_healthy(started)
        except BaseException:  # an interrupt (Ctrl-C) too: a rerun must not find a second server
            self.stop()
            raise

    def _wait_until_healthy(self, started: float) -> None:
        while time.monotonic() - started < self.startup_timeout_s:
            if self.process.poll() is not None:
                raise EndpointError(
                    f"The {self.label} exited during start-up (code {self.process.returncode}). "
                    f"Last lines of {self.log_path}:\n{self._log_tail()}"
                )
            try:
                with NO_PROXY_OPENER.open(self.base_url.removesuffix("/v1") + "/health", timeout=2) as r:
                    if r.status == 200:
                        self.startup_s = time.monotonic() - started
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise EndpointError(
            f"The {self.label} did not answer within {self.startup_timeout_s:.0f} s. "
            f"Last lines of {self.log_path}:\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
