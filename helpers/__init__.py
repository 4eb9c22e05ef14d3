"""The helpers the course notebooks call: endpoint, data, environment, tracing entry points,
evaluation records, views and exercise checks. What makes the course run locally (model servers,
Weave clients and trace store, trace viewer, GGUF conversion, notebook 02's rollout server and run
folder) is in helpers.local; the multi-GPU launcher in helpers.gpu."""

from helpers.modes import keep_telemetry_local

keep_telemetry_local()  # first: before anything below imports weave or wandb

import pandas as _pd
from gsm8k_course import GSM8KUnavailable, load_gsm8k

from helpers.checks import check
from helpers.endpoint import Endpoint, EndpointError, get_client
from helpers.env import build_gsm8k_env, quiet_library_logs
from helpers.eval_views import (
    accuracy_table,
    compare_designs,
    parser_trap_table,
    plot_designs,
    plot_reward_components,
    rescore,
    rollouts_view,
    show_source,
    vf_eval_command,
)
from helpers.evaluation import EvalRun, load_eval_run, record_evaluation
from helpers.install_check import hardware_summary, show_record, versions_table
from helpers.local.wandb_offline import wandb_history
from helpers.modes import describe_modes
from helpers.paths import display_path, runs_dir
from helpers.trace_views import calls_table, export_trace_html, trace_tree_widget
from helpers.tracing import TracingSession, init_tracing, open_local_traces, upload_local_traces
from helpers.worker_thread import in_worker_thread

quiet_library_logs()
# GSM8K text is full of dollar amounts: without this, JupyterLab typesets "$100 ... $20" in a
# table cell as LaTeX math (pandas then marks its HTML tables with MathJax's ignore class).
_pd.set_option("display.html.use_mathjax", False)

__all__ = [
    "Endpoint",
    "EndpointError",
    "EvalRun",
    "GSM8KUnavailable",
    "TracingSession",
    "accuracy_table",
    "build_gsm8k_env",
    "calls_table",
    "check",
    "compare_designs",
    "describe_modes",
    "display_path",
    "export_trace_html",
    "get_client",
    "hardware_summary",
    "in_worker_thread",
    "init_tracing",
    "load_eval_run",
    "load_gsm8k",
    "open_local_traces",
    "parser_trap_table",
    "plot_designs",
    "plot_reward_components",
    "record_evaluation",
    "rescore",
    "rollouts_view",
    "runs_dir",
    "show_record",
    "show_source",
    "trace_tree_widget",
    "upload_local_traces",
    "versions_table",
    "vf_eval_command",
    "wandb_history",
]
