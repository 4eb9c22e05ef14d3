"""A Weave trace server on local disk, so Weave's own client can trace without W&B.

Weave's `WeaveClient` talks to any object that has the trace-server methods it calls
(call_start/call_end, obj/table/file create and read, calls_query_stream, ...). `LocalTraceServer`
is such an object. It appends every write to JSON-lines files in Weave's own write-ahead-log
record format (helpers.tracing.records) and keeps an in-memory index for reads. A new process
rebuilds the index from the files; helpers.tracing.replay sends the same records to any trace server,
W&B's included (that is how local traces are uploaded).
"""

from __future__ import annotations

import base64
import re
import threading
import urllib.parse
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python
from weave.durability.wal_directory_manager import FileWALDirectoryManager
from weave.durability.wal_lock import release_lock
from weave.durability.wal_writer import JSONLWALWriter
from weave.trace.serialization.digest import (
    compute_file_digest,
    compute_object_digest_result,
    compute_row_digest,
    compute_table_digest,
)
from weave.trace_server_bindings.models import (
    EnsureProjectExistsRes,
    FileContentReadRes,
)
from weave.vendor.weave_server_sdk.types import (
    CallQueryStatsResponse,
    CallReadResponse,
    CallStartResponse,
    FileCreateResponse,
    ObjectCreateResponse,
    ObjectQueryResponse,
    ObjectReadResponse,
    RefReadBatchResponse,
    ServerInfoRes,
    TableCreateResponse,
    TableQueryResponse,
    TableQueryStatsBatchResponse,
    TableQueryStatsResponse,
)
from weave.vendor.weave_server_sdk.types.call_read_response import Call

from helpers.scrubbing import scrub, secret_values
from helpers.tracing.call_queries import call_model, matching_calls, now
from helpers.tracing.records import WAL_SUFFIX, numbered_records, project_of

# ---------------------------------------------------------------- reading the log


# ---------------------------------------------------------------- the server


# What indexing a record of the wrong shape raises (valid JSON, but not what the record type holds).
WRONG_SHAPE = (KeyError, TypeError, ValueError, AttributeError)


def _close_after_a_failed_write(writer: JSONLWALWriter) -> None:
    """Close weave's WAL writer after a write failed. Its close() flushes first; on a full disk that
    raises, and it then leaves the file open and its .lock (with this process's PID) behind."""
    file_writer = writer._writer  # weave 0.54: the one-file writer (path, _file, _lock_path)
    try:
        file_writer._file.close()  # the buffer cannot be written; the file is closed all the same
    except OSError:
        pass
    release_lock(file_writer._lock_path)


def _op_kind(val: Any) -> str:
    is_op = isinstance(val, dict) and val.get("_type") == "CustomWeaveType" and \
        (val.get("weave_type") or {}).get("type") == "Op"
    return "op" if is_op else "object"


class LocalTraceServer:
    """The trace-server calls Weave's client makes, answered from files under `path`.

    Thread-safe: the client writes from its worker threads. Each process appends to a file of its
    own (as Weave's WAL does), so two notebooks can share a store. `read=False` starts with an empty
    index (nothing read, no folder created).
    """

    def __init__(self, path: str | Path, *, read: bool = True):
        self.path = Path(path)
        if read:
            self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._writer: JSONLWALWriter | None = None
        self.records_written = 0
        self.write_failed = False
        self._calls: dict[str, dict] = {}
        self._objs: dict[tuple[str, str], dict] = {}  # (object_id, digest) -> obj
        self._versions: dict[str, list[str]] = {}  # object_id -> digests, oldest first
        self._rows: dict[str, Any] = {}  # row digest -> row
        self._tables: dict[str, list[str]] = {}  # table digest -> row digests
        self._files: dict[str, bytes] = {}  # file digest -> content
        if read:
            self.reload()

    # -- storage

    def reload(self) -> int:
        """Rebuild the index from the files (e.g. after another process wrote more)."""
        with self._lock:
            for index in (self._calls, self._objs, self._versions, self._rows, self._tables, self._files):
                index.clear()
            count = skipped = 0
            for _, record in numbered_records(self.path):
                try:
                    self._apply(record["type"], record["req"])
                    count += 1
                except WRONG_SHAPE:
                    skipped += 1  # valid JSON of the wrong shape: skip it, keep the rest
            orphans = sum("op_name" not in call for call in self._calls.values())
            if skipped or orphans:
                warnings.warn(f"trace store {self.path}: skipped {skipped} record(s) of the wrong shape and "
                              f"{orphans} call end(s) whose start is missing; the rest is intact", stacklevel=2)
            return count

    def _write(self, record_type: str, req: Any) -> tuple[dict, Any]:
        """Append one record (scrubbed) to this process's log file and index it."""
        payload = scrub(to_jsonable_python(req, inf_nan_mode="null", bytes_mode="utf8"), secret_values())
        with self._lock:
            if not self.write_failed:
                try:
                    if self._writer is None:  # opened on first write: a reader never creates files
                        self._writer = JSONLWALWriter(FileWALDirectoryManager(str(self.path), file_ext=WAL_SUFFIX))
                    self._writer.write({"type": record_type, "req": payload})
                    self.records_written += 1
                except OSError as e:
                    self._stop_writing(e)
            return payload, self._apply(record_type, payload)

    def _stop_writing(self, error: OSError) -> None:
        """A full disk (or a store folder that went away): say it once, let go of the log file and its
        .lock, and keep answering the client from memory. Writing is not retried: half-written lines
        would follow."""
        if not self.write_failed:
            self.write_failed = True
            warnings.warn(f"trace store {self.path} could not be written ({error.strerror or error}): traces "
                          "from now on are kept in memory only and lost at exit; free some disk space "
                          "and restart the kernel", stacklevel=3)
        writer, self._writer = self._writer, None
        if writer is not None:
            _close_after_a_failed_write(writer)

    def flush(self) -> None:
        with self._lock:
            if self._writer is not None:
                try:
                    self._writer.flush()
                except OSError as e:
                    self._stop_writing(e)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                try:
                    self._writer.close()
                    self._writer = None
                except OSError as e:
                    self._stop_writing(e)

    def _apply(self, record_type: str, req: dict) -> Any:
        """Index one record; returns its digest(s) for the create calls. A record of the wrong shape
        raises one of WRONG_SHAPE before anything is indexed."""
        project_of(record_type, req)
        if record_type == "call_start":
            start = req["start"]
            self._calls[start["id"]] = {**self._calls.get(start["id"], {}), **start}
        elif record_type == "call_end":
            end = req["end"]
            call = self._calls.setdefault(end["id"], {"id": end["id"]})
            call.update({k: end.get(k) for k in ("ended_at", "exception", "output", "summary", "wb_run_step_end")})
        elif record_type == "call_update":
            if req["call_id"] in self._calls and req.get("display_name") is not None:
                self._calls[req["call_id"]]["display_name"] = req["display_name"] or None
        elif record_type == "obj_create":
            obj = req["obj"]
            result = compute_object_digest_result(obj["val"], obj.get("builtin_object_class"))
            key = (obj["object_id"], result.digest)
            if key not in self._objs:
                versions = self._versions.setdefault(obj["object_id"], [])
                versions.append(result.digest)
                self._objs[key] = {
                    "project_id": obj["project_id"], "object_id": obj["object_id"], "digest": result.digest,
                    "val": result.processed_val, "kind": _op_kind(obj["val"]), "created_at": now(),
                    "version_index": len(versions) - 1, "base_object_class": result.base_object_class,
                    "leaf_object_class": result.leaf_object_class,
                }
            return result.digest
        elif record_type == "table_create":
            row_digests = []
            for row in req["table"]["rows"]:
                digest = compute_row_digest(row)
                self._rows[digest] = row
                row_digests.append(digest)
            digest = compute_table_digest(row_digests)
            self._tables[digest] = row_digests
            return digest, row_digests
        elif record_type == "file_create":
            if not isinstance(req["name"], str):  # the upload sends it with the content
                raise TypeError(f"file name is not text: {req['name']!r}")
            content = base64.b64decode(req["content_b64"]) if "content_b64" in req else req["content"].encode()
            digest = compute_file_digest(content)
            self._files[digest] = content
            return digest
        return None  # call_update of a call this store does not hold

    # -- writes the client makes

    def server_info(self) -> ServerInfoRes:
        return ServerInfoRes(min_required_weave_python_version="0.0.0", trace_server_version="local")

    def ensure_project_exists(self, entity: str, project: str) -> EnsureProjectExistsRes:
        return EnsureProjectExistsRes(project_name=project)

    def call_start(self, req: dict) -> CallStartResponse:
        start = self._write("call_start", req)[0]["start"]
        return CallStartResponse(id=start["id"], trace_id=start["trace_id"])

    def call_end(self, req: dict) -> dict:
        self._write("call_end", req)
        return {}

    def call_update(self, req: dict) -> dict:
        self._write("call_update", req)
        return {}

    def obj_create(self, req: dict) -> ObjectCreateResponse:
        payload, digest = self._write("obj_create", req)
        return ObjectCreateResponse(digest=digest, object_id=payload["obj"]["object_id"])

    def table_create(self, req: dict) -> TableCreateResponse:
        digest, row_digests = self._write("table_create", req)[1]
        return TableCreateResponse(digest=digest, row_digests=row_digests)

    def file_create(self, req: dict) -> FileCreateResponse:
        name, content = req["file"]
        record = {"project_id": req["project_id"], "name": name, "expected_digest": req.get("expected_digest")}
        try:
            record["content"] = content.decode("utf-8")  # Weave's WAL format keeps content as text
        except UnicodeDecodeError:
            record["content_b64"] = base64.b64encode(content).decode()  # e.g. an image
        return FileCreateResponse(digest=self._write("file_create", record)[1])

    # -- reads

    def calls_query_stream(self, req: dict) -> Iterator[Call]:
        with self._lock:
            calls = matching_calls(self._calls.values(), req)
        offset = req.get("offset") or 0
        limit = req.get("limit")
        for raw in calls[offset: None if limit is None else offset + limit]:
            yield call_model(raw)

    def calls_query(self, req: dict):
        from weave.trace_server_bindings.models import CallsQueryRes

        return CallsQueryRes(calls=list(self.calls_query_stream(req)))

    def calls_query_stats(self, req: dict) -> CallQueryStatsResponse:
        with self._lock:
            count = len(matching_calls(self._calls.values(), req))
        if req.get("limit") is not None:
            count = min(count, req["limit"])
        return CallQueryStatsResponse(count=count)

    def call_read(self, req: dict) -> CallReadResponse:
        with self._lock:
            raw = self._calls.get(req["id"])
        return CallReadResponse(call=call_model(raw) if raw else None)

    def _obj(self, object_id: str, digest: str) -> dict:
        versions = self._versions.get(object_id) or []
        if digest == "latest" and versions:
            digest = versions[-1]
        elif re.fullmatch(r"v\d+", digest) and int(digest[1:]) < len(versions):
            digest = versions[int(digest[1:])]
        obj = self._objs.get((object_id, digest))
        if obj is None:
            raise KeyError(f"object {object_id}:{digest} is not in the local trace store")
        return {**obj, "is_latest": int(versions[-1] == digest)}

    def obj_read(self, req: dict) -> ObjectReadResponse:
        with self._lock:
            return ObjectReadResponse(obj=self._obj(req["object_id"], req["digest"]))

    def objs_query(self, req: dict) -> ObjectQueryResponse:
        f = req.get("filter") or {}
        with self._lock:
            objs = [self._obj(oid, d) for oid, digests in self._versions.items() for d in digests]
        if f.get("object_ids"):
            objs = [o for o in objs if o["object_id"] in set(f["object_ids"])]
        if f.get("latest_only"):
            objs = [o for o in objs if o["is_latest"]]
        if f.get("is_op") is not None:
            objs = [o for o in objs if (o["kind"] == "op") == f["is_op"]]
        if req.get("metadata_only"):
            objs = [{**o, "val": {}} for o in objs]
        return ObjectQueryResponse(objs=objs)

    def _table_rows(self, digest: str) -> list[dict]:
        if digest not in self._tables:
            raise KeyError(f"table {digest} is not in the local trace store")
        return [{"digest": d, "val": self._rows[d], "original_index": i} for i, d in enumerate(self._tables[digest])]

    def table_query(self, req: dict) -> TableQueryResponse:
        with self._lock:
            rows = self._table_rows(req["digest"])
        wanted = (req.get("filter") or {}).get("row_digests")
        if wanted:
            rows = [r for r in rows if r["digest"] in set(wanted)]
        offset = req.get("offset") or 0
        limit = req.get("limit")
        return TableQueryResponse(rows=rows[offset: None if limit is None else offset + limit])

    def table_query_stream(self, req: dict):
        yield from self.table_query(req).rows

    def table_query_stats(self, req: dict) -> TableQueryStatsResponse:
        with self._lock:
            return TableQueryStatsResponse(count=len(self._tables.get(req["digest"], [])))

    def table_query_stats_batch(self, req: dict) -> TableQueryStatsBatchResponse:
        with self._lock:
            tables = [{"digest": d, "count": len(self._tables.get(d, []))} for d in req.get("digests") or []]
        return TableQueryStatsBatchResponse(tables=tables)

    def file_content_read(self, req: dict) -> FileContentReadRes:
        with self._lock:
            return FileContentReadRes(content=self._files[req["digest"]])

    def refs_read_batch(self, req: dict) -> RefReadBatchResponse:
        with self._lock:
            return RefReadBatchResponse(vals=[self._resolve(ref) for ref in req["refs"]])

    def _resolve(self, uri: str) -> Any:
        """The value a weave:///entity/project/{object,op,table}/name:digest[/edge/key...] ref points at."""
        parts = uri.removeprefix("weave:///").split("/")
        kind, name, extra = parts[2], parts[3], [urllib.parse.unquote(p) for p in parts[4:]]
        if kind == "table":
            val: Any = [row["val"] for row in self._table_rows(name)]
        elif kind == "call":
            val = self._calls[name]
        else:
            object_id, _, digest = name.rpartition(":")
            val = self._obj(urllib.parse.unquote(object_id), digest)["val"]
        for edge, key in zip(extra[::2], extra[1::2]):
            if isinstance(val, str) and val.startswith("weave:///"):
                val = self._resolve(val)
            if edge == "id":  # a table row by its digest
                val = self._rows[key]
            elif edge == "index":
                val = val[int(key)]
            else:  # "key" or "attr"
                val = val[key]
        return val


# ---------------------------------------------------------------- replay (upload)


