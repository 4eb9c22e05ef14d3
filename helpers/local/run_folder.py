"""The folder of a training run (runs/grpo/<name>): resume a run of the same settings, never delete
an earlier one, refuse settings that cannot train, and say in plain words what to do after an
interrupt or running out of memory. Notebook 02 calls `prepare_run_dir(config, ...)` after building
its GRPOConfig and wraps `trainer.train()` in `explain_failures(output_dir)`.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers.local.paths import display_path
from helpers.local.scrubbing import write_json


class TrainingOutOfMemory(RuntimeError):
    """Training ran out of memory; the message says which settings to lower."""


TRAINING_FIELDS = (  # what must match for a checkpoint to be resumed (how long to train may change)
    "learning_rate", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
    "max_completion_length", "max_prompt_length", "temperature", "top_p", "top_k", "beta", "seed",
    "reward_weights", "lr_scheduler_type", "loss_type", "scale_rewards", "num_iterations", "bf16", "fp16")


def check_config(config) -> None:
    """Refuse settings TRL would accept and then crash on (or train nothing with), before any folder is touched."""
    problems = []
    if config.max_steps < 1:
        problems.append(f"max_steps={config.max_steps}: train at least 1 step")
    if config.num_generations < 2:
        problems.append(f"num_generations={config.num_generations}: GRPO compares at least 2 completions per prompt")
    batch = config.per_device_train_batch_size
    if batch < config.num_generations or batch % config.num_generations:
        problems.append(f"per_device_train_batch_size={batch}: must be a positive multiple of "
                        f"num_generations={config.num_generations} (prompts per step x completions per prompt)")
    if config.max_completion_length < 1:
        problems.append(f"max_completion_length={config.max_completion_length}: must be at least 1 token")
    if not config.learning_rate > 0:
        problems.append(f"learning_rate={config.learning_rate}: must be positive")
    if not config.temperature > 0:
        problems.append(f"temperature={config.temperature}: must be positive (GRPO needs varied samples)")
    if config.beta < 0:
        problems.append(f"beta={config.beta}: must be 0 or more")
    if config.save_steps < 1:
        problems.append(f"save_steps={config.save_steps}: must be at least 1")
    if problems:
        raise ValueError("These GRPO settings cannot train:\n- " + "\n- ".join(problems))


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest checkpoint folder of a run (what `trainer.train(resume_from_checkpoint=...)` takes)."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None


def prepare_run_dir(config, resume: str = "auto", **run: Any) -> None:
    """Make `config.output_dir` ready: keep a run of the same settings to resume, or start an empty one.

    `resume="auto"` keeps the run in the folder when it was made with the same settings (the
    training fields of `config`, and `run`, e.g. the environment's arguments) and has a checkpoint;
    `resume="never"` starts over. An earlier run that is not resumed is never deleted: it is moved
    aside with a timestamp, and that is said in one line.
    """
    if resume not in ("auto", "never"):
        raise ValueError(f"resume must be 'auto' or 'never', not {resume!r}")
    check_config(config)
    out = Path(config.output_dir)
    identity = json.loads(json.dumps({**{f: getattr(config, f) for f in TRAINING_FIELDS}, **run}, default=str))
    saved = out / "course_run.json"
    if out.is_dir() and any(out.iterdir()):
        same = saved.is_file() and json.loads(saved.read_text()).get("identity") == identity
        checkpoint = last_checkpoint(out)
        if resume == "auto" and same and checkpoint is not None:
            print(f"training: will resume from {Path(checkpoint).name} of the same run "
                  f"(resume='never' starts over; the earlier run is then kept aside)")
            return
        aside = out.with_name(f"{out.name}-{datetime.now():%Y%m%d-%H%M%S}")
        out.rename(aside)
        why = "resume='never'" if resume == "never" else "other settings" if not same else "no checkpoint"
        print(f"training: starting over ({why}); the earlier run is kept in {display_path(aside)}")
    out.mkdir(parents=True, exist_ok=True)
    write_json(saved, {"identity": identity})


@contextlib.contextmanager
def explain_failures(output_dir: str | Path):
    """Around `trainer.train()`: an interrupt says how to resume; running out of memory says what to lower."""
    try:
        yield
    except KeyboardInterrupt:
        saved = last_checkpoint(output_dir)
        print("training: interrupted. " + (f"The last checkpoint is {Path(saved).name}: run this cell again to "
                                           "resume from it." if saved else "No checkpoint was saved yet."))
        raise
    except (RuntimeError, MemoryError) as e:
        text = str(e).lower()
        if isinstance(e, MemoryError) or "out of memory" in text or "can't allocate" in text:
            raise TrainingOutOfMemory(
                "Training ran out of memory. Lower num_generations, per_device_train_batch_size or "
                "max_completion_length (each scales what a step holds in memory), close other notebooks, then "
                f"run again: it resumes from the last checkpoint in {display_path(Path(output_dir))}.") from e
        raise
