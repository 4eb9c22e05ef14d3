"""The folder of a training run (runs/grpo/<name>): resume a run of the same settings and rewards, never
delete an earlier one, refuse settings that cannot train, remember which reward the run trained on, and say
in plain words what to do after an interrupt or running out of memory. Notebook 02 checks its parameters
first (helpers.parameters, in well under a second, before any model is loaded), calls
`prepare_run_dir(config, rewards=..., ...)` after building its GRPOConfig, loads a run that already
reached max_steps instead of training it again (`load_if_finished`) and wraps `trainer.train()` in
`explain_failures(output_dir)`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import inspect
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers.parameters import problems
from helpers.paths import display_path
from helpers.scrubbing import write_json


class TrainingOutOfMemory(RuntimeError):
    """Training ran out of memory; the message says which settings to lower."""


# What must match for a checkpoint to be resumed (how long to train may change). Not bf16: on the CPU it is the
# machine's choice (bfloat16 autocast where it has the instructions, device_settings), the weights are float32
# either way, and an instructor's run handed to a learner's laptop must resume there.
TRAINING_FIELDS = (
    "learning_rate", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
    "max_completion_length", "max_prompt_length", "temperature", "top_p", "top_k", "beta", "seed",
    "reward_weights", "lr_scheduler_type", "loss_type", "scale_rewards", "num_iterations", "fp16")


def check_config(config) -> None:
    """Refuse settings TRL would accept and then crash on (or train nothing with), before any folder is touched."""
    fields = ("max_steps", "num_generations", "per_device_train_batch_size", "max_completion_length",
              "learning_rate", "temperature", "beta", "save_steps")
    found = problems({key: getattr(config, key) for key in fields})
    if found:
        raise ValueError("These GRPO settings cannot train:\n- " + "\n- ".join(found))


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest checkpoint folder of a run (what `trainer.train(resume_from_checkpoint=...)` takes)."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None


def code_identity(func) -> str:
    """A short hash of what `func` computes: its source (decorators unwrapped), or where there is no source its
    bytecode, constants and names. Two rewards that differ in any character of their code differ here; the same
    code defined again in a new kernel does not."""
    func = inspect.unwrap(func)
    try:
        text = inspect.getsource(func)
    except (OSError, TypeError):
        text = _code_text(getattr(func, "__code__", None)) or repr(func)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _code_text(code) -> str:
    if code is None:
        return ""
    consts = [(_code_text(c) if inspect.iscode(c) else repr(c)) for c in code.co_consts]
    return f"{code.co_code.hex()}|{consts}|{code.co_names}"


def reward_identity(rewards) -> list[dict]:
    """What makes a run's reward that reward: each function's name, weight and code (`rewards`: a
    helpers.grpo.rewards.RubricRewards, or any object with `functions`, `names` and `weights`)."""
    return [{"name": name, "weight": float(weight), "code": code_identity(func)}
            for func, name, weight in zip(rewards.functions, rewards.names, rewards.weights)]


def prepare_run_dir(config, resume: str = "auto", rewards=None, reward_is_yours: bool | None = None,
                    **run: Any) -> None:
    """Make `config.output_dir` ready: keep a run of the same settings and rewards to resume, or start an empty one.

    `resume="auto"` keeps the run in the folder when it was made with the same settings (the training fields of
    `config`, the reward functions' code and weights (`rewards`), and `run`, e.g. the environment's arguments)
    and has a checkpoint; `resume="never"` starts over. An earlier run that is not resumed is never deleted: it
    is moved aside with a timestamp, and that is said in one line, with what differs. `reward_is_yours` (the
    reward exercise's check passed) is recorded with the run: `trained_reward` reads it back after training.
    """
    if resume not in ("auto", "never"):
        raise ValueError(f"resume must be 'auto' or 'never', not {resume!r}")
    check_config(config)
    out = Path(config.output_dir)
    fields = {f: getattr(config, f) for f in TRAINING_FIELDS}
    if rewards is not None:
        fields["rewards"] = reward_identity(rewards)
    identity = json.loads(json.dumps({**fields, **run}, default=str))
    saved = out / "course_run.json"
    record = {"identity": identity, "reward_is_yours": reward_is_yours}
    if out.is_dir() and any(out.iterdir()):
        earlier = json.loads(saved.read_text()) if saved.is_file() else {}
        differs = _differences(earlier.get("identity"), identity)
        checkpoint = last_checkpoint(out)
        if resume == "auto" and not differs and checkpoint is not None:
            print(f"training: will resume from {Path(checkpoint).name} of the same run, same settings and reward "
                  f"(resume='never' starts over; the earlier run is then kept aside)")
            return
        aside = _move_aside(out)
        why = ("resume='never'" if resume == "never" else f"{differs} differ" if differs else "no checkpoint")
        print(f"training: starting over ({why}); the earlier run is kept in {display_path(aside)}")
    out.mkdir(parents=True, exist_ok=True)
    write_json(saved, record)


def _differences(earlier: dict | None, identity: dict) -> str:
    """'' when the two identities are the same run; else what differs, in words ('the reward functions', 'the
    settings learning_rate, seed')."""
    if earlier == identity:
        return ""
    if earlier is None:
        return "the settings (the earlier run recorded none)"
    parts = []
    if earlier.get("rewards") != identity.get("rewards"):
        parts.append("the reward functions")
    keys = sorted(k for k in {*earlier, *identity} - {"rewards"} if earlier.get(k) != identity.get(k))
    if keys:
        parts.append("the settings " + ", ".join(keys))
    return " and ".join(parts)


def trained_reward(output_dir: str | Path) -> dict:
    """Which reward the run in `output_dir` trained on, as recorded when it started: {"reward_is_yours": bool or
    None, "reward_functions": [names]}. A run is resumed only with the same reward code, so this holds for every
    step in its folder, whatever the notebook's cells hold now."""
    saved = Path(output_dir) / "course_run.json"
    record = json.loads(saved.read_text()) if saved.is_file() else {}
    names = [reward["name"] for reward in record.get("identity", {}).get("rewards", [])]  # the identity holds them
    return {"reward_is_yours": record.get("reward_is_yours"), "reward_functions": names}


def load_if_finished(trainer, checkpoint: str | None) -> bool:
    """True when `checkpoint` already holds the run's max_steps steps: its weights and log history are loaded into
    `trainer`, and there is nothing left to train (transformers' train() would run one step past max_steps).
    False otherwise: call `trainer.train(resume_from_checkpoint=checkpoint)`."""
    from transformers import TrainerState

    if checkpoint is None:
        return False
    state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    if state.global_step < trainer.args.max_steps:
        return False
    trainer._load_from_checkpoint(checkpoint)  # the same call train() makes when it resumes
    trainer.state = state
    print(f"training: {Path(checkpoint).name} already holds all {trainer.args.max_steps} steps of this run: its "
          "weights and log are loaded and no step is trained (resume='never' trains it again)")
    return True


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
            raise TrainingOutOfMemory(out_of_memory_advice(output_dir)) from e
        raise


MEMORY_FIELDS = ("per_device_train_batch_size", "num_generations", "max_completion_length")  # each scales a step


def out_of_memory_advice(output_dir: str | Path) -> str:
    """What to do when training ran out of memory, and what each choice does to the run: freeing memory keeps the
    settings, so the training cell resumes from the last checkpoint; a smaller step changes a TRAINING_FIELDS
    setting, so the run starts over (prepare_run_dir keeps the earlier one aside)."""
    saved = last_checkpoint(output_dir)
    resumes = (f"resumes from {Path(saved).name} in {display_path(Path(output_dir))}" if saved
               else "starts from the beginning (no checkpoint was saved yet)")
    return ("Training ran out of memory. Either free memory (close other notebooks, kernels and programs) and run the "
            f"training cell again with the same settings: it {resumes}. Or make a step smaller: lower "
            f"{', '.join(MEMORY_FIELDS[:-1])} or {MEMORY_FIELDS[-1]} (each scales what a step holds in memory), run "
            "the "
            "cells from the configuration on: these are training settings, so the run starts over from step 0 "
            "(the earlier run is kept aside, not resumed).")


def save_summary(output_dir: str | Path, figures: dict) -> Path:
    """Write the figures a notebook run produced to <output_dir>/summary.json (tests read it)."""
    return write_json(Path(output_dir) / "summary.json", figures)
