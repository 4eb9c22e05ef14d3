"""scripts/serve_room.py --host ::1 said "Port 8080 on ::1 is already in use": the port check bound an IPv4
socket to an IPv6 address. It serves there now, and tells learners a URL with the address in brackets."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ipv6_port() -> int:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
            return sock.getsockname()[1]
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")


def test_serve_room_on_ipv6_loopback_serves_and_names_the_url_in_brackets(tmp_path):
    port = _ipv6_port()
    env = {**os.environ, "COURSE_RUNS_DIR": str(tmp_path)}
    env.pop("COURSE_ROOM_KEY", None)
    process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve_room.py"), "--host", "::1", "--port",
                                str(port), "--parallel", "1", "--threads", "1"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=env)
    try:
        seen, deadline = [], time.monotonic() + 240
        while time.monotonic() < deadline and not any("export OPENAI_MODEL=" in line for line in seen):
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            seen.append(line)
        printed = "".join(seen)
        assert "export OPENAI_MODEL=" in printed, printed + process.stderr.read()
        assert "already in use" not in printed
        variables = dict(line.strip().removeprefix("export ").split("=", 1)
                         for line in seen if line.strip().startswith("export "))
        assert variables["OPENAI_BASE_URL"] == f"http://[::1]:{port}/v1"
        request = urllib.request.Request(variables["OPENAI_BASE_URL"] + "/models",
                                         headers={"Authorization": f"Bearer {variables['OPENAI_API_KEY']}"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as reply:
            assert reply.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
