"""Secrets never reach a file the course writes: traces, saved evaluations, training summaries,
metrics, exports. Everything written goes through `scrub` (or the writers below).

A secret is the value of an environment variable whose name looks like a credential
(OPENAI_API_KEY, WANDB_API_KEY, HF_TOKEN, ...), or a value registered here, such as the local
servers' per-start API keys. Token logprobs are dropped too (large, and not what the course shows).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

REDACTED = "***REDACTED***"
DROPPED_KEYS = {"logprobs", "top_logprobs"}
SECRET_KEYS = {"api_key", "apikey", "authorization", "password", "access_token", "secret"}
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
MIN_SECRET_CHARS = 8  # shorter values ("1", "true") are settings, not secrets

_registered: set[str] = set()
_env_cache: tuple[float, set[str]] = (0.0, set())


def register_secret(value: str) -> None:
    """Hide `value` from everything written from now on (e.g. a server's per-start key)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _registered.add(value)


def secret_values() -> list[str]:
    """The secret values to hide, longest first (a key that contains another is fully hidden).

    The environment is re-read at most once a second: a key set later in a notebook is hidden too,
    without scanning the environment on every traced call."""
    global _env_cache
    checked, from_env = _env_cache
    if time.monotonic() - checked > 1.0:
        from_env = {v for k, v in os.environ.items() if SECRET_ENV.search(k) and v and len(v) >= MIN_SECRET_CHARS}
        _env_cache = (time.monotonic(), from_env)
    return sorted(from_env | _registered, key=len, reverse=True)


def scrub(value: Any, secrets: list[str] | None = None) -> Any:
    """A copy of a JSON-like value without logprobs, credential fields or secret values."""
    return _scrub(value, secret_values() if secrets is None else secrets)


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = str(k).lower()
            if key in DROPPED_KEYS:
                out[k] = None
            elif key in SECRET_KEYS and isinstance(v, str) and v:
                out[k] = REDACTED
            else:
                out[k] = _scrub(v, secrets)
        return out
    if isinstance(value, (list, tuple)):
        return [_scrub(v, secrets) for v in value]
    return value


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` with every secret value hidden."""
    path = Path(path)
    path.write_text(scrub(text), encoding="utf-8")
    return path


def write_json(path: str | Path, value: Any) -> Path:
    """Write `value` as JSON (Paths and other objects as text), scrubbed like a trace."""
    plain = json.loads(json.dumps(value, default=str))
    return write_text(path, json.dumps(scrub(plain), indent=2))
