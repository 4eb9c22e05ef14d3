"""How the local trace store answers Weave's calls queries: which stored calls a query's filter keeps and in what
order (`matching_calls`), and each call as weave's `Call` model with its status and latency (`call_model`)."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterable
from typing import Any

from weave.vendor.weave_server_sdk.types.call_read_response import Call


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def parse_time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def sort_key(value: Any) -> tuple:
    """Missing values last; times compared as times (their ISO strings do not always sort)."""
    if value is None:
        return (1, "")
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        try:
            return (0, parse_time(value).timestamp())
        except ValueError:
            pass
    return (0, value if isinstance(value, (int, float)) else str(value))


def matching_calls(calls: Iterable[dict], req: dict) -> list[dict]:
    """The calls a calls query asks for (its `filter`), in its `sort_by` order (by start time by default)."""
    f = req.get("filter") or {}
    calls = [c for c in calls if "op_name" in c]  # an end without its start is not a call

    def keep(field: str, key: str) -> None:
        nonlocal calls
        if f.get(key) is not None:
            wanted = set(f[key])
            calls = [c for c in calls if c.get(field) in wanted]

    keep("id", "call_ids")
    keep("trace_id", "trace_ids")
    keep("parent_id", "parent_ids")
    keep("thread_id", "thread_ids")
    keep("turn_id", "turn_ids")
    keep("wb_run_id", "wb_run_ids")
    if f.get("trace_roots_only"):
        calls = [c for c in calls if not c.get("parent_id")]
    if f.get("op_names"):
        exact = {n for n in f["op_names"] if not n.endswith(":*")}
        prefixes = tuple(n[:-1] for n in f["op_names"] if n.endswith(":*"))
        calls = [c for c in calls
                 if c.get("op_name") in exact or c.get("op_name", "").startswith(prefixes or ("\0",))]
    if req.get("query"):
        warnings.warn("the local trace store ignores `query`; use `filter` (op_names, trace_ids, "
                      "parent_ids, call_ids, trace_roots_only)", stacklevel=3)
    for sort in reversed(req.get("sort_by") or [{"field": "started_at", "direction": "asc"}]):
        field = sort["field"]
        calls.sort(key=lambda c, field=field: sort_key(c.get(field)), reverse=sort.get("direction") == "desc")
    return calls


def call_model(raw: dict) -> Call:
    """A stored call as weave's Call model, with its status and latency in its summary."""
    call = dict(raw)
    call.setdefault("inputs", {})
    call.setdefault("attributes", {})
    call.setdefault("op_name", "")
    call.setdefault("trace_id", call["id"])
    call.setdefault("started_at", call.get("ended_at") or now())
    summary = dict(call.get("summary") or {})
    started, ended = parse_time(call["started_at"]), parse_time(call.get("ended_at"))
    status = "running" if ended is None else ("error" if call.get("exception") else "success")
    summary["weave"] = {
        **summary.get("weave", {}), "status": status,
        "latency_ms": None if ended is None else int((ended - started).total_seconds() * 1000),
    }
    call["summary"] = summary
    return Call(**{k: v for k, v in call.items() if k in Call.model_fields})
