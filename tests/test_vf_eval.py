"""verifiers' own CLI on the course's environment module, against the real local endpoint."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import build_gsm8k_env
from helpers.serving.llama_server import LOCAL_MODEL_NAME

VF_EVAL = Path(sys.executable).parent / "vf-eval"
ENV_ARGS = '{"variant": "hash", "num_eval_examples": 4}'


@pytest.mark.slow
def test_vf_eval_matches_evaluate(local_server):
    """vf-eval (unmodified) exits 0, and its mean reward equals env.evaluate's at temperature 0."""
    result = subprocess.run(
        [str(VF_EVAL), "gsm8k-course", "-a", ENV_ARGS, "-m", LOCAL_MODEL_NAME, "-b", local_server.base_url,
         "-k", "COURSE_SERVER_KEY", "-n", "4", "-r", "1", "-c", "1", "-t", "96", "-T", "0"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "COURSE_SERVER_KEY": local_server.api_key},  # -k names the variable
    )
    assert result.returncode == 0, result.stderr[-2000:]
    cli_reward = float(re.search(r"^reward: avg - ([0-9.]+)", result.stdout, re.MULTILINE).group(1))

    env = build_gsm8k_env(variant="hash", num_eval_examples=4)
    client = local_server.endpoint().client
    outputs = env.evaluate(client, LOCAL_MODEL_NAME, sampling_args={"max_tokens": 96, "temperature": 0.0},
                           num_examples=4, rollouts_per_example=1, max_concurrent=1)
    assert round(sum(outputs.reward) / len(outputs.reward), 3) == cli_reward
