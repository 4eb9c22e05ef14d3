"""What a GRPO run learned, on the held-out problems before and after training: the runs side by side
(`compare_evals`, `plot_before_after`, `side_by_side`), the shares of right answers, format and the signs of a
reward earned another way (`behaviour`), each change with its interval (`changes`), a verdict whose words
follow those intervals (`what_it_learned`), and the figures the notebook's last cell states (`run_figures`)."""

from __future__ import annotations

from collections import Counter

import pandas as pd
from gsm8k_course import extract_hash_answer
from matplotlib.figure import Figure
from word_arithmetic import hash_lines, last_number, last_number_right

from helpers.charts import figure as _figure
from helpers.grpo.training_log import TIME_PARTS, learning_summary
from helpers.results import interval


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


# ----------------------------------------------------------------------------- what the run learned


# behaviour() columns: the right number (last in the reply, or after '####'), the format, and the signs of a reward
# earned another way than by answering right: replies cut at the cap (a reward that pays for the gold
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
        WRONG_HASH: pd.Series([_wrong_hash(text, gold) for text,
                               gold in zip(rollouts["completion"], rollouts["answer"])],
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
            f"{interval(row['low'], row['high'], digits=0)})")


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
