"""A Jupyter kernel held to a memory limit: its resident memory, with every process it starts (the llama.cpp
servers), is read every few hundredths of a second, and the kernel is killed the moment the sum goes over the
limit. Notebook 02 at its defaults must fit an 8 GB laptop with a browser open: 3.5 GB for the kernel and its
server (issue 39); its CI-scale run trains steps of the default's shape, so its peak is the default's.

    with watched_kernel(tmp_path, limit_gb=3.5) as watch:
        execute(..., kernel_name=watch.kernel_name)
    watch.peak_gb, watch.exceeded_gb   # the largest sum read; the sum that killed it (None: never over)
"""

from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

GB = 2**30  # GiB, as every result file's "GB"
KERNEL_NAME = "course-memory-watched"
# The kernel writes its process id where the watch finds it, then becomes the usual ipykernel.
LAUNCH = ("import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
          "os.execv(sys.executable, [sys.executable, '-m', 'ipykernel_launcher', '-f', sys.argv[2]])")


@dataclass
class Watch:
    pid_file: Path
    limit_gb: float
    interval_s: float = 0.05
    kernel_name: str = KERNEL_NAME
    peak_gb: float = 0.0
    exceeded_gb: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def resident_gb(self, kernel: psutil.Process) -> float:
        total = 0
        for process in (kernel, *kernel.children(recursive=True)):
            try:
                total += process.memory_info().rss
            except psutil.Error:  # ended between the listing and the reading
                pass
        return total / GB

    def run(self) -> None:
        kernel = None
        while not self._stop.wait(self.interval_s):
            if kernel is None or not kernel.is_running():
                try:
                    kernel = psutil.Process(int(self.pid_file.read_text()))
                except (OSError, ValueError, psutil.Error):  # not started yet, or a new kernel
                    kernel = None
                    continue
            try:
                resident = self.resident_gb(kernel)
            except psutil.Error:
                continue
            self.peak_gb = max(self.peak_gb, resident)
            if resident > self.limit_gb and self.exceeded_gb is None:
                self.exceeded_gb = resident
                for process in (*kernel.children(recursive=True), kernel):
                    try:
                        process.kill()
                    except psutil.Error:
                        pass


@contextmanager
def watched_kernel(folder: Path, limit_gb: float):
    """A kernel spec (in `folder`, on JUPYTER_PATH while inside) whose kernels are watched by the yielded Watch."""
    spec = folder / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    pid_file = folder / "kernel.pid"
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", LAUNCH, str(pid_file), "{connection_file}"],
        "display_name": f"Python (memory held to {limit_gb} GB)", "language": "python"}))
    watch = Watch(pid_file, limit_gb)
    thread = threading.Thread(target=watch.run, daemon=True, name="memory-watch")
    before = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), before]))
    thread.start()
    try:
        yield watch
    finally:
        watch._stop.set()
        thread.join()
        if before is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = before
