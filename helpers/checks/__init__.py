"""Exercise checks: `helpers.check("<notebook>-<name>", value)` prints "correct" or "not yet — hint: ...".

A check never raises, so Run All always completes: an exercise left as committed says "not yet".
Each notebook's checks live in their own module here (`notebook_00.py`, ...), registered with
`@checks_exercise("<name>")`: the function receives the learner's value and returns None when it is
right, or a hint in plain words when it is not. Solutions are in solutions/<notebook>.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

CHECKS: dict[str, Callable[[Any], str | None]] = {}
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


def check(name: str, value: Any) -> None:
    """Check an exercise's answer and say so in one line (correct, or not yet with a hint)."""
    _load_checks()
    checker = CHECKS.get(name)
    if checker is None:
        print(f"not yet — there is no exercise called {name!r} (known: {', '.join(sorted(CHECKS))})")
        return
    try:
        hint = checker(value)
    except Exception as e:  # noqa: BLE001 - a check never stops Run All
        hint = f"checking your answer raised {type(e).__name__}: {e}"
    print(f"not yet — {name}: {hint}" if hint else f"correct — {name}")
