"""Run async-flavoured code from a notebook cell without touching the kernel's own event loop."""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor

import openai

from helpers.endpoint import connection_lost


def in_worker_thread(func, /, *args, **kwargs):
    """Call `func(*args, **kwargs)` in a worker thread and return its result.

    verifiers 0.1.5's `env.evaluate` sees Jupyter's running event loop and applies nest_asyncio
    to it; with ipykernel 7 that silently drops the cells queued behind it (Run All stops). In a
    worker thread no loop is running, so verifiers takes its plain script path. Copying the context
    keeps Weave's current call, so traced calls nest where they belong. A model server that goes
    away in the middle is reported in plain words (helpers.endpoint.connection_lost).
    """
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(ctx.run, func, *args, **kwargs).result()
        except openai.APIConnectionError as e:
            raise connection_lost(e) from e


def run_sync(coro):
    """Run a coroutine to completion on a fresh event loop (in a worker thread) and return its result."""
    return in_worker_thread(asyncio.run, coro)
