"""The result files in benchmarks/results/<bench>-<date>.json: how a benchmark writes one, and how the
notebooks read them back.

Each file records when, on what and from which commit it was measured (date, commit, CPU model and
flags, cores, load average before and after the run), next to the figures the benchmark printed. The
README, the guides and the notebook headers cite these files for every figure they state.

    from helpers.results import machine_info, write_result
    info = machine_info()           # before the run: the load average is read now
    ...
    write_result("grpo", info, {"table": {...}, ...})
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.paths import PROJECT_ROOT as ROOT

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

RESULTS_DIR = ROOT / "benchmarks" / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")  # what decides float32 vs bfloat16 speed


def cpu_flags() -> dict:
    """Which of CPU_FLAGS this CPU has (without avx512_bf16 or AMX, bfloat16 is emulated: far slower than float32)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return {flag: flag in flags for flag in CPU_FLAGS}


def cpu_class(flags: dict | None = None) -> str:
    """The class of CPU whose runs may be pooled and compared: what it computes bfloat16 and float32 with
    (a CPU with AMX, one with avx512_bf16, one with AVX-512 or only AVX2: bfloat16 emulated on the last two)."""
    flags = cpu_flags() if flags is None else flags
    for flag, name in (("amx_bf16", "amx"), ("avx512_bf16", "avx512_bf16"), ("avx512f", "avx512"), ("avx2", "avx2")):
        if flags.get(flag):
            return name
    return "no-avx2"


def runs_cpu_classes(record: dict) -> set[str]:
    """The CPU classes a learnability result file's runs ran on (each run's machine record)."""
    return {cpu_class(r["machine"]["cpu_flags"]) for r in record.get("runs", []) if "machine" in r}


def machine_info() -> dict:
    """The facts a reader needs to judge a figure; call it before the run (load average now)."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "cpu": _cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def write_result(bench: str, info: dict, result: dict, *, suffix: str = "") -> Path:
    """Write benchmarks/results/<bench>[-<suffix>]-<date>.json and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    day = info["date"][:10]
    name = f"{bench}-{suffix}-{day}" if suffix else f"{bench}-{day}"
    path = RESULTS_DIR / f"{name}.json"
    record = {"bench": bench, **info, "load_avg_after": [round(x, 2) for x in os.getloadavg()], **result}
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"\nresult written to {path.relative_to(ROOT)}")
    return path


# ----------------------------------------------------------------------------- reading them


def interval(low: float, high: float, digits: int = 1) -> str:
    """The interval as 'low to high', with ', not significant' where it includes 0."""
    return f"{low:+.{digits}%} to {high:+.{digits}%}" + ("" if low > 0 or high < 0 else ", not significant")


def _seeds_interval(d: dict) -> str:
    """A change's t-interval over seeds, as 'low to high' (points), or '' when fewer than 2 seeds."""
    return interval(*d["t_95_over_seeds"]) if "t_95_over_seeds" in d else "one seed: none"


def _rose(d: dict) -> str:
    """'rose in k of n seeds' (and 'fell in m') from a change's per-seed values."""
    per_seed = d["per_seed"]
    rose, fell = sum(x > 0 for x in per_seed), sum(x < 0 for x in per_seed)
    return f"rose in {rose} of {len(per_seed)} seeds" + (f", fell in {fell}" if fell else "")


def result_record(setting: str, results: str | Path | None = None) -> dict | None:
    """The newest learnability-<setting>-<date>.json of `results` (the course's benchmarks/results by default), its
    name under "file", or None where it is not measured yet."""
    files = sorted(Path(results or RESULTS_DIR).glob(f"learnability-{setting}-2*.json"))
    return {**json.loads(files[-1].read_text()), "file": files[-1].name} if files else None


KINDS = {  # a result summary's measures (its "signs" and "confirm" blocks, or older files' diff_* keys): label
    "pass1": "pass@1 (sampled at the training temperature)", "pass_at_k": "pass@k (any of the samples right)",
    "greedy": "greedy (temperature 0)", "cut": "sampled replies cut at the token cap",
    "multi_marker": "sampled replies with 2+ '####' lines",
    "constant": "sampled replies whose last number is the run's most common",
    "format_wrong": "sampled replies with a wrong '####' answer"}


_OLDER_KEYS = {"pass1": "sampled_lenient", "greedy": "lenient", "cut": "sampled_cut",
               "multi_marker": "sampled_multi_marker"}


def _block(summary: dict, block: str = "signs") -> dict:
    """A summary's measures as {kind: {before, after, change: {mean, bootstrap_95, t_95_over_seeds, per_seed}}}: its
    "signs" (design problems) or "confirm" (confirmation problems) block; on the design problems, older files' diff_*
    keys fill in what they measured (and files without those blocks have only these)."""
    if block == "confirm":
        return {k: v for k, v in summary.get("confirm", {}).items() if isinstance(v, dict)}
    found = {kind: {"before": summary[f"base_{key}"], "after": summary[f"after_{key}"],
                    "change": summary[f"diff_{key}"]}
             for kind, key in _OLDER_KEYS.items() if f"diff_{key}" in summary}
    return {**found, **summary.get("signs", {})}


def _entry(e: dict) -> dict:
    d = e["change"]
    return {"before": f"{e['before']:.0%}", "after": f"{e['after']:.0%}", "change": f"{d['mean']:+.1%}",
            "per seed": ", ".join(f"{x:+.0%}" for x in d["per_seed"]), "seeds": _rose(d),
            "95% interval over problems": interval(*d["bootstrap_95"]), "95% interval over seeds": _seeds_interval(d)}


def seeds_table(setting: str, block: str = "signs", kinds: list[str] | None = None,
                results: str | Path | None = None) -> pd.DataFrame:
    """One row per measure of a result file (`block`: "signs", the design problems, or "confirm", the problems no
    design was chosen on): before, after (mean of the seeds), the change, each seed's change, in how many seeds it
    rose, and its two 95% intervals (over problems, seeds pooled; over seeds). "not measured yet" where the file,
    the block or a measure asked for in `kinds` is missing."""
    import pandas as pd

    record = result_record(setting, results)
    block_data = _block(record.get("summary", {}), block) if record else {}
    if not block_data:
        what = f"no learnability-{setting}-*.json" if record is None else f"no {block!r} block in its file"
        return pd.DataFrame({"not measured yet": {setting: what}})
    rows = {}  # without `kinds`, the measures the file has (older files lack some)
    for kind in kinds or [k for k in KINDS if k in block_data]:
        rows[KINDS[kind]] = _entry(block_data[kind]) if kind in block_data else {"before": "not measured yet"}
    table = pd.DataFrame(rows).T.fillna("")
    summary = record["summary"]
    if block == "confirm":  # pass@k depends on k: the heading says how many samples each problem had
        samples = summary["confirm"].get("samples")
        problems = f"{summary['confirm']['problems']} problems"
        problems += f", greedy + {samples} samples each" if samples else ""
    else:
        problems = f"{(record.get('base') or {}).get('n', '?')} problems"
    seeds = len(summary.get("seeds", []))
    classes = sorted(runs_cpu_classes(record))
    cpu = f" on {record.get('cpu', 'a CPU')} ({', '.join(classes)})" if classes else ""  # files hold one class each
    table.index.name = f"{record['file']}: {seeds} seeds{cpu}, {summary.get('steps')} steps, {problems}"
    return table


def arms_table(arms: dict[str, str], kinds: list[str], block: str = "signs",
               results: str | Path | None = None) -> pd.DataFrame:
    """One row per arm (label: a result file's setting), one column per measure: 'before -> after (change; rose
    in k of n seeds)', and each arm's seeds; "not measured yet" where the file or a measure is missing."""
    import pandas as pd

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
    import pandas as pd

    rows = {}
    for label, s in summaries.items():
        gain, greedy = s["diff_sampled_lenient"], s["diff_lenient"]
        rows[label] = {"seeds": len(s["seeds"]), "pass@1 before": s["base_sampled_lenient"],
                       "pass@1 after": s["after_sampled_lenient"], "gain": gain["mean"],
                       "gain, 95% interval": interval(*gain["bootstrap_95"]),
                       "gain per seed": ", ".join(f"{g:+.1%}" for g in gain["per_seed"]), "gain in seeds": _rose(gain),
                       "gain, interval over seeds": _seeds_interval(gain),
                       "greedy before": s["base_lenient"], "greedy after": s["after_lenient"],
                       "greedy gain, 95% interval": interval(*greedy["bootstrap_95"]),
                       "'####' line before": s["base_sampled_format"], "'####' line after": s["after_sampled_format"],
                       "training minutes": s["train_minutes"]}
    return pd.DataFrame(rows).T


def hack_table(records: dict[str, dict]) -> pd.DataFrame:
    """One row per reward, from bench_learnability's result files of runs with a format term: held-out pass@1
    (lenient) and the signs in the same sampled replies (2+ lines holding '####', cut at the token cap), each
    before -> after with the change's paired 95% bootstrap interval over problems, and each seed's (seeds can
    find different ways), with the '####' format and the greedy replies' 2+ '####' lines beside them; the
    constant answer and wrong '####' answers where the file measured them."""
    import pandas as pd

    def change(s: dict, key: str) -> str:
        d = s[f"diff_{key}"]
        return f"{s[f'base_{key}']:.0%} -> {s[f'after_{key}']:.0%} ({d['mean']:+.1%}; {interval(*d['bootstrap_95'])})"

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
    from helpers.charts import figure

    fig, ((batches, held_out),) = figure(11.0, 3.4, 1, 2)
    per_step = grpo["num_generations"] * grpo["prompts_per_step"]
    for run in grpo.get("runs", []):
        steps = run["training"]["per_step"]
        batches.plot([per_step * (i + 1) for i in range(len(steps))],
                     [e.get(f"rewards/{reward}/mean") for e in steps], lw=1, alpha=0.8,
                     label=f"GRPO, seed {run['seed']}")
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
