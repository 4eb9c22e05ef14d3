"""Tables and charts for notebook 02: what a GRPO run logged, while it trains and afterwards.

- `LiveView`: a TrainerCallback that redraws one chart after every step (reward and each reward
  function, where the step's time went) and shows one sampled completion with its reward. It
  updates in place in JupyterLab; the executed notebook keeps the final chart.
- `metrics_table`, `learning_summary`, `plot_metrics`, `logged_steps`: the run's log, per step.
- `compare_evals`, `plot_before_after`: the held-out evaluation before and after training.
"""

from __future__ import annotations

import html

import matplotlib.pyplot as plt
import pandas as pd
from gsm8k_course import extract_hash_answer
from matplotlib.figure import Figure
from transformers import TrainerCallback

from helpers.grpo import hash_lines, last_number_right

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


def _figure(width: float, height: float, rows: int = 1, cols: int = 1):
    """A figure that is shown only where it is displayed or returned (closed in pyplot, so Jupyter's
    inline backend does not show it a second time at the end of the cell)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    plt.close(fig)
    return fig, axes


def _draw_rewards(ax, metrics: pd.DataFrame, components: list[str]) -> None:
    for column in ["reward", *components]:
        if column in metrics:
            series = metrics[column].dropna()
            ax.plot(series.index, series.values, marker="o", ms=3, lw=2 if column == "reward" else 1,
                    label="reward (weighted sum)" if column == "reward" else column)
    ax.set_title("reward per step (mean of the batch)", fontsize=10)
    ax.set_xlabel("step")
    ax.legend(fontsize=8)


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
    """After every logged step: the reward chart and time split redrawn in place, and the step's best
    completion with its rewards. `GRPOTrainer(..., callbacks=[LiveView(rewards)])`."""

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
        fig, ((left, right),) = _figure(11, 3.2, 1, 2)
        _draw_rewards(left, metrics, self.components)
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


def compare_evals(runs: dict) -> pd.DataFrame:
    """One row per labelled EvalRun (None is skipped): model, endpoint, examples, reward, each metric."""
    rows = []
    for label, run in runs.items():
        if run is None:
            continue
        summary = run.summary
        row = {"run": label, "model": run.info.get("model"), "endpoint": run.info.get("endpoint"),
               "examples": run.info.get("params", {}).get("num_examples"), "rollouts": len(run.rollouts)}
        for key, value in summary.items():
            if isinstance(value, (int, float)):
                row[key] = value
        if "accuracy" in summary:
            low, high = summary["accuracy"]["ci95"]
            row["accuracy_ci95"] = f"[{low:.2f}, {high:.2f}]"
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def plot_before_after(table: pd.DataFrame, components: list[str]) -> Figure:
    columns = [c for c in ("reward", *components) if c in table.columns]
    fig, ((ax,),) = _figure(1.8 + 1.6 * len(columns), 3.2)
    table[columns].T.plot.bar(ax=ax, rot=0)
    ax.set_ylabel("mean over rollouts")
    ax.set_title("before vs after training (same held-out examples)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- the committed designs


def _interval(low: float, high: float, digits: int = 1) -> str:
    """The interval as 'low to high', with ', not significant' where it includes 0."""
    return f"{low:+.{digits}%} to {high:+.{digits}%}" + ("" if low > 0 or high < 0 else ", not significant")


def design_table(summaries: dict[str, dict]) -> pd.DataFrame:
    """One row per training design, from bench_learnability's summaries (a result file's "summary", or its
    "summary_expert_iteration"): held-out pass@1 sampled at the training temperature (lenient) before and
    after, the gain with its paired 95% bootstrap interval and per seed, greedy lenient before and after,
    the '####' line in the sampled replies, and the minutes of training."""
    rows = {}
    for label, s in summaries.items():
        gain, greedy = s["diff_sampled_lenient"], s["diff_lenient"]
        rows[label] = {"seeds": len(s["seeds"]), "pass@1 before": s["base_sampled_lenient"],
                       "pass@1 after": s["after_sampled_lenient"], "gain": gain["mean"],
                       "gain, 95% interval": _interval(*gain["bootstrap_95"]),
                       "gain per seed": ", ".join(f"{g:+.1%}" for g in gain["per_seed"]),
                       "greedy before": s["base_lenient"], "greedy after": s["after_lenient"],
                       "greedy gain, 95% interval": _interval(*greedy["bootstrap_95"]),
                       "'####' line before": s["base_sampled_format"], "'####' line after": s["after_sampled_format"],
                       "training minutes": s["train_minutes"]}
    return pd.DataFrame(rows).T


def hack_table(records: dict[str, dict]) -> pd.DataFrame:
    """One row per reward, from bench_learnability's result files of runs with a format term: held-out pass@1
    (lenient) and the hack's signs in the same sampled replies (2+ lines holding '####', cut at the token cap),
    each before -> after with the change's paired 95% bootstrap interval over problems, and each seed's (seeds
    can learn different hacks), with the '####' format and the greedy replies' 2+ '####' lines beside them."""
    def change(s: dict, key: str) -> str:
        d = s[f"diff_{key}"]
        return f"{s[f'base_{key}']:.0%} -> {s[f'after_{key}']:.0%} ({d['mean']:+.1%}; {_interval(*d['bootstrap_95'])})"

    rows = {}
    for label, record in records.items():
        s = record["summary"]
        runs = [r for r in record["runs"] if r["seed"] in s["seeds"] and r["steps"] == s["steps"]]
        rows[label] = {"seeds": len(s["seeds"]), "pass@1": change(s, "sampled_lenient"),
                       "pass@1 gain per seed": ", ".join(f"{g:+.1%}" for g in s["diff_sampled_lenient"]["per_seed"]),
                       "'####' format": f"{s['base_sampled_format']:.0%} -> {s['after_sampled_format']:.0%}",
                       "2+ '####' lines": change(s, "sampled_multi_marker"), "cut at the cap": change(s, "sampled_cut"),
                       "per seed after: 2+ lines / cut": ", ".join(
                           f"{r['after']['sampled_multi_marker']:.0%} / {r['after']['sampled_cut']:.0%}" for r in runs),
                       "2+ '####' lines, greedy": change(s, "multi_marker")}
    return pd.DataFrame(rows).T


def plot_sampled_accuracy(grpo: dict, expert_iteration: dict, reward: str = "last_number_right") -> Figure:
    """GRPO's runs of one bench_learnability result file beside the expert-iteration runs of another (or the
    same): the share of each training batch's sampled completions that were right (GRPO: each step's mean of
    `reward`; expert iteration: each round's share kept, right and finished) against the completions sampled
    so far; and the held-out pass@1 at the training temperature before (a line) and after (a point a seed)."""
    fig, ((batches, held_out),) = _figure(11.0, 3.4, 1, 2)
    per_step = grpo["num_generations"] * grpo["prompts_per_step"]
    for run in grpo.get("runs", []):
        steps = run["training"]["per_step"]
        batches.plot([per_step * (i + 1) for i in range(len(steps))],
                     [e.get(f"rewards/{reward}/mean") for e in steps], lw=1, alpha=0.8, label=f"GRPO, seed {run['seed']}")
    for run in expert_iteration.get("expert_iteration_runs", []):
        done = [0]
        for point in run["curve"]:
            done.append(done[-1] + point["sampled"])
        batches.plot(done[1:], [p["kept"] / p["sampled"] for p in run["curve"]], marker="o", lw=2,
                     label=f"expert iteration, seed {run['seed']}")
    batches.set(xlabel="completions sampled so far", ylabel="share right", ylim=(0, 1),
                title="training batches (not held-out problems)")
    batches.legend(fontsize=7)
    for x, (record, key, method) in enumerate(((grpo, "runs", "GRPO"),
                                               (expert_iteration, "expert_iteration_runs", "expert iteration"))):
        afters = [run["after"]["sampled_lenient"] for run in record.get(key, [])]
        held_out.scatter([x] * len(afters), afters, zorder=3, label=f"{method}: after, a point a seed")
        held_out.hlines(record["base"]["sampled_lenient"], x - 0.3, x + 0.3, color="grey", ls="--",
                        label="before training" if x == 0 else None)
    held_out.set(xticks=[0, 1], xticklabels=["GRPO", "expert iteration"], xlim=(-0.5, 1.5), ylim=(0, 1),
                 ylabel="pass@1", title=f"held-out pass@1 at temperature {grpo['temperature']}")
    held_out.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- what the run learned


# behaviour() columns: the right number (anywhere last, or after '####'), the format, and the signs of a gamed format
RIGHT, RIGHT_HASH = "right number (last in the reply)", "right number after '####'"
FORMAT, CUT, MULTI = "'#### N' format", "cut at max_tokens", "2+ '####' lines"
SHARES = (RIGHT, RIGHT_HASH, FORMAT, CUT, MULTI)


def _indicators(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One row per rollout, 0/1 in each of the columns behaviour() averages (NaN where the run lacks it)."""
    nan = pd.Series(float("nan"), index=rollouts.index)
    return pd.DataFrame({
        "example": rollouts.get("example", pd.Series(range(len(rollouts)), index=rollouts.index)),
        RIGHT: pd.Series([last_number_right(text, str(gold)) for text, gold in
                          zip(rollouts["completion"], rollouts["answer"])], index=rollouts.index, dtype=float),
        RIGHT_HASH: rollouts.get("correct_answer", nan),
        FORMAT: rollouts["completion"].map(lambda text: float(bool(extract_hash_answer(text)))),
        CUT: (rollouts["finish_reason"] == "length").astype(float) if "finish_reason" in rollouts else nan,
        MULTI: (rollouts["completion"].map(hash_lines) >= 2).astype(float),
    })


def behaviour(runs: dict) -> pd.DataFrame:
    """One row per labelled EvalRun: what its completions did, beside what they earned. The right number
    (the reply's last, whatever the format; and after '####', the environment's correct_answer), the '####'
    format, and the signs of a gamed format: completions cut at max_tokens, their length, the '####' lines
    per completion and the share with two or more."""
    rows = {}
    for label, run in runs.items():
        if run is None:
            continue
        r = run.rollouts
        shares = _indicators(r).drop(columns="example").mean()
        rows[label] = {
            "rollouts": len(r), **{name: shares[name] for name in (RIGHT, RIGHT_HASH, FORMAT, CUT)},
            "completion tokens": r["completion_tokens"].mean() if "completion_tokens" in r else float("nan"),
            "'####' lines per completion": r["completion"].map(hash_lines).mean(), MULTI: shares[MULTI],
        }
    return pd.DataFrame(rows).T


def side_by_side(before, after, components: list[str], n: int = 3, width: int = 240) -> pd.DataFrame:
    """The first `n` held-out examples: the first completion before and after training, shortened,
    with each one's reward and reward components."""
    def short(text: str) -> str:
        text = " ⏎ ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())
        return text if len(text) <= width else text[: width - 1] + "…"

    def first_rollouts(run) -> pd.DataFrame:
        return run.rollouts[run.rollouts["rollout"] == 0].set_index("example")

    b, a = first_rollouts(before), first_rollouts(after)
    rows = []
    for example in list(b.index)[:n]:
        row = {"gold": b.loc[example, "answer"]}
        for label, run in (("before", b), ("after", a)):
            row[f"{label}: completion"] = short(run.loc[example, "completion"])
            row[f"{label}: reward"] = run.loc[example, "reward"]
            for name in components:
                row[f"{label}: {name}"] = run.loc[example, name]
        rows.append(row)
    return pd.DataFrame(rows)


HACK_RISE = 0.2  # a rise of 20 points in cut-off or repeated-'####' completions names the hack


def changes(before, after) -> pd.DataFrame:
    """Each behaviour() share before and after, on the examples both EvalRuns scored, with the change's
    paired 95% bootstrap interval over examples (an example's share: the mean over its rollouts)."""
    from helpers.evaluation import paired_bootstrap

    b, a = (_indicators(run.rollouts).groupby("example").mean() for run in (before, after))
    common = b.index.intersection(a.index)
    rows = {}
    for column in SHARES:
        diffs = (a.loc[common, column] - b.loc[common, column]).dropna()
        low, high = paired_bootstrap(list(diffs))  # NaN, like the mean, when the runs lack the column
        rows[column] = {"before": b.loc[common, column].mean(), "after": a.loc[common, column].mean(),
                        "change": diffs.mean(), "low": low, "high": high, "examples": len(diffs)}
    return pd.DataFrame(rows).T


def _said(row: pd.Series) -> str:
    return (f"{row['before']:.0%} -> {row['after']:.0%} ({row['change']:+.0%}, 95% interval "
            f"{_interval(row['low'], row['high'], digits=0)})")


def what_it_learned(before, after) -> str:
    """In words, from two EvalRuns of the same held-out examples: what the reward made the model do, each
    change with its interval, and whether the format was earned by gaming it (completions cut at max_tokens,
    or lists of '####' lines): said only when such a sign rose by HACK_RISE or more and its interval is
    above 0."""
    table = changes(before, after)
    n = int(table["examples"].max())
    lines = [f"On {n} held-out examples (a change's interval: paired bootstrap over examples):",
             f"- the right number (the reply's last, whatever the format): {_said(table.loc[RIGHT])}",
             f"- the right number after '####': {_said(table.loc[RIGHT_HASH])}",
             f"- the '#### N' format: {_said(table.loc[FORMAT])}"]
    signs = {"completions cut at max_tokens": table.loc[CUT], "completions with 2+ '####' lines": table.loc[MULTI]}
    lines += [f"- {what}: {_said(row)}" for what, row in signs.items()]
    right = table.loc[RIGHT]
    if right["low"] > 0:
        lines.append("It answers more of these problems right, beyond chance.")
    elif right["high"] < 0:
        lines.append("It answers fewer of these problems right, beyond chance.")
    else:
        lines.append("Whether it answers more of these problems right is not significant on these examples.")
    risen = [what for what, row in signs.items() if row["change"] >= HACK_RISE]
    sure = [what for what in risen if signs[what]["low"] > 0]
    if table.loc[FORMAT, "change"] > 0 and sure:
        lines.append(f"REWARD HACKING: {' and '.join(sure)} rose by {HACK_RISE:.0%} or more, beyond chance. The "
                     "model earns the format reward " + ("while answering better, " if right["low"] > 0 else
                                                         "without answering better: ") +
                     "it writes '#### N' lines, as many as fit, where one answer would do.")
    elif risen:
        lines.append(f"Possibly a gamed format: {' and '.join(risen)} rose by {HACK_RISE:.0%} or more, but on "
                     f"{n} examples the interval includes no change: not significant. More examples (or seeds) "
                     "would tell.")
    else:
        lines.append(f"No sign of a gamed format: neither the share of completions cut at max_tokens nor of "
                     f"completions with 2+ '####' lines rose by {HACK_RISE:.0%} or more.")
    return "\n".join(lines)


def run_figures(metrics: pd.DataFrame, reward_names: list[str], before, after, held_out: pd.DataFrame,
                behaviour_table: pd.DataFrame) -> dict:
    """What notebook 02's summary.json keeps of a run's log and its held-out evaluations: training-batch
    reward (first and last steps, and each reward function's), where a step's time went, peak memory, reward
    errors, the held-out figures before and after with their intervals, and the verdict."""
    learning = learning_summary(metrics)
    per_function = {name: learning_summary(metrics, column=name) for name in reward_names}
    time_split = {"sec_per_step": "step_s", **{f"{column}_sec_per_step": column for column in TIME_PARTS}}
    return {
        "steps": int(metrics.index.max()), "reward_first": learning["first"], "reward_last": learning["last"],
        "reward_gain": learning["gain"],
        **{name: metrics[column].mean() for name, column in time_split.items() if column in metrics},
        **{name: metrics[name].max() for name in ("peak_rss_gb", "peak_gpu_gb") if name in metrics},
        "reward_errors": int(metrics.get("reward_errors", pd.Series(dtype=float)).sum()),
        "before_reward": before.summary["reward"], "after_reward": after.summary["reward"],
        "before_accuracy": before.summary["accuracy"]["mean"], "after_accuracy": after.summary["accuracy"]["mean"],
        "held_out": {kind: held_out.loc[kind].round(4).to_dict(orient="index") for kind in ("sampled", "greedy")},
        **{f"{name}_{end}": summary[end] for name, summary in per_function.items() for end in ("first", "last")},
        "per_step": metrics.reset_index().round(4).to_dict(orient="records"),
        "behaviour": behaviour_table.round(4).to_dict(orient="index"), "verdict": what_it_learned(before, after),
    }
