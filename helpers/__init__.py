"""The one small package behind the course notebooks. Notebooks call these; no logic hides in cells."""

from helpers.data import GSM8KUnavailable, load_gsm8k
from helpers.endpoint import (
    EndpointError,
    LocalModelServer,
    get_client,
    start_local_server,
    stop_local_server,
)
from helpers.env import build_gsm8k_env
from helpers.modes import describe_modes
from helpers.paths import runs_dir

__all__ = [
    "EndpointError",
    "GSM8KUnavailable",
    "LocalModelServer",
    "build_gsm8k_env",
    "describe_modes",
    "get_client",
    "load_gsm8k",
    "runs_dir",
    "start_local_server",
    "stop_local_server",
]
