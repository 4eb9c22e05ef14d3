"""scripts/gpu_smoke.py's CPU dry run: every step it can run without a GPU, on the local SmolLM2-135M
with tiny settings (its tokenizer set up as Qwen3-0.6B-Base's), writing its result file. On a CUDA
machine the same script runs the real checks (scripts/gpu_smoke.py, no --dry-run)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the quick tier (scripts/test.sh --quick) leaves it out

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, gsm8k_dir):
    out = tmp_path_factory.mktemp("smoke") / "gpu-smoke.json"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--dry-run", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                         env={**os.environ, "GSM8K_DIR": str(gsm8k_dir)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_dry_run_records_every_step(dry_run):
    assert dry_run["dry_run"] is True and dry_run["commit"] and dry_run["date"]
    assert {name: step["status"] for name, step in dry_run["steps"].items()} == {
        "1 stop tokens and dtypes": "ok", "2 gpu backend: one GRPO step": "ok",
        "3 vLLM colocate: two steps with weight sync": "skipped",  # vllm is not installed on the CPU stack
        "4 verifiers backend and notebook 02's views": "ok"}


def test_generations_stop_at_the_end_of_the_turn_in_both_dtypes(dry_run):
    step = dry_run["steps"]["1 stop tokens and dtypes"]
    assert step["eos_token"] == "<|endoftext|>" and step["stop_tokens"] == ["<|im_end|>", "<|endoftext|>"]
    for dtype in ("float16", "float32"):
        result = step["dtypes"][dtype]
        assert not result["nan_logits"] and not any(c["has_!!!"] for c in result["completions"])
        short = result["completions"][0]  # "what is 2 + 2?": the turn ends long before the token limit
        assert short["stopped_at"] == "<|im_end|>" and "user" not in short["text"], short


def test_the_gpu_step_uses_the_plan_and_frees_the_trainer(dry_run):
    step = dry_run["steps"]["2 gpu backend: one GRPO step"]
    assert step["steps"] == 1 and step["optimizer_released"]
    assert step["generation_eos_token_id"] == [2, 0]  # <|im_end|> and <|endoftext|>
    assert "micro-batches of 4 (gradient_accumulation_steps=4)" in step["plan"]  # a 16 GB T4's plan
    server = step["eval_server"]  # the merged weights of step 1, in the dtype the notebook gives a T4's server
    assert server["dtype"] == "float32" and server["serves_step"] == 1 and server["completion_tokens"] > 0


def test_the_verifiers_plan_and_the_views(dry_run):
    step = dry_run["steps"]["4 verifiers backend and notebook 02's views"]
    assert step["plan"].count("NCCL_CUMEM_ENABLE=0") == 2
    assert "2+ CUDA GPUs" in step["checks_failed"]
    assert [summary["column"] for summary in step["learning"]] == ["reward", "correct_answer", "hash_format"]
    assert all(summary["steps"] == 1 for summary in step["learning"])
