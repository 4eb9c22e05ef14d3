"""Run async-flavoured code from a notebook cell without touching the kernel's own event loop, and stop it
when the learner presses the interrupt button (or a time limit passes), for real: the caller is told whether
the code has ended, never "stopped" while it still runs."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import gc
import os
import sys
import threading
import time
import warnings

import openai

from helpers.serving.endpoint import connection_lost
from helpers.serving.llama_server import drop_abandoned_requests

STOP_WAIT_S = 10.0  # after an interrupt or the time limit, how long the caller waits for the worker to end
CANCEL_GRACE_S = 2.0  # how long cancelled asyncio tasks may take to end before the thread is interrupted
REINTERRUPT_S = 0.5  # code may catch one KeyboardInterrupt (a bare except): it gets another this often
STILL_RUNNING = ("it is still running in a background thread (the worker, or a thread it started with "
                 "asyncio.to_thread or run_in_executor): it is blocked outside Python (a sleep, a C extension, a "
                 "network wait) or ignores KeyboardInterrupt, and ends only when it returns. To stop it now, restart "
                 "the kernel (Kernel > Restart Kernel); your variables are lost then.")
# A loop inside one C call (sum(itertools.repeat(0)), a regular expression that backtracks without end) holds
# Python's lock for good: no other thread of the kernel runs, so neither a time limit nor the interrupt button can
# end it or say anything. For the checker to say before it runs learner code.
FROZEN = ("If a check never ends (the cell stays busy, the interrupt button does nothing), your code is in a loop "
          "inside one C call (e.g. sum(itertools.repeat(0)), or a regular expression that backtracks without end), "
          "which no time limit can stop: restart the kernel (Kernel > Restart Kernel).")
_POOL_FILE = os.path.join("concurrent", "futures", "thread.py")


class WorkerTimeout(TimeoutError):
    """The call did not finish within its time limit; `still_running` says whether stopping it failed."""

    def __init__(self, timeout_s: float, still_running: bool):
        self.still_running = still_running
        super().__init__(f"it did not finish within {timeout_s:.0f} s; "
                         + (STILL_RUNNING if still_running else "it was stopped"))


class RaisedInterrupt(RuntimeError):
    """The code raised KeyboardInterrupt itself: not the interrupt button (that only reaches the caller's thread)."""


_CURRENT: contextvars.ContextVar[_Worker | None] = contextvars.ContextVar("helpers_worker", default=None)


class _Worker(threading.Thread):
    """A daemon thread that runs `call()` (or `coroutine` on its own event loop) in a copy of the caller's
    context and keeps its result or error. `stop()` ends it: see there."""

    def __init__(self, call=None, coroutine=None):
        super().__init__(daemon=True, name="helpers-worker")
        self._call, self._coroutine = call, coroutine
        self._context = contextvars.copy_context()
        self.result = None
        self.error: BaseException | None = None
        self.done = threading.Event()  # waited on instead of join(): an interrupted join can leave it unusable
        self.stopping = False  # set by stop(): a KeyboardInterrupt from the thread is then ours
        self.children: list[_Worker] = []  # workers its code started (a check's run_sync)
        # the default executors of the event loops its code ran: asyncio.to_thread's threads. Closing a loop
        # leaves a busy one running (at ~97% of a core, after the check said "stopped"), so they are counted too.
        self.executors: list = []
        # KeyboardInterrupt may be raised in the thread only while the code runs: never in threading's start-up
        # or the clean-up after it, nor while this worker stops a child of its own (that must not be cut short).
        self._interruptible = False
        self._lock = threading.Lock()
        parent = _CURRENT.get()
        if parent is not None:  # the finished ones are dropped: a check makes dozens, each holding its result
            parent.children = [child for child in parent.children if child.running()] + [self]

    def run(self) -> None:
        self._context.run(_CURRENT.set, self)
        try:
            self._set_interruptible(True)
            self.result = self._context.run(self._run_coroutine if self._coroutine is not None else self._call)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, whatever it is (SystemExit too)
            self.error = e
        self._set_interruptible(False)
        if self._coroutine is None:
            # What a call (env.evaluate) left for the cycle collector is collected here, where no event loop
            # runs. Collected later in the kernel's thread, an AsyncOpenAI client (verifiers makes one per
            # evaluate) schedules its aclose() on Jupyter's loop for connections of a closed loop: "Event
            # loop is closed" tracebacks in a later cell's output (openai's AsyncHttpxClientWrapper.__del__).
            # Not after each short coroutine (a check runs dozens): it makes no client.
            gc.collect()
        self.done.set()

    def _run_coroutine(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return loop.run_until_complete(self._coroutine)
        finally:  # as asyncio.run ends: what the coroutine left running is cancelled, then the loop closed
            self._set_interruptible(False)
            leftover = asyncio.all_tasks(loop)
            for task in leftover:
                task.cancel()
            if leftover:
                loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            asyncio.set_event_loop(None)
            self._adopt(loop)
            self._stop_executors(time.monotonic() + CANCEL_GRACE_S)  # what it left in to_thread ends with it
            loop.close()

    def _set_interruptible(self, value: bool) -> None:
        """Called in this thread only. A KeyboardInterrupt that stop() sent just before may land here: it is
        dropped (came too late, or stop() sends another while the code still runs) and the flag set anyway."""
        while True:
            try:
                with self._lock:
                    self._interruptible = value
                return
            except KeyboardInterrupt:
                continue

    def _interrupt(self) -> None:
        with self._lock:  # the thread cannot leave its code between this check and the exception
            if self._interruptible and not self.done.is_set():
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident),
                                                           ctypes.py_object(KeyboardInterrupt))

    def _running_loops(self) -> list[asyncio.AbstractEventLoop]:
        """The event loops running in this thread (verifiers' evaluate runs its own), found on its stack."""
        loops, frame = [], sys._current_frames().get(self.ident)
        while frame is not None:
            if frame.f_code.co_name == "run_forever":  # by name: nest_asyncio replaces the method
                loop = frame.f_locals.get("self")
                if isinstance(loop, asyncio.AbstractEventLoop) and loop not in loops:
                    loops.append(loop)
            frame = frame.f_back
        return loops

    def _adopt(self, loop: asyncio.AbstractEventLoop) -> None:
        executor = getattr(loop, "_default_executor", None)  # made on the first to_thread/run_in_executor
        if executor is not None and executor not in self.executors:
            self.executors.append(executor)

    def threads_left(self) -> list[threading.Thread]:
        """The threads its event loops' executors still run (a call in asyncio.to_thread, or not yet exited)."""
        return [t for executor in self.executors for t in list(getattr(executor, "_threads", ())) if t.is_alive()]

    def _stop_executors(self, deadline: float) -> None:
        """Shut the executors down (idle threads exit) and interrupt each thread that runs a call, until every
        one has ended or `deadline` passes; a call blocked outside Python is left (threads_left names it)."""
        for executor in self.executors:
            executor.shutdown(wait=False, cancel_futures=True)
        while (left := self.threads_left()) and time.monotonic() < deadline:
            for thread in left:
                if _in_pool_call(thread):  # never an idle one: it would log "Exception in worker"
                    _raise_in(thread.ident)
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))

    def running(self) -> bool:
        """This thread, a worker it started or a thread of its event loops' executors has not ended."""
        return (not self.done.is_set() or bool(self.threads_left())
                or any(child.running() for child in self.children))

    def stop(self) -> bool:
        """End the call and return True once it (and every worker it started) has ended, False if it still
        runs after STOP_WAIT_S.

        First every task of the event loops running in the thread is cancelled: that wakes a loop waiting for
        the model server at once, and the cancelled requests close their connections, which ends llama.cpp's
        generation for them. Code that never awaits (`while True: ...` in an async def) cannot be cancelled, so
        then KeyboardInterrupt is raised in the thread, which Python delivers at the code's next bytecode.
        Code blocked outside Python (time.sleep, a C call) only gets it when that returns."""
        self.stopping = True
        deadline = time.monotonic() + STOP_WAIT_S
        loops = self._running_loops() if self.ident is not None else []
        for loop in loops:
            self._adopt(loop)  # verifiers' own loop (asyncio.run) too: its executor threads are this call's
            with contextlib.suppress(RuntimeError):  # the loop closed in between: the thread is ending anyway
                loop.call_soon_threadsafe(_cancel_all, loop)
        if loops:
            self.done.wait(CANCEL_GRACE_S)
        while not self.done.is_set() and time.monotonic() < deadline:
            self._interrupt()
            self.done.wait(min(REINTERRUPT_S, max(deadline - time.monotonic(), 0)))
        for child in self.children:  # each is stopped by the code that started it (its own _wait)
            child.done.wait(max(deadline - time.monotonic(), 0))
        self._stop_executors(deadline)
        return not self.running()


def _in_pool_call(thread: threading.Thread) -> bool:
    """The executor thread runs a call (concurrent.futures' _WorkItem.run is on its stack), not waiting for one."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "run" and frame.f_code.co_filename.endswith(_POOL_FILE):
            return True
        frame = frame.f_back
    return False


def _raise_in(ident: int | None) -> None:
    if ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(KeyboardInterrupt))


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _stop(worker: _Worker) -> bool:
    """worker.stop(), and meanwhile the worker that runs this code (if any) is not interrupted again."""
    current = _CURRENT.get()
    if current is None:
        return worker.stop()
    current._set_interruptible(False)
    try:
        return worker.stop()
    finally:
        current._set_interruptible(True)


def _wait(worker: _Worker, timeout_s: float | None):
    """Wait for `worker` in short waits (an interrupt reaches this thread between them); on an interrupt or
    the time limit, stop the worker and say whether it ended."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    worker.start()
    try:
        while not worker.done.wait(0.1):
            if deadline is not None and time.monotonic() > deadline:
                raise WorkerTimeout(timeout_s, still_running=not _stop(worker))
    except KeyboardInterrupt as pressed:
        if not _stop(worker):
            pressed.add_note(f"The interrupted call is not stopped: {STILL_RUNNING}")
        for server in drop_abandoned_requests():  # it would finish the stopped call's replies first
            pressed.add_note(f"The {server.label} on port {server.port} was still writing the interrupted "
                             "call's replies: restarted, so that the next cell's requests do not wait behind them.")
        raise
    if left := worker.threads_left():  # it returned, and left a call in a thread that would not stop
        warnings.warn(f"{len(left)} thread(s) the code started ({', '.join(t.name for t in left)}) still run: "
                      f"{STILL_RUNNING}", RuntimeWarning, stacklevel=3)
    if worker.error is not None:
        if isinstance(worker.error, openai.APIConnectionError):
            raise connection_lost(worker.error) from worker.error
        if isinstance(worker.error, KeyboardInterrupt) and not worker.stopping:
            raise RaisedInterrupt("the code raised KeyboardInterrupt itself (the interrupt button was not "
                                  "pressed): raise an ordinary error, or return, instead") from worker.error
        raise worker.error
    return worker.result


def in_worker_thread(func, /, *args, timeout_s: float | None = None, **kwargs):
    """Call `func(*args, **kwargs)` in a worker thread and return its result.

    verifiers 0.1.5's `env.evaluate` sees Jupyter's running event loop and applies nest_asyncio
    to it; with ipykernel 7 that silently drops the cells queued behind it (Run All stops). In a
    worker thread no loop is running, so verifiers takes its plain script path. Copying the context
    keeps Weave's current call, so traced calls nest where they belong. A model server that goes
    away in the middle is reported in plain words (helpers.serving.endpoint.connection_lost). The kernel's
    interrupt stops the call (an evaluation's pending requests are cancelled at once), and `timeout_s`
    stops it with WorkerTimeout; code that cannot be stopped is named as still running.
    """
    return _wait(_Worker(call=lambda: func(*args, **kwargs)), timeout_s)


def run_sync(coro, timeout_s: float | None = None):
    """Run a coroutine to completion on a fresh event loop (in a worker thread) and return its result; an
    interrupt or `timeout_s` cancels it at once (or interrupts it, if it never awaits)."""
    return _wait(_Worker(coroutine=coro), timeout_s)
