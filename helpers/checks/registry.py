"""The exercise checks' registry: `@checks_exercise("<notebook>-<name>")` registers a check in CHECKS. Each
notebook's check modules register theirs when helpers.checks loads them; the check modules import this registry,
never the runner that loads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHECKS: dict[str, Callable[[Any], str | None]] = {}


def checks_exercise(name: str):
    """Register the check of exercise `name` (e.g. "01-boxed-reward")."""

    def register(func: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
        CHECKS[name] = func
        return func

    return register
