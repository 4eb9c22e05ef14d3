"""The folder of a training run (runs/grpo/<name>): resume a run of the same settings, never delete
an earlier one, refuse settings that cannot train, and say in plain words what to do after an
interrupt or running out of memory. Notebook 02 checks its parameters first
(`check_parameters(globals())`, in well under a second, before any model is loaded), calls
`prepare_run_dir(config, ...)` after building its GRPOConfig and wraps `trainer.train()` in
`explain_failures(output_dir)`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import re
from collections.abc import Callable, Mapping
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


# ----------------------------------------------------------------------------- parameters

# A rule takes a value and returns what is wrong with it (None: nothing).
Rule = Callable[[Any], "str | None"]


def _text_hint(value: Any) -> str:
    """A number that arrived as text (quotes, or papermill's -r) is named as such."""
    if isinstance(value, str):
        try:
            float(value)
            return " (this one is text: drop the quotes, or pass it with papermill's -p, not -r)"
        except ValueError:
            pass
    return ""


def whole(at_least: int, below: int | None = None, why: str = "") -> Rule:
    """A whole number (not a bool) in [at_least, below)."""
    def rule(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be a whole number of at least {at_least}{_text_hint(value)}"
        if value < at_least or (below is not None and value >= below):
            bounds = f"at least {at_least}" + (f" and below {below}" if below is not None else "")
            return f"must be {bounds}{why}"
        return None
    return rule


def number(above: float | None = None, at_least: float | None = None, why: str = "") -> Rule:
    """A finite number (int or float, not a bool) above `above` or at least `at_least`."""
    bound = f"above {above}" if above is not None else f"at least {at_least}"

    def rule(value):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return f"must be a number {bound}{_text_hint(value)}"
        if (above is not None and not value > above) or (at_least is not None and not value >= at_least):
            return f"must be {bound}{why}"
        return None
    return rule


def choice(*options: str) -> Rule:
    def rule(value):
        return None if value in options else f"must be one of {', '.join(map(repr, options))}"
    return rule


def text(optional: bool = False) -> Rule:
    """Some text (not empty); with `optional`, None too."""
    def rule(value):
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            return "must be some text" + (", or None" if optional else "")
        return None
    return rule


def name(empty_ok: bool = False) -> Rule:
    """A name that is also a folder name (runs/<...>/<name>) and a W&B project or run name."""
    def rule(value):
        if empty_ok and value == "":
            return None
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", value):
            return ("must be a name of letters, digits, '.', '_' or '-' (it names a folder)"
                    + (", or ''" if empty_ok else ""))
        return None
    return rule


# Notebook 02's parameters cell, one rule per parameter (a new parameter adds one line here; a test
# checks that this table and the notebook's cell name the same parameters).
GRPO_NOTEBOOK_PARAMETERS: dict[str, Rule] = {
    "backend": choice("auto", "cpu", "gpu", "verifiers"),
    "rollouts": choice("server", "generate"),
    "max_steps": whole(at_least=1),
    "learning_rate": number(above=0),
    "num_generations": whole(at_least=2, why=" (GRPO compares at least 2 completions per prompt)"),
    "per_device_train_batch_size": whole(at_least=1),
    "max_completion_length": whole(at_least=1),
    "temperature": number(above=0, why=" (GRPO needs varied samples)"),
    "beta": number(at_least=0),
    "seed": whole(at_least=0, below=2**32),
    "hack_steps": whole(at_least=1),
    "save_steps": whole(at_least=1),
    "resume": choice("auto", "never"),
    "system_prompt": text(optional=True),
    "num_train_examples": whole(at_least=1),
    "num_eval_examples": whole(at_least=1),
    "eval_max_tokens": whole(at_least=1),
    "run_name": name(),
    "before_run": name(empty_ok=True),
    "project": name(),
}


def _problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with `values`, by the rules above, one line per parameter."""
    wrong = {key: problem for key, rule in GRPO_NOTEBOOK_PARAMETERS.items()
             if key in values and (problem := rule(values[key]))}
    problems = [f"{key}={values[key]!r}: {problem}" for key, problem in wrong.items()]
    batch, group = values.get("per_device_train_batch_size"), values.get("num_generations")
    both_right = batch is not None and group is not None and not wrong.keys() & {
        "per_device_train_batch_size", "num_generations"}
    if both_right and batch % group:
        problems.append(f"per_device_train_batch_size={batch}: must be a multiple of num_generations={group} "
                        "(prompts per step x completions per prompt)")
    return problems


def check_parameters(namespace: Mapping[str, Any]) -> None:
    """Check notebook 02's parameters, each by name, before anything slow runs: call it with the
    notebook's `globals()`. Raises one ValueError that names every wrong parameter, its value and
    what it must be."""
    missing = [key for key in GRPO_NOTEBOOK_PARAMETERS if key not in namespace]
    if missing:
        raise ValueError(f"Notebook 02's parameters cell has no {', '.join(missing)}: run that cell first "
                         "(or, if a parameter was renamed, rename it in run_folder.GRPO_NOTEBOOK_PARAMETERS)")
    problems = _problems({key: namespace[key] for key in GRPO_NOTEBOOK_PARAMETERS})
    if problems:
        raise ValueError("Notebook 02 cannot run with these parameters; fix them in the parameters cell "
                         "(or papermill's -p NAME VALUE) and run again:\n- " + "\n- ".join(problems))


def check_config(config) -> None:
    """Refuse settings TRL would accept and then crash on (or train nothing with), before any folder is touched."""
    fields = ("max_steps", "num_generations", "per_device_train_batch_size", "max_completion_length",
              "learning_rate", "temperature", "beta", "save_steps")
    problems = _problems({key: getattr(config, key) for key in fields})
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
        aside = _move_aside(out)
        why = "resume='never'" if resume == "never" else "other settings" if not same else "no checkpoint"
        print(f"training: starting over ({why}); the earlier run is kept in {display_path(aside)}")
    out.mkdir(parents=True, exist_ok=True)
    write_json(saved, {"identity": identity})


def _move_aside(folder: Path) -> Path:
    """Rename `folder` to <name>-<date>-<time>, or -2, -3, ... after it when that name is taken (two
    restarts within the same second). Returns the new path; nothing is ever replaced."""
    stamp = f"{folder.name}-{datetime.now():%Y%m%d-%H%M%S}"
    for n in range(1, 1000):
        aside = folder.with_name(stamp if n == 1 else f"{stamp}-{n}")
        if aside.exists():
            continue
        try:
            folder.rename(aside)  # replaces an empty folder made meanwhile, never a non-empty one
            return aside
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    raise FileExistsError(f"{folder.parent} already holds 999 runs named {stamp}-*: remove some")


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
