"""The course's GSM8K environment, loaded the verifiers way (`vf.load_environment`).

Its source of truth is environments/gsm8k_course/gsm8k_course.py (which also loads GSM8K), installed by
scripts/setup_env.sh; notebooks 01 and 02 and the GPU training script all load it from there.
"""

from __future__ import annotations

import logging
import warnings

import verifiers as vf
from gsm8k_course import GSM8KUnavailable

ENV_ID = "gsm8k-course"


def quiet_library_logs() -> None:
    """Silence log lines a learner would have to ignore; the notebooks explain what they say."""
    import datasets

    # ThinkParser warns on every construction that it expects <think> tags (notebook 01 shows why).
    logging.getLogger("verifiers.parsers.ThinkParser").setLevel(logging.ERROR)
    # load_environment logs each load at INFO, and each error a second time (we raise it clearly).
    logging.getLogger("verifiers.utils.env_utils").setLevel(logging.CRITICAL)
    datasets.disable_progress_bars()  # sub-second .map() calls on a few rows; bars are only noise
    # Weave's openai-realtime integration (imported when tracing patches integrations) declares a
    # pydantic field typed with a lock; pydantic warns about it on import. Harmless here.
    warnings.filterwarnings("ignore", message=r".*allocate_lock.* is not a Python type")


def build_gsm8k_env(**env_args) -> vf.SingleTurnEnv:
    """`vf.load_environment("gsm8k-course", **env_args)`; see gsm8k_course.load_environment for the arguments."""
    try:
        return vf.load_environment(ENV_ID, **env_args)
    except RuntimeError as e:
        if isinstance(e.__cause__, (ValueError, TypeError, GSM8KUnavailable)):
            raise e.__cause__ from None  # our own clear message, not verifiers' wrapper
        raise
