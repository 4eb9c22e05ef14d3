"""Tracing for the course: real Weave traces with no key (a local store), W&B Weave with one.

`init_tracing(project)` decides the mode once per process and says which in plain words:

- `WANDB_API_KEY` set  -> `weave.init(project)`, traces in W&B Weave, wandb online. If W&B cannot be
                          reached within 20 s, it falls back to local and says so.
- otherwise            -> Weave's own `WeaveClient` on a trace store on local disk
                          (runs/traces/<project>), with the same integrations `weave.init` patches
                          (verifiers, openai, ...), and wandb offline under runs/wandb.

Local traces can be sent to W&B later with `upload_local_traces(project)` once a key is set.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.paths import display_path, runs_dir
from helpers.quiet import wandb_key_set
from helpers.tracing import weave_clients
from helpers.tracing.records import wal_files
from helpers.tracing.replay import replay
from helpers.tracing.store import LocalTraceServer

DEFAULT_PROJECT = "verifiers-course"


@dataclass
class TracingSession:
    """What `init_tracing` decided: the mode, the Weave client, and where traces go."""

    mode: str  # "local" or "cloud"
    project: str
    client: Any  # weave.trace.weave_client.WeaveClient
    store_path: Path | None = None  # local mode: the trace store folder
    server: LocalTraceServer | None = field(default=None, repr=False)
    fallback_reason: str | None = None  # cloud was asked for but could not be reached

    def describe(self) -> str:
        if self.mode == "cloud":
            return (f"traces: W&B Weave project {self.client.entity}/{self.client.project} "
                    "(WANDB_API_KEY is set); metrics: wandb online")
        where = display_path(self.store_path)
        metrics = f"metrics: wandb offline under {display_path(runs_dir('wandb'))}"
        if self.fallback_reason:
            return (f"WANDB_API_KEY is set, but W&B could not be used ({self.fallback_reason}), so tracing "
                    f"stays local.\ntraces: local store at {where}; {metrics}; once W&B is reachable, "
                    "send them with helpers.upload_local_traces()")
        return (f"traces: local store at {where}; {metrics}; to send them to W&B set WANDB_API_KEY "
                "(then helpers.upload_local_traces())")

    def flush(self) -> None:
        """Wait until every traced call is written (the client writes in background threads)."""
        self.client.flush()
        if self.server is not None:
            self.server.flush()

    def close(self) -> None:
        """Flush, and close the store's log file (at exit; a later write would open a new one)."""
        self.flush()
        if self.server is not None:
            self.server.close()

    def close_at_exit(self) -> None:
        """close(), for atexit: a failure is one line on stderr, not a traceback after the kernel's output."""
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - at exit there is nothing left to hand it to
            print(f"tracing: the trace store could not be closed cleanly ({weave_clients.one_line(e)})",
                  file=sys.stderr)

    def get_calls(self, **kwargs) -> list:
        self.flush()
        return list(self.client.get_calls(**kwargs))


_session: TracingSession | None = None
_session_lock = threading.Lock()


def init_tracing(project: str = DEFAULT_PROJECT, *, quiet: bool = False) -> TracingSession:
    """Start tracing for this process (see the module docstring); later calls return the same session."""
    global _session
    with _session_lock:
        if _session is None:
            _session = _start(project)
            atexit.register(_session.close_at_exit)
            exit_cleanly_on_sigterm()
        elif _session.project != project and not quiet:
            print(f"(tracing was already started for project {_session.project!r}; keeping it)")
    if not quiet:
        print(_session.describe())
    return _session


def current_session() -> TracingSession | None:
    return _session


def exit_cleanly_on_sigterm() -> None:
    """Let SIGTERM end this process the way the end of a script does: atexit callbacks and finalizers run.

    Jupyter (and papermill) end a kernel with SIGTERM when it has not exited within 2.5 s of the
    shutdown request (SIGKILL 2.5 s later), and Python's default for SIGTERM ends the process on the
    spot: the trace store kept its `.lock` with the dead kernel's PID and wandb its temporary folders in
    /tmp. Only the main thread can set a handler, and one set by someone else is kept."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    if not threading.main_thread().is_alive():
        return  # the interpreter is already exiting (atexit callbacks are running): let them finish
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise SystemExit(128 + signum)


def _start(project: str) -> TracingSession:
    weave_clients.fast_op_check_on_python_311()
    # wandb.init would otherwise start its own cloud Weave client; tracing is decided here.
    os.environ["WANDB_DISABLE_WEAVE"] = "true"
    os.environ.setdefault("WANDB_SILENT", "true")
    reason = None
    if wandb_key_set():
        client, reason = weave_clients.cloud_client(project, current_client=lambda: _session and _session.client)
        if client is not None:
            return TracingSession("cloud", project, client)
    client, server, store = weave_clients.local_client(project)
    return TracingSession("local", project, client, store_path=store, server=server, fallback_reason=reason)


def open_local_traces(project: str = DEFAULT_PROJECT, store_path: str | Path | None = None) -> TracingSession:
    """Read a local trace store (e.g. one written by an earlier kernel) without tracing anything:
    the returned session's client answers get_calls()/get_call() from the files on disk."""
    store = Path(store_path) if store_path else runs_dir("traces") / project
    if not store.is_dir():
        raise FileNotFoundError(f"no trace store at {store}")
    client, server = weave_clients.reader_client(project, store)
    return TracingSession("local", project, client, store_path=store, server=server)


# ---------------------------------------------------------------- upload


def upload_local_traces(project: str | None = None, entity: str | None = None, *, skip: int = 0) -> int:
    """Send a local trace store (runs/traces/<project>) to W&B Weave project <entity>/<project>.

    `project` defaults to the one `init_tracing` was started with in this process. Needs
    WANDB_API_KEY; `entity` defaults to WANDB_ENTITY or your default W&B entity. Records the reader
    skips (of the wrong shape, or the end of a call whose start is missing) are not sent, and the
    upload says how many. A project in W&B's calls_complete mode gets each finished call whole; calls
    that never ended (a stopped kernel) cannot go, and the upload names them. If W&B fails part-way,
    the error says what went and the command that sends the rest (`skip=`). Returns the number of
    records sent. The local store is left as it is.
    """
    from weave.trace.weave_init import get_entity_project_from_project_name, init_weave_get_server
    from weave.wandb_interface.context import get_wandb_auth_context

    project = project or (_session.project if _session is not None else DEFAULT_PROJECT)
    store = runs_dir("traces") / project
    if not wal_files(store):
        raise FileNotFoundError(
            f"No local traces to upload for project {project!r}: {display_path(store)} holds no trace records. "
            f"Traces are stored there while init_tracing({project!r}) runs without WANDB_API_KEY.")
    if not wandb_key_set():
        raise RuntimeError("upload_local_traces needs WANDB_API_KEY in the environment.")
    asked = {"project": project, "entity": entity}
    entity, project = get_entity_project_from_project_name(f"{entity}/{project}" if entity else project)
    server = init_weave_get_server(get_wandb_auth_context(), should_batch=False)
    target = f"W&B Weave project {entity}/{project}"
    named = "".join(f"{k}={v!r}, " for k, v in asked.items() if v)

    def again(skip: int) -> str:
        return f"helpers.upload_local_traces({named}skip={skip})"

    result = replay(store, server, project_id=f"{entity}/{project}", skip=skip, target=target, again=again)
    print(f"uploaded {result.sent_now} trace records ({result.what or 'nothing new'}) from {display_path(store)} "
          f"to {target}" + (f" (resumed at record {skip + 1} of the store)" if skip else ""))
    for left_out, why in ((result.skipped, "record(s) that the local reader skips too"),
                          (result.unfinished, "call(s) that never ended")):
        if left_out:
            print(f"not sent: {len(left_out)} {why}:\n  " + "\n  ".join(left_out[:5])
                  + ("\n  ..." if len(left_out) > 5 else ""))
    return result.sent_now
