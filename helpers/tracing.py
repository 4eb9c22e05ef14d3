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
import base64
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.local.trace_store import LocalTraceServer, replay, scrub, wal_files
from helpers.modes import wandb_key_set
from helpers.paths import runs_dir

DEFAULT_PROJECT = "verifiers-course"
LOCAL_ENTITY = "local"  # traces stored locally live in project "local/<project>"
CLOUD_DEADLINE_S = 20.0  # the whole cloud attempt, probe included, before falling back to local
PROBE_TIMEOUT_S = 5.0


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
        where = _shown_path(self.store_path)
        metrics = f"metrics: wandb offline under {_shown_path(runs_dir('wandb'))}"
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

    def get_calls(self, **kwargs) -> list:
        self.flush()
        return list(self.client.get_calls(**kwargs))


_session: TracingSession | None = None
_session_lock = threading.Lock()


def _shown_path(path: Path | None) -> str:
    """A path relative to the repo when it is inside it, as the notebooks print it."""
    from helpers.paths import PROJECT_ROOT

    try:
        return str(Path(path).relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def init_tracing(project: str = DEFAULT_PROJECT, *, quiet: bool = False) -> TracingSession:
    """Start tracing for this process (see the module docstring); later calls return the same session."""
    global _session
    with _session_lock:
        if _session is None:
            _session = _start(project)
            atexit.register(_session.close)
        elif _session.project != project and not quiet:
            print(f"(tracing was already started for project {_session.project!r}; keeping it)")
    if not quiet:
        print(_session.describe())
    return _session


def current_session() -> TracingSession | None:
    return _session


def _start(project: str) -> TracingSession:
    _fast_op_check_on_python_311()
    # wandb.init would otherwise start its own cloud Weave client; tracing is decided here.
    os.environ["WANDB_DISABLE_WEAVE"] = "true"
    os.environ.setdefault("WANDB_SILENT", "true")
    reason = None
    if wandb_key_set():
        client, reason = _init_cloud(project)
        if client is not None:
            return TracingSession("cloud", project, client)
    return _init_local(project, fallback_reason=reason)


def _fast_op_check_on_python_311() -> None:
    """Give weave's `is_op` on Python 3.11 the check weave itself uses on 3.12+.

    weave 0.54's `is_op` is `isinstance(obj, Op)` against a runtime Protocol before Python 3.12, and
    3.11 recomputes the protocol's members on every such check. Saving a traced call runs it for
    every attribute of every object passed, so tracing a 16-rollout evaluation spent 13 s of CPU
    there (cProfile, 2 cores). On 3.12+ weave checks `hasattr` for Op's annotated attributes.
    """
    if sys.version_info >= (3, 12):
        return
    from weave.trace import op as weave_op

    slow = weave_op.is_op
    if getattr(slow, "course_fast", False):
        return

    def is_op(obj: Any) -> bool:
        return all(hasattr(obj, attr) for attr in weave_op.Op.__annotations__)

    is_op.course_fast = True
    for name, module in list(sys.modules.items()):  # every weave module that imported it by name
        if name.split(".")[0] == "weave" and getattr(module, "is_op", None) is slow:
            module.is_op = is_op


# ---------------------------------------------------------------- local mode


def _init_local(project: str, fallback_reason: str | None = None) -> TracingSession:
    from weave.integrations.patch import implicit_patch, register_import_hook
    from weave.trace.context import weave_client_context
    from weave.trace.display.term import configure_logger
    from weave.trace.weave_client import WeaveClient

    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_DIR"] = str(runs_dir("wandb"))
    os.environ["WEAVE_PRINT_CALL_LINK"] = "false"  # its links point at wandb.ai, where these traces are not
    configure_logger()
    store = runs_dir("traces", project)
    server = LocalTraceServer(store)
    client = WeaveClient(LOCAL_ENTITY, project, server, ensure_project_exists=False,
                         postprocess_inputs=scrub_inputs, postprocess_output=scrub_output)
    # What weave.init does after it has a client: make it the global one, patch the integrations
    # whose libraries are imported (verifiers, openai, ...) and those imported later.
    weave_client_context.set_weave_client_global(client)
    implicit_patch()
    register_import_hook()
    return TracingSession("local", project, client, store_path=store, server=server,
                          fallback_reason=fallback_reason)


def open_local_traces(project: str = DEFAULT_PROJECT, store_path: str | Path | None = None) -> TracingSession:
    """Read a local trace store (e.g. one written by an earlier kernel) without tracing anything:
    the returned session's client answers get_calls()/get_call() from the files on disk."""
    from weave.trace.weave_client import WeaveClient

    store = Path(store_path) if store_path else runs_dir("traces") / project
    if not store.is_dir():
        raise FileNotFoundError(f"no trace store at {store}")
    server = LocalTraceServer(store)
    client = WeaveClient(LOCAL_ENTITY, project, server, ensure_project_exists=False)
    return TracingSession("local", project, client, store_path=store, server=server)


def scrub_inputs(inputs: dict) -> dict:
    return scrub(_describe_clients(inputs))


def scrub_output(output: Any) -> Any:
    return scrub(output)


def _describe_clients(inputs: dict) -> dict:
    """An OpenAI client object is shown by its endpoint only: it carries the API key."""
    import openai

    return {k: {"client": type(v).__name__, "base_url": str(v.base_url)}
            if isinstance(v, (openai.OpenAI, openai.AsyncOpenAI)) else v for k, v in inputs.items()}


# ---------------------------------------------------------------- cloud mode


def _probe(url: str, timeout: float) -> str | None:
    """None when something answers HTTP at `url` (any status), else why not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError) as e:
        return f"{url}: {getattr(e, 'reason', e)}"


def _key_refused(base_url: str, key: str, timeout: float) -> str | None:
    """Why W&B refuses `key` (it answers 401/403 to an authenticated `viewer` query), else None."""
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/graphql", data=json.dumps({"query": "{ viewer { id } }"}).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Basic " + base64.b64encode(f"api:{key}".encode()).decode()})
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            return (f"W&B at {base_url} refused WANDB_API_KEY (HTTP {e.code}); check the key "
                    "(https://wandb.ai/authorize) or unset it to stay local")
        return None
    except (urllib.error.URLError, OSError) as e:
        return f"{base_url}: {getattr(e, 'reason', e)}"


def _one_line(error: BaseException) -> str:
    """An exception as one whole line: W&B's messages run over several (\"Fix with one of:\n 1. ...\")."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def _init_cloud(project: str) -> tuple[Any, str | None]:
    """weave.init(project) within CLOUD_DEADLINE_S, or (None, reason)."""
    from weave.trace import env as weave_env

    started = time.monotonic()
    for url in (weave_env.wandb_base_url(), weave_env.weave_trace_server_url()):
        reason = _probe(url, PROBE_TIMEOUT_S)
        if reason:
            return None, reason
    reason = _key_refused(weave_env.wandb_base_url(), os.environ["WANDB_API_KEY"], PROBE_TIMEOUT_S)
    if reason:
        return None, reason
    result: dict[str, Any] = {}
    lock = threading.Lock()

    def init() -> None:
        import weave

        try:
            client = weave.init(
                project, postprocess_inputs=scrub_inputs, postprocess_output=scrub_output,
                settings={"http_timeout": 10.0, "retry_max_attempts": 1, "retry_max_interval": 2.0},
            )
        except BaseException as e:  # noqa: BLE001 - any failure means: stay local
            result["error"] = _one_line(e)
            return
        with lock:
            if not result.get("abandoned"):
                result["client"] = client
                return
        # Too late: we already fell back to local. Keep the local client the global one.
        from weave.trace.context import weave_client_context

        if _session is not None:
            weave_client_context.set_weave_client_global(_session.client)

    worker = threading.Thread(target=init, daemon=True, name="weave-init")
    worker.start()
    worker.join(max(1.0, CLOUD_DEADLINE_S - (time.monotonic() - started)))
    with lock:
        if "client" in result:
            return result["client"], None
        result["abandoned"] = True
    if worker.is_alive():
        return None, f"weave.init did not finish within {CLOUD_DEADLINE_S:.0f} s"
    return None, result.get("error", "weave.init failed")


# ---------------------------------------------------------------- upload


def upload_local_traces(project: str | None = None, entity: str | None = None) -> int:
    """Send a local trace store (runs/traces/<project>) to W&B Weave project <entity>/<project>.

    `project` defaults to the one `init_tracing` was started with in this process. Needs
    WANDB_API_KEY; `entity` defaults to WANDB_ENTITY or your default W&B entity. Returns the number
    of records sent. The local store is left as it is.
    """
    from weave.trace.weave_init import get_entity_project_from_project_name, init_weave_get_server
    from weave.wandb_interface.context import get_wandb_auth_context

    project = project or (_session.project if _session is not None else DEFAULT_PROJECT)
    store = runs_dir("traces") / project
    if not wal_files(store):
        raise FileNotFoundError(
            f"No local traces to upload for project {project!r}: {_shown_path(store)} holds no trace records. "
            f"Traces are stored there while init_tracing({project!r}) runs without WANDB_API_KEY.")
    if not wandb_key_set():
        raise RuntimeError("upload_local_traces needs WANDB_API_KEY in the environment.")
    entity, project = get_entity_project_from_project_name(f"{entity}/{project}" if entity else project)
    server = init_weave_get_server(get_wandb_auth_context(), should_batch=False)
    sent = replay(store, server, project_id=f"{entity}/{project}")
    print(f"uploaded {sent} trace records from {_shown_path(store)} to W&B Weave project {entity}/{project}")
    return sent
