"""A GRPO run's log, one row per step: TRL's metrics (trainer.state.log_history or the wandb run) with the step
timer's, under short column names (`metrics_table`); which steps wandb logged (`logged_steps`); how a column
moved from the first steps to the last (`learning_summary`); and its chart (`plot_metrics`), redrawn in place
after every step while it trains (`LiveView`, a TrainerCallback that also shows the step's best completion):
the reward (each step, and a rolling mean), each reward function, the share of completions cut at the length
cap, and where each step's time went."""

from __future__ import annotations

import html

import pandas as pd
from matplotlib.figure import Figure
from transformers import TrainerCallback

from helpers.charts import figure as _figure

ROLLING = 5  # steps in the rolling mean of the reward charts
TIME_PARTS = {"generation_s": "generation", "sync_s": "weight sync", "scoring_s": "scoring", "update_s": "update"}
METRIC_COLUMNS = {  # log key (TRL's, verifiers', StepTimer's) -> column
    "reward": "reward", "reward_std": "reward_std", "loss": "loss", "kl": "kl", "grad_norm": "grad_norm",
    "completions/mean_length": "completion_length", "completions/clipped_ratio": "clipped_ratio",
    "frac_reward_zero_std": "frac_zero_std", "rewards/errors": "reward_errors",
    "timing/generation_s": "generation_s", "timing/sync_s": "sync_s", "timing/scoring_s": "scoring_s",
    "timing/update_s": "update_s", "timing/step_s": "step_s", "memory/peak_rss_gb": "peak_rss_gb",
    "memory/peak_gpu_gb": "peak_gpu_gb", "hack/multi_hash": "multi_hash_share",
}


def metrics_table(log_history: list[dict]) -> pd.DataFrame:
    """One row per logged training step: reward, each reward function, loss, KL, length, timings.

    A log history from TRL's GRPOTrainer (trainer.state.log_history) or verifiers' (trainer_state.json):
    TRL logs each reward function as `rewards/<name>/mean` (and `/std`), verifiers 0.1.5 as
    `rewards/<name>` (trainers/grpo_trainer.py, _log_reward_metrics_primary); both become column <name>."""
    rows = []
    for entry in log_history:
        if "loss" not in entry or "step" not in entry:
            continue  # the end-of-training summary has train_loss, not loss; evaluations have eval_*
        row = {"step": int(entry["step"])}
        for key, column in METRIC_COLUMNS.items():
            if key in entry:
                row[column] = entry[key]
        for key, value in entry.items():
            parts = key.split("/")
            if parts[0] == "rewards" and key not in METRIC_COLUMNS and parts[2:] in ([], ["mean"]):
                row[parts[1]] = value
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.drop_duplicates("step", keep="last").set_index("step") if len(frame) else frame


def logged_steps(history: pd.DataFrame) -> list[int]:
    """The training steps a wandb history (helpers.wandb_history) holds a reward for."""
    if "train/reward" not in history or "train/global_step" not in history:
        return []  # e.g. no wandb run of this kernel (an empty frame)
    return sorted(int(step) for step in history.dropna(subset=["train/reward"])["train/global_step"].unique())


def learning_summary(metrics: pd.DataFrame, n: int = 5, column: str = "reward") -> dict:
    """Mean of `column` over the first n and the last n logged steps, and the difference (NaN, with
    steps 0, when the run logged no such column: e.g. a reward function the trainer did not log)."""
    values = metrics[column].dropna() if column in metrics else pd.Series(dtype=float)
    if values.empty:
        return {"column": column, "steps": 0, "n": 0, "first": float("nan"), "last": float("nan"), "gain": float("nan")}
    n = min(n, len(values) // 2) or 1
    first, last = float(values.iloc[:n].mean()), float(values.iloc[-n:].mean())
    return {"column": column, "steps": len(values), "n": n, "first": first, "last": last, "gain": last - first}




def _draw_rewards(ax, metrics: pd.DataFrame, components: list[str]) -> None:
    """Each step's reward (a batch of 4 prompts: noisy) as faint points, and its rolling mean over ROLLING steps
    as a line; each reward function's rolling mean beside it."""
    if "reward" in metrics:
        raw = metrics["reward"].dropna()
        ax.plot(raw.index, raw.values, marker="o", ms=3, lw=0.5, alpha=0.4, color="C0", label="reward, each step")
    for i, column in enumerate(["reward", *components]):
        if column in metrics:
            series = metrics[column].dropna().rolling(ROLLING, min_periods=1).mean()
            ax.plot(series.index, series.values, lw=2 if column == "reward" else 1, color=f"C{i}",
                    label=f"reward, mean of the last {ROLLING} steps" if column == "reward" else f"{column} (mean)")
    ax.set_title("reward per step (mean of the batch)", fontsize=10)
    ax.set_xlabel("step")
    ax.legend(fontsize=7)


def _draw_cut(ax, metrics: pd.DataFrame) -> None:
    series = metrics["clipped_ratio"].dropna() if "clipped_ratio" in metrics else pd.Series(dtype=float)
    ax.set_title("share of completions cut at max_completion_length", fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylim(-0.05, 1.05)
    if series.empty:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", fontsize=9, transform=ax.transAxes)
        return
    ax.plot(series.index, series.values, marker="o", ms=3, lw=0.5, alpha=0.4, color="C3")
    ax.plot(series.index, series.rolling(ROLLING, min_periods=1).mean().values, lw=2, color="C3")


def _draw_time_split(ax, metrics: pd.DataFrame) -> None:
    bottom = None
    for column, label in TIME_PARTS.items():
        if column in metrics:
            values = metrics[column].fillna(0.0)
            ax.bar(metrics.index, values, bottom=bottom, label=label)
            bottom = values if bottom is None else bottom + values
    ax.set_title("where each step's time went (s)", fontsize=10)
    ax.set_xlabel("step")
    ax.legend(fontsize=8)


def plot_metrics(metrics: pd.DataFrame, components: list[str]) -> Figure:
    """Reward and each reward function, time split, loss, gradient norm, share of groups with equal
    rewards, KL, completion length and share of completions cut at max length, per step."""
    fig, axes = _figure(16.0, 6.0, 2, 4)
    _draw_rewards(axes[0, 0], metrics, components)
    _draw_time_split(axes[0, 1], metrics)
    for ax, (column, title) in zip(list(axes.flat)[2:], [
            ("loss", "loss"), ("grad_norm", "gradient norm"),
            ("frac_zero_std", "share of groups with equal rewards"), ("kl", "KL to the start model"),
            ("completion_length", "completion length (tokens)"), ("clipped_ratio", "share cut at max length")]):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        series = metrics[column].dropna() if column in metrics else pd.Series(dtype=float)
        if series.empty:
            why = "beta = 0: no reference model, KL not computed" if column == "kl" else "not logged"
            ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=9, transform=ax.transAxes)
            continue
        ax.plot(series.index, series.values, marker="o", ms=3, lw=1)
    fig.tight_layout()
    return fig


class LiveView(TrainerCallback):
    """After every logged step: the reward chart (each step, and its rolling mean), the share of completions cut at
    the length cap and the time split, redrawn in place, and the step's best completion with its rewards.
    `GRPOTrainer(..., callbacks=[LiveView(rewards)])`."""

    def __init__(self, rewards, components: list[str] | None = None):
        self.rewards = rewards
        self.components = components or list(rewards.names)
        self._chart = self._sample = None

    def on_train_begin(self, args, state, control, **kwargs):
        from IPython.display import HTML, display

        self._chart = display(HTML("<i>the chart appears after the first step</i>"), display_id=True)
        self._sample = display(HTML(""), display_id=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        from IPython.display import HTML

        if self._chart is None or "reward" not in (logs or {}):
            return
        metrics = metrics_table(state.log_history)
        fig, ((left, middle, right),) = _figure(15, 3.2, 1, 3)
        _draw_rewards(left, metrics, self.components)
        _draw_cut(middle, metrics)
        _draw_time_split(right, metrics)
        fig.tight_layout()
        self._chart.update(fig)
        self._sample.update(HTML(self._sample_html(state.global_step)))

    def _sample_html(self, step: int) -> str:
        batch = self.rewards.last_batch
        if not batch:
            return ""
        scores = batch["scores"]
        best = max(range(len(batch["completions"])), key=lambda i: scores["reward"][i])
        parts = ", ".join(f"{name} {scores[name][best]:.2f}" for name in self.components)
        text = batch["completions"][best]
        text = text if len(text) <= 600 else text[:600] + " …"
        return (f"<b>step {step}</b>: the best of {len(batch['completions'])} completions — reward "
                f"{scores['reward'][best]:.2f} ({parts}; gold answer {html.escape(batch['answers'][best])})"
                f"<pre style='white-space:pre-wrap;max-height:12em;overflow:auto'>{html.escape(text)}</pre>")
