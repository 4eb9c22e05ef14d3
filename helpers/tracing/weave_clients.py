"""The Weave clients behind helpers.init_tracing.

- local mode: Weave's own WeaveClient writing to a trace store on disk (helpers.tracing.store),
  set up the way weave.init sets up its client, and a read-only one for an earlier kernel's store;
- cloud mode: weave.init, after a quick check that W&B answers and accepts the key, within a
  deadline, so that no network or a wrong key falls back to local mode in seconds, in plain words;
- both: what a traced call records is scrubbed (no API keys, no OpenAI client objects), and
  weave's slow `is_op` check on Python 3.11 is replaced by the one weave uses on 3.12+.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.paths import runs_dir
from helpers.scrubbing import scrub
from helpers.tracing.store import LocalTraceServer

LOCAL_ENTITY = "local"  # traces stored locally live in project "local/<project>"
CLOUD_DEADLINE_S = 20.0  # the whole cloud attempt, probe included, before falling back to local
PROBE_TIMEOUT_S = 5.0


# ---------------------------------------------------------------- local mode


def local_client(project: str) -> tuple[Any, LocalTraceServer, Path]:
    """Weave's own WeaveClient on the trace store runs/traces/<project>, set up as weave.init sets up
    its client: the global one, with the integrations (verifiers, openai, ...) patched; wandb offline."""
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
    return client, server, store


def reader_client(project: str, store: Path) -> tuple[Any, LocalTraceServer]:
    """A WeaveClient that answers get_calls()/get_call() from a trace store on disk and traces nothing."""
    from weave.trace.weave_client import WeaveClient

    server = LocalTraceServer(store)
    return WeaveClient(LOCAL_ENTITY, project, server, ensure_project_exists=False), server


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


def one_line(error: BaseException) -> str:
    """An exception as one whole line: W&B's messages run over several (\"Fix with one of:\n 1. ...\")."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def cloud_client(project: str, current_client: Callable[[], Any]) -> tuple[Any, str | None]:
    """weave.init(project) within CLOUD_DEADLINE_S, or (None, reason). When weave.init finishes only
    after the deadline, the client `current_client()` returns (the local fallback) is made the global
    one again."""
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
            result["error"] = one_line(e)
            return
        with lock:
            if not result.get("abandoned"):
                result["client"] = client
                return
        # Too late: we already fell back to local. Keep the local client the global one.
        from weave.trace.context import weave_client_context

        if current_client() is not None:
            weave_client_context.set_weave_client_global(current_client())

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


# ---------------------------------------------------------------- Python 3.11


def fast_op_check_on_python_311() -> None:
    """Give weave's `is_op` on Python 3.11 the check weave itself uses on 3.12+.

    weave 0.54's `is_op` is `isinstance(obj, Op)` against a runtime Protocol before Python 3.12, and
    3.11 recomputes the protocol's members on every such check. Saving a traced call runs it for
    every attribute of every object passed, which makes tracing an evaluation spend seconds of CPU there.
    On 3.12+ weave checks `hasattr` for Op's annotated attributes.
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
