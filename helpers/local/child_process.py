"""Start/stop of a model server in a child process on 127.0.0.1, shared by the course's two servers.

The child is a plain script started by path (`python -P helpers/local/<script>.py`), so it does
not import the helpers package (pandas, verifiers, weave: seconds of start-up it does not need).
"""

from __future__ import annotations

import atexit
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

from helpers.paths import PROJECT_ROOT, runs_dir

HOST = "127.0.0.1"
HERE = Path(__file__).resolve().parent


class EndpointError(RuntimeError):
    """The model endpoint cannot be used; the message says why and what to do."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            sock.bind((HOST, port))
            sock.listen()
        except OSError:
            return False
        return True


class ChildServer:
    """A subclass provides `port`, `startup_timeout_s`, `process` (None until started), `label` and
    `log_name`, and calls `_launch(script, args)` from its start()."""

    label = "model server"
    log_name = "model-server"  # runs/logs/<log_name>-<port>.log

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        return runs_dir("logs") / f"{self.log_name}-{self.port}.log"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _launch(self, script: str, args: list[str]) -> None:
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-P", str(HERE / script), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=str(PROJECT_ROOT),
            )
        atexit.register(self.stop)
        while time.monotonic() - started < self.startup_timeout_s:
            if self.process.poll() is not None:
                raise EndpointError(
                    f"The {self.label} exited during start-up (code {self.process.returncode}). "
                    f"Last lines of {self.log_path}:\n{self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        self.startup_s = time.monotonic() - started
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.stop()
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
