"""Reads the locks that scripts/lock.sh writes (uv pip compile's format: a pin, its --hash lines, then
"# via" lines naming what needs it). Used by tests/test_lock.py, tests/test_offline_install.py and
benchmarks/bench_install.py.

    from lockfile import read_lock, needed_by
    lock = read_lock(ROOT / "requirements.lock")   # {"torch": Entry(version="2.13.0+cpu", ...), ...}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TOP_LEVEL = "-r requirements.txt"  # how a lock names a package that requirements.txt pins itself


def normalized(name: str) -> str:
    """PEP 503: Jinja2, jinja2 and jinja_2 are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Entry:
    version: str
    hashes: list[str] = field(default_factory=list)
    via: set[str] = field(default_factory=set)  # what needs it: package names, or TOP_LEVEL
    lines: list[str] = field(default_factory=list)  # the pin and its hashes, as a pip -r file has them


def read_lock(path: Path) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    current: Entry | None = None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not line.startswith((" ", "#")) and stripped:
            match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(\s+\\)?", stripped)
            if not match:
                raise ValueError(f"{path.name}: '{stripped}' is not a pin (name==version)")
            current = entries[normalized(match.group(1))] = Entry(match.group(2), lines=[line])
        elif current and stripped.startswith("--hash="):
            current.hashes.append(stripped.removeprefix("--hash=").rstrip(" \\"))
            current.lines.append(line)
        elif current and stripped.startswith("#"):
            words = stripped.lstrip("#").strip().removeprefix("via").strip()
            if words:
                current.via.add(words if words.startswith("-") else normalized(words))
    return entries


def needed_by(lock: dict[str, Entry], roots: set[str]) -> set[str]:
    """The packages `roots` need, themselves included: the closure of the lock's "# via" lines."""
    found, todo = set(), [normalized(name) for name in roots]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [child for child, entry in lock.items() if name in entry.via]
    return found
