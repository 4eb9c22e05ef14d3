"""Run `env.evaluate`, turn its GenerateOutputs into a table, and save/load runs under runs/evals/.

A saved run is a folder `runs/evals/<name>/` with two files:

- `run.json`: {"name", "created", "env_args", "params", "model", "endpoint", "modes",
  "wall_s", "rollouts_per_s", "summary": {"reward": mean, "<metric>": mean, ...,
  "accuracy": {"mean", "ci95": [low, high], "n"}}}
- `rollouts.jsonl`: one JSON object per rollout with `example` (index in the eval set),
  `rollout`, `question`, `answer` (gold), `completion` (text), `parsed`, `reward`, one key per
  metric, `finish_reason` and `completion_tokens` of the model's last turn, `generation_ms`, `scoring_ms`.

Notebook 02 reads notebook 01's run to compare the model before and after training.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import verifiers as vf

from helpers.modes import describe_modes
from helpers.paths import runs_dir
from helpers.scrubbing import write_json, write_text
from helpers.serving.endpoint import Endpoint


@dataclass
class EvalRun:
    name: str
    rollouts: pd.DataFrame
    info: dict = field(default_factory=dict)

    @property
    def summary(self) -> dict:
        return self.info.get("summary", {})

    def save(self) -> Path:
        """Write runs/evals/<name>/ (secret values hidden, as in traces) and return the folder."""
        folder = runs_dir("evals", self.name)
        write_json(folder / "run.json", self.info)
        write_text(folder / "rollouts.jsonl", self.rollouts.to_json(orient="records", lines=True))
        return folder


def paired_bootstrap(differences: list[float], resamples: int = 10_000) -> tuple[float, float]:
    """95% interval of the mean of paired differences (one per problem: after minus before on the same
    problem), by resampling the problems with replacement; seeded, so the same data give the same interval."""
    import random

    n = len(differences)
    if n == 0:
        return (float("nan"), float("nan"))
    rng = random.Random(0)
    means = sorted(sum(differences[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for a proportion: sensible even at 0 or n successes."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rollouts_frame(outputs: vf.GenerateOutputs, parser: vf.Parser, num_examples: int) -> pd.DataFrame:
    """One row per rollout. evaluate() repeats the eval set, so rollout i is example i % n."""
    rows = []
    for i, completion in enumerate(outputs.completion):
        text = completion[-1]["content"] if isinstance(completion, list) and completion else str(completion)
        prompt = outputs.prompt[i]
        question = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        timing = outputs.state[i].get("timing", {})
        last = (outputs.state[i].get("responses") or [None])[-1]  # the model's last ChatCompletion
        choice = last.choices[0] if getattr(last, "choices", None) else None
        rows.append({
            "example": i % num_examples,
            "rollout": i // num_examples,
            "question": question,
            "answer": outputs.answer[i],
            "completion": text,
            "parsed": parser.parse_answer(completion),
            "reward": outputs.reward[i],
            **{name: values[i] for name, values in outputs.metrics.items()},
            "finish_reason": getattr(choice, "finish_reason", None),  # "length": cut at max_tokens
            "completion_tokens": getattr(getattr(last, "usage", None), "completion_tokens", None),
            "generation_ms": timing.get("generation_ms"),
            "scoring_ms": timing.get("scoring_ms"),
        })
    return pd.DataFrame(rows)


def summarize(rollouts: pd.DataFrame, metric_names: list[str]) -> dict:
    summary = {name: float(rollouts[name].mean()) for name in ["reward", *metric_names]}
    if "correct_answer" in rollouts:
        hits, n = float(rollouts["correct_answer"].sum()), len(rollouts)
        low, high = wilson_interval(hits, n)
        summary["accuracy"] = {"mean": hits / n if n else 0.0, "ci95": [low, high], "n": n}
    return summary


def record_evaluation(outputs: vf.GenerateOutputs, env: vf.Environment, endpoint: Endpoint, *,
                      name: str, rollouts_per_example: int, wall_s: float, max_concurrent: int | None = None,
                      sampling_args: dict | None = None, env_args: dict | None = None) -> EvalRun:
    """The GenerateOutputs of `env.evaluate(...)` as an EvalRun (rollouts table + run info), not yet saved."""
    n = len(outputs.reward) // rollouts_per_example
    rollouts = rollouts_frame(outputs, env.parser, n)
    info = {
        "name": name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "env_args": env_args or {},
        "params": {"num_examples": n, "rollouts_per_example": rollouts_per_example,
                   "max_concurrent": max_concurrent, "sampling_args": sampling_args or {}},
        "model": endpoint.model,
        "endpoint": endpoint.kind,
        "modes": describe_modes()["mode"].to_dict(),
        "wall_s": wall_s,
        "rollouts_per_s": len(rollouts) / wall_s if wall_s else None,
        "summary": summarize(rollouts, list(outputs.metrics)),
    }
    return EvalRun(name=name, rollouts=rollouts, info=info)


def load_eval_run(name_or_path: str | Path) -> EvalRun:
    folder = Path(name_or_path)
    if not folder.is_dir():
        folder = runs_dir("evals") / str(name_or_path)
    if not (folder / "run.json").is_file():
        raise FileNotFoundError(
            f"No saved evaluation at {folder}. Run notebook 01 first (it saves its run there)."
        )
    info = json.loads((folder / "run.json").read_text())
    rollouts = pd.read_json(folder / "rollouts.jsonl", orient="records", lines=True)
    return EvalRun(name=info["name"], rollouts=rollouts, info=info)
