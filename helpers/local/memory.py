"""Resident memory of a process and the processes it started, sampled together.

`PeakMemory` is what the benchmarks record (issue 39: notebook 02 must fit an 8 GB laptop, kernel and llama.cpp
server together): a background thread reads the resident set size (RSS) of this process and of every process
below it every `interval_s`, and keeps the largest values and the largest sum. A training script's children are
its model servers; a notebook runner's are the kernel and the kernel's servers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Self

import psutil

GB = 2**30  # GiB, as helpers.grpo.peak_rss_gb and every result file report "GB"


@dataclass
class PeakMemory:
    """`with PeakMemory() as peak: ...` then `peak.record()`: the peaks in GB, of this process ("own"), of the
    processes below it together ("children") and of both at the same moment ("total")."""

    interval_s: float = 0.1
    own: int = 0
    children: int = 0
    total: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def sample(self) -> None:
        me = psutil.Process()
        own = me.memory_info().rss
        children = 0
        for child in me.children(recursive=True):
            try:
                children += child.memory_info().rss
            except psutil.Error:  # a process that ended between the listing and the reading
                pass
        self.own, self.children = max(self.own, own), max(self.children, children)
        self.total = max(self.total, own + children)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Self:
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True, name="peak-memory")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def record(self) -> dict:
        return {"own_gb": round(self.own / GB, 3), "children_gb": round(self.children / GB, 3),
                "total_gb": round(self.total / GB, 3), "interval_s": self.interval_s}


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
LARGE_BLOCK_BYTES = 1 << 20


def return_freed_memory() -> bool:
    """Have glibc give every allocation of LARGE_BLOCK_BYTES or more its own mapping, handed back to the system
    when it is freed. By default glibc raises that threshold each time it frees a large block (up to 32 MB), so a
    training step's many 1-32 MB tensors come from the heap, whose freed pieces stay resident between tensors that
    live on: notebook 02's update held 5.8 GB resident where 3.05 GB was in use (float32, 4 x 8 completions of
    48 tokens; benchmarks/results/memory-*.json). Process-wide and for good; costs a page fault per new page of a
    large block. Linux with glibc only: elsewhere it does nothing and returns False."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES))
    except (OSError, AttributeError):
        return False
