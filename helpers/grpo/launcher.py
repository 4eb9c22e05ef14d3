"""The `verifiers` backend of notebook 02 (>= 2 CUDA GPUs of compute capability 8.0+): the launch plan,
its checks, and a runner.

verifiers' GRPOTrainer cannot run on a CPU: it generates with a vLLM server and pushes new weights
to it over NCCL after every step. Its recipe (verifiers v0.1.5.post0) needs two processes:

1. `vf-vllm --model willcb/Qwen3-0.6B --enforce-eager` on GPU 0 (the inference server);
2. `accelerate launch --num-processes 1 --config-file training/zero3.yaml training/train_gsm8k_verifiers.py`
   on GPU 1.

Both run with `NCCL_CUMEM_ENABLE=0 NCCL_CUMEM_HOST_ENABLE=0`: NCCL's cuMem allocator breaks the
weight-sync communicator between the two processes, and both ends of it must agree; vllm 0.11 no
longer sets these itself (its env_override.py sets neither), so the recipe sets them in both shells.

`build_plan()` writes both commands and their environments down; `plan.checks()` says what is
missing on this machine; `run_plan(plan)` starts the server with subprocess.Popen, waits until it
answers, streams the trainer's log, and stops both, also on error or interrupt;
`train_with_verifiers(plan)` runs it and returns the final model's folder and its log history.
On a CPU machine the tests check the plan without running it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from helpers.grpo.backends import VERIFIERS_MODEL, gpu_capabilities
from helpers.grpo.run_folder import last_checkpoint
from helpers.paths import PROJECT_ROOT, display_path, runs_dir
from helpers.scrubbing import scrub
from helpers.serving.child_process import NO_PROXY_OPENER

DEFAULT_MODEL = VERIFIERS_MODEL
ZERO3_CONFIG = PROJECT_ROOT / "training" / "zero3.yaml"
TRAIN_SCRIPT = PROJECT_ROOT / "training" / "train_gsm8k_verifiers.py"
GPU_REQUIREMENTS = PROJECT_ROOT / "requirements-gpu.txt"
NCCL_ENV = {"NCCL_CUMEM_ENABLE": "0", "NCCL_CUMEM_HOST_ENABLE": "0"}
GPU_PACKAGES = ("vllm", "deepspeed", "accelerate", "peft", "trl")
FLASH_ATTN = "flash-attn==2.8.3"  # optional; source only, built against the installed torch


@dataclass
class LaunchPlan:
    server_cmd: list[str]
    server_env: dict[str, str]
    train_cmd: list[str]
    train_env: dict[str, str]
    host: str
    port: int
    output_dir: Path
    model: str
    log_dir: Path = field(default_factory=lambda: runs_dir("logs"))

    @property
    def health_url(self) -> str:
        return f"http://{self.host}:{self.port}/health"

    def shell(self) -> str:
        """Both commands as you would type them in two terminals, from the repository root."""
        def line(env, cmd):
            return _relative(" ".join([*(f"{k}={v}" for k, v in env.items()), *cmd]))
        return (f"# terminal 1: the vLLM server (GPU 0)\n{line(self.server_env, self.server_cmd)}\n"
                f"# terminal 2: training (GPU 1), once the server answers {self.health_url}\n"
                f"{line(self.train_env, self.train_cmd)}")

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([
            {"process": "vLLM server", "command": _relative(" ".join(self.server_cmd)),
             "environment": _relative(" ".join(f"{k}={v}" for k, v in self.server_env.items()))},
            {"process": "trainer", "command": _relative(" ".join(self.train_cmd)),
             "environment": _relative(" ".join(f"{k}={v}" for k, v in self.train_env.items()))},
        ]).set_index("process")

    def checks(self, gpus: int | None = None, capabilities: list[tuple[int, int]] | None = None) -> pd.DataFrame:
        """One row per requirement: ok or not, and what to do. Nothing is started. gpus, capabilities:
        as helpers.grpo.backends.choose_backend takes them (None: this machine's)."""

        if capabilities is None:
            capabilities = gpu_capabilities() if gpus is None else [(8, 0)] * gpus
        gpus = len(capabilities) if gpus is None else gpus
        old = [f"{major}.{minor}" for major, minor in capabilities if (major, minor) < (8, 0)]
        rows = [("2+ CUDA GPUs", gpus >= 2, f"{gpus} found",
                 "use backend='auto': TRL on the CPU or on one GPU"),
                ("compute capability 8.0+ (bfloat16)", gpus >= 2 and not old,
                 f"{', '.join(old)} found" if old else "yes" if gpus else "no GPU",
                 "use backend='gpu': TRL on GPU 0, float16 (verifiers' trainer needs bfloat16)")]
        for module in GPU_PACKAGES:
            found = importlib.util.find_spec(module) is not None
            rows.append((f"python package {module}", found, "installed" if found else "missing",
                         "pip install -r requirements-gpu.txt"))
        found = importlib.util.find_spec("flash_attn") is not None
        rows.append(("python package flash_attn (optional)", True,
                     "installed" if found else "missing: the trainer uses PyTorch's sdpa attention",
                     f"for flash_attention_2, after the rest: pip install {FLASH_ATTN} --no-build-isolation"))
        for tool in ("vf-vllm", "accelerate"):
            found = shutil.which(tool) or (Path(sys.executable).parent / tool).exists()
            rows.append((f"command {tool}", bool(found), "on PATH" if found else "missing",
                         "pip install -r requirements-gpu.txt"))
        for path in (ZERO3_CONFIG, TRAIN_SCRIPT, GPU_REQUIREMENTS):
            rows.append((f"file {path.relative_to(PROJECT_ROOT)}", path.is_file(), "present" if path.is_file()
                         else "missing", "restore it from the repository"))
        free = _port_free(self.host, self.port)
        rows.append((f"port {self.port} on {self.host}", free, "free" if free else "in use",
                     "stop what listens there, or pass port= to build_plan"))
        return pd.DataFrame(rows, columns=["check", "ok", "found", "if not ok"]).set_index("check")


def _relative(text: str) -> str:
    """Paths inside the repository as a reader types them (the plan itself keeps absolute ones)."""
    return text.replace(str(PROJECT_ROOT) + os.sep, "")


def _port_free(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _bin(name: str) -> str:
    """The venv's console script when it exists (a notebook kernel may not have the venv on PATH)."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def build_plan(model: str = DEFAULT_MODEL, *, run_name: str = "gsm8k-grpo-qwen3-0.6b", max_steps: int = 200,
               variant: str = "think", num_eval_examples: int = 100, num_train_examples: int = -1,
               learning_rate: float | None = None, num_generations: int = 12, per_device_batch_size: int = 12,
               max_tokens: int = 2048, seed: int = 0, host: str = "127.0.0.1", port: int = 8000,
               inference_gpu: int = 0, train_gpu: int = 1, extra_args: list[str] | None = None,
               project: str = "verifiers-course", env_id: str = "gsm8k-course",
               env_args: dict | None = None) -> LaunchPlan:
    """The two commands of the verifiers recipe, with their environments (nothing is started).

    The training settings go to the trainer script as its arguments (learning_rate None: verifiers'
    own default from vf.grpo_defaults). env_id / env_args: the verifiers environment module to train
    on and its load_environment arguments (e.g. "gsm8k-feedback", {"max_turns": 3}); `variant`,
    `num_train_examples` and `num_eval_examples` apply to gsm8k-course only.
    """
    output_dir = runs_dir("grpo", run_name)
    server_env = {"CUDA_VISIBLE_DEVICES": str(inference_gpu), **NCCL_ENV}  # both ends of the weight sync
    server_cmd = [_bin("vf-vllm"), "--model", model, "--enforce-eager", "--disable-log-requests",
                  "--host", host, "--port", str(port)]
    train_env = {"CUDA_VISIBLE_DEVICES": str(train_gpu), **NCCL_ENV, "WANDB_PROJECT": project}
    if not os.environ.get("WANDB_API_KEY"):
        train_env["WANDB_MODE"] = "offline"
        train_env["WANDB_DIR"] = str(runs_dir("wandb"))
    train_cmd = [_bin("accelerate"), "launch", "--num-processes", "1", "--config-file", str(ZERO3_CONFIG),
                 str(TRAIN_SCRIPT), "--model", model, "--variant", variant, "--run-name", run_name,
                 "--output-dir", str(output_dir), "--max-steps", str(max_steps), "--seed", str(seed),
                 "--num-train-examples", str(num_train_examples), "--num-eval-examples", str(num_eval_examples),
                 "--num-generations", str(num_generations), "--per-device-batch-size", str(per_device_batch_size),
                 "--max-tokens", str(max_tokens), "--vllm-host", host, "--vllm-port", str(port),
                 "--project", project, "--env-id", env_id, "--env-args", json.dumps(env_args or {}),
                 *(["--learning-rate", str(learning_rate)] if learning_rate is not None else []), *(extra_args or [])]
    return LaunchPlan(server_cmd, server_env, train_cmd, train_env, host, port, output_dir, model)


def run_plan(plan: LaunchPlan, server_timeout_s: float = 900.0, echo=print) -> int:
    """Start the vLLM server, wait for it, run training with its log streamed, stop both. Returns
    the trainer's exit code (0 = done). Ctrl-C / kernel interrupt stops both processes cleanly."""
    failed = plan.checks()
    failed = failed[~failed["ok"]]
    if len(failed):
        raise RuntimeError("The verifiers backend cannot start here:\n" + "\n".join(
            f"- {check}: {row.found} -> {row['if not ok']}" for check, row in failed.iterrows()))
    server_log = plan.log_dir / "vf-vllm.log"
    server = trainer = None
    try:
        with open(server_log, "wb") as log:
            server = subprocess.Popen(plan.server_cmd, env={**os.environ, **plan.server_env}, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT,
                                      start_new_session=True)
        echo(f"vLLM server starting (log: {server_log}) ...")
        _wait_for_server(plan, server, server_log, server_timeout_s)
        echo("vLLM server is up; starting training")
        trainer = subprocess.Popen(plan.train_cmd, env={**os.environ, **plan.train_env}, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT,
                                   text=True, bufsize=1, start_new_session=True)
        with open(plan.log_dir / "vf-train.log", "w") as train_log:
            for line in trainer.stdout:
                line = scrub(line)
                train_log.write(line)
                if "out of memory" in line.lower():
                    echo("CUDA ran out of memory: lower --per-device-batch-size / --num-generations / "
                         "--max-tokens in the plan's extra_args, then run again (it resumes).")
                echo(line.rstrip())
        return trainer.wait()
    finally:
        for process in (trainer, server):
            _stop(process)


def _wait_for_server(plan: LaunchPlan, server: subprocess.Popen, log: Path, timeout_s: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if server.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"vf-vllm exited during start-up (code {server.returncode}):\n{tail}")
        try:
            with NO_PROXY_OPENER.open(plan.health_url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(2)
    raise RuntimeError(f"vf-vllm did not answer {plan.health_url} within {timeout_s:.0f} s; see {log}")


def _stop(process: subprocess.Popen | None) -> None:
    """SIGTERM the process group (accelerate and vLLM start children), then SIGKILL after 30 s."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def merge_lora(final_dir: str | Path, base_model: str = DEFAULT_MODEL) -> Path:
    """A LoRA run saves an adapter; merge it into the base weights so any server can load it."""
    final_dir = Path(final_dir)
    if not (final_dir / "adapter_config.json").is_file():
        return final_dir
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged_dir = final_dir.with_name(final_dir.name + "-merged")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), str(final_dir))
    model.merge_and_unload().save_pretrained(merged_dir)
    AutoTokenizer.from_pretrained(base_model).save_pretrained(merged_dir)
    return merged_dir


def train_with_verifiers(plan: LaunchPlan) -> tuple[Path, list[dict]]:
    """The verifiers recipe on 2+ GPUs (`run_plan`: vf-vllm and the trainer), then
    the folder of its final model (LoRA merged) and its log history (trainer_state.json)."""
    code = run_plan(plan)
    if code != 0:
        raise RuntimeError(f"verifiers training exited with code {code}; see "
                           f"{display_path(plan.log_dir / 'vf-train.log')}. "
                           "Running the cell again resumes from the last checkpoint.")
    # the whole run's log (the trainer script saves it at the end); else the last checkpoint's
    state_file = plan.output_dir / "trainer_state.json"
    if not state_file.is_file():
        state_file = Path(last_checkpoint(plan.output_dir) or plan.output_dir) / "trainer_state.json"
    history = json.loads(state_file.read_text())["log_history"] if state_file.is_file() else []
    return merge_lora(plan.output_dir / "final", plan.model), history
