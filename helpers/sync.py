"""Run a coroutine from synchronous code, also inside Jupyter, whose event loop is already running."""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor


def run_sync(coro):
    """Run `coro` to completion on a fresh event loop in a worker thread and return its result.

    Copying the context keeps Weave's current call, so traced calls inside nest where they belong.
    """
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()
