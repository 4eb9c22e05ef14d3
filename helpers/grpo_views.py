"""Tables and charts for notebook 02 and its appendix: what a GRPO run logged, while it trains and afterwards,
and what the committed result files say.

- `LiveView`: a TrainerCallback that redraws one chart after every step (the reward, raw and as a rolling
  mean, each reward function, the share of completions cut at the length cap, where the step's time went)
  and shows one sampled completion with its reward. It updates in place in JupyterLab; the executed
  notebook keeps the final chart.
- `metrics_table`, `learning_summary`, `plot_metrics`, `logged_steps`: the run's log, per step.
- `compare_evals`, `plot_before_after`, `behaviour`, `changes`, `what_it_learned`: the held-out evaluation
  before and after training, and a verdict whose words follow its intervals.
- `which_reward`, `reward_note`, `fix_runs`: which reward trains (the learner's, or the exercise's placeholder as
  written), read from the run itself after training.
- `result_record`, `seeds_table`, `arms_table`, `design_table`, `hack_table`, `plot_sampled_accuracy`: the
  committed result files (benchmarks/results/), with each seed's figure and "rose in k of n seeds".
"""

from __future__ import annotations

import contextlib
import html
import io
import json
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from gsm8k_course import extract_hash_answer
from matplotlib.figure import Figure
from transformers import TrainerCallback

from helpers.grpo import hash_lines, last_number, last_number_right
from helpers.local.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "benchmarks" / "results"
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


def _figure(width: float, height: float, rows: int = 1, cols: int = 1):
    """A figure that is shown only where it is displayed or returned (closed in pyplot, so Jupyter's
    inline backend does not show it a second time at the end of the cell)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    plt.close(fig)
    return fig, axes


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


def _seeds_interval(d: dict) -> str:
    """A change's t-interval over seeds, as 'low to high' (points), or '' when fewer than 2 seeds."""
    return _interval(*d["t_95_over_seeds"]) if "t_95_over_seeds" in d else "one seed: none"


def _rose(d: dict) -> str:
    """'rose in k of n seeds' (and 'fell in m') from a change's per-seed values."""
    per_seed = d["per_seed"]
    rose, fell = sum(x > 0 for x in per_seed), sum(x < 0 for x in per_seed)
    return f"rose in {rose} of {len(per_seed)} seeds" + (f", fell in {fell}" if fell else "")


def result_record(setting: str, results: str | Path | None = None) -> dict | None:
    """The newest learnability-<setting>-<date>.json of `results` (the course's benchmarks/results by default), its
    name under "file", or None where it is not measured yet."""
    files = sorted(Path(results or RESULTS).glob(f"learnability-{setting}-2*.json"))
    return {**json.loads(files[-1].read_text()), "file": files[-1].name} if files else None


KINDS = {  # a result summary's measures (its "signs" and "confirm" blocks, or older files' diff_* keys): label
    "pass1": "pass@1 (sampled at the training temperature)", "pass_at_k": "pass@k (any of the samples right)",
    "greedy": "greedy (temperature 0)", "cut": "sampled replies cut at the token cap",
    "multi_marker": "sampled replies with 2+ '####' lines",
    "constant": "sampled replies whose last number is the run's most common",
    "format_wrong": "sampled replies with a wrong '####' answer"}
_OLDER_KEYS = {"pass1": "sampled_lenient", "greedy": "lenient", "cut": "sampled_cut", "multi_marker": "sampled_multi_marker"}


def _block(summary: dict, block: str = "signs") -> dict:
    """A summary's measures as {kind: {before, after, change: {mean, bootstrap_95, t_95_over_seeds, per_seed}}}: its
    "signs" (design problems) or "confirm" (confirmation problems) block; on the design problems, older files' diff_*
    keys fill in what they measured (and files without those blocks have only these)."""
    if block == "confirm":
        return {k: v for k, v in summary.get("confirm", {}).items() if isinstance(v, dict)}
    found = {kind: {"before": summary[f"base_{key}"], "after": summary[f"after_{key}"], "change": summary[f"diff_{key}"]}
             for kind, key in _OLDER_KEYS.items() if f"diff_{key}" in summary}
    return {**found, **summary.get("signs", {})}


def _entry(e: dict) -> dict:
    d = e["change"]
    return {"before": f"{e['before']:.0%}", "after": f"{e['after']:.0%}", "change": f"{d['mean']:+.1%}",
            "per seed": ", ".join(f"{x:+.0%}" for x in d["per_seed"]), "seeds": _rose(d),
            "95% interval over problems": _interval(*d["bootstrap_95"]), "95% interval over seeds": _seeds_interval(d)}


def seeds_table(setting: str, block: str = "signs", kinds: list[str] | None = None,
                results: str | Path | None = None) -> pd.DataFrame:
    """One row per measure of a result file (`block`: "signs", the design problems, or "confirm", the problems no
    design was chosen on): before, after (mean of the seeds), the change, each seed's change, in how many seeds it
    rose, and its two 95% intervals (over problems, seeds pooled; over seeds). "not measured yet" where the file,
    the block or a measure is missing."""
    record = result_record(setting, results)
    block_data = _block(record.get("summary", {}), block) if record else {}
    if not block_data:
        what = f"no learnability-{setting}-*.json" if record is None else f"no {block!r} block in its file"
        return pd.DataFrame({"not measured yet": {setting: what}})
    rows = {}
    for kind in kinds or list(KINDS):
        rows[KINDS[kind]] = _entry(block_data[kind]) if kind in block_data else {"before": "not measured yet"}
    table = pd.DataFrame(rows).T.fillna("")
    summary = record["summary"]
    if block == "confirm":
        samples = summary["confirm"].get("samples")
        problems = f"{summary['confirm']['problems']} problems" + (f", greedy + {samples} samples each" if samples else "")
    else:
        problems = f"{(record.get('base') or {}).get('n', '?')} problems"
    table.index.name = f"{record['file']}: {len(summary.get('seeds', []))} seeds, {summary.get('steps')} steps, {problems}"
    return table


def arms_table(arms: dict[str, str], kinds: list[str], block: str = "signs",
               results: str | Path | None = None) -> pd.DataFrame:
    """One row per arm (label: a result file's setting), one column per measure: 'before -> after (change; rose
    in k of n seeds)', and each arm's seeds; "not measured yet" where the file or a measure is missing."""
    rows = {}
    for label, setting in arms.items():
        record = result_record(setting, results)
        if record is None or not record.get("summary"):
            rows[label] = {"seeds": "not measured yet"}
            continue
        data = _block(record["summary"], block)
        row = {"file": record["file"], "seeds": len(record["summary"]["seeds"])}
        for kind in kinds:
            e = data.get(kind)
            row[KINDS[kind]] = "not measured" if e is None else (
                f"{e['before']:.0%} -> {e['after']:.0%} ({e['change']['mean']:+.1%}; {_rose(e['change'])})")
        rows[label] = row
    return pd.DataFrame(rows).T.fillna("")


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
                       "gain per seed": ", ".join(f"{g:+.1%}" for g in gain["per_seed"]), "gain in seeds": _rose(gain),
                       "gain, interval over seeds": _seeds_interval(gain),
                       "greedy before": s["base_lenient"], "greedy after": s["after_lenient"],
                       "greedy gain, 95% interval": _interval(*greedy["bootstrap_95"]),
                       "'####' line before": s["base_sampled_format"], "'####' line after": s["after_sampled_format"],
                       "training minutes": s["train_minutes"]}
    return pd.DataFrame(rows).T


def hack_table(records: dict[str, dict]) -> pd.DataFrame:
    """One row per reward, from bench_learnability's result files of runs with a format term: held-out pass@1
    (lenient) and the signs in the same sampled replies (2+ lines holding '####', cut at the token cap), each
    before -> after with the change's paired 95% bootstrap interval over problems, and each seed's (seeds can
    find different ways), with the '####' format and the greedy replies' 2+ '####' lines beside them; the
    constant answer and wrong '####' answers where the file measured them (files since 2026-12-06)."""
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
                       "2+ '####' lines, greedy": change(s, "multi_marker"),
                       **{KINDS[kind]: (f"{e['before']:.0%} -> {e['after']:.0%} (per seed after: "
                                        f"{', '.join(f'{x:.0%}' for x in e['after_per_seed'])})"
                                        if (e := s.get("signs", {}).get(kind)) else "not measured in this file")
                          for kind in ("constant", "format_wrong")}}
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


# behaviour() columns: the right number (last in the reply, or after '####'), the format, and the signs of a reward
# earned another way than by answering right (issue 40): replies cut at the cap (a reward that pays for the gold
# number anywhere pays for long lists of numbers), 2+ '####' lines (a format term earned by repeating it), one
# constant answer ('#### 9' to every problem collects a format term whatever the answer) and wrong '####' answers
RIGHT, RIGHT_HASH = "right number (last in the reply)", "right number after '####'"
FORMAT, CUT, MULTI = "'#### N' format", "cut at max_tokens", "2+ '####' lines"
CONSTANT, WRONG_HASH = "last number = the run's most common", "'####' answer, wrong"
SHARES = (RIGHT, RIGHT_HASH, FORMAT, CUT, MULTI, CONSTANT, WRONG_HASH)
SIGNS = {CUT: "completions cut at max_tokens", MULTI: "completions with 2+ '####' lines",
         CONSTANT: "completions whose last number is the run's most common one",
         WRONG_HASH: "completions with a wrong '####' answer"}


def _wrong_hash(text: str, gold: str) -> float:
    from gsm8k_course import canonical_number

    said = extract_hash_answer(text)
    return float(bool(said) and canonical_number(said) != canonical_number(str(gold)))


def _indicators(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One row per rollout, 0/1 in each of the columns behaviour() averages (NaN where the run lacks it)."""
    nan = pd.Series(float("nan"), index=rollouts.index)
    numbers = rollouts["completion"].map(last_number)
    modal = Counter(n for n in numbers if n).most_common(1)
    return pd.DataFrame({
        "example": rollouts.get("example", pd.Series(range(len(rollouts)), index=rollouts.index)),
        RIGHT: pd.Series([last_number_right(text, str(gold)) for text, gold in
                          zip(rollouts["completion"], rollouts["answer"])], index=rollouts.index, dtype=float),
        RIGHT_HASH: rollouts.get("correct_answer", nan),
        FORMAT: rollouts["completion"].map(lambda text: float(bool(extract_hash_answer(text)))),
        CUT: (rollouts["finish_reason"] == "length").astype(float) if "finish_reason" in rollouts else nan,
        MULTI: (rollouts["completion"].map(hash_lines) >= 2).astype(float),
        CONSTANT: (numbers == modal[0][0]).astype(float) if modal else pd.Series(0.0, index=rollouts.index),
        WRONG_HASH: pd.Series([_wrong_hash(text, gold) for text, gold in zip(rollouts["completion"], rollouts["answer"])],
                              index=rollouts.index, dtype=float),
    })


def behaviour(runs: dict) -> pd.DataFrame:
    """One row per labelled EvalRun: what its completions did, beside what they earned. The right number
    (the reply's last, whatever the format; and after '####', the environment's correct_answer), the '####'
    format, the signs of a reward earned another way (completions cut at max_tokens, 2+ '####' lines, the run's
    most common last number, wrong '####' answers), and the length, numbers and '####' lines per completion."""
    from gsm8k_course import NUMBER

    rows = {}
    for label, run in runs.items():
        if run is None:
            continue
        r = run.rollouts
        shares = _indicators(r).drop(columns="example").mean()
        rows[label] = {
            "rollouts": len(r), **{name: shares[name] for name in (RIGHT, RIGHT_HASH, FORMAT)},
            **{name: shares[name] for name in SIGNS},
            "completion tokens": r["completion_tokens"].mean() if "completion_tokens" in r else float("nan"),
            "numbers per completion": r["completion"].map(lambda text: len(NUMBER.findall(str(text)))).mean(),
            "'####' lines per completion": r["completion"].map(hash_lines).mean(),
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


# ----------------------------------------------------------------------------- which reward trains


PLACEHOLDER = "nb02-placeholder"  # bench_learnability's runs of the reward exercise's placeholder (gold_anywhere)
PLACEHOLDER_WORDS = (
    "The placeholder pays 1.0 whenever the gold number appears anywhere in the reply (18 is in 118, and in "
    "'18 - 5 = 13'), so a reply that writes more numbers earns it more often, right or not: it pays for writing "
    "numbers, not for ending on the right one.")


def _agrees_with_placeholder(func) -> bool:
    """`func` scores every reply of the reward exercise's check as the committed placeholder does."""
    from gsm8k_course import HashParser

    from helpers.checks.notebook_02 import _last_number_replies
    from helpers.checks.real_inputs import call_reward
    from helpers.grpo import gold_anywhere

    try:
        return all(call_reward(func, completion=c, answer=gold, parser=HashParser()) == gold_anywhere(c, gold)
                   for c, gold, _ in _last_number_replies())
    except Exception:  # noqa: BLE001 - a function that raises is not the placeholder
        return False


def _passes(exercise: str, func) -> bool:
    """The exercise's check, run quietly: True when it says correct."""
    from helpers.checks import check

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        check(exercise, func)
    return f"correct — {exercise}" in said.getvalue()


def which_reward(func, results: str | Path | None = None) -> bool:
    """Say which reward the training below uses, and return True when it is the learner's finished
    `last_number_right` (the reward exercise's check passes; the check runs here quietly). Otherwise the function
    trains as written: the committed placeholder (or another answer that does not pass yet), and what the
    placeholder taught in its committed runs is shown, from its result file."""
    from IPython.display import display

    if _passes("02-last-number", func):
        print("The training below uses your last_number_right (its check passed): 1.0 for the right last number, "
              "whatever the format.")
        return True
    what = ("the exercise's placeholder, as committed" if _agrees_with_placeholder(func)
            else "your function as written (it does not pass its check yet)")
    print(f"The training below uses {what}: last_number_right is not finished. {PLACEHOLDER_WORDS} Training on it "
          "is allowed, and section 11 explains what it taught. To train on the right answer instead, finish the "
          "exercise in section 3 and run the notebook again from there: the run starts over, since its reward "
          "differs. What the placeholder taught in its committed runs (design set, each seed's change beside the "
          "mean):")
    display(seeds_table(PLACEHOLDER, kinds=["pass1", "greedy", "cut", "constant"], results=results))
    return False


def reward_note(output_dir: str | Path, results: str | Path | None = None) -> bool:
    """After training: which reward the run in `output_dir` trained on, read from the run itself (recorded when it
    started; a run resumes only with the same reward code), never from what the cells hold now; for the
    placeholder, what it pays for and what its committed runs did. Returns whether it was the learner's."""
    from IPython.display import display

    from helpers.local.run_folder import trained_reward

    yours = trained_reward(output_dir)["reward_is_yours"]
    if yours:
        print("This run trained on your last_number_right: the rows above are what a reward for the right last "
              "number taught this seed, beside what nothing paid for.")
        return True
    if yours is None:
        print("This run's folder does not record which reward it trained on (it was started by other code).")
        return False
    print("This run trained on the reward exercise's function as written, not on a reward for the right answer. "
          f"{PLACEHOLDER_WORDS} In the rows above, look at the right last number, 'cut at max_tokens' and "
          "'numbers per completion' before and after: a run paid for numbers anywhere is free to fill every reply up "
          "to the cap with them. The committed runs of the placeholder, each seed's change beside the mean:")
    display(seeds_table(PLACEHOLDER, kinds=["pass1", "greedy", "cut", "constant"], results=results))
    return False


def fix_runs(func, hack_steps: int) -> bool:
    """Section 12: whether its second run trains, said before it does. It trains only on the learner's finished
    `right_answer_line` (its check passes): as committed, the exercise's placeholder pays for exactly one '#### N'
    line with any number, the '+ one #### line' arm of the committed runs, so the run would repeat that arm
    instead of showing the fix."""
    if not hack_steps:
        print("Section 12's run is off (hack_steps = 0); the committed runs below show what it would measure.")
        return False
    if _passes("02-close-the-hack", func):
        print(f"The run below trains last_number_right + 0.5 x your right_answer_line (its check passed) for "
              f"{hack_steps} steps from the starting weights.")
        return True
    print("The run below is skipped: right_answer_line is not finished. As committed it pays 0.5 for exactly one "
          "'#### N' line, right or wrong: the '+ one #### line' arm of the table below, whose runs it would repeat "
          "(one of its seeds wrote '#### 9' in all three example replies its file keeps). Finish the exercise and "
          "run this cell again to train with the fix.")
    return False


HACK_RISE = 0.2  # a rise of 20 points or more in a sign is named even when its interval includes 0 (as such)


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


def _beyond_chance(row: pd.Series) -> str:
    """'rose', 'fell' (the interval excludes 0 on that side) or '' (it includes 0, or was not measured)."""
    return "rose" if row["low"] > 0 else "fell" if row["high"] < 0 else ""


def what_it_learned(before, after) -> str:
    """In words, from two EvalRuns of the same held-out examples: what the reward made the model do, each change
    with its interval, and the verdict (`verdict`)."""
    return verdict(changes(before, after))


def verdict(table: pd.DataFrame) -> str:
    """The verdict of a `changes` table, whose words agree with its intervals in every branch: a change is said to
    rise or fall only where its 95% interval excludes 0; a sign that rose by HACK_RISE or more with an interval
    that includes 0 is named as not significant; nothing is called gaming, since a table of replies does not say
    whether the reward paid more for them than for an honest answer (notebook 02's section 12 says how to tell)."""
    n = int(table["examples"].max())
    lines = [f"On {n} held-out examples (a change's interval: paired bootstrap over examples):",
             f"- the right number (the reply's last, whatever the format): {_said(table.loc[RIGHT])}",
             f"- the right number after '####': {_said(table.loc[RIGHT_HASH])}",
             f"- the '#### N' format: {_said(table.loc[FORMAT])}"]
    signs = {what: table.loc[column] for column, what in SIGNS.items() if column in table.index}
    lines += [f"- {what}: {_said(row)}" for what, row in signs.items()]
    right = _beyond_chance(table.loc[RIGHT])
    lines.append({"rose": "It answers more of these problems right, beyond chance.",
                  "fell": "It answers fewer of these problems right, beyond chance."}.get(
        right, "Whether it answers more of these problems right is not significant on these examples "
               "(the interval includes no change)."))
    risen = [what for what, row in signs.items() if _beyond_chance(row) == "rose"]
    unsure = [what for what, row in signs.items() if not _beyond_chance(row) and row["change"] >= HACK_RISE]
    if risen:
        named = " and ".join(risen)
        lines.append(f"Beyond chance, these rose too: {named}. " + (
            "The right answers rose with them: read the replies (the side-by-side table) before calling it all "
            "learning." if right == "rose" else
            "The right answers did not rise with them: what the run learned to write is not a better answer; read "
            "the replies, and which reward trained, to see whether it earned its reward another way."))
    if unsure:
        lines.append(f"Rose by {HACK_RISE:.0%} or more, but the interval includes no change (not significant on "
                     f"{n} examples): {' and '.join(unsure)}. More examples (or seeds) would tell.")
    if not risen and not unsure:
        lines.append("None of the signs of a reward earned another way (cut at max_tokens, 2+ '####' lines, one "
                     "constant answer, wrong '####' answers) rose beyond chance.")
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
