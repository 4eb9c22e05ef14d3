"""GRPO training on a CPU: TRL's GRPOTrainer on SmolLM2-135M, rewarded by the course's verifiers rubric.

The pieces notebook 02 calls, in order:

- `choose_backend("auto")`: "cpu" with fewer than 2 CUDA GPUs, "verifiers" otherwise;
- `GRPOSettings`: every knob in one place (defaults = the run measured with scripts/bench_grpo.py);
- `RubricRewards(env.rubric)`: the adapter from a verifiers rubric to TRL reward functions. One
  `rubric.score_rollouts` call per batch (traced by Weave's verifiers integration), one TRL reward
  function per rubric component (so TRL logs each one), TRL's weights = the rubric's weights, so
  TRL's reward equals the rubric's. A reward function that raises scores that rollout 0; the error
  is logged, counted in the metrics and kept in the traced batch call, and training goes on;
- `build_trainer(env, settings)` and `train(trainer)`: resumes from the last checkpoint of the same
  settings, logs to wandb, saves the final model to runs/grpo/<run_name>/final;
- `eval_setup` and `evaluate_checkpoint`: before/after on the same held-out examples, sampling and
  server (the starting weights and the trained ones, both served by `HFModelServer`);
- `metrics_table`, `plot_metrics`, `learning_summary`, `weight_change`, `compare_evals`,
  `plot_before_after`: what the notebook shows.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import resource
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.local.scrubbing import scrub, write_json, write_text
from helpers.paths import runs_dir
from helpers.worker_thread import run_sync

log = logging.getLogger("helpers.grpo")
BACKENDS = ("auto", "cpu", "verifiers")


class BackendUnavailable(RuntimeError):
    """The requested training backend cannot run on this machine; the message says why."""


class TrainingOutOfMemory(RuntimeError):
    """Training ran out of memory; the message says which settings to lower."""


# ----------------------------------------------------------------------------- backend


def choose_backend(backend: str = "auto", gpus: int | None = None) -> str:
    """"cpu" or "verifiers". "auto" picks "verifiers" only with 2 or more CUDA GPUs."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    from helpers.install_check import cuda_gpu_count

    gpus = cuda_gpu_count() if gpus is None else gpus
    if backend == "auto":
        return "verifiers" if gpus >= 2 else "cpu"
    if backend == "verifiers" and gpus < 2:
        raise BackendUnavailable(
            f"backend='verifiers' needs at least 2 CUDA GPUs (one for the vLLM inference server, "
            f"one for training), and this machine has {gpus}. Use backend='auto' or 'cpu' to train "
            "on the CPU with TRL instead; helpers.gpu.launcher shows the GPU recipe without running it."
        )
    return backend


# ----------------------------------------------------------------------------- settings


@dataclass
class GRPOSettings:
    """The CPU run. Defaults: the run measured on 2 idle cores (seed 0, 20 steps in 18 min: reward
    0.20 -> 0.44 over the first/last 5 steps, format 0.40 -> 0.88; scripts/bench_grpo.py)."""

    max_steps: int = 20
    prompts_per_step: int = 2
    num_generations: int = 4  # completions per prompt: the "group" that advantages are relative to
    max_completion_tokens: int = 200  # with 128 most completions stop before '####': no signal
    max_prompt_tokens: int = 256
    learning_rate: float = 5e-5  # 1e-5 moved the reward only 0.10 -> 0.18 in 22 steps (measured)
    beta: float = 0.0  # KL penalty; > 0 loads a reference model and logs KL
    temperature: float = 0.9
    seed: int = 0
    variant: str = "hash"  # the reward the 135M model sometimes earns
    num_train_examples: int = 500
    save_steps: int = 10
    # float32: bf16 autocast made generation ~35% slower on a 2-core AVX-512 CPU without AMX (measured)
    bf16: bool = False
    threads: int | None = None  # torch threads; None = the cores not busy with other work
    run_name: str = "02_grpo_cpu"

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.num_generations

    def output_dir(self) -> Path:
        return runs_dir("grpo", self.run_name)

    def identity(self) -> dict:
        """What must match for a checkpoint to be resumed (how long to train may change)."""
        return {k: v for k, v in asdict(self).items() if k not in ("max_steps", "save_steps", "threads")}


# ----------------------------------------------------------------------------- rewards


def _text(completion: Any) -> str:
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return str(completion)


def _guarded(func, errors: list):
    """`func`, but an exception is recorded and re-raised for the rubric (which then scores 0)."""

    @functools.wraps(func)  # keeps the signature that verifiers inspects
    def guarded(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as e:
            errors.append({"reward_func": func.__name__, "error": f"{type(e).__name__}: {e}",
                           "completion": kwargs.get("completion")})
            raise

    return guarded


class RubricRewards:
    """A verifiers rubric as TRL reward functions (see the module docstring).

    `reward_funcs` go to `GRPOTrainer(reward_funcs=...)` and `weights` to `GRPOConfig(reward_weights=...)`.
    """

    def __init__(self, rubric):
        import verifiers as vf

        self.names = rubric.get_reward_func_names()
        self.weights = [float(w) for w in rubric.get_reward_weights()]
        self._errors: list[dict] = []  # filled by the guarded functions during one batch
        self.error_log: list[dict] = []  # every error so far, with the batch number
        self.batches = 0
        # Same class, functions and parser as the env's rubric, so Weave traces its scoring calls.
        self.rubric = vf.Rubric(funcs=[_guarded(f, self._errors) for f in rubric.get_reward_funcs()],
                                weights=list(self.weights), parser=rubric.parser)
        self.rubric.logger.setLevel(logging.CRITICAL)  # we report errors ourselves, once each
        self._last_key: tuple | None = None
        self._last: dict | None = None
        self._lock = threading.Lock()

    def score(self, prompts: list, completions: list, answers: list[str],
              tasks: list[str] | None = None, infos: list[dict] | None = None) -> dict:
        """{"reward": [...], "<component>": [...], "errors": [...]} for a batch of rollouts."""
        with self._lock:
            self._errors.clear()
            result = _traced_batch(self, prompts, completions, answers, tasks, infos, self.batches + 1)
            self.batches += 1
            return result

    def _score(self, prompts, completions, answers, tasks, infos) -> dict:
        n = len(completions)
        states = [{"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}} for _ in range(n)]
        coro = self.rubric.score_rollouts(
            prompts=list(prompts), completions=list(completions), answers=list(answers), states=states,
            tasks=list(tasks or ["default"] * n), infos=list(infos or [{} for _ in range(n)]))
        with contextlib.redirect_stderr(io.StringIO()):  # the rubric's per-batch progress bar
            scores = run_sync(coro)
        result = {"reward": list(scores.reward), **{k: list(v) for k, v in scores.metrics.items()}}
        errors = []
        for err in self._errors:  # a rollout with any failing reward function scores 0 in total
            index = next((i for i, c in enumerate(completions) if c is err["completion"]), None)
            if index is not None:
                for values in result.values():
                    values[index] = 0.0
            errors.append({"rollout": index, "reward_func": err["reward_func"], "error": err["error"]})
            log.warning("reward function %s raised %s; rollout %s scores 0, training goes on",
                        err["reward_func"], err["error"], index)
        result["errors"] = errors
        return result

    def _batch(self, prompts, completions, answer) -> dict:
        # TRL calls every reward function with the same lists; score once per batch.
        key = (id(completions), len(completions), _text(completions[0]) if completions else "")
        if key != self._last_key or self._last is None:
            self._last = self.score(prompts, completions, answer)
            self._last_key = key
            for err in self._last["errors"]:
                self.error_log.append({"batch": self.batches, **err})
        return self._last

    @property
    def reward_funcs(self) -> list:
        funcs = []
        for name in self.names:
            def reward(prompts, completions, answer, _name=name, **kwargs):
                return self._batch(prompts, completions, answer)[_name]

            reward.__name__ = name  # TRL logs rewards/<name>/mean
            funcs.append(reward)
        return funcs


def _drop_adapter(inputs: dict) -> dict:
    inputs = dict(inputs)
    inputs.pop("adapter", None)
    return inputs


def _traced_batch_impl(adapter, prompts, completions, answers, tasks, infos, batch):
    return adapter._score(prompts, completions, answers, tasks, infos)


try:  # one Weave call per batch: its output keeps the rewards and any reward-function errors
    import weave

    _traced_batch = weave.op(_traced_batch_impl, name="grpo_reward_batch", postprocess_inputs=_drop_adapter)
except Exception:  # noqa: BLE001 - without weave, scoring is just untraced
    _traced_batch = _traced_batch_impl


# ----------------------------------------------------------------------------- trainer


def _timed_trainer_class():
    from trl import GRPOTrainer

    class CourseGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that also logs, per step, seconds spent generating, scoring and updating."""

        def __init__(self, *args, rewards: RubricRewards | None = None, **kwargs):
            super().__init__(*args, **kwargs)
            self.course_rewards = rewards
            self._timing = {"generation_s": 0.0, "scoring_s": 0.0, "step_s": 0.0, "steps": 0}
            self._errors_logged = 0

        @contextlib.contextmanager
        def _timed(self, key: str):
            started = time.perf_counter()
            try:
                yield
            finally:
                self._timing[key] += time.perf_counter() - started

        def _generate(self, *args, **kwargs):
            with self._timed("generation_s"):
                return super()._generate(*args, **kwargs)

        def _calculate_rewards(self, *args, **kwargs):
            with self._timed("scoring_s"):
                return super()._calculate_rewards(*args, **kwargs)

        def training_step(self, *args, **kwargs):
            self._timing["steps"] += 1
            with self._timed("step_s"):
                return super().training_step(*args, **kwargs)

        def log(self, logs: dict, start_time: float | None = None) -> None:
            t = self._timing
            if "loss" in logs and t["steps"]:
                n = t["steps"]
                logs["timing/generation_s"] = t["generation_s"] / n
                logs["timing/scoring_s"] = t["scoring_s"] / n
                logs["timing/update_s"] = (t["step_s"] - t["generation_s"] - t["scoring_s"]) / n
                logs["timing/step_s"] = t["step_s"] / n
                logs["memory/peak_rss_gb"] = peak_rss_gb()
                if self.course_rewards is not None:
                    total = len(self.course_rewards.error_log)
                    logs["rewards/errors"] = total - self._errors_logged
                    self._errors_logged = total
                self._timing = {"generation_s": 0.0, "scoring_s": 0.0, "step_s": 0.0, "steps": 0}
            super().log(logs, start_time)

    return CourseGRPOTrainer


def default_threads(sample_s: float = 1.0) -> int:
    """Cores that other programs are not using right now. On a shared machine, 2 torch threads
    fighting other processes for 2 cores ran 5x slower than 1 thread (measured), so busy cores are
    left alone. Measured over `sample_s` while this process waits: the load average would count
    this process's own work of the last minute (loading the model) and leave a core idle."""
    import psutil

    cores = os.cpu_count() or 1
    busy = round(psutil.cpu_percent(interval=sample_s) / 100 * cores)
    return max(1, cores - busy)


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def training_dataset(env):
    """The env's training prompts (system prompt + question) and gold answers, as TRL wants them."""
    return env.dataset.select_columns(["prompt", "answer"])


def build_trainer(env, settings: GRPOSettings, model_dir: str | Path | None = None,
                  resume: str = "auto", callbacks: list | None = None):
    """A CPU GRPOTrainer for `env`'s dataset and rubric. `resume`: "auto" | "never" (start fresh).

    With "auto", a checkpoint in runs/grpo/<run_name>/ is resumed if it was made with the same
    settings (the number of steps may differ); otherwise that folder is cleared first.
    """
    import torch
    from trl import GRPOConfig

    from helpers.local.gguf_convert import convert_gguf, load_converted

    if settings.num_generations < 2:
        raise ValueError("num_generations must be at least 2: GRPO compares completions within a group.")
    torch.set_num_threads(settings.threads or default_threads())
    out = settings.output_dir()
    _prepare_output_dir(out, settings, resume)
    model, tokenizer = load_converted(model_dir or convert_gguf(quiet=True))
    rewards = RubricRewards(env.rubric)
    config = GRPOConfig(
        output_dir=str(out), run_name=settings.run_name, report_to=["wandb"],
        max_steps=settings.max_steps, per_device_train_batch_size=settings.batch_size,
        num_generations=settings.num_generations, gradient_accumulation_steps=1,
        max_completion_length=settings.max_completion_tokens, max_prompt_length=settings.max_prompt_tokens,
        learning_rate=settings.learning_rate, lr_scheduler_type="constant", beta=settings.beta,
        temperature=settings.temperature, seed=settings.seed, reward_weights=rewards.weights,
        use_cpu=True, bf16=settings.bf16, use_vllm=False,
        logging_steps=1, save_strategy="steps", save_steps=settings.save_steps, save_total_limit=1,
        dataloader_num_workers=0, disable_tqdm=False,
    )
    trainer = _timed_trainer_class()(
        model=model, processing_class=tokenizer, args=config, reward_funcs=rewards.reward_funcs,
        train_dataset=training_dataset(env), callbacks=callbacks, rewards=rewards,
    )
    return trainer


def _prepare_output_dir(out: Path, settings: GRPOSettings, resume: str) -> None:
    if resume not in ("auto", "never"):
        raise ValueError(f"resume must be 'auto' or 'never', not {resume!r}")
    saved = out / "settings.json"
    same = saved.is_file() and json.loads(saved.read_text()).get("identity") == settings.identity()
    if resume == "never" or not same:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    write_json(saved, {"identity": settings.identity(), "settings": asdict(settings)})


def last_checkpoint(output_dir: str | Path) -> Path | None:
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    found = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    return Path(found) if found else None


@dataclass
class TrainResult:
    model_dir: Path  # the final weights + tokenizer, loadable with from_pretrained
    metrics: pd.DataFrame  # one row per logged step
    wall_s: float  # this session's training time (a resumed run counts only the new steps)
    resumed_from: Path | None
    wandb_dir: Path | None  # the wandb run folder (offline or online)
    peak_rss_gb: float
    reward_errors: list[dict] = field(default_factory=list)


def train(trainer, quiet: bool = False) -> TrainResult:
    """Train (resuming from the last checkpoint if there is one), log to wandb, save the final model.

    Interrupting (Ctrl-C / kernel interrupt) keeps the checkpoints: run it again to resume.
    """
    out = Path(trainer.args.output_dir)
    checkpoint = last_checkpoint(out)
    if checkpoint and not quiet:
        print(f"training: resuming from {checkpoint.name} (delete {out.name}/ or pass resume='never' to start over)")
    run = start_wandb_run(trainer)
    started = time.monotonic()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except KeyboardInterrupt:
        saved = last_checkpoint(out)
        print(f"training: interrupted at step {trainer.state.global_step}. "
              + (f"The last checkpoint is {saved.name}; run this cell again to resume from it."
                 if saved else "No checkpoint was saved yet; a rerun starts from step 0."))
        raise
    except (RuntimeError, MemoryError) as e:
        if isinstance(e, MemoryError) or "out of memory" in str(e).lower() or "can't allocate" in str(e).lower():
            raise TrainingOutOfMemory(
                "Training ran out of memory. Lower num_generations, prompts_per_step or "
                "max_completion_tokens (each scales the batch held in memory), close other notebooks, "
                f"then run again: it resumes from the last checkpoint in {out}."
            ) from e
        raise
    finally:
        wandb_dir = Path(run.dir).parent if run is not None else None
        if run is not None:
            run.finish()
    wall_s = time.monotonic() - started
    final = out / "final"
    trainer.save_model(str(final))
    trainer.processing_class.save_pretrained(str(final))
    metrics = metrics_table(trainer.state.log_history)
    errors = list(trainer.course_rewards.error_log) if trainer.course_rewards else []
    write_text(out / "metrics.csv", metrics.to_csv(index=False))
    return TrainResult(model_dir=final, metrics=metrics, wall_s=wall_s, resumed_from=checkpoint,
                       wandb_dir=wandb_dir, peak_rss_gb=peak_rss_gb(), reward_errors=errors)


def start_wandb_run(trainer):
    """Start the wandb run that TRL's WandbCallback then logs into (offline without a key)."""
    import wandb

    if not os.environ.get("WANDB_API_KEY"):
        os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_DIR", str(runs_dir("wandb")))
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")  # tracing is set up by helpers.tracing
    os.environ.setdefault("WANDB_SILENT", "true")
    if wandb.run is not None:
        wandb.finish()
    settings_file = Path(trainer.args.output_dir) / "settings.json"
    config = json.loads(settings_file.read_text())["settings"] if settings_file.is_file() else {}
    return wandb.init(project=os.environ.get("WANDB_PROJECT", "verifiers-course"),
                      name=trainer.args.run_name, dir=os.environ["WANDB_DIR"],
                      config=scrub({"course": config, "backend": "cpu"}), reinit="finish_previous")


# ----------------------------------------------------------------------------- results

METRIC_COLUMNS = {  # TRL log key -> column
    "reward": "reward", "reward_std": "reward_std", "loss": "loss", "kl": "kl",
    "completions/mean_length": "completion_length", "completions/clipped_ratio": "clipped_ratio",
    "frac_reward_zero_std": "frac_zero_std", "rewards/errors": "reward_errors",
    "timing/generation_s": "generation_s", "timing/scoring_s": "scoring_s",
    "timing/update_s": "update_s", "timing/step_s": "step_s", "memory/peak_rss_gb": "peak_rss_gb",
}


def metrics_table(log_history: list[dict]) -> pd.DataFrame:
    """One row per logged training step: reward, each reward component, loss, KL, length, timings."""
    rows = []
    for entry in log_history:
        if "loss" not in entry or "step" not in entry:
            continue  # the end-of-training summary has train_loss, not loss
        row = {"step": int(entry["step"])}
        for key, column in METRIC_COLUMNS.items():
            if key in entry:
                row[column] = entry[key]
        for key, value in entry.items():
            if key.startswith("rewards/") and key.endswith("/mean"):
                row[key.split("/")[1]] = value
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.drop_duplicates("step", keep="last").set_index("step") if len(frame) else frame


def logged_steps(history: pd.DataFrame) -> list[int]:
    """The training steps a wandb history (helpers.wandb_history) holds a reward for."""
    if "train/reward" not in history:
        return []
    return sorted(int(step) for step in history.dropna(subset=["train/reward"])["train/global_step"].unique())


def learning_summary(metrics: pd.DataFrame, n: int = 5, column: str = "reward") -> dict:
    """Mean of `column` over the first n and the last n logged steps, and the difference."""
    values = metrics[column].dropna()
    n = min(n, len(values) // 2) or 1
    first, last = float(values.iloc[:n].mean()), float(values.iloc[-n:].mean())
    return {"column": column, "steps": len(values), "n": n, "first": first, "last": last, "gain": last - first}


def plot_metrics(metrics: pd.DataFrame, components: list[str] | None = None):
    """Reward, each reward component, loss, KL and completion length per step (one figure)."""
    import matplotlib.pyplot as plt

    components = components or [c for c in metrics.columns if c in ("correct_answer", "hash_format",
                                                                     "think_format", "format_reward")]
    panels = [("reward", "total reward (mean of the batch)"),
              *[(c, f"reward component: {c}") for c in components],
              ("loss", "loss"), ("kl", "KL to the start model"),
              ("completion_length", "completion length (tokens)")]
    cols = 3
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, (column, title) in zip(axes.flat, panels):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        series = metrics[column].dropna() if column in metrics else pd.Series(dtype=float)
        if series.empty:
            why = "beta = 0: no reference model, KL not computed" if column == "kl" else "not logged"
            ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=9, transform=ax.transAxes)
            continue
        ax.plot(series.index, series.values, marker="o", ms=3, lw=1)
        if len(series) >= 5:
            ax.plot(series.index, series.rolling(5, min_periods=1).mean().values, lw=2, alpha=0.7,
                    label="5-step mean")
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def weight_change(before_dir: str | Path, after_dir: str | Path) -> dict:
    """How much training moved the weights: tensors changed, largest change, relative L2 change."""
    import torch
    from safetensors.torch import load_file

    before = load_file(str(Path(before_dir) / "model.safetensors"))
    after = load_file(str(Path(after_dir) / "model.safetensors"))
    changed, max_abs, diff_sq, norm_sq = 0, 0.0, 0.0, 0.0
    for name, a in after.items():
        b = before.get(name)
        if b is None:
            continue
        d = a.float() - b.float()
        changed += int(bool(torch.any(d != 0)))
        max_abs = max(max_abs, float(d.abs().max()))
        diff_sq += float((d * d).sum())
        norm_sq += float((b.float() ** 2).sum())
    return {"tensors": len(after), "tensors_changed": changed, "max_abs_change": max_abs,
            "relative_l2_change": (diff_sq / norm_sq) ** 0.5 if norm_sq else 0.0}


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


def plot_before_after(table: pd.DataFrame, columns: list[str] | None = None):
    import matplotlib.pyplot as plt

    columns = columns or [c for c in ("reward", "correct_answer", "hash_format", "think_format")
                          if c in table.columns]
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(columns), 3.2))
    table[columns].T.plot.bar(ax=ax, rot=0)
    ax.set_ylabel("mean over rollouts")
    ax.set_title("before vs after training (same held-out examples)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- before / after


@dataclass
class EvalSetup:
    """Which held-out examples, sampling and env arguments the before/after evaluations share."""

    env_args: dict
    num_examples: int
    rollouts_per_example: int
    sampling_args: dict
    reference: Any | None  # notebook 01's EvalRun of the same task (llama.cpp), shown beside before/after
    source: str  # in words: where the setup came from


def eval_setup(before_run: str, variant: str, num_eval_examples: int, eval_max_tokens: int,
               seed: int = 0, system_prompt: str | None = None) -> EvalSetup:
    """Reuse notebook 01's examples and sampling when it saved a run; otherwise (e.g. a fresh clone
    running this notebook alone) take the first `num_eval_examples` test examples.

    At most `num_eval_examples` examples are kept: GSM8K subsets are a shuffle with `seed` and then
    the first n rows, so the first k of 01's examples are exactly the examples of n=k.
    01's results are kept as `reference` when they are of the same task (variant and prompt).
    """
    extra = {"system_prompt": system_prompt} if system_prompt else {}
    from helpers.evaluation import EvalRun, load_eval_run, summarize

    try:
        saved = load_eval_run(before_run)
    except FileNotFoundError:
        saved = None
    if saved is not None:
        env01 = dict(saved.info.get("env_args", {}))
        params = saved.info.get("params", {})
        n = min(num_eval_examples, int(params.get("num_examples") or num_eval_examples))
        env_args = {"variant": variant, "eval_split": env01.get("eval_split", "test"),
                    "num_eval_examples": n, "seed": env01.get("seed", seed), **extra}
        setup = EvalSetup(env_args, n, int(params.get("rollouts_per_example") or 1),
                          dict(params.get("sampling_args") or {"max_tokens": eval_max_tokens}), None, "")
        if env01.get("variant", "think") == variant and env01.get("system_prompt") == system_prompt:
            rollouts = saved.rollouts[saved.rollouts["example"] < n].reset_index(drop=True)
            metrics = [c for c in ("correct_answer", "hash_format", "think_format", "format_reward")
                       if c in rollouts]
            info = {**saved.info, "summary": summarize(rollouts, metrics),
                    "params": {**params, "num_examples": n}}
            setup.reference = EvalRun(name=saved.name, rollouts=rollouts, info=info)
            setup.source = f"notebook 01's saved run {saved.name!r} (its first {n} examples)"
        else:
            setup.source = (f"notebook 01's examples; its results are of another prompt or variant "
                            f"({env01.get('variant')!r}), so they are not shown beside these")
        return setup
    env_args = {"variant": variant, "eval_split": "test", "num_eval_examples": num_eval_examples, "seed": seed,
                **extra}
    return EvalSetup(env_args, num_eval_examples, 1, {"max_tokens": eval_max_tokens, "temperature": 0.0},
                     None, f"no saved run {before_run!r} (run notebook 01 to reuse its examples): the "
                     f"first {num_eval_examples} test examples, greedy")


def evaluate_checkpoint(env, model_dir: str | Path, setup: EvalSetup, name: str):
    """Serve a transformers checkpoint on an OpenAI-compatible endpoint and evaluate it like 01 did."""
    from helpers.evaluation import run_evaluation
    from helpers.local.hf_server import HFModelServer

    with HFModelServer(Path(model_dir), model_name=name, threads=default_threads()) as server:
        run = run_evaluation(env, server.endpoint(), name=name, num_examples=setup.num_examples,
                             rollouts_per_example=setup.rollouts_per_example, max_concurrent=8,
                             sampling_args=setup.sampling_args, env_args=setup.env_args)
    run.save()
    return run


def save_summary(run_name: str, figures: dict) -> Path:
    """Write the figures a notebook run produced to runs/grpo/<run_name>/summary.json (tests read it)."""
    return write_json(runs_dir("grpo", run_name) / "summary.json", figures)


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def base_model_dir(backend: str = "cpu") -> Path | str:
    """The weights training starts from: the converted SmolLM2 folder on the CPU backend, the
    recipe's HF model id on the verifiers backend."""
    if backend == "verifiers":
        from helpers.gpu.launcher import DEFAULT_MODEL

        return DEFAULT_MODEL
    from helpers.local.gguf_convert import convert_gguf

    return convert_gguf(quiet=True)


def gpu_train_result(plan, wall_s: float):
    """A helpers.grpo.TrainResult for a finished verifiers run, read from its trainer_state.json."""
    from helpers.gpu.launcher import merge_lora

    checkpoint = last_checkpoint(plan.output_dir)
    state_file = (checkpoint or plan.output_dir) / "trainer_state.json"
    history = json.loads(state_file.read_text())["log_history"] if state_file.is_file() else []
    return TrainResult(model_dir=merge_lora(plan.output_dir / "final", plan.model),
                       metrics=metrics_table(history), wall_s=wall_s, resumed_from=None,
                       wandb_dir=None, peak_rss_gb=peak_rss_gb())


def run_and_collect(plan):
    """run_plan, then the run's metrics and merged final model as a helpers.grpo.TrainResult."""
    from helpers.gpu.launcher import run_plan

    started = time.monotonic()
    code = run_plan(plan)
    if code != 0:
        raise RuntimeError(f"verifiers training exited with code {code}; see {plan.log_dir / 'vf-train.log'}. "
                           "Running the cell again resumes from the last checkpoint.")
    return gpu_train_result(plan, time.monotonic() - started)
