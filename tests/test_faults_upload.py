"""The upload's resume starts in the mode the project demanded. A resume after a part-way failure started by
sending single call records again and switched to whole calls only when the server refused one; against a
server that accepts a lone call end, a call whose start went before the failure and whose end came after it
arrived as a lone end, never whole (2 of 31 calls). The mode is remembered beside the store and the resume
starts in it.

The target is a tiny trace server on 127.0.0.1 spoken to by weave's own HTTP client: it refuses lone call
starts as a calls_complete project does, takes lone call ends, takes whole calls, and fails one request once."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from weave.trace_server_bindings.remote_http_trace_server import RemoteHTTPTraceServer

from helpers.tracing.replay import ReplayInterrupted, replay
from helpers.tracing.store import LocalTraceServer

PROJECT_ID = "local/resume"


class _TraceServer(BaseHTTPRequestHandler):
    received: list[tuple[str, dict]]  # (path, body) of every request it took
    fail_complete_at: int  # the n-th calls_complete request (from 1) fails once, as an outage would

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        path = self.path
        if path.endswith("/call/start"):
            return self._answer(400, {"error_code": "CALLS_COMPLETE_MODE_REQUIRED",
                                      "reason": "this project takes calls_complete"})
        if path.endswith("/calls/complete"):
            completes = sum(p.endswith("/calls/complete") for p, _ in self.received) + 1
            if completes == self.fail_complete_at and not getattr(self.server, "failed", False):
                self.server.failed = True
                return self._answer(400, {"reason": "the server is busy: try again later"})
        self.received.append((path, body))
        self._answer(200, {"digest": "d0"} if path.endswith("/obj/create") else {})

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def trace_server():
    handler = type("Handler", (_TraceServer,), {"received": [], "fail_complete_at": 2})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _store(path) -> list[str]:
    """4 calls, each written start, then end: the failed request is a whole call sent at its end's position."""
    store, ids = LocalTraceServer(path), []
    for i in range(4):
        call_id = f"call-{i}"
        store.obj_create({"obj": {"project_id": PROJECT_ID, "object_id": "double",
                                  "val": {"_type": "Op", "name": "double", "version": i}}})
        store.call_start({"start": {"project_id": PROJECT_ID, "id": call_id, "trace_id": call_id,
                                    "op_name": f"weave:///{PROJECT_ID}/op/double:v{i}",
                                    "started_at": "2026-12-04T10:00:00+00:00", "attributes": {}, "inputs": {"x": i}}})
        store.call_end({"end": {"project_id": PROJECT_ID, "id": call_id, "ended_at": "2026-12-04T10:00:01+00:00",
                                "output": 2 * i, "summary": {}}})
        ids.append(call_id)
    store.close()
    return ids


def test_a_resumed_upload_sends_every_call_whole(tmp_path, trace_server):
    handler, url = trace_server
    path = tmp_path / "traces" / "resume"
    ids = _store(path)
    client = RemoteHTTPTraceServer(url, should_batch=False)
    with pytest.raises(ReplayInterrupted) as stopped:
        replay(path, client, project_id="me/resume")
    assert "the server is busy" in str(stopped.value)
    result = replay(path, client, project_id="me/resume", skip=stopped.value.skip)  # the advice, as given
    whole = [call["id"] for p, body in handler.received if p.endswith("/calls/complete") for call in body["batch"]]
    lone_ends = [body["end"]["id"] for p, body in handler.received if p.endswith("/call/end")]
    assert lone_ends == [], f"calls that arrived as a lone end, never whole: {lone_ends}"
    assert sorted(whole) == ids and len(whole) == len(ids)  # every call whole, none twice
    assert result.what.endswith("whole calls")
    assert json.loads((tmp_path / "traces" / "resume.upload-modes.json").read_text()) == {"me/resume": "calls_complete"}
