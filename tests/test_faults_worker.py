"""Learner code that awaits asyncio.to_thread(busy): the check's time limit said "it was stopped" while the
loop's executor thread ran on at ~97% of a core, and the interrupt button ended the cell with no "still running"
note. Every thread of the event loops the code ran is now counted and stopped, or named as still running."""

import asyncio
import threading
import time

import pytest

spins = {"count": 0}


def _busy():
    while True:
        spins["count"] += 1


def _still_spinning(within_s: float = 1.0) -> bool:
    before = spins["count"]
    time.sleep(within_s)
    return spins["count"] != before


async def _awaits_a_busy_thread(rubric, text, answer):
    await asyncio.to_thread(_busy)


async def _awaits_nothing(rubric, text, answer):
    return None


def test_a_check_stops_the_thread_that_asyncio_to_thread_started(monkeypatch, capsys):
    from helpers import checks

    checks.check("01-score-rollout", _awaits_nothing)  # the check's imports and data, within the full limit
    capsys.readouterr()
    monkeypatch.setattr(checks, "TIME_LIMIT_S", 2.0)
    checks.check("01-score-rollout", _awaits_a_busy_thread)
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert "did not finish within 2 s" in verdict and verdict.endswith("it was stopped"), verdict
    assert not _still_spinning(), "the check said 'it was stopped' while the to_thread call still runs"


def test_a_thread_that_cannot_be_stopped_is_named_not_called_stopped(monkeypatch):
    """A to_thread call blocked outside Python (a lock's wait) cannot be interrupted: the time limit says it is
    still running and how to stop it."""
    from helpers import worker_thread

    release = threading.Event()

    async def waits():
        await asyncio.to_thread(release.wait, 60)

    monkeypatch.setattr(worker_thread, "STOP_WAIT_S", 1.0)
    try:
        with pytest.raises(worker_thread.WorkerTimeout) as limit:
            worker_thread.run_sync(waits(), timeout_s=1.0)
    finally:
        release.set()
    assert limit.value.still_running and "restart the kernel" in str(limit.value), limit.value


def test_the_button_stops_a_to_thread_call_before_the_cell_ends(monkeypatch):
    import _thread
    import signal

    from helpers import worker_thread

    async def awaits_busy():
        await asyncio.to_thread(_busy)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    button = threading.Timer(1.0, _thread.interrupt_main)  # as the kernel's interrupt: in the waiting thread
    button.start()
    try:
        with pytest.raises(KeyboardInterrupt) as pressed:
            worker_thread.run_sync(awaits_busy())
    finally:
        button.cancel()
        signal.signal(signal.SIGINT, previous)
    assert "not stopped" not in "".join(getattr(pressed.value, "__notes__", []))
    assert not _still_spinning(), "the button ended the cell while the to_thread call still runs"


def test_a_call_left_running_in_to_thread_is_stopped_when_the_code_returns():
    """Code that returns while a to_thread call runs on (a wait_for that gave up) leaves no thread behind."""
    from helpers import worker_thread

    async def gives_up():
        try:
            await asyncio.wait_for(asyncio.to_thread(_busy), 0.3)
        except TimeoutError:
            return "gave up"

    assert worker_thread.run_sync(gives_up(), timeout_s=30) == "gave up"
    assert not _still_spinning()
