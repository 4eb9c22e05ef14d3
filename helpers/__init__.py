"""The helpers the course notebooks call, by idea:

- here, the names a notebook cell calls as `helpers.<name>` (below), each imported from its module on first use;
- `serving/`: the model behind the OpenAI-compatible endpoint (llama.cpp and transformers servers, model files);
- `tracing/`: Weave and wandb, in the cloud or on this machine (the session, the trace store, its viewer);
- `grpo/`: notebook 02's training (where it runs, rewards, rollouts, memory, run folders, and how a run is shown);
- `checks/`: the exercise checks;
- beside them one module an idea: `evaluation`, `eval_views`, `gsm8k_env`, `install_check`, `machine_speed`,
  `modes`, `notebook_runner`, `parameters`, `paths`, `quiet`, `results`, `reward_choice`, `scrubbing`, `charts`,
  `worker_thread`.

`import helpers` is cheap: each name below is imported from its module when a cell first uses it, so that a
script which needs one corner of the package (the GPU trainer imports helpers.tracing.session; a verifiers 0.4
environment imports the trace store) does not pull in the notebooks' plotting stack or verifiers' v0 API.
"""

from __future__ import annotations

import importlib

from helpers.quiet import keep_telemetry_local

keep_telemetry_local()  # first: before anything imports weave or wandb

# name -> the module that defines it
_EXPORTS = {
    "check": "helpers.checks",
    "Endpoint": "helpers.serving.endpoint", "EndpointError": "helpers.serving.endpoint",
    "get_client": "helpers.serving.endpoint",
    "build_gsm8k_env": "helpers.gsm8k_env",
    "GSM8KUnavailable": "gsm8k_course", "load_gsm8k": "gsm8k_course",
    "accuracy_table": "helpers.eval_views", "compare_designs": "helpers.eval_views",
    "parser_trap_table": "helpers.eval_views", "plot_designs": "helpers.eval_views",
    "plot_reward_components": "helpers.eval_views", "rescore": "helpers.eval_views",
    "rollouts_view": "helpers.eval_views", "show_source": "helpers.eval_views",
    "vf_eval_command": "helpers.eval_views",
    "EvalRun": "helpers.evaluation", "load_eval_run": "helpers.evaluation",
    "record_evaluation": "helpers.evaluation",
    "hardware_summary": "helpers.install_check", "show_record": "helpers.install_check",
    "versions_table": "helpers.install_check",
    "wandb_history": "helpers.tracing.wandb_offline", "wandb_table": "helpers.tracing.wandb_offline",
    "describe_modes": "helpers.modes",
    "display_path": "helpers.paths", "runs_dir": "helpers.paths",
    "calls_table": "helpers.tracing.views", "export_trace_html": "helpers.tracing.views",
    "trace_tree_widget": "helpers.tracing.views",
    "TracingSession": "helpers.tracing.session", "init_tracing": "helpers.tracing.session",
    "open_local_traces": "helpers.tracing.session", "upload_local_traces": "helpers.tracing.session",
    "in_worker_thread": "helpers.worker_thread", "run_sync": "helpers.worker_thread",
    "fix_runs": "helpers.reward_choice", "reward_note": "helpers.reward_choice",
    "which_reward": "helpers.reward_choice",
}
_notebook_ready = False


def _prepare_for_notebooks() -> None:
    """What a notebook needs once, before its first helper runs: quiet library logs, and dollar
    amounts shown as text (pandas would mark its HTML tables for MathJax, and JupyterLab would
    typeset "$100 ... $20" in a table cell as LaTeX math)."""
    global _notebook_ready
    if _notebook_ready:
        return
    _notebook_ready = True
    import pandas as pd

    pd.set_option("display.html.use_mathjax", False)
    from helpers.quiet import quiet_library_logs

    try:
        quiet_library_logs()
    except ImportError:  # notebook 04's kernel (.venv-v1): no datasets; helpers.tracing.v1_bridge quiets its own
        return


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    _prepare_for_notebooks()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
