"""Exercise checks: `helpers.check("<notebook>-<name>", value)` prints "correct" or "not yet — hint: ...".

A check never raises, so Run All always completes: an exercise left as committed says "not yet". The
learner's code runs in a worker thread with a time limit (a loop that never ends is stopped and named), what
it prints (sys.stdout and the process's own stdout/stderr files alike) is cut after PRINT_LIMIT characters,
an iterator given as the answer is read for at most MAX_ITEMS items, and whatever the code raises, SystemExit
and KeyboardInterrupt included, becomes the hint; only the kernel's interrupt button stops a check
(helpers.worker_thread). A check adds nothing to the learner's traces: it scores hundreds of rollouts, and
Weave's verifiers integration would record each.
Each notebook's checks live in modules of their own here (`notebook_00.py`, ...), registered with
`@checks_exercise("<name>")` (helpers.checks.registry): the function receives the learner's value and returns
None when it is right, or a hint in plain words when it is not. Solutions are in solutions/<notebook>.md.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import importlib
import io
import itertools
import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Sized
from typing import Any

from helpers.checks.registry import CHECKS
from helpers.worker_thread import STILL_RUNNING, RaisedInterrupt, WorkerTimeout, in_worker_thread

TIME_LIMIT_S = 120.0  # a check runs the learner's code a few times, with real rubric calls: seconds, not minutes
PRINT_LIMIT = 2000  # characters of what the learner's code prints while it is checked
MAX_ITEMS = 10_000  # items read from an iterator given as the answer (an endless one would fill the memory)
NOTEBOOK_MODULES = ("notebook_00", "notebook_01", "notebook_02", "notebook_02_advantages", "notebook_02_loss",
                    "notebook_03", "notebook_03_discount", "notebook_03_tools", "notebook_03_module", "notebook_04")



def _load_checks() -> None:
    for module in NOTEBOOK_MODULES:
        try:
            importlib.import_module(f"helpers.checks.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"helpers.checks.{module}":
                raise


class _CappedText(io.TextIOBase):
    """Keeps the first `limit` characters written to it and counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.kept, self.size, self.dropped = limit, [], 0, 0
        self._lock = threading.Lock()  # the learner's thread and the reader of the stdout files both write

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            room = max(self.limit - self.size, 0)  # a running count: a loop of prints stays linear
            self.kept.append(text[:room])
            self.size += len(self.kept[-1])
            self.dropped += len(text) - len(self.kept[-1])
        return len(text)

    def text(self) -> str:
        cut = f"\n… ({self.dropped:,} more characters your code printed were cut)\n" if self.dropped else ""
        return "".join(self.kept) + cut


@contextlib.contextmanager
def _captured_files(printed: _CappedText):
    """Writes to the process's stdout and stderr files (os.write(1, ...), a C extension's printf, a subprocess
    that inherits them) pass sys.stdout by: for the duration, file descriptors 1 and 2 are a pipe whose reader
    thread hands what comes to `printed` (it keeps the cap, and the pipe never fills up and blocks a writer)."""
    if os.name == "nt":  # select() takes no pipes there: a reader could not keep up, and a full pipe blocks
        yield
        return
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no such files (a detached process): nothing to capture
        yield
        return
    _flush_c_stdio()
    read_end, write_end = os.pipe()
    os.dup2(write_end, 1)
    os.dup2(write_end, 2)
    os.close(write_end)
    ended = threading.Event()
    reader = threading.Thread(target=_read_pipe, args=(read_end, printed, ended), daemon=True,
                              name="helpers-check-output")
    reader.start()
    try:
        yield
    finally:
        _flush_c_stdio()  # a C printf still in libc's buffer belongs to the check
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        ended.set()
        reader.join(5)
        os.close(read_end)  # a child process the code left running writes nowhere now, not into the cell


def _flush_c_stdio() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _read_pipe(fd: int, printed: _CappedText, ended: threading.Event) -> None:
    """Hand what arrives on `fd` to `printed` until the writers are gone or, once `ended` is set, nothing more
    is waiting or a second has passed (a child process the code left running may write for ever)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    last = None
    while last is None or time.monotonic() < last:
        if last is None and ended.is_set():
            last = time.monotonic() + 1.0
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            printed.write(decoder.decode(data))
        elif last is not None:
            break
    printed.write(decoder.decode(b"", final=True))


def _bounded(value: Any) -> Any:
    """An iterator (a generator, a map, ...) given as the answer, read into a list of at most MAX_ITEMS items:
    a check would read an endless one until the memory runs out. Containers and functions stay as they are."""
    if callable(value) or isinstance(value, Sized) or not isinstance(value, Iterable):
        return value
    items = list(itertools.islice(value, MAX_ITEMS + 1))
    if len(items) > MAX_ITEMS:
        raise _EndlessAnswer
    return items


class _EndlessAnswer(Exception):
    """The answer is an iterator with more than MAX_ITEMS items."""


def _check_value(checker: Callable[[Any], str | None], value: Any) -> str | None:
    return checker(_bounded(value))


def _untraced():
    """Weave records no call made inside (a context variable: the worker thread gets a copy of it)."""
    try:
        from weave.trace.context.call_context import tracing_disabled
    except ImportError:  # no Weave: nothing is traced anyway
        return contextlib.nullcontext()
    return tracing_disabled()


def check(name: str, value: Any) -> None:
    """Check an exercise's answer and say so in one line (correct, or not yet with a hint). The learner's code runs
    in a worker thread with a time limit; a loop inside one C call holds the whole process, and no limit or button
    can stop it (worker_thread.FROZEN, which the notebooks' exercise text says too)."""
    _load_checks()
    checker = CHECKS.get(name)
    if checker is None:
        print(f"not yet — there is no exercise called {name!r} (known: {', '.join(sorted(CHECKS))})")
        return
    printed = _CappedText(PRINT_LIMIT)
    try:
        with (contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), _captured_files(printed),
              _untraced()):
            hint = in_worker_thread(_check_value, checker, value, timeout_s=TIME_LIMIT_S)
    except WorkerTimeout as e:
        hint = (f"your code did not finish within {TIME_LIMIT_S:.0f} s when the check ran it (a loop that never "
                "ends, or a wait for something that never comes?); "
                + (STILL_RUNNING if e.still_running else "it was stopped"))
    except KeyboardInterrupt:
        raise  # the interrupt button stops the check, as it stops any cell
    except RaisedInterrupt:
        hint = ("your code raised KeyboardInterrupt itself; a check stops only for the interrupt button. Return a "
                "value (or raise an ordinary error) instead")
    except _EndlessAnswer:
        hint = (f"your answer is an iterator (a generator?) that gave more than {MAX_ITEMS:,} items without "
                "ending: give a list, e.g. list(...) of a finite one")
    except BaseException as e:  # noqa: BLE001 - SystemExit too: a check never ends the kernel or Run All
        hint = f"checking your answer raised {type(e).__name__}: {e}"
    finally:
        print(printed.text(), end="")
    print(f"not yet — {name}: {hint}" if hint else f"correct — {name}")
