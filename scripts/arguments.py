"""The argparse types the scripts and benchmarks share: a bad value is refused by name before anything
runs, and 0 is never read as "not given" (`args.steps or default` would start a full run)."""

from __future__ import annotations

import argparse
import math


def whole_number(at_least: int = 1, at_most: int | None = None, what: str = ""):
    """An argparse type: a whole number from `at_least` to `at_most`; `what` says what it counts."""
    about = f" ({what})" if what else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{about}") from None
        if value < at_least or (at_most is not None and value > at_most):
            bounds = f"at least {at_least}" + (f" and at most {at_most}" if at_most is not None else "")
            raise argparse.ArgumentTypeError(f"{value} is out of range: it must be {bounds}{about}")
        return value
    return parse


def positive_number(what: str = ""):
    """An argparse type: a finite number above 0; `what` says what it is."""
    about = f" ({what})" if what else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number{about}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be a number above 0{about}")
        return value
    return parse
