"""The course's GSM8K environment, loaded the verifiers way (`vf.load_environment`).

Its source of truth is environments/gsm8k_course/gsm8k_course.py (which also loads GSM8K), installed by
scripts/setup_env.sh; notebooks 01 and 02 and the GPU training script all load it from there.
"""

from __future__ import annotations

import verifiers as vf
from gsm8k_course import GSM8KUnavailable

ENV_ID = "gsm8k-course"


def build_gsm8k_env(**env_args) -> vf.SingleTurnEnv:
    """`vf.load_environment("gsm8k-course", **env_args)`; see gsm8k_course.load_environment for the arguments."""
    try:
        return vf.load_environment(ENV_ID, **env_args)
    except RuntimeError as e:
        if isinstance(e.__cause__, (ValueError, TypeError, GSM8KUnavailable)):
            raise e.__cause__ from None  # our own clear message, not verifiers' wrapper
        raise
