"""Which mode each part of the course runs in, decided from the environment and said in plain words."""

from __future__ import annotations

import os

import pandas as pd

from helpers.paths import display_path, runs_dir
from helpers.quiet import wandb_key_set


def describe_modes() -> pd.DataFrame:
    """One row per part (model, traces, metrics, data): the mode it will use and how to change it."""
    if os.environ.get("OPENAI_BASE_URL"):
        model = ("custom endpoint", f"{os.environ['OPENAI_BASE_URL']} (OPENAI_BASE_URL)",
                 "unset OPENAI_BASE_URL for the local model")
    elif os.environ.get("OPENAI_API_KEY"):
        model = ("cloud", "OpenAI (OPENAI_API_KEY is set)", "unset OPENAI_API_KEY for the local model")
    else:
        model = ("local", "SmolLM2-135M-Instruct on a llama.cpp server at 127.0.0.1",
                 "set OPENAI_API_KEY, or OPENAI_BASE_URL for vLLM/Ollama")
    if wandb_key_set():
        traces = ("cloud", "W&B Weave (WANDB_API_KEY is set)", "unset WANDB_API_KEY to keep traces local")
        metrics = ("cloud", "wandb online", "unset WANDB_API_KEY to log offline")
    else:
        traces = ("local", f"Weave trace store under {display_path(runs_dir('traces'))}",
                  "set WANDB_API_KEY to send them to W&B")
        metrics = ("local", f"wandb offline runs under {display_path(runs_dir('wandb'))}",
                   "set WANDB_API_KEY, then `wandb sync`")
    if os.environ.get("GSM8K_DIR"):
        data = ("local", f"GSM8K from {os.environ['GSM8K_DIR']} (GSM8K_DIR)", "unset GSM8K_DIR to use the HF hub")
    else:
        data = ("hub", "GSM8K as openai/gsm8k from the HF hub (or its cache)", "set GSM8K_DIR to work offline")
    rows = {"model": model, "traces": traces, "metrics": metrics, "data": data}
    return pd.DataFrame(
        [(part, *values) for part, values in rows.items()],
        columns=["part", "mode", "where", "to change"],
    ).set_index("part")
