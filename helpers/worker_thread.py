"""Run async-flavoured code from a notebook cell without touching the kernel's own event loop, and stop it
when the learner presses the interrupt button."""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import gc
import threading
import time

import openai

from helpers.endpoint import connection_lost

STOP_WAIT_S = 10.0  # after an interrupt, how long the caller waits for the worker to wind down


class WorkerTimeout(TimeoutError):
    """The call did not finish within its time limit; it was asked to stop."""


class _Worker(threading.Thread):
    """A daemon thread that runs `call()` in a copy of the caller's context and keeps its result or error.

    `coroutine`: run it on this thread's own event loop, so that `stop()` can cancel it (which wakes the
    loop at once). Otherwise `stop()` raises KeyboardInterrupt inside the thread at its next Python line:
    code that sits in asyncio (verifiers' evaluate runs its own loop) stops when its next reply arrives."""

    def __init__(self, call=None, coroutine=None):
        super().__init__(daemon=True, name="helpers-worker")
        self._call, self._coroutine = call, coroutine
        self._context = contextvars.copy_context()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self.result = None
        self.error: BaseException | None = None
        self.done = threading.Event()  # waited on instead of join(): an interrupted join can leave it unusable

    def run(self) -> None:
        try:
            self.result = self._context.run(self._run_coroutine if self._coroutine is not None else self._call)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, whatever it is (SystemExit too)
            self.error = e
        finally:
            if self._coroutine is None:
                # What a call (env.evaluate) left for the cycle collector is collected here, where no event loop
                # runs. Collected later in the kernel's thread, an AsyncOpenAI client (verifiers makes one per
                # evaluate) schedules its aclose() on Jupyter's loop for connections of a closed loop: "Event
                # loop is closed" tracebacks in a later cell's output (openai's AsyncHttpxClientWrapper.__del__).
                # Not after each short coroutine (a check runs dozens): it makes no client.
                gc.collect()
            self.done.set()

    def _run_coroutine(self):
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._task = self._loop.create_task(self._coroutine)
            return self._loop.run_until_complete(self._task)
        finally:  # as asyncio.run ends: what the coroutine left running is cancelled, then the loop closed
            leftover = asyncio.all_tasks(self._loop)
            for task in leftover:
                task.cancel()
            if leftover:
                self._loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            asyncio.set_event_loop(None)
            self._loop.close()

    def stop(self) -> None:
        if self._task is not None and self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._task.cancel)
            except RuntimeError:  # the loop closed in between: the thread is ending anyway
                pass
        elif not self.done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(KeyboardInterrupt))


def _wait(worker: _Worker, timeout_s: float | None):
    """Wait for `worker` in short joins (an interrupt reaches this thread between them); on an interrupt or
    the time limit, stop the worker and wait a little for it to end."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    worker.start()
    try:
        while not worker.done.wait(0.1):
            if deadline is not None and time.monotonic() > deadline:
                worker.stop()
                worker.done.wait(STOP_WAIT_S)
                raise WorkerTimeout(f"it did not finish within {timeout_s:.0f} s")
    except KeyboardInterrupt:
        worker.stop()
        worker.done.wait(STOP_WAIT_S)
        raise
    if worker.error is not None:
        if isinstance(worker.error, openai.APIConnectionError):
            raise connection_lost(worker.error) from worker.error
        raise worker.error
    return worker.result


def in_worker_thread(func, /, *args, timeout_s: float | None = None, **kwargs):
    """Call `func(*args, **kwargs)` in a worker thread and return its result.

    verifiers 0.1.5's `env.evaluate` sees Jupyter's running event loop and applies nest_asyncio
    to it; with ipykernel 7 that silently drops the cells queued behind it (Run All stops). In a
    worker thread no loop is running, so verifiers takes its plain script path. Copying the context
    keeps Weave's current call, so traced calls nest where they belong. A model server that goes
    away in the middle is reported in plain words (helpers.endpoint.connection_lost). The kernel's
    interrupt stops the call too (within a few seconds: at the next reply of the model server), and
    `timeout_s` stops it with WorkerTimeout.
    """
    return _wait(_Worker(call=lambda: func(*args, **kwargs)), timeout_s)


def run_sync(coro, timeout_s: float | None = None):
    """Run a coroutine to completion on a fresh event loop (in a worker thread) and return its result; an
    interrupt or `timeout_s` cancels it at once."""
    return _wait(_Worker(coroutine=coro), timeout_s)
