import socket
import subprocess

import openai
import pytest

from helpers.endpoint import LOCAL_MODEL_NAME, EndpointError, get_client
from helpers.local.llama_server import LocalModelServer


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
    monkeypatch.setattr("helpers.local.llama_server._shared_server", local_server)
    endpoint = get_client()
    assert endpoint.model == LOCAL_MODEL_NAME
    assert "local llama.cpp server at http://127.0.0.1" in capsys.readouterr().out
    assert isinstance(endpoint.client, openai.OpenAI)
