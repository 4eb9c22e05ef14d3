"""helpers.local.memory: what training frees goes back to the system, and the peak is measured with the servers."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from helpers.local.memory import PeakMemory

# 300 tensors of 2 MB between small ones that live on, after an 8 MB block was freed (glibc's threshold then
# rises to 8 MB, as it does after a training step's first large frees): the resident memory after freeing them.
FREE_AFTER_PINS = """
import sys, psutil, torch
from helpers.local.memory import return_freed_memory
if sys.argv[1] == "on":
    assert return_freed_memory()
rss = lambda: psutil.Process().memory_info().rss / 2**20
big = torch.ones(8 << 18); del big
pins, blocks = [], []
for _ in range(300):
    blocks.append(torch.ones(1 << 19))
    pins.append(torch.ones(64))
before = rss(); del blocks
print(before - rss())
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_freed_training_tensors_go_back_to_the_system():
    def returned_mb(mode: str) -> float:
        done = subprocess.run([sys.executable, "-c", FREE_AFTER_PINS, mode], capture_output=True, text=True,
                              check=True)
        return float(done.stdout.strip().splitlines()[-1])

    assert returned_mb("off") < 100  # glibc keeps the freed 600 MB resident between the pins
    assert returned_mb("on") > 500


def test_peak_memory_counts_the_processes_started_below():
    child = subprocess.Popen([sys.executable, "-c", "x = bytearray(300 << 20); import time; time.sleep(3)"])
    try:
        with PeakMemory(interval_s=0.05) as peak:
            child.wait(timeout=30)
    finally:
        child.kill()
    record = peak.record()
    assert record["children_gb"] > 0.25 and record["total_gb"] >= record["own_gb"] + 0.25
