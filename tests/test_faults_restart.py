"""Two interrupt presses 0.3-0.5 s apart: the first stops the call and restarts the llama.cpp server that was still
writing its replies (drop_abandoned_requests); the second cut that restart short and left the server stopped
without a word, so the next evaluation failed. The restart now finishes whatever is pressed, and says so."""

import atexit
import os
import signal

import pytest


def test_presses_during_a_restart_wait_for_it_and_the_server_runs(tmp_path, monkeypatch):
    from helpers.serving.llama_server import LocalModelServer

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as the kernel's: a press raises
    server = LocalModelServer(parallel=1, threads=1, startup_timeout_s=180).start()
    stop, wait = server.stop, server._wait_until_healthy

    def pressed_after(step):  # a press right after the old server stops, one while the new one starts
        def run(*args):
            step(*args)
            os.kill(os.getpid(), signal.SIGINT)  # delivered to this (the main) thread at once
        return run

    try:
        monkeypatch.setattr(server, "stop", patched := pressed_after(stop))
        monkeypatch.setattr(server, "_wait_until_healthy", lambda started: (os.kill(os.getpid(), signal.SIGINT),
                                                                            wait(started)))
        with pytest.raises(KeyboardInterrupt) as pressed:
            server.restart()
        monkeypatch.setattr(server, "stop", stop)
        assert "the restart was finished first" in "".join(getattr(pressed.value, "__notes__", []))
        assert server.is_running()
        reply = server.endpoint().client.models.list()
        assert [m.id for m in reply.data] == [server.alias]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the kernel's handler is back
    finally:
        atexit.unregister(locals().get("patched"))  # the new start registered the patched stop
        stop()
        signal.signal(signal.SIGINT, previous)
