"""The trace store's files: JSON-lines records in Weave's own write-ahead-log format
(`{"type": "call_start", "req": {...}}`, see `weave/durability`), one file per writer, read back in write
order (`read_records`); a torn or damaged line is skipped with a warning, and only that record is lost."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WAL_SUFFIX = ".jsonl"


def wal_files(store_path: str | Path) -> list[Path]:
    """The store's log files, oldest first (their names start with a nanosecond timestamp)."""
    path = Path(store_path)
    return sorted(path.glob(f"*{WAL_SUFFIX}")) if path.is_dir() else []


def read_records(store_path: str | Path) -> Iterator[dict]:
    """Every record in the store, in write order. A torn or corrupt line (a killed kernel) is
    skipped with a warning; only that record is lost."""
    for _, record in numbered_records(store_path):
        yield record


def numbered_records(store_path: str | Path) -> Iterator[tuple[str, dict]]:
    """(where, record) for every record of `read_records`; `where` is "<file> line <n>"."""
    for file in wal_files(store_path):
        with open(file, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    if not line.endswith(b"\n"):
                        raise ValueError("line cut short")
                    record = json.loads(line)
                    if not isinstance(record, dict) or "type" not in record or "req" not in record:
                        raise ValueError("not a WAL record")
                except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                    warnings.warn(
                        f"trace store: skipped a damaged record in {file.name} line {number} ({e}); "
                        "the rest of the store is intact", stacklevel=3)
                    continue
                yield f"{file.name} line {number}", record


# Where each record type keeps its "entity/project" (the others keep it at the top of "req").
PROJECT_PART = {"call_start": "start", "call_end": "end", "obj_create": "obj", "table_create": "table"}


RECORD_TYPES = (*PROJECT_PART, "call_update", "file_create")


def project_of(record_type: str, req: Any) -> str:
    """The "entity/project" a record belongs to. A record without one is of the wrong shape
    (KeyError/TypeError/ValueError): the reader skips it, and so does the upload."""
    if record_type not in RECORD_TYPES:
        raise ValueError(f"unknown record type {record_type!r}")
    part = PROJECT_PART.get(record_type)
    project = (req[part] if part else req)["project_id"]
    if not isinstance(project, str):
        raise TypeError(f"project_id is not text: {project!r}")
    return project
