"""Secrets never land on disk or in an output: a key planted in the environment (and so in the system
prompt, the prompts, the traces, the saved runs) is found nowhere under the runs folder after a real
evaluation and a real 1-step GRPO training, and not in what the cells print.

Tracing patches libraries process-wide, so the run happens in a subprocess (stdin closed)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "sk-planted-" + "9c41e7" * 6

SCRIPT = """
import os, time
import torch, verifiers as vf, wandb
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

import helpers
from helpers.grpo.backends import device_settings, start_model
from helpers.grpo.rewards import RubricRewards
from helpers.grpo.run_folder import save_summary
from helpers.grpo.step_timer import StepTimer
from helpers.grpo import run_folder
from helpers.grpo.policy_server import PolicyServer
from helpers.grpo.server_rollouts import ServerRolloutGRPOTrainer

planted = os.environ["COURSE_PLANTED_API_KEY"]
tracing = helpers.init_tracing("secrets")
endpoint = helpers.get_client()
env_args = {"variant": "hash", "num_eval_examples": 2, "num_examples": 8,
            "system_prompt": f"Your access key is {planted}. Answer with '#### <number>'."}
env = vf.load_environment("gsm8k-course", **env_args)
sampling = {"max_tokens": 16, "temperature": 0.7}
results = helpers.in_worker_thread(env.evaluate, endpoint.client, endpoint.model, num_examples=2,
                                   rollouts_per_example=1, sampling_args=sampling)
run = helpers.record_evaluation(results, env, endpoint, name="secrets", rollouts_per_example=1, wall_s=1.0,
                                sampling_args=sampling, env_args=env_args)
run.save()
print(helpers.vf_eval_command("gsm8k-course", env_args, endpoint.base_url, endpoint.model, num_examples=2,
                              rollouts_per_example=1, max_concurrent=1, sampling_args=sampling))
calls = helpers.calls_table(session=tracing)
print("exported", helpers.export_trace_html(calls.iloc[0]["trace_id"], session=tracing))

rewards = RubricRewards(env.rubric)
model_dir = start_model("cpu")
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
server = PolicyServer(folder=helpers.runs_dir("models"), name="secrets", parallel=4)
server.sync(model, step=0)
output_dir = helpers.runs_dir("grpo", "secrets")
config = GRPOConfig(output_dir=str(output_dir), run_name="secrets", max_steps=1, per_device_train_batch_size=4,
                    num_generations=4, max_completion_length=12, save_strategy="steps", save_steps=1,
                    logging_steps=1, report_to="wandb", reward_weights=rewards.weights,
                    **device_settings("cpu"))
run_folder.prepare_run_dir(config, env_args=env_args)
trainer = ServerRolloutGRPOTrainer(model=model, processing_class=tokenizer, args=config,
                                   reward_funcs=rewards.reward_funcs, policy_server=server,
                                   train_dataset=env.dataset.select_columns(["prompt", "answer"]))
trainer.add_callback(StepTimer(trainer, rewards, server))
# as notebook 02
wandb_run = wandb.init(project="secrets", name="secrets", config={"rollouts": "server", "backend": "cpu"})
trainer.train()
wandb_run.finish()
save_summary(output_dir, {"system_prompt": env.system_prompt, "wandb_dir": wandb_run.dir})
server.stop()
tracing.close()
print("done")
"""


@pytest.mark.notebook
def test_a_planted_key_is_nowhere_under_runs_or_in_the_output(tmp_path):
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "WEAVE_"))}
    env.update(COURSE_RUNS_DIR=str(runs), COURSE_PLANTED_API_KEY=PLANTED, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=ROOT, env=env, text=True,
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=1200, check=False)
    assert out.returncode == 0 and "done" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
    assert PLANTED not in out.stdout + out.stderr
    assert "***REDACTED***" in out.stdout  # the vf-eval line carried it, hidden
    files = [p for p in runs.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {".jsonl", ".json", ".html", ".wandb", ".safetensors", ".log"} <= kinds, kinds
    leaked = [str(p.relative_to(runs)) for p in files if PLANTED.encode() in p.read_bytes()]
    assert not leaked, f"the planted key is in {leaked}"


@pytest.mark.parametrize("url, hidden", [
    ("http://learner:p@ss@w0rd@127.0.0.1:9/simple", "http://****@127.0.0.1:9/simple"),  # pip cuts at the last '@'
    ("https://host/simple?token=s3cret&x=1", "https://host/simple?token=****&x=****"),
    ("https://download.pytorch.org/whl/cpu", "https://download.pytorch.org/whl/cpu"),
])
def test_an_index_url_is_printed_with_its_secrets_hidden(url, hidden):
    """A password holding '@' and a token in the query string are hidden, in Python (bench_install) and by the
    shell function setup_env.sh and download_wheels.sh print TORCH_INDEX_URL with: the same one place."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from url_shown import shown

    assert shown(url) == hidden
    printed = subprocess.run(["bash", "-c", 'source scripts/torch_cpu.sh && shown "$1"', "-", url], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert printed == hidden and "s3cret" not in printed and "w0rd" not in printed
