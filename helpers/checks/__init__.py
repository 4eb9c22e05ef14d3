"""Exercise checks: `helpers.check("<notebook>-<name>", value)` prints "correct" or "not yet — hint: ...".

A check never raises, so Run All always completes: an exercise left as committed says "not yet". The
learner's code runs in a worker thread with a time limit (a loop that never ends is stopped and named), what
it prints is cut after PRINT_LIMIT characters, and whatever it raises, SystemExit and KeyboardInterrupt
included, becomes the hint; only the kernel's interrupt button stops a check (helpers.worker_thread). A check
adds nothing to the learner's traces: it scores hundreds of rollouts, and Weave's verifiers integration would
record each.
Each notebook's checks live in their own module here (`notebook_00.py`, ...), registered with
`@checks_exercise("<name>")`: the function receives the learner's value and returns None when it is
right, or a hint in plain words when it is not. Solutions are in solutions/<notebook>.md.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Callable
from typing import Any

from helpers.worker_thread import STILL_RUNNING, RaisedInterrupt, WorkerTimeout, in_worker_thread

CHECKS: dict[str, Callable[[Any], str | None]] = {}
TIME_LIMIT_S = 120.0  # a check runs the learner's code a few times, with real rubric calls: seconds, not minutes
PRINT_LIMIT = 2000  # characters of what the learner's code prints while it is checked
NOTEBOOK_MODULES = ("notebook_00", "notebook_01", "notebook_02", "notebook_03", "notebook_04")


def checks_exercise(name: str):
    """Register the check of exercise `name` (e.g. "01-boxed-reward")."""

    def register(func: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
        CHECKS[name] = func
        return func

    return register


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

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = max(self.limit - self.size, 0)  # a running count: a loop of prints stays linear
        self.kept.append(text[:room])
        self.size += len(self.kept[-1])
        self.dropped += len(text) - len(self.kept[-1])
        return len(text)

    def text(self) -> str:
        cut = f"\n… ({self.dropped:,} more characters your code printed were cut)\n" if self.dropped else ""
        return "".join(self.kept) + cut


def _untraced():
    """Weave records no call made inside (a context variable: the worker thread gets a copy of it)."""
    try:
        from weave.trace.context.call_context import tracing_disabled
    except ImportError:  # no Weave: nothing is traced anyway
        return contextlib.nullcontext()
    return tracing_disabled()


def check(name: str, value: Any) -> None:
    """Check an exercise's answer and say so in one line (correct, or not yet with a hint)."""
    _load_checks()
    checker = CHECKS.get(name)
    if checker is None:
        print(f"not yet — there is no exercise called {name!r} (known: {', '.join(sorted(CHECKS))})")
        return
    printed = _CappedText(PRINT_LIMIT)
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), _untraced():
            hint = in_worker_thread(checker, value, timeout_s=TIME_LIMIT_S)
    except WorkerTimeout as e:
        hint = (f"your code did not finish within {TIME_LIMIT_S:.0f} s when the check ran it (a loop that never "
                "ends, or a wait for something that never comes?); "
                + (STILL_RUNNING if e.still_running else "it was stopped"))
    except KeyboardInterrupt:
        raise  # the interrupt button stops the check, as it stops any cell
    except RaisedInterrupt:
        hint = ("your code raised KeyboardInterrupt itself; a check stops only for the interrupt button. Return a "
                "value (or raise an ordinary error) instead")
    except BaseException as e:  # noqa: BLE001 - SystemExit too: a check never ends the kernel or Run All
        hint = f"checking your answer raised {type(e).__name__}: {e}"
    finally:
        print(printed.text(), end="")
    print(f"not yet — {name}: {hint}" if hint else f"correct — {name}")
