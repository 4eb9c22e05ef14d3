"""How fast this machine multiplies matrices, and what notebook 02's measured runs say it will take here.

- `matmul_gflops(dtype)`: a short fixed matrix-multiply benchmark (torch, about a second);
- `machine_record()`: both precisions' figures, for a result file's "machine_speed" key
  (benchmarks/bench_notebooks.py and bench_learnability.py write it), so another machine can scale its minutes;
- `FILES`: which result file backs notebook 02's defaults in each precision (the one place to update);
- `measured(precision)`: what that file measured (s/step, minutes, peak memory, and the CPU it ran on).

helpers.install_check turns these into plain-words verdicts (notebook 00's table, scripts/preflight.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from helpers.results import RESULTS_DIR

PRECISIONS = ("float32", "bfloat16")

# Notebook 02 run whole at its defaults, exercises solved, in each precision (benchmarks/bench_notebooks.py 02
# --solved -p precision P): its training's steps and s/step, the kernel and its llama.cpp servers read together all
# the way, and the machine's matrix speed. None: not measured yet. tests/test_install_check.py checks each file.
FILES: dict[str, str | None] = {
    "bfloat16": "notebooks-02-precision-bfloat16-speed-2026-12-07.json",
    "float32": "notebooks-02-precision-float32-speed-2026-12-07.json",
}


# One multiplication of the benchmark: 1024 tokens through SmolLM2-135M's MLP projection (hidden 576, MLP 1536),
# the kind of product that dominates notebook 02's update: 1.8 GFLOP, a few milliseconds on 2 cores.
SHAPE = (1024, 576, 1536)


def matmul_gflops(dtype: str = "float32", seconds: float = 1.0, threads: int | None = None) -> float:
    """GFLOP/s of torch's CPU matrix multiply of SHAPE in `dtype` ("float32" or "bfloat16"), repeated for about
    `seconds` after one warm-up product. threads: torch threads for the benchmark (None: torch's current count).

    A CPU without bfloat16 instructions emulates bfloat16 (an order of magnitude slower): when the warm-up alone takes
    `seconds` or more, its time is the figure, so the benchmark never runs much past max(seconds, one product).
    """
    import torch

    if dtype not in PRECISIONS:
        raise ValueError(f"dtype must be one of {PRECISIONS}, not {dtype!r}")
    if not seconds > 0:
        raise ValueError(f"seconds must be above 0, not {seconds!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a whole number of at least 1 (or None), not {threads!r}")
    rows, inner, cols = SHAPE
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, inner, generator=generator).to(getattr(torch, dtype))
    b = torch.randn(inner, cols, generator=generator).to(getattr(torch, dtype))
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        started = time.perf_counter()
        torch.matmul(a, b)  # warm-up: the first product allocates and picks its kernel
        elapsed, products = time.perf_counter() - started, 1
        if elapsed < seconds:
            started, products = time.perf_counter(), 0
            while (elapsed := time.perf_counter() - started) < seconds or products == 0:
                torch.matmul(a, b)
                products += 1
    finally:
        torch.set_num_threads(before)
    return 2 * rows * inner * cols * products / elapsed / 1e9


def machine_record() -> dict:
    """This machine's benchmark, for a result file's "machine_speed" key (about 2 seconds)."""
    import torch

    return {"matmul_gflops": {dtype: round(matmul_gflops(dtype), 1) for dtype in PRECISIONS},
            "threads": torch.get_num_threads()}


@dataclass
class Measured:
    """What the result file FILES names for a precision measured: notebook 02 run whole at its defaults."""

    file: str
    date: str
    cpu: str
    cores: int
    steps: int
    sec_per_step: float  # the training's mean (generation, weight sync and update)
    peak_gb: float | None  # the kernel and its llama.cpp servers read together, the whole notebook
    matmul_gflops: float | None  # its machine's benchmark in this precision, where it recorded "machine_speed"

    @property
    def minutes(self) -> float:
        return self.steps * self.sec_per_step / 60

    def source(self) -> str:
        article = "an" if self.cpu[:1].lower() in "aeiou" else "a"
        return f"{self.cores} cores of {article} {self.cpu} ({self.file}, {self.date[:10]})"


def measured(precision: str) -> Measured | None:
    """The figures of FILES[precision]; None where no file backs that precision, or its file is gone or holds no
    notebook 02 run that trained."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    name = FILES[precision]
    if name is None or not (RESULTS_DIR / name).is_file():
        return None
    record = json.loads((RESULTS_DIR / name).read_text())
    run = next((n for n in record.get("notebooks", []) if n.get("notebook", "").startswith("02")
                and (n.get("grpo") or {}).get("sec_per_step")), None)
    if run is None:
        return None
    return Measured(file=name, date=record.get("date", "date not recorded"), cpu=record.get("cpu", "unrecorded CPU"),
                    cores=record.get("cores", 0), steps=run["grpo"]["steps"], sec_per_step=run["grpo"]["sec_per_step"],
                    peak_gb=run.get("peak_kernel_and_servers_gb"),
                    matmul_gflops=record.get("machine_speed", {}).get("matmul_gflops", {}).get(precision))
