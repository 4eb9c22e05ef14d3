"""What notebook 02's cells pass to TRL's GRPOTrainer, and what they need around it.

The cells build `trl.GRPOConfig(...)` and `trl.GRPOTrainer(...)` themselves and call
`trainer.train()`; this module holds the pieces they pass in:

- `choose_backend`, `start_model`, `device_settings`, `one_gpu_plan`, ...: where it trains, handed on
  from helpers.gpu.backend; `default_threads`: how many CPU cores it may use;
- `RubricRewards(env.rubric)`: a verifiers rubric as TRL reward functions (one per rubric
  function, so TRL logs each); every batch is scored once, in a Weave-traced call;
- `StepTimer`: a TrainerCallback that splits each step's time into generation, weight sync,
  scoring and update, and logs it with TRL's own metrics (wandb, trainer.state.log_history), with the
  share of completions that game the '####' format;
- `eval_setup`, `weight_change`, `save_summary`: the before/after evaluation and the run's figures.

Resuming a run and explaining an interrupt or running out of memory: helpers.local.run_folder.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import weave
from transformers import TrainerCallback

from helpers.gpu.backend import (  # noqa: F401 - the cells reach the backend through helpers.grpo
    BACKENDS,
    BackendUnavailable,
    choose_backend,
    cpu_has_bf16,
    cpu_precision,
    device_settings,
    eval_server_dtype,
    lora_config,
    merged,
    one_gpu_plan,
    release_trainer,
    start_model,
)
from helpers.local.llama_server import THREADS_VARIABLE, fixed_threads  # noqa: F401 - tests set it by name
from helpers.local.scrubbing import write_json
from helpers.worker_thread import run_sync

log = logging.getLogger("helpers.grpo")


class RewardFunctionFailing(RuntimeError):
    """A reward function raised on too many rollouts of a step: training on zeros would teach nothing."""


# ----------------------------------------------------------------------------- the CPU




def default_threads(samples: int = 4, sample_s: float = 0.5) -> int:
    """How many torch threads (and policy-server threads) to use: $COURSE_THREADS when set, else every core
    except those other programs keep busy through the whole 2-second sample (busy in each of its 4 parts).

    Why, measured (benchmarks/results/update-threads-2026-12-05.json, benchmarks/bench_update.py --threads 1 2
    --busy 0 1 2; one float32 update, AMD EPYC, 2 cores, AVX2): idle, 2 threads 3.51 s and 1 thread 5.16 s;
    beside 1 busy process, 2 threads 8.42 s and 1 thread 5.01 s; beside 2, 16.98 s and 7.87 s. Threads that
    fight other programs for cores cost up to 2.2x, a core left idle 1.5x: neither rule can cost 10x (that
    was bfloat16 emulation: device_settings). What the old rule got wrong was one 2-second average, in which
    a short burst of another program left a core idle for a whole training run; a burst now counts only if it
    lasts all four samples."""
    import psutil

    fixed = fixed_threads()
    if fixed:
        return fixed
    cores = os.cpu_count() or 1
    busy = min(int(psutil.cpu_percent(interval=sample_s) / 100 * cores + 0.25) for _ in range(samples))
    return max(1, cores - busy)


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


# ----------------------------------------------------------------------------- the CPU task and its rewards

# Notebook 02's prompt on the CPU's task (one-step word problems): one short line of working fits its 48 tokens
ONE_LINE_PROMPT = ("Solve the math problem in one short line of working. "
                   "On the last line, write the final answer as '#### <number>'.")
# The first held-out problems of that task, on which the course chose notebook 02's design: a run is judged on the
# problems after them (word_arithmetic's eval_start), never on these
DESIGN_PROBLEMS = 100


def hash_lines(text: str) -> int:
    """How many lines of a completion hold a '####' answer marker: 2 or more is the gamed format
    (a list of '#### N' lines instead of one answer)."""
    return sum("####" in line for line in str(text).splitlines())


def last_number(text: str) -> str:
    """The last number anywhere in a reply ('18', '-3', '1,200', '0.5': gsm8k_course's number pattern),
    canonical as gsm8k_course writes answers ('1,200.' -> '1200'); '' when the reply holds none."""
    from gsm8k_course import NUMBER, canonical_number

    numbers = NUMBER.findall(str(text))
    return canonical_number(numbers[-1]) if numbers else ""


def one_answer_line(completion: Any, **kwargs) -> float:
    """The course's reference for notebook 02's format exercise: 1.0 when the reply holds exactly one '####'
    and a number follows it; else 0.0. A list of '#### N' lines earns nothing; an answer followed by more
    text still does."""
    from gsm8k_course import extract_hash_answer

    text = reply_text(completion)
    return 1.0 if text.count("####") == 1 and extract_hash_answer(text) else 0.0


def last_number_right(completion: Any, answer: str) -> float:
    """The course's reference for notebook 02's reward (and the 'lenient' accuracy the benchmarks report): 1.0
    when the reply's last number is the gold answer, whatever the format."""
    from gsm8k_course import canonical_number

    number = last_number(reply_text(completion))
    return 1.0 if number and number == canonical_number(answer) else 0.0


def right_answer_line(completion: Any, answer: str, **kwargs) -> float:
    """The course's reference for notebook 02's section-12 fix: 1.0 when the reply holds exactly one '####' and
    the number after it is the gold answer; else 0.0. A format term that pays only with the right answer: a
    constant '#### 9' earns it only where 9 is right, a list of '#### N' lines never."""
    from gsm8k_course import canonical_number, extract_hash_answer

    text = reply_text(completion)
    number = extract_hash_answer(text) if text.count("####") == 1 else ""
    return 1.0 if number and canonical_number(number) == canonical_number(answer) else 0.0


def gold_anywhere(completion: Any, answer: str, **kwargs) -> float:
    """What notebook 02's reward exercise holds as committed (its placeholder): 1.0 when the gold number appears
    anywhere in the reply, as text. Kept here for the benchmark that trains on it (a reward that pays for many
    numbers); the course's reward is `last_number_right`."""
    from gsm8k_course import canonical_number

    return 1.0 if canonical_number(answer) in reply_text(completion) else 0.0


def reply_text(completion: Any) -> str:
    """A completion as text: chat messages (what a rubric passes) become the assistant's words."""
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return str(completion)


@weave.op(name="grpo_reward_batch", postprocess_inputs=lambda inputs: {k: v for k, v in inputs.items()
                                                                         if k != "rewards"})
def _traced_batch(rewards: RubricRewards, prompts, completions, answers, batch: int) -> dict:
    """One Weave call per batch: its output keeps the rewards and any reward-function errors."""
    return rewards._score(prompts, completions, answers)


def _guarded(func, errors: list):
    """`func`, but an exception is recorded before the rubric turns it into a 0 for that function."""

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
    """A verifiers rubric as TRL reward functions.

    `reward_funcs` go to `GRPOTrainer(reward_funcs=...)`, `weights` to
    `GRPOConfig(reward_weights=...)`, so TRL's reward is the rubric's weighted sum. TRL calls every
    reward function with the same batch; the batch is scored once (`rubric.score_rollout` for each
    rollout, all inside one traced `grpo_reward_batch` call). A reward function that raises makes
    that rollout score 0 (logged, counted, kept in the trace); when one raises on more than
    `max_error_share` of a batch, training stops with RewardFunctionFailing instead of learning from zeros.
    """

    def __init__(self, rubric, max_error_share: float = 0.5):
        import verifiers as vf

        self.names = rubric.get_reward_func_names()
        self.functions = list(rubric.get_reward_funcs())  # the learner's own, unwrapped: the run's identity reads them
        self.weights = [float(w) for w in rubric.get_reward_weights()]
        self.max_error_share = max_error_share
        self._errors: list[dict] = []  # filled by the guarded functions while one batch is scored
        # Same functions, weights and parser as the env's rubric (and the same class, so Weave's
        # verifiers integration traces its calls); each function records what it raises.
        self.rubric = vf.Rubric(funcs=[_guarded(f, self._errors) for f in rubric.get_reward_funcs()],
                                weights=list(self.weights), parser=rubric.parser)
        self.rubric.logger.setLevel(logging.CRITICAL)  # errors are reported here, once each
        self.batches = 0
        self.error_log: list[dict] = []  # every error so far, with its batch number
        self.last_batch: dict | None = None  # the texts and scores of the latest batch (the live view shows one)
        self.scoring_started = self.scoring_ended = 0.0  # monotonic clock, for StepTimer
        self._cache_key: tuple | None = None
        self._lock = threading.RLock()

    @property
    def reward_funcs(self) -> list:
        funcs = []
        for name in self.names:
            def reward(prompts, completions, answer, _name=name, **kwargs) -> list[float]:
                return self._batch(prompts, completions, answer)[_name]

            reward.__name__ = name  # TRL logs rewards/<name>/mean
            funcs.append(reward)
        return funcs

    def score(self, prompts: list, completions: list, answers: list[str]) -> dict:
        """{"reward": [...], "<function>": [...], "errors": [...]} for a batch of rollouts (traced)."""
        with self._lock:
            self.batches += 1
            self._errors.clear()
            return _traced_batch(self, prompts, completions, answers, self.batches)

    def _batch(self, prompts, completions, answers) -> dict:
        key = (tuple(reply_text(c) for c in completions), tuple(answers))  # by content: the same batch, scored once
        with self._lock:
            if key == self._cache_key:
                return self.last_batch["scores"]
            self.scoring_started = time.monotonic()
            scores = self.score(prompts, completions, answers)
            self.scoring_ended = time.monotonic()
            self._cache_key = key
            self.last_batch = {"completions": [reply_text(c) for c in completions], "answers": list(answers),
                               "scores": scores}
            self.error_log.extend({"batch": self.batches, **error} for error in scores["errors"])
        for func in {error["reward_func"] for error in scores["errors"]}:
            failed = [e for e in scores["errors"] if e["reward_func"] == func]
            if len(failed) > self.max_error_share * len(completions):
                raise RewardFunctionFailing(
                    f"The reward function {func} raised on {len(failed)} of the {len(completions)} rollouts of "
                    f"this step ({failed[0]['error']}); training on their zeros would teach nothing, so it "
                    "stopped here, before the update. Fix the function (the traced grpo_reward_batch call "
                    "shows the completions), then run the training cell again: it resumes from the last checkpoint.")
        return scores

    def _score(self, prompts, completions, answers) -> dict:
        states = [{"timing": {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0}} for _ in completions]

        async def score_all():  # what rubric.score_rollouts does, without its per-batch progress bar
            return await asyncio.gather(*(
                self.rubric.score_rollout(prompt, completion, answer, state)
                for prompt, completion, answer, state in zip(prompts, completions, answers, states)))

        scores = run_sync(score_all())
        result = {"reward": [s.reward for s in scores],
                  **{name: [s.metrics[name] for s in scores] for name in self.names}, "errors": []}
        for error in self._errors:  # a rollout with a failing reward function scores 0 in total
            index = next((i for i, c in enumerate(completions) if c is error["completion"]), None)
            if index is not None:
                for name in ("reward", *self.names):
                    result[name][index] = 0.0
            result["errors"].append({"rollout": index, "reward_func": error["reward_func"], "error": error["error"]})
            log.warning("reward function %s raised %s: rollout %s scores 0", error["reward_func"], error["error"], index)
        return result


# ----------------------------------------------------------------------------- trainer


class StepTimer(TrainerCallback):
    """Splits each optimizer step's time into generation, weight sync, scoring and update, and adds
    them (with peak memory and reward-function errors) to the metrics TRL logs for the step.

    `trainer.add_callback(StepTimer(trainer, rewards, policy_server))`: generation is the time from
    the step's start until scoring starts (minus the weight sync, when the server got new weights),
    update is the time from the end of scoring to the end of the step (forward, backward, optimizer).
    """

    def __init__(self, trainer, rewards: RubricRewards, policy_server=None):
        self.trainer = trainer
        self.rewards = rewards
        self.policy_server = policy_server
        self._started = 0.0
        self._syncs = self._errors = 0

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = time.monotonic()
        self._syncs = self.policy_server.syncs if self.policy_server else 0

    def on_step_end(self, args, state, control, **kwargs):
        import torch

        ended = time.monotonic()
        synced = self.policy_server is not None and self.policy_server.syncs > self._syncs
        sync_s = self.policy_server.last_sync_s if synced else 0.0
        errors = len(self.rewards.error_log)
        metrics = self.trainer._metrics["train"]  # TRL averages these into the step's log entry
        for key, value in {
            "timing/generation_s": self.rewards.scoring_started - self._started - sync_s,
            "timing/sync_s": sync_s,
            "timing/scoring_s": self.rewards.scoring_ended - self.rewards.scoring_started,
            "timing/update_s": ended - self.rewards.scoring_ended,
            "timing/step_s": ended - self._started,
            "memory/peak_rss_gb": peak_rss_gb(),
            "rewards/errors": errors - self._errors,
            "hack/multi_hash": self._multi_hash_share(),
            **({"memory/peak_gpu_gb": torch.cuda.max_memory_allocated() / 1024**3} if torch.cuda.is_available() else {}),
        }.items():
            metrics[key].append(value)
        self._errors = errors

    def _multi_hash_share(self) -> float:
        """The share of this step's completions with 2+ '####' lines (the gamed format)."""
        completions = (self.rewards.last_batch or {}).get("completions") or []
        return sum(hash_lines(c) >= 2 for c in completions) / len(completions) if completions else float("nan")


# ----------------------------------------------------------------------------- results


@dataclass
class EvalSetup:
    """Which held-out examples, sampling and env arguments the before/after evaluations share."""

    env_args: dict
    num_examples: int
    rollouts_per_example: int
    sampling_args: dict
    reference: Any | None  # notebook 01's EvalRun of the same task (llama.cpp, 4-bit), shown beside them
    source: str  # in words: where the setup came from


def eval_setup(before_run: str, variant: str, num_eval_examples: int, eval_max_tokens: int,
               seed: int = 0, system_prompt: str | None = None) -> EvalSetup:
    """Reuse notebook 01's examples and sampling when it saved a run; otherwise (e.g. a fresh clone
    running this notebook alone) take the first `num_eval_examples` test examples, greedy.

    At most `num_eval_examples` examples are kept: GSM8K subsets are a shuffle with `seed` and then
    the first n rows, so the first k of 01's examples are exactly the examples of n=k. 01's results
    are kept as `reference` when they are of the same task (variant and prompt).
    """
    from helpers.evaluation import EvalRun, load_eval_run, summarize

    extra = {"system_prompt": system_prompt} if system_prompt else {}
    try:
        saved = load_eval_run(before_run)
    except FileNotFoundError:
        env_args = {"variant": variant, "eval_split": "test", "num_eval_examples": num_eval_examples,
                    "seed": seed, **extra}
        return EvalSetup(env_args, num_eval_examples, 1, {"max_tokens": eval_max_tokens, "temperature": 0.0},
                         None, f"no saved run {before_run!r} (run notebook 01 to reuse its examples): the "
                         f"first {num_eval_examples} test examples, greedy")
    env01 = dict(saved.info.get("env_args", {}))
    params = saved.info.get("params", {})
    n = min(num_eval_examples, int(params.get("num_examples") or num_eval_examples))
    env_args = {"variant": variant, "eval_split": env01.get("eval_split", "test"), "num_eval_examples": n,
                "seed": env01.get("seed", seed), **extra}
    setup = EvalSetup(env_args, n, int(params.get("rollouts_per_example") or 1),
                      dict(params.get("sampling_args") or {"max_tokens": eval_max_tokens}), None, "")
    if env01.get("variant", "think") == variant and env01.get("system_prompt") == system_prompt:
        rollouts = saved.rollouts[saved.rollouts["example"] < n].reset_index(drop=True)
        metrics = [c for c in saved.info.get("summary", {}) if c in rollouts and c != "reward"]
        info = {**saved.info, "summary": summarize(rollouts, metrics), "params": {**params, "num_examples": n}}
        setup.reference = EvalRun(name=saved.name, rollouts=rollouts, info=info)
        setup.source = f"notebook 01's saved run {saved.name!r} (its first {n} examples)"
    else:
        setup.source = (f"notebook 01's examples; its results are of another prompt or variant "
                        f"({env01.get('variant')!r}), so they are not shown beside these")
    return setup


def weight_change(before_dir: str | Path, after_dir: str | Path) -> dict:
    """How much training moved the weights: tensors changed, largest change, relative L2 change. Read one
    tensor pair at a time with plain reads: two whole models at once, or safetensors' memory map (whose pages
    stay resident until the file is closed: +1.0 GB here), would set the run's memory peak on an 8 GB laptop."""
    changed, max_abs, diff_sq, norm_sq = 0, 0.0, 0.0, 0.0
    with SafetensorsReader(Path(before_dir) / "model.safetensors") as before, \
            SafetensorsReader(Path(after_dir) / "model.safetensors") as after:
        names = after.names()
        for name in names:
            if name not in before.header or 0 in before.header[name]["shape"]:
                continue  # new, or nothing in it
            b = before.tensor(name).float()
            d = after.tensor(name).float() - b
            changed += int(bool((d != 0).any()))
            max_abs = max(max_abs, float(d.abs().max()))
            diff_sq += float((d * d).sum())
            norm_sq += float((b * b).sum())
    return {"tensors": len(names), "tensors_changed": changed, "max_abs_change": max_abs,
            "relative_l2_change": (diff_sq / norm_sq) ** 0.5 if norm_sq else 0.0}


class SafetensorsReader:
    """One tensor at a time from a .safetensors file (8-byte header length, JSON header, raw data), by seek and
    read: nothing of the file stays resident after a tensor is dropped."""

    DTYPES: ClassVar[dict[str, str]] = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
              "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}

    def __init__(self, path: str | Path):
        self.file = open(path, "rb")  # noqa: SIM115 - closed by __exit__
        length = int.from_bytes(self.file.read(8), "little")
        self.header = {k: v for k, v in json.loads(self.file.read(length)).items() if k != "__metadata__"}
        self.data_start = 8 + length

    def names(self) -> list[str]:
        return list(self.header)

    def tensor(self, name: str):
        import torch

        meta = self.header[name]
        start, end = meta["data_offsets"]
        self.file.seek(self.data_start + start)
        data = bytearray(self.file.read(end - start))
        dtype = getattr(torch, self.DTYPES[meta["dtype"]])
        return torch.frombuffer(data, dtype=dtype).reshape(meta["shape"]) if data else torch.empty(meta["shape"],
                                                                                                  dtype=dtype)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def save_summary(output_dir: str | Path, figures: dict) -> Path:
    """Write the figures a notebook run produced to <output_dir>/summary.json (tests read it)."""
    return write_json(Path(output_dir) / "summary.json", figures)
