"""What the course keeps quiet: in local mode nothing leaves the machine (no error reports, no hub telemetry),
and library log lines a learner would have to ignore are not shown."""

from __future__ import annotations

import logging
import os
import sys
import warnings


def wandb_key_set() -> bool:
    return bool(os.environ.get("WANDB_API_KEY"))


def keep_telemetry_local() -> None:
    """In local mode (no WANDB_API_KEY) nothing leaves the machine: Weave's and wandb's error
    reporting (Sentry: a session ping at every exit, client errors with local variables) and the
    HF hub's telemetry are switched off. Runs on `import helpers`, before weave is imported. In
    cloud mode the user's own settings stand (README: how to turn reporting off)."""
    if wandb_key_set():
        return
    os.environ["WANDB_ERROR_REPORTING"] = "false"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    sentry_module = sys.modules.get("weave.telemetry.trace_sentry")
    if sentry_module is not None:  # weave was imported before helpers: its reporter already started
        sentry_module.global_trace_sentry._disabled = True
        sentry_module.global_trace_sentry.scope = None  # no session to send at exit


def quiet_library_logs() -> None:
    """Silence log lines a learner would have to ignore; the notebooks explain what they say."""
    import datasets

    # ThinkParser warns on every construction that it expects <think> tags (notebook 01 shows why).
    logging.getLogger("verifiers.parsers.ThinkParser").setLevel(logging.ERROR)
    # load_environment logs each load at INFO, and each error a second time (we raise it clearly).
    logging.getLogger("verifiers.utils.env_utils").setLevel(logging.CRITICAL)
    datasets.disable_progress_bars()  # sub-second .map() calls on a few rows; bars are only noise
    # Weave's openai-realtime integration (imported when tracing patches integrations) declares a
    # pydantic field typed with a lock; pydantic warns about it on import. Harmless here.
    warnings.filterwarnings("ignore", message=r".*allocate_lock.* is not a Python type")
