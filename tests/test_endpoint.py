import http.server
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import psutil
import pytest

from helpers.serving.endpoint import EndpointError, get_client
from helpers.serving.llama_server import LOCAL_MODEL_NAME, LocalModelServer


def test_chat_n2_and_logprobs(local_client):
    reply = local_client.chat.completions.create(
        model=LOCAL_MODEL_NAME,
        messages=[{"role": "user", "content": "What is 2 + 3?"}],
        max_tokens=16, n=2, logprobs=True, temperature=0.8, seed=1,
    )
    assert len(reply.choices) == 2
    for choice in reply.choices:
        assert choice.message.content.strip()
        assert choice.logprobs.content, "no logprobs returned"
    assert reply.usage.completion_tokens > 0


def test_the_server_names_its_model_by_the_alias_asked_for(local_server, local_client):
    """xllamacpp takes a set of aliases: a plain string once became the set of its letters, so the
    server listed its model as '-' with aliases '-', '1', '2', 'I', ... and traces recorded '-'."""
    listed = list(local_client.models.list())
    assert [m.id for m in listed] == [LOCAL_MODEL_NAME], [m.model_dump() for m in listed]
    reply = local_client.chat.completions.create(
        model=LOCAL_MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert reply.model == LOCAL_MODEL_NAME


def test_binds_loopback_only(local_server):
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    ours = [line for line in listening.splitlines() if line.split()[3].endswith(f":{local_server.port}")]
    assert ours, listening
    assert all(line.split()[3] == f"127.0.0.1:{local_server.port}" for line in ours), ours


def test_stop_frees_port_and_restart_reuses():
    server = LocalModelServer(parallel=1).start()
    port = server.port
    assert server.start() is server and server.port == port  # second start reuses the running one
    server.stop()
    assert not server.is_running()
    with socket.socket() as sock:  # SO_REUSEADDR: connections in TIME_WAIT may remain, a listener may not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()


def test_missing_model_file(tmp_path):
    with pytest.raises(EndpointError, match="Model file not found"):
        LocalModelServer(model_path=tmp_path / "nope.gguf").start()


def test_busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(EndpointError, match="already in use"):
            LocalModelServer(port=sock.getsockname()[1]).start()


def test_get_client_prefers_base_url_and_reports_unreachable(monkeypatch):
    with socket.socket() as sock:  # a loopback port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EndpointError, match="Cannot reach the model endpoint"):
        get_client(quiet=True)


def test_get_client_local(local_server, capsys, monkeypatch):
    monkeypatch.setattr("helpers.serving.llama_server._shared_server", local_server)
    endpoint = get_client()
    assert endpoint.model == LOCAL_MODEL_NAME
    assert "local llama.cpp server at http://127.0.0.1" in capsys.readouterr().out
    assert isinstance(endpoint.client, openai.OpenAI)


# ---------------------------------------------------------------- faults: orphans, interrupts, web pages

STARTS_A_SERVER = {  # python code that starts each server (a child of that python process)
    "llama.cpp": "from helpers import get_client; get_client(quiet=True)",
    "transformers": ("from helpers.serving.gguf_convert import convert_gguf; "
                     "from helpers.serving.hf_server import HFModelServer; "
                     "HFModelServer(convert_gguf(quiet=True)).start()"),
}
CHILD_SCRIPTS = {"llama.cpp": "llama_child.py", "transformers": "hf_child.py"}


def _server_children(process: psutil.Process, script: str) -> list[psutil.Process]:
    found = []
    for child in process.children(recursive=True):
        try:
            if any(arg.endswith(script) for arg in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _wait_for(predicate, timeout_s: float, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    return predicate()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llama.cpp", "transformers"])
def test_server_exits_when_its_parent_is_killed_during_start_up(kind):
    """A kernel killed (SIGKILL) while the model is still loading leaves no server behind."""
    if kind == "transformers":
        from helpers.serving.gguf_convert import convert_gguf

        convert_gguf(quiet=True)  # the conversion is cached; the kill must hit the server's start-up
    parent = subprocess.Popen([sys.executable, "-c", STARTS_A_SERVER[kind]], stdin=subprocess.DEVNULL)
    watched = psutil.Process(parent.pid)
    try:
        servers = _wait_for(lambda: _server_children(watched, CHILD_SCRIPTS[kind]), timeout_s=120)
        assert servers, f"the {kind} server process never appeared"
        parent.kill()  # as soon as the server process exists: mid start-up
        parent.wait()
        gone = _wait_for(lambda: not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers),
                         timeout_s=5)
        assert gone, f"the {kind} server outlived its killed parent: {[s.pid for s in servers]}"
    finally:
        parent.kill()
        for server in _server_children(watched, CHILD_SCRIPTS[kind]) if parent.poll() is None else []:
            server.kill()


INTERRUPTED_THEN_RERUN = """
import time
import psutil
from helpers import get_client
from helpers.serving.child_process import ChildServer

me = psutil.Process()
healthy = ChildServer._wait_until_healthy
def interrupted_once(self, started):
    # Ctrl-C / a kernel interrupt while the first server is starting (its process already runs);
    # raised here rather than from a signal so that the moment is the same on every machine.
    ChildServer._wait_until_healthy = healthy
    assert self.process.poll() is None
    raise KeyboardInterrupt
ChildServer._wait_until_healthy = interrupted_once
try:
    get_client(quiet=True)
    print("NOT INTERRUPTED")
except KeyboardInterrupt:
    pass
get_client(quiet=True)  # the rerun
time.sleep(1)
servers = [c for c in me.children() if c.status() != psutil.STATUS_ZOMBIE
           and any(a.endswith("llama_child.py") for a in c.cmdline())]
print("SERVERS", len(servers))
"""


@pytest.mark.slow
def test_an_interrupted_first_start_then_a_rerun_leaves_one_server():
    out = subprocess.run([sys.executable, "-c", INTERRUPTED_THEN_RERUN], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "NOT INTERRUPTED" not in out.stdout
    assert "SERVERS 1" in out.stdout, out.stdout


def _request(url: str, headers: dict, method: str = "GET", body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers=headers, method=method, data=body)
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, dict(reply.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def _assert_refuses_web_pages_and_keyless_requests(server, model: str) -> None:
    root = server.base_url.removesuffix("/v1")
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    json_type = {"Content-Type": "application/json"}
    evil = {"Origin": "http://evil.example"}
    key = {"Authorization": f"Bearer {server.api_key}"}
    assert _request(f"{root}/v1/models", {})[0] == 401
    assert _request(f"{root}/v1/chat/completions", {**json_type, **evil}, "POST", body)[0] in (401, 403)
    assert _request(f"{root}/v1/chat/completions", {**json_type, "Authorization": "Bearer wrong"}, "POST",
                    body)[0] == 401
    # A browser's preflight from another origin must not be allowed to go on.
    status, headers = _request(f"{root}/v1/chat/completions", {
        **evil, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type"}, "OPTIONS")
    allowed = {k.lower(): v for k, v in headers.items()}.get("access-control-allow-origin")
    assert status >= 400 or allowed not in ("*", "http://evil.example"), (status, headers)
    assert _request(f"{root}/v1/chat/completions", {**json_type, **key}, "POST", body)[0] == 200


def test_llama_server_refuses_requests_without_its_key_or_from_web_pages(local_server):
    _assert_refuses_web_pages_and_keyless_requests(local_server, local_server.alias)


@pytest.mark.slow
def test_hf_server_refuses_requests_without_its_key_or_from_web_pages():
    from helpers.serving.gguf_convert import convert_gguf
    from helpers.serving.hf_server import HFModelServer

    with HFModelServer(convert_gguf(quiet=True), threads=1) as server:
        _assert_refuses_web_pages_and_keyless_requests(server, server.model_name)


def test_the_per_start_key_is_not_on_the_command_line(local_server):
    assert local_server.api_key not in " ".join(psutil.Process(local_server.process.pid).cmdline())


class _ListsModels(http.server.BaseHTTPRequestHandler):
    """A tiny fake OpenAI-compatible endpoint for the model-name path only: it answers /v1/models."""

    listing: tuple = ()  # set per test

    def do_GET(self):
        body = json.dumps({"object": "list", "data": list(self.listing)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("listing, expected", [
    ([{"id": "-", "object": "model"}], None),
    ([{"id": "-", "object": "model", "aliases": ["smollm2-local"]}], "smollm2-local"),
    ([{"id": "/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf", "object": "model"}], "SmolLM2-135M-Instruct.Q4_1"),
    ([{"id": "Qwen/Qwen3-0.6B", "object": "model"}], "Qwen/Qwen3-0.6B"),
])
def test_a_custom_endpoint_records_a_real_model_name(monkeypatch, listing, expected):
    handler = type("Handler", (_ListsModels,), {"listing": tuple(listing)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    try:
        if expected is None:
            with pytest.raises(EndpointError, match="Set OPENAI_MODEL"):
                get_client(quiet=True)
        else:
            assert get_client(quiet=True).model == expected
    finally:
        server.shutdown()


@pytest.mark.slow
def test_a_server_that_dies_mid_evaluation_is_reported_in_plain_words(monkeypatch):
    from helpers import build_gsm8k_env, in_worker_thread
    from helpers.serving import llama_server

    monkeypatch.setattr(llama_server, "_shared_server", None)
    endpoint = get_client(quiet=True)
    server = llama_server._shared_server
    env = build_gsm8k_env(variant="hash", num_eval_examples=2)
    killer = threading.Timer(2.0, server.process.kill)
    killer.start()
    try:
        with pytest.raises(EndpointError, match=r"local model server stopped during the call .*log is .*llama-server"):
            in_worker_thread(env.evaluate, endpoint.client, endpoint.model, num_examples=2, rollouts_per_example=4,
                             sampling_args={"max_tokens": 400})
    finally:
        killer.cancel()
        llama_server.stop_local_server()
