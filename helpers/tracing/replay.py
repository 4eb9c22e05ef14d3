"""Sending a local trace store to another trace server, W&B's included: that is how local traces are uploaded.
`replay` sends the store's records in an order the server accepts (a call's start before its end, paired by id:
the files are not in call order), resumes where an interrupted upload stopped, and says what it sent."""

from __future__ import annotations

import base64
import contextlib
import json
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weave.durability.wal_sender import build_trace_server_handlers
from weave.trace_server_bindings.call_batch_processor import CallBatchProcessor
from weave.trace_server_bindings.models import EndBatchItem, StartBatchItem

from helpers.tracing.records import numbered_records, project_of
from helpers.tracing.store import WRONG_SHAPE, LocalTraceServer


def _retarget(value: Any, old: str, new: str) -> Any:
    """Rewrite project ids and refs from project `old` ("entity/project") to `new`."""
    if isinstance(value, str):
        if value == old:
            return new
        return value.replace(f"weave:///{old}/", f"weave:///{new}/") if "weave:///" in value else value
    if isinstance(value, dict):
        return {k: _retarget(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_retarget(v, old, new) for v in value]
    return value


class ReplayInterrupted(RuntimeError):
    """Sending stopped part-way: `sent` of the store's `total` records went, `first_unsent` ("<file> line
    <n>: <type> ...") did not, nor anything after it. `replay(..., skip=skip)` sends the rest."""

    def __init__(self, message: str, sent: int, total: int, first_unsent: str, skip: int):
        super().__init__(message)
        self.sent, self.total, self.first_unsent, self.skip = sent, total, first_unsent, skip


@dataclass
class Replayed:
    sent: int  # records that went, those of an earlier try (before `skip`) included
    sent_now: int = 0  # records this replay sent
    what: str = ""  # what this replay sent, counted: "20 objects, 10 whole calls"
    skipped: list[str] = field(default_factory=list)  # "<file> line <n>: why", for each record the reader skips
    unfinished: list[str] = field(default_factory=list)  # calls never sent: they never ended (calls_complete mode)


CALL_RECORDS = ("call_start", "call_end")


# What one request sends, in the words (and the order) the messages count them.
KIND_NAMES = {"obj_create": "object", "table_create": "table", "file_create": "file", "call_start": "call start",
              "call_end": "call end", "calls_complete": "whole call", "call_update": "call update"}


def _counted(kinds: dict[str, int]) -> str:
    """{"calls_complete": 10, "obj_create": 1} -> "1 object, 10 whole calls"."""
    return ", ".join(f"{kinds[kind]} {name}{'s' if kinds[kind] != 1 else ''}"
                     for kind, name in KIND_NAMES.items() if kinds.get(kind))


def _describe(record_type: str, req: dict) -> str:
    """A record as a person finds it: its type and the call, object or file it is about."""
    keys = {"call_start": ("start", "id"), "call_end": ("end", "id"), "call_update": ("call_id",),
            "obj_create": ("obj", "object_id"), "file_create": ("name",)}.get(record_type, ())
    value = req
    for key in keys:
        value = value[key]
    return f"{record_type} {value}" if keys else record_type


def _call_id(record: dict) -> str:
    return record["req"]["start"]["id"] if record["type"] == "call_start" else record["req"]["end"]["id"]


@dataclass
class _Request:
    """One request of a replay: `kind` is a record type, or "calls_complete" (a whole call); `carries` are the
    positions, in the store's order, of the records it sends (a whole call: its start, then its end)."""

    kind: str
    carries: list[int]

    @property
    def position(self) -> int:
        """It goes when the store's order reaches the last record it carries; `skip` counts these positions."""
        return max(self.carries)


def _call_positions(records: list[tuple[str, dict]]) -> dict[str, dict[str, int]]:
    """call id -> {"call_start": position, "call_end": position}, wherever they stand in the store."""
    calls: dict[str, dict[str, int]] = {}
    for position, (_, record) in enumerate(records):
        if record["type"] in CALL_RECORDS:
            calls.setdefault(_call_id(record), {})[record["type"]] = position
    return calls


def _plan(records: list[tuple[str, dict]], complete: bool) -> list[_Request]:
    """The requests that send `records`, in the order they go (by position). One record a request, in the
    store's order; in calls_complete mode each finished call goes whole instead: its start and end, paired by
    id wherever they stand (weave writes them from background threads, and a fast call's end is often written
    before its start), go as one request when the later of the two comes: after every op, object, table and
    file written before either, so after all it refers to. Children end first and go first, and call
    updates go where they stand, as from weave's own client. A call that never ended is not sent."""
    requests = [_Request(record["type"], [position]) for position, (_, record) in enumerate(records)
                if not (complete and record["type"] in CALL_RECORDS)]
    if complete:
        requests += [_Request("calls_complete", [call["call_start"], call["call_end"]])
                     for call in _call_positions(records).values() if len(call) == 2]
    return sorted(requests, key=lambda request: request.position)


def sendable_records(store_path: str | Path) -> tuple[list[tuple[str, dict]], list[str]]:
    """The records an upload sends, in write order, and where the ones it leaves out are (also in
    write order): exactly what the reader leaves out, records of the wrong shape and the ends of
    calls whose start is missing."""
    index = LocalTraceServer(store_path, read=False)  # indexed record by record, as the reader does
    kept, left_out = [], []  # (position, where, record) / (position, why)
    for position, (where, record) in enumerate(numbered_records(store_path)):
        try:
            index._apply(record["type"], record["req"])
            kept.append((position, where, record))
        except WRONG_SHAPE as e:
            why = f"a {record['type']} record of the wrong shape ({type(e).__name__}: {e})"
            left_out.append((position, f"{where}: {why}"))
    started = {call_id for call_id, call in index._calls.items() if "op_name" in call}
    sendable = []
    for position, where, record in kept:
        call_id = record["req"]["end"]["id"] if record["type"] == "call_end" else None
        if call_id is not None and call_id not in started:
            left_out.append((position, f"{where}: the end of call {call_id}, whose start is missing"))
        else:
            sendable.append((where, record))
    return sendable, [why for _, why in sorted(left_out)]


def _modes_file(store_path: str | Path) -> Path:
    """Beside the store (the store itself is left as it is): the targets that demanded whole calls."""
    path = Path(store_path)
    return path.with_name(path.name + ".upload-modes.json")


def _demanded_whole_calls(store_path: str | Path, target: str) -> bool:
    try:
        return json.loads(_modes_file(store_path).read_text()).get(target) == "calls_complete"
    except (OSError, ValueError, AttributeError):  # none yet, or damaged: start as a first upload does
        return False


def _remember_whole_calls(store_path: str | Path, target: str) -> None:
    path = _modes_file(store_path)
    try:
        modes = json.loads(path.read_text())
        modes = modes if isinstance(modes, dict) else {}
    except (OSError, ValueError):
        modes = {}
    with contextlib.suppress(OSError):  # a resume without it still works where the target refuses lone records
        path.write_text(json.dumps({**modes, target: "calls_complete"}, indent=1))


def replay(store_path: str | Path, server: Any, *, project_id: str | None = None, skip: int = 0,
           target: str = "the trace server",
           again: Callable[[int], str] = lambda skip: f"replay(..., skip={skip})") -> Replayed:
    """Send the records of a local store to `server` (any trace server: W&B's, or another local
    store), in write order; with `project_id`, records are moved to that "entity/project".

    A W&B project once written in "calls_complete" mode refuses call starts and ends one by one
    (CALLS_COMPLETE_MODE_REQUIRED); weave's own client then sends each finished call whole, and so does
    the replay from the refused record on (see `_plan`): a call that never ended cannot go
    (`Replayed.unfinished` names it). Records the reader skips are not sent (`Replayed.skipped`).
    That the target demanded whole calls is remembered beside the store (`<store>.upload-modes.json`, by
    project), and a later replay to it starts in that mode: a resume that began with single records would send the
    lone end of a call whose start has not gone yet, and a server that took it would never get that call whole.

    `skip=n` leaves out what the first n records of the store's order sent (to finish an interrupted
    replay; a whole call counts at the later of its start and end). If sending fails part-way,
    `ReplayInterrupted` (or, on Ctrl-C, a note on the KeyboardInterrupt) says how many records went and
    what they were, which is the first not sent, and the call that sends the rest (`again(skip)`)."""
    handlers = build_trace_server_handlers(server)  # Weave's own record-type -> server-call mapping

    def file_create(record: dict) -> None:  # ours also carries binary files
        req = record["req"]
        content = base64.b64decode(req["content_b64"]) if "content_b64" in req else req["content"].encode()
        server.file_create({"project_id": req["project_id"], "file": (req["name"], content),
                            "expected_digest": req.get("expected_digest")})

    handlers["file_create"] = file_create
    handlers["call_update"] = lambda record: server.call_update(record["req"])
    records, skipped = sendable_records(store_path)

    def req(position: int) -> dict:
        """The record's request, moved to `project_id` if given."""
        record_type, payload = records[position][1]["type"], records[position][1]["req"]
        if project_id is None:
            return payload
        return _retarget(payload, project_of(record_type, payload), project_id)

    def send(request: _Request) -> None:
        if request.kind == "calls_complete":  # made by weave's own pairing
            start, end = map(req, request.carries)
            whole = CallBatchProcessor._create_complete(None, StartBatchItem(req=start), EndBatchItem(req=end))
            server.calls_complete({"batch": [whole.req]})
        else:
            handlers[request.kind]({"type": request.kind, "req": req(request.carries[0])})

    remembered = project_id or target  # the key the mode is remembered by
    complete = _demanded_whole_calls(store_path, remembered)
    plan = _plan(records, complete)
    todo = deque(request for request in plan if request.position >= skip)
    went_now: Counter[str] = Counter()
    while todo:
        request = todo[0]
        try:
            send(request)
        except BaseException as e:
            if not complete and request.kind in CALL_RECORDS and isinstance(e, Exception) and _wants_calls_complete(e):
                # W&B refuses a project's first call record, so no call went alone: go on from here, whole.
                complete, plan = True, _plan(records, True)
                _remember_whole_calls(store_path, remembered)
                todo = deque(later for later in plan if later.position >= request.position)
                continue
            done = [earlier for earlier in plan if earlier.position < request.position]
            sent = sum(len(earlier.carries) for earlier in done)
            what = _counted(Counter(earlier.kind for earlier in done))
            where, record = records[request.position]
            first_unsent = f"{where}: {_describe(record['type'], req(request.position))}"
            error = " ".join(f"{type(e).__name__}: {e}".split())
            if complete:  # the calls that went, and the starts that wait for a later end, are not a prefix
                what += "; a whole call goes when the later of its start and end comes"
            left_out = f" ({len(skipped)} record(s) the reader skips are never sent)" if skipped else ""
            message = (f"Sending {store_path} to {target} stopped part-way: {sent} of {len(records)} records went"
                       f"{f' ({what})' if what else ''}; the first not sent is {first_unsent} ({error}), and nothing "
                       f"after it was sent{left_out}. Send the rest with {again(request.position)}")
            if not isinstance(e, Exception):  # Ctrl-C stays an interrupt, with what went in its note
                e.add_note(message)
                raise
            raise ReplayInterrupted(message, sent, len(records), first_unsent, request.position) from e
        went_now[request.kind] += 1
        todo.popleft()
    unfinished = [f"{records[call['call_start']][0]}: call {call_id} never ended, and this W&B project takes "
                  "finished calls only (calls_complete mode)"
                  for call_id, call in _call_positions(records).items() if complete and "call_end" not in call]
    return Replayed(sent=sum(len(request.carries) for request in plan),
                    sent_now=sum(len(request.carries) for request in plan if request.position >= skip),
                    what=_counted(went_now), skipped=skipped, unfinished=unfinished)


def _wants_calls_complete(error: Exception) -> bool:
    """W&B's answer that this project takes finished calls only (weave's own test for it)."""
    from weave.trace.errors import CallsCompleteModeRequired
    from weave.trace_server_bindings.http_utils import is_calls_complete_mode_error

    return isinstance(error, CallsCompleteModeRequired) or is_calls_complete_mode_error(error)
