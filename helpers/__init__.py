"""The one small package behind the course notebooks. Notebooks call these; no logic hides in cells."""

from helpers.data import GSM8KUnavailable, load_gsm8k
from helpers.endpoint import (
    EndpointError,
    LocalModelServer,
    get_client,
    start_local_server,
    stop_local_server,
    timed_chat,
)
from helpers.env import build_gsm8k_env
from helpers.modes import describe_modes
from helpers.paths import runs_dir
from helpers.system import hardware_summary, show_record, versions_table

__all__ = [
    "EndpointError",
    "GSM8KUnavailable",
    "LocalModelServer",
    "build_gsm8k_env",
    "describe_modes",
    "hardware_summary",
    "get_client",
    "load_gsm8k",
    "runs_dir",
    "show_record",
    "start_local_server",
    "stop_local_server",
    "timed_chat",
    "versions_table",
]
