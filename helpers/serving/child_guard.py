"""What both model-server child scripts do first (stdlib only: the children import no course code).

- Exit as soon as the process that started them is gone, watched from the first line of `main`,
  so a kernel killed while the model is still loading leaves nothing behind.
- Read the per-start API key from the environment (never from the command line, which any user
  of the machine can read with `ps`).
"""

from __future__ import annotations

import os
import threading
import time

KEY_ENV = "COURSE_SERVER_KEY"  # the parent passes the per-start key in this variable


def exit_with_parent(parent_pid: int, every_s: float = 0.5) -> None:
    """Exit this process once `parent_pid` is no longer its parent (the parent died)."""
    if os.getppid() != parent_pid:
        os._exit(0)  # the parent died before we got here

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def server_key() -> str:
    key = os.environ.pop(KEY_ENV, "")  # popped: children of this process do not inherit it
    if not key:
        raise SystemExit(f"{KEY_ENV} is not set: the server refuses to start without an API key")
    return key
