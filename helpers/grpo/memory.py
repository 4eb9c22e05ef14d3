"""Resident memory of a process and the processes it started, sampled together.

`PeakMemory` is what the benchmarks record (notebook 02 must fit an 8 GB laptop, kernel and llama.cpp server
together): a background thread reads the resident set size (RSS) of this process and of every process
below it every `interval_s`, and keeps the largest values and the largest sum. A training script's children are
its model servers; a notebook runner's are the kernel and the kernel's servers.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass, field
from typing import Self

import psutil

GB = 2**30  # GiB, as peak_rss_gb below and every result file report "GB"


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


# how far resident memory may grow past the trims' high-water mark before the next trim. With the gradients in their
# own mapping (gradients_at_once) the heap holds only short-lived tensors, so a larger slack than the 256 MB of before
# keeps the step's peak under 3.5 GB with fewer trims (benchmarks/bench_trainer_memory.py measures both)
TRIM_SLACK_BYTES = 384 << 20


class HeapTrimmer:
    """Hand the heap's freed pages back to the system at a model's decoder-layer boundaries (each layer's forward
    and backward), but only when resident memory is more than `slack_bytes` above the most an earlier trim left
    resident (`trim` trims at once, whatever the slack).

    Why: glibc keeps freed memory resident for reuse, and a training step frees and allocates GBs of 1-30 MB
    tensors between ones that live on, so the heap's holes grow the step's peak far above what is in use (and
    notebook 02's kernel and its server must fit an 8 GB laptop). Trimming at every boundary, or giving every large
    block its own mapping, keeps the peak near what is in use but makes the system hand out and zero every page
    again: trimming only past the most held in use so far plus the slack bounds the peak the same way, while most
    boundaries pass untrimmed.
    benchmarks/results/trainer-memory-*.json measures the step against the trainer without it. Linux with glibc
    only; elsewhere `attach` does nothing and returns False."""

    def __init__(self, slack_bytes: int = TRIM_SLACK_BYTES):
        self.slack_bytes = slack_bytes
        self.trims = 0
        self._floor = 0
        self._libc = _glibc()
        self._page = os.sysconf("SC_PAGE_SIZE") if self._libc is not None else 0

    def resident_bytes(self) -> int:
        with open("/proc/self/statm") as statm:  # a read of a few bytes: cheap enough for every layer
            return int(statm.read().split()[1]) * self._page

    def maybe_trim(self, *_hook_args) -> None:
        """Trim when resident memory is the slack above the most a trim has left resident so far (a forward or
        backward hook). That high-water mark is about the most a step holds in use: below it a trim could not
        lower the step's peak, and would only make the system hand the same pages out again."""
        if self._libc is None or self.resident_bytes() <= self._floor + self.slack_bytes:
            return
        self._libc.malloc_trim(0)
        self.trims += 1
        self._floor = max(self._floor, self.resident_bytes())

    def trim(self) -> None:
        """Trim now, whatever the slack: before another process needs the memory (the policy server samples
        between updates, and the holes an update left are not in use until the next one)."""
        if self._libc is not None:
            self._libc.malloc_trim(0)
            self.trims += 1

    def attach(self, model) -> bool:
        """Hook every decoder layer of `model` (its first ModuleList named '...layers'); True when hooked."""
        import torch

        layers = next((m for name, m in model.named_modules()
                       if name.endswith("layers") and isinstance(m, torch.nn.ModuleList)), None)
        if self._libc is None or layers is None:
            return False
        for layer in layers:
            layer.register_forward_hook(self.maybe_trim)
            layer.register_full_backward_hook(self.maybe_trim)
        return True


def gradients_at_once(model) -> None:
    """Give each trainable parameter of `model` that has no gradient a zero one, all of them views into one block
    of fresh pages from the system (an anonymous mapping: zeros that become resident only where written, and go
    back whole when the gradients are freed). For the moment a backward pass starts (a hook on the loss).

    Why: allocated one by one, layer by layer, the gradients (the weights' size) landed in the heap between the
    backward pass's short-lived tensors, resident memory rose past HeapTrimmer's slack again and again, and each
    trim gave back pages the next layer then took anew: the system handed out and zeroed ~2 million pages a float32
    step. In their own mapping they neither split the heap nor are given back before the step ends. Values do not
    change: autograd adds each gradient to the zeros (TRL's zero_grad frees them after the step)."""
    import mmap

    import torch

    params = [p for p in model.parameters() if p.requires_grad and p.grad is None]
    if not params:
        return
    alike = [p for p in params if p.device.type == "cpu" and p.dtype == params[0].dtype]
    count = sum(p.numel() for p in alike)
    if count:
        # the tensor holds the mapping; it is unmapped when the last gradient view is freed
        block = torch.frombuffer(mmap.mmap(-1, count * params[0].element_size()), dtype=params[0].dtype,
                                 count=count)
        start = 0
        for p in alike:
            p.grad = block[start:start + p.numel()].view_as(p)
            start += p.numel()
    for p in params:  # another device or dtype: their own zeros
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def _glibc():
    """glibc's C library (for malloc_trim), or None on another system or C library."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - present in every glibc; checked so that a stand-in C library is refused
        return libc
    except (OSError, AttributeError):
        return None


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
