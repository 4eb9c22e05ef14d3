"""An OpenAI-compatible server for a transformers checkpoint, in a child process on 127.0.0.1.

A trained model is a transformers folder, not a GGUF. This server (the child process is
`hf_child.py`) answers the two calls the course needs, `GET /v1/models` and
`POST /v1/chat/completions`, so a checkpoint is evaluated like any other endpoint.

Requests that arrive together are generated as one batch (left-padded), which is what makes an
evaluation with `max_concurrent > 1` faster on a CPU. Usage:

    with HFModelServer("runs/grpo/02_grpo_cpu/final") as server:
        endpoint = server.endpoint()
        results = env.evaluate(endpoint.client, endpoint.model, num_examples=...)
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from helpers.serving.child_process import ChildServer, EndpointError, free_port


@dataclass
class HFModelServer(ChildServer):
    """Handle on the child process: start()/stop(), or use it as a context manager."""

    model_dir: Path  # a transformers folder (helpers.grpo.backends.start_model downloads a hub model into one)
    model_name: str | None = None  # what /v1/models lists; default: the folder name
    port: int | None = None
    threads: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    max_batch: int = 8
    device: str = "cpu"  # "cuda" on a GPU
    dtype: str = "float32"  # "bfloat16" / "float16" on a GPU
    startup_timeout_s: float = 180.0
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    api_key: str | None = field(default=None, init=False, repr=False)
    startup_s: float | None = field(default=None, init=False)

    def __post_init__(self):
        self.model_dir = Path(self.model_dir)
        self.model_name = self.model_name or self.model_dir.name

    label = "model server"
    log_name = "hf-server"
    endpoint_kind = "local-transformers"
    client_timeout_s = 1800.0  # a CPU batch of long completions takes minutes

    @property
    def served_model(self) -> str:
        return self.model_name

    def start(self) -> Self:
        if self.is_running():
            return self
        if not (self.model_dir / "config.json").is_file():
            raise EndpointError(f"No transformers model in {self.model_dir} (config.json is missing).")
        self.port = self.port or free_port()
        self._launch("hf_child.py", ["--model", str(self.model_dir), "--name", self.model_name,
                                     "--port", str(self.port), "--threads", str(self.threads),
                                     "--max-batch", str(self.max_batch), "--device", self.device,
                                     "--dtype", self.dtype])
        return self
