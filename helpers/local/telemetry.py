"""Local mode keeps everything on this machine: no error reports, no hub telemetry."""

from __future__ import annotations

import os
import sys


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
