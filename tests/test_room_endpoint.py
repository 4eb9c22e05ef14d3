"""The workshop's shared model server (scripts/serve_room.py, helpers.serving.llama_server): 127.0.0.1 by
default; another address only with an instructor's key (at least 16 characters) and a warning; the three
variables it prints are what helpers.get_client() reads, so the notebooks run against it unchanged.

"Another address" here is 127.0.0.2: a different address than the default, on the loopback interface,
so the test exercises the named-address path without opening anything to a network.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from helpers.serving.child_process import EndpointError
from helpers.serving.endpoint import get_client
from helpers.serving.llama_server import LOCAL_MODEL_NAME, LocalModelServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
NAMED = "127.0.0.2"
KEY = "room-key-for-the-test-0123456789"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _status(url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with NO_PROXY.open(urllib.request.Request(url, headers=headers), timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as e:
        return e.code


def _listening(port: int) -> list[str]:
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if line.split()[3].endswith(f":{port}")]


def test_a_named_address_needs_a_key():
    server = LocalModelServer(host=NAMED, parallel=1)
    with pytest.raises(EndpointError, match=r"Serving on 127\.0\.0\.2 .* needs a key"):
        server.start()
    assert server.process is None


def test_a_short_key_is_refused():
    with pytest.raises(EndpointError, match="at least 16"):
        LocalModelServer(key="short", parallel=1).start()


def test_a_named_address_with_a_key_warns_binds_there_and_takes_only_that_key(monkeypatch):
    with pytest.warns(UserWarning, match="every machine that can reach this address and has the key"):
        server = LocalModelServer(host=NAMED, key=KEY, parallel=1).start()
    try:
        assert _listening(server.port) == [f"{NAMED}:{server.port}"]
        assert server.base_url == f"http://{NAMED}:{server.port}/v1" and server.api_key == KEY
        models = f"{server.base_url}/models"
        assert _status(models, None) == 401
        assert _status(models, "wrong-key-wrong-key-wrong") == 401
        assert _status(models, KEY) == 200
        assert KEY not in " ".join(psutil.Process(server.process.pid).cmdline())
        # What a learner does: three variables, then the notebooks' own get_client().
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_MODEL", LOCAL_MODEL_NAME)
        endpoint = get_client(quiet=True)
        assert (endpoint.kind, endpoint.model) == ("custom", LOCAL_MODEL_NAME)
        reply = endpoint.client.chat.completions.create(
            model=endpoint.model, messages=[{"role": "user", "content": "2 + 2 ="}], max_tokens=4)
        assert reply.model == LOCAL_MODEL_NAME
    finally:
        server.stop()


def _read_until(process: subprocess.Popen, marker: str, timeout_s: float = 240) -> str:
    seen, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"serve_room never printed {marker!r}; it printed:\n{''.join(seen)}\n{process.stderr.read()}")


def test_serve_room_prints_the_three_variables_that_notebooks_read(tmp_path, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "COURSE_ROOM_KEY"}
    env["COURSE_RUNS_DIR"] = str(tmp_path)
    process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve_room.py"), "--port", str(port),
                                "--parallel", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL, env=env)
    try:
        printed = _read_until(process, "export OPENAI_MODEL=")
        variables = dict(line.strip().removeprefix("export ").split("=", 1)
                         for line in printed.splitlines() if line.strip().startswith("export "))
        assert variables["OPENAI_BASE_URL"] == f"http://127.0.0.1:{port}/v1"
        assert variables["OPENAI_MODEL"] == LOCAL_MODEL_NAME
        key = variables["OPENAI_API_KEY"]
        assert len(key) >= 16 and printed.count(key) == 1  # a random key, printed once
        env_file = tmp_path / "room" / "room.env"
        assert env_file.stat().st_mode & 0o777 == 0o600
        assert env_file.read_text().splitlines() == [f"{k}={v}" for k, v in variables.items()]
        assert _listening(port) == [f"127.0.0.1:{port}"]
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        endpoint = get_client(quiet=True)
        assert endpoint.model == LOCAL_MODEL_NAME
        reply = endpoint.client.chat.completions.create(
            model=endpoint.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert reply.choices[0].message.content is not None
        assert not any(key in log.read_text(errors="replace") for log in (tmp_path / "logs").glob("*.log"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "serve_room: stopped" in process.stdout.read()
        assert _listening(port) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_room_serves_the_gguf_file_given_as_model_under_the_name_given(tmp_path):
    """--model and --model-name were vLLM's only: the llama backend served SmolLM2 as SmolLM2-135M-Instruct
    whatever they said. A GGUF file is now served under --model-name (here the course's own file, renamed)."""
    from helpers.serving.llama_server import packaged_model_path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**{k: v for k, v in os.environ.items() if k != "COURSE_ROOM_KEY"}, "COURSE_RUNS_DIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve_room.py"), "--port", str(port),
                                "--parallel",
                                "1", "--model", str(packaged_model_path()), "--model-name", "room-gguf"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                               env=env)
    try:
        printed = _read_until(process, "export OPENAI_MODEL=")
        variables = dict(line.strip().removeprefix("export ").split("=", 1)
                         for line in printed.splitlines() if line.strip().startswith("export "))
        assert variables["OPENAI_MODEL"] == "room-gguf"
        request = urllib.request.Request(f"{variables['OPENAI_BASE_URL']}/models",
                                         headers={"Authorization": f"Bearer {variables['OPENAI_API_KEY']}"})
        with NO_PROXY.open(request, timeout=30) as reply:
            assert [m["id"] for m in json.loads(reply.read())["data"]] == ["room-gguf"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_room_refuses_a_short_key(tmp_path):
    env = {**os.environ, "COURSE_RUNS_DIR": str(tmp_path), "COURSE_ROOM_KEY": "too-short"}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "serve_room.py"), "--host", NAMED],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, timeout=120, check=False)
    assert out.returncode != 0 and "COURSE_ROOM_KEY is 9 characters long; use at least 16" in out.stderr


def test_serve_room_vllm_keeps_the_key_off_the_command_line(monkeypatch, capsys):
    import serve_room

    args = serve_room.argparse.Namespace(backend="vllm", host="127.0.0.1", port=8080, model="Qwen/Qwen3-0.6B",
                                         model_name="qwen3", parallel=16, threads=None)
    assert serve_room.vllm_command(args) == ["vllm", "serve", "Qwen/Qwen3-0.6B", "--host", "127.0.0.1", "--port",
                                             "8080", "--served-model-name", "qwen3"]
    monkeypatch.setattr(serve_room.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="`vllm` is not installed"):
        serve_room.serve_vllm(args, KEY)


@pytest.mark.parametrize("arguments, named", [
    (["--port", "70000"], "--port"), (["--port", "-1"], "--port"), (["--port", "0"], "--port"),
    (["--port", "http"], "--port"), (["--parallel", "0"], "--parallel"), (["--threads", "0"], "--threads"),
    (["--host", ""], "--host: an empty address"),
    (["--host", "192.0.2.1"], "--host: '192.0.2.1' is not an address of this machine"),  # RFC 5737: no one's
    (["--model", "Qwen/Qwen3-0.6B"], "the llama backend serves a GGUF file"),
    (["--model", "missing.gguf"], "--model 'missing.gguf': there is no such file"),
])
def test_serve_room_refuses_a_bad_argument_before_anything_starts(arguments, named):
    """--port 70000 raised a bare OverflowError, --port 0 and --host '' waited 180 s, --parallel 0 served
    nothing, --model was silently ignored by the llama backend: each is now refused at once, naming the
    argument and what it must be, and no server is started."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "serve_room.py"), *arguments], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert out.returncode == 2 and named in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert time.monotonic() - started < 30 and "serve_room:" not in out.stdout


def test_ipv6_loopback_is_loopback():
    """::1 is only this machine, like 127.0.0.1: no key needed, no warning that 'every machine' can reach it."""
    import warnings

    from helpers.serving.child_process import check_bind_address

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_bind_address("::1", None)
        check_bind_address("127.0.0.1", None)
    with pytest.raises(EndpointError, match="needs a key"):
        check_bind_address("::", None)
