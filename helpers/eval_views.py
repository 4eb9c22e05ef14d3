"""Tables and charts for notebook 01: the rollouts, the reward components, the parser trap,
and the side-by-side comparison of two rubric designs."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable

import matplotlib.pyplot as plt
import pandas as pd
import verifiers as vf
from IPython.display import Markdown

from helpers.evaluation import EvalRun
from helpers.scrubbing import scrub
from helpers.worker_thread import run_sync

METRIC_LABELS = {
    "correct_answer": "correct answer",
    "format_reward_func": "<think> format",
    "hash_format": "'#### N' format",
}


def show_source(obj) -> Markdown:
    """The source code of a function or class, rendered as a code block."""
    return Markdown(f"```python\n{inspect.getsource(obj).rstrip()}\n```")


def metric_names(run: EvalRun) -> list[str]:
    return [c for c in METRIC_LABELS if c in run.rollouts]


def rollouts_view(run: EvalRun, width: int = 160) -> pd.DataFrame:
    """The rollouts table, texts shortened so that it reads as a table."""
    def short(text):
        text = " ".join(str(text).split())
        return text if len(text) <= width else text[: width - 1] + "…"

    table = run.rollouts[["example", "rollout", "question", "completion", "parsed", "answer",
                          *metric_names(run), "reward"]].copy()
    for column in ("question", "completion"):
        table[column] = table[column].map(short)
    return table


def accuracy_table(*runs: EvalRun) -> pd.DataFrame:
    """Accuracy per run with its 95% (Wilson) interval: small samples have wide intervals."""
    rows = {}
    for run in runs:
        acc = run.summary["accuracy"]
        low, high = acc["ci95"]
        rows[run.name] = {"rollouts": acc["n"], "accuracy": acc["mean"], "95% CI low": low,
                          "95% CI high": high}
    return pd.DataFrame(rows).T


def plot_reward_components(run: EvalRun):
    """Left: mean of each reward component and of the total. Right: reward per example."""
    names = metric_names(run)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    means = [run.rollouts[name].mean() for name in names] + [run.rollouts["reward"].mean()]
    labels = [METRIC_LABELS[name] for name in names] + ["reward (weighted sum)"]
    left.barh(labels, means, color=["#4c72b0", "#dd8452", "#55a868"][: len(labels)])
    left.set_xlim(0, 1)
    left.set_xlabel("mean over rollouts")
    left.set_title(f"{run.name}: reward components")
    per_example = run.rollouts.groupby("example")[[*names, "reward"]].mean()
    per_example.rename(columns=METRIC_LABELS).plot.bar(ax=right, width=0.8)
    right.set_xlabel("example")
    right.set_ylabel("mean over its rollouts")
    right.set_title("reward per example")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def score_text(rubric: vf.Rubric, text: str, answer: str) -> dict:
    """Score one assistant message with a rubric, the way evaluate() does after a rollout."""
    completion = [{"role": "assistant", "content": text}]
    state = {"timing": {"total_ms": 0.0}}  # score_rollout records its timing here
    score = run_sync(rubric.score_rollout(prompt=[], completion=completion, answer=answer, state=state))
    return {**score.metrics, "reward": score.reward}


def parser_trap_table(fixed: vf.Rubric, trap: vf.Rubric, examples: list[tuple[str, str]]) -> pd.DataFrame:
    """correct_answer for each (completion, gold answer) under the rubric with parser= and without."""
    rows = []
    for text, answer in examples:
        rows.append({
            "completion": text, "gold": answer,
            "with parser=parser": score_text(fixed, text, answer)["correct_answer"],
            "without parser=": score_text(trap, text, answer)["correct_answer"],
        })
    return pd.DataFrame(rows)


def rescore(run: EvalRun, rubric: vf.Rubric) -> pd.Series:
    """correct_answer of every rollout of `run` under another rubric (no new model calls)."""
    return pd.Series([score_text(rubric, text, answer)["correct_answer"]
                      for text, answer in zip(run.rollouts["completion"], run.rollouts["answer"])])


def compare_designs(runs: dict[str, EvalRun], signal_share: Callable[[pd.DataFrame], float]) -> pd.DataFrame:
    """One row per labelled run: format reward earned, correct answers, mean reward, and the share of
    examples with a GRPO signal as `signal_share(run.rollouts)` computes it (notebook 01's exercise)."""
    rows = {}
    for label, run in runs.items():
        fmt = next(name for name in ("format_reward_func", "hash_format") if name in run.rollouts)
        rows[label] = {
            "format reward earned": run.rollouts[fmt].mean(),
            "correct answer": run.rollouts["correct_answer"].mean(),
            "mean reward": run.rollouts["reward"].mean(),
            "examples with GRPO signal": float(signal_share(run.rollouts)),
        }
    return pd.DataFrame(rows).T


def plot_designs(table: pd.DataFrame):
    ax = table.T.plot.bar(figsize=(8, 3.4), rot=0, ylim=(0, 1))
    ax.set_title("Same examples, same model: two rubric designs")
    ax.set_ylabel("share / mean")
    ax.figure.tight_layout()
    return ax.figure


def vf_eval_command(env_id: str, env_args: dict, base_url: str, model: str, *, num_examples: int,
                    rollouts_per_example: int, max_concurrent: int, sampling_args: dict,
                    key_variable: str = "OPENAI_API_KEY") -> str:
    """The one-line `vf-eval` equivalent of an evaluate() call (verifiers' own CLI), secrets hidden.
    `key_variable` names the environment variable that holds the endpoint's key (-k): never the key."""
    parts = ["vf-eval", env_id, "-a", f"'{json.dumps(env_args)}'", "-m", model, "-b", base_url,
             "-k", key_variable, "-n", str(num_examples), "-r", str(rollouts_per_example),
             "-c", str(max_concurrent)]
    if "max_tokens" in sampling_args:
        parts += ["-t", str(sampling_args["max_tokens"])]
    if "temperature" in sampling_args:
        parts += ["-T", str(sampling_args["temperature"])]
    return scrub(" ".join(parts))
