"""A stand-in for llama.cpp's /completion on 127.0.0.1 (that path only), for the policy server's paths a real server
does not take on demand (tests/test_policy_server.py, tests/test_grpo.py)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeCompletionServer:
    """A stand-in for llama.cpp's /completion on 127.0.0.1 (that path only), for the paths a real server does
    not take on demand: `reply(body)` gives (status, JSON object or raw bytes, delay_s) for each request, or
    None to close the connection without an answer."""

    def __init__(self, tmp_path, reply):
        outer = self
        self.reply, self.requests = reply, 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests += 1
                answer = outer.reply(body)
                if answer is None:  # no status line: the client sees the connection close
                    self.close_connection = True
                    return
                status, data, delay_s = answer
                time.sleep(delay_s)
                raw = data if isinstance(data, bytes) else json.dumps(data).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting: a hung-server test
                    pass

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.http.server_port}/v1"
        self.api_key, self.log_path = "test-key", tmp_path / "policy.log"

    def is_running(self) -> bool:
        return True

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
