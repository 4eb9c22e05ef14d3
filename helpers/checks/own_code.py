"""Is a learner's answer the course's own code? A check runs the learner's answer next to the course's
reference; the reference itself, imported from helpers or from one of the course's environment modules,
agrees with it on every input and teaches nothing, so the check asks for the learner's own code instead.

This module imports in both environments (the course's, and notebook 04's .venv-v1)."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


@functools.cache
def course_modules() -> frozenset[str]:
    """The top-level names of the course's own modules: helpers, and each module of environments/."""
    return frozenset({"helpers", *(path.stem for path in ENVIRONMENTS.glob("*/*.py"))})


def _unwrapped(value):
    """The function or class behind a partial, a bound method or a decorated function."""
    for _ in range(20):  # a chain of wrappers is short; a loop of them must not hang the check
        if isinstance(value, functools.partial):
            value = value.func
        elif inspect.ismethod(value):
            value = value.__func__
        elif getattr(value, "__wrapped__", None) is not None:
            value = value.__wrapped__
        else:
            break
    return value


def course_code(value) -> str | None:
    """'module.name' when `value` is defined in one of the course's own modules, else None."""
    target = _unwrapped(value)
    module = getattr(target, "__module__", None)
    if not isinstance(module, str) or module.split(".")[0] not in course_modules():
        return None
    return f"{module}.{getattr(target, '__qualname__', getattr(target, '__name__', type(target).__name__))}"


def not_your_own(*values) -> str | None:
    """The hint for an answer that is (or hands back) the course's own code, else None."""
    for value in values:
        name = course_code(value)
        if name:
            return (f"this is the course's own {name}, imported: the check compares your code with the course's, "
                    "so it needs your own code. Write it in the exercise cell")
    return None
