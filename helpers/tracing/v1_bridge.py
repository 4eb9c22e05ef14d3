"""Notebook 04's bridge between verifiers 0.4 (the `verifiers.v1` API) and the course's Weave
traces, in notebook 04's own kernel (.venv-v1, made by scripts/setup_v1_env.sh).

Weave 0.54's verifiers integration patches verifiers' v0 classes only: it imports
`verifiers.envs.environment` (weave/integrations/verifiers/verifiers.py), which verifiers 0.4.0 does
not have, so on 0.4.0 it patches nothing and says nothing. verifiers' own eval runner writes every
rollout to `<run folder>/traces.jsonl` instead (one `vf.Episode` per line, holding its `vf.Trace`s).
`log_run` turns such a run folder into real Weave calls, in the shape the course's trace views read:

    verifiers.v1.eval             one per run: its config in, its summary out
    └── verifiers.v1.rollout      one per trace: the task in; reward, rewards and metrics out
        ├── verifiers.v1.model_call   one per model call: the messages sent in, the reply and usage out
        └── <Task class>.<reward>     one per reward: the reply in, its score and weight out

Each call keeps the start and end times the run recorded. This module never imports the top-level
helpers (helpers.tracing.session, ...): the caller passes the Weave client.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

from helpers.paths import PROJECT_ROOT

MAIN_PYTHON = PROJECT_ROOT / ".venv" / "bin" / "python"  # the course's main environment


# ---------------------------------------------------------------- this kernel


def prepare_kernel() -> None:
    """What notebook 04's kernel needs before its first helper runs.

    - `import helpers` prepares a notebook on its first helper (helpers._prepare_for_notebooks): its
      pandas setting applies here; its quieting of verifiers 0.1.5's loggers (helpers.quiet, the v0 API)
      does not, so the one warning filter that applies here is made below.
    - verifiers' runtimes run `uv` from PATH (verifiers/v1/runtimes/base.py `_ENSURE_UV`); this
      environment's `uv` (requirements-v1.txt) is in the kernel's bin folder, which a Jupyter kernel
      does not put on PATH by itself.
    """
    import warnings

    # As helpers.quiet does: weave's openai-realtime integration makes pydantic warn on import; harmless.
    warnings.filterwarnings("ignore", message=r".*allocate_lock.* is not a Python type")
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def load_gsm8k(split: str = "test", n: int | None = None, seed: int = 0) -> list[dict]:
    """GSM8K rows (`question`, `answer` = the number after `####`) from the course's own loader,
    `gsm8k_course.load_gsm8k`, run by the main environment's Python: the same rows notebook 01 gets
    for the same split, n and seed, from GSM8K_DIR or the HF hub, with the same error messages.
    (Its module needs verifiers 0.1.5 and `datasets`, which this environment does not have.)"""
    if not MAIN_PYTHON.is_file():
        raise RuntimeError(f"{MAIN_PYTHON} is missing: notebook 04 reads GSM8K with the course's main "
                           "environment. Run `bash scripts/setup_env.sh` first.")
    code = ("import json, sys\nfrom gsm8k_course import load_gsm8k\n"
            "rows = load_gsm8k(sys.argv[1], n=json.loads(sys.argv[2]), seed=int(sys.argv[3])).to_list()\n"
            "print(json.dumps(rows))")
    done = subprocess.run([str(MAIN_PYTHON), "-c", code, split, json.dumps(n), str(seed)], capture_output=True,
                          text=True, check=False, stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RuntimeError(f"loading GSM8K failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def register_taskset(taskset_id: str, taskset_class: type) -> types.ModuleType:
    """Make a Taskset class defined in a notebook loadable by its id.

    verifiers finds a taskset by importing the module named after its id (`gsm8k-v1` -> `gsm8k_v1`)
    and taking the one Taskset subclass its `__all__` exports (verifiers/v1/utils/loaders.py,
    `_import_plugin` and `_plugin_class`). A real taskset is an installed package; this registers the
    notebook's class as such a module in this process, where the eval runner runs.
    """
    module = types.ModuleType(taskset_id.replace("-", "_").lower())
    setattr(module, taskset_class.__name__, taskset_class)
    module.__all__ = [taskset_class.__name__]
    sys.modules[module.__name__] = module
    return module


# ---------------------------------------------------------------- a run folder


def read_run(run_dir: str | Path) -> tuple[dict, list]:
    """A v1 eval run folder: its saved config (configs/resolved/*.json, as the runner wrote it) and its
    episodes, read as verifiers' own `read_episodes` reads them (`vf.WireTrace` reads any taskset's traces),
    except that a damaged line is skipped with a warning naming its file and line, as the course's trace store
    does (helpers.tracing.store), and the rest is kept: a torn last line of a killed run (not JSON, or cut
    inside a UTF-8 character), a record of the wrong shape, one nested too deeply to parse. `read_episodes`
    raises on the first one, and nothing is read. A missing traces.jsonl is a RuntimeError that says why."""
    import warnings

    import pydantic
    import verifiers.v1 as vf
    from verifiers.v1.cli.output import saved_config_path
    from verifiers.v1.episode import WireEpisode
    from verifiers.v1.utils.trace_store import TRACES_FILE, type_adapter

    run_dir = Path(run_dir)
    path = run_dir / TRACES_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} does not exist: {run_dir} is not a v1 eval run folder, or its run stopped "
                           "before the first rollout finished (vf-eval writes one line per rollout). Give the "
                           "folder the run printed, or run the evaluation again.")
    config, config_path = {}, saved_config_path(run_dir)
    if config_path:
        try:
            config = json.loads(config_path.read_bytes().decode("utf-8-sig"))  # -sig: an editor's BOM is no error
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            warnings.warn(f"v1 run {config_path}: its saved config cannot be read ({type(e).__name__}); "
                          "the run's calls are written without it", stacklevel=2)
        if not isinstance(config, dict):  # a list or null: .get() on it would be a bare AttributeError in log_run
            warnings.warn(f"v1 run {config_path}: its saved config is {type(config).__name__}, not a JSON object; "
                          "the run's calls are written without it", stacklevel=2)
            config = {}
    trace_adapter, episodes, skipped = type_adapter(vf.WireTrace), [], []
    with path.open("rb") as f:  # bytes: a line cut inside a UTF-8 character must not stop the others
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8-sig"))  # -sig: a BOM (an editor's) made line 1 "not JSON"
                episode = WireEpisode.model_validate({**row, "traces": []})
                episode.traces = [trace_adapter.validate_python(trace) for trace in row["traces"]]
            except UnicodeDecodeError:
                skipped.append(f"line {number}: not UTF-8 text (a line cut inside a character?)")
            except json.JSONDecodeError:
                skipped.append(f"line {number}: not JSON (a line cut short?)")
            except RecursionError:
                skipped.append(f"line {number}: nested too deeply to read")
            except (pydantic.ValidationError, TypeError, KeyError) as e:
                skipped.append(f"line {number}: not an episode ({type(e).__name__})")
            else:
                episodes.append(episode)
    if skipped:
        warnings.warn(f"v1 run {path}: skipped {len(skipped)} damaged record(s) ({'; '.join(skipped)}); "
                      f"kept {len(episodes)}", stacklevel=2)
    return config, episodes


def _message(message: Any) -> dict:
    return message.model_dump(mode="json", exclude_none=True)


def _traces(episodes: list) -> list[tuple[int, Any]]:
    """(rollout number within its task, trace) for every trace, ordered by task then rollout
    (the runner writes episodes in the order they finish)."""
    done: dict[Any, int] = {}
    numbered = []
    for episode in episodes:
        for trace in episode.traces:
            key = trace.task.data.idx
            numbered.append((done.get(key, 0), trace))
            done[key] = done.get(key, 0) + 1
    return sorted(numbered, key=lambda item: (item[1].task.data.idx, item[0]))


def _rows(episodes: list) -> list[dict]:
    rows = []
    for number, trace in _traces(episodes):
        data = trace.task.data
        usage = trace.usage
        rows.append({
            "task": data.idx, "rollout": number, "answer": getattr(data, "answer", None),
            "reply": trace.last_reply, "reward": trace.reward,
            **{name: (r.score if r is not None else None) for name, r in trace.rewards.items()},
            **trace.metrics,
            "completion_tokens": usage.completion_tokens if usage else None,
            "seconds": round(max(trace.timing.agent.end - trace.timing.agent.start, 0.0), 2),
            "stop": trace.stop_condition, "ok": trace.ok,
            "error": trace.errors[-1].message if trace.errors else None,
        })
    return rows


def rollouts_table(run_dir: str | Path):
    """One row per rollout of a run folder: task, gold answer, the model's reply, the reward and each
    reward function's score, metrics, tokens, seconds, and whether it finished without error."""
    import pandas as pd

    return pd.DataFrame(_rows(read_run(run_dir)[1]))


def summarize(rollouts) -> dict:
    """A run's figures: rollouts, mean reward, the mean of each reward function, errors."""
    known = {"task", "rollout", "answer", "reply", "reward", "completion_tokens", "seconds", "stop", "ok", "error"}
    scores = [c for c in rollouts.columns if c not in known]
    return {"rollouts": len(rollouts), "reward": float(rollouts["reward"].mean()),
            **{f"mean {name}": float(rollouts[name].mean()) for name in scores},
            "errors": int((~rollouts["ok"]).sum()),
            "completion_tokens": int(rollouts["completion_tokens"].fillna(0).sum())}


# ---------------------------------------------------------------- Weave calls


def _time(seconds: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC) if seconds else None


def _at(value: Any, *keys: str) -> Any:
    """value[key][key]..., or None where a level is missing or not an object (a config edited by hand)."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def log_run(client: Any, run_dir: str | Path) -> Any:
    """Write a v1 run folder into Weave as calls (see the module docstring) through `client`, a
    WeaveClient (the course's local store, or W&B Weave). Returns the run's root call."""
    import pandas as pd
    from verifiers.v1 import graph

    config, episodes = read_run(run_dir)
    rows = _rows(episodes)
    traces = [trace for _, trace in _traces(episodes)]
    starts = [t.timing.start for t in traces] or [None]
    ends = [t.timing.scoring.end or t.timing.agent.end for t in traces] or [None]
    root = client.create_call(
        "verifiers.v1.eval", {"run": Path(run_dir).name, "taskset": _at(config, "env", "taskset", "id"),
                              "model": config.get("model"), "sampling": config.get("sampling"),
                              "harness": _at(config, "env", "agent", "harness", "id"),
                              "num_rollouts": config.get("num_rollouts"), "tasks": len({r["task"] for r in rows})},
        use_stack=False, started_at=_time(min(starts)))
    for trace, row in zip(traces, rows, strict=True):
        data = trace.task.data
        first = trace.calls[0].node if trace.calls else None
        rollout = client.create_call(
            "verifiers.v1.rollout",
            {"task": data.model_dump(mode="json", exclude_none=True, include={"idx", "answer", "id"}),
             "prompt": [_message(m) for m in graph.path(trace, first)[:-1]] if first is not None else []},
            parent=root, use_stack=False, display_name=f"rollout task {data.idx}", started_at=_time(trace.timing.start))
        for call in trace.calls:
            sent = graph.path(trace, call.node)[:-1] if call.node is not None else []
            reply = trace.nodes[call.node].message if call.node is not None else None
            model_call = client.create_call(
                "verifiers.v1.model_call", {"messages": [_message(m) for m in sent], "model": call.model,
                                            **(call.sampling.model_dump(exclude_none=True) if call.sampling else {})},
                parent=rollout, use_stack=False, started_at=_time(call.time.start))
            output = {"model": call.model,
                      "choices": [{"message": _message(reply), "finish_reason": call.finish_reason}]
                      if reply is not None else []}
            if call.usage:
                output["usage"] = {"prompt_tokens": call.usage.prompt_tokens,
                                   "completion_tokens": call.usage.completion_tokens,
                                   "total_tokens": call.usage.prompt_tokens + call.usage.completion_tokens}
            client.finish_call(model_call, output, ended_at=_time(call.time.end),
                               exception=RuntimeError(call.error.message) if call.error else None)
        scoring = trace.timing.scoring
        for name, reward in trace.rewards.items():
            score_call = client.create_call(f"{trace.task.type}.{name}", {"reply": trace.last_reply,
                                                                          "answer": getattr(data, "answer", None)},
                                            parent=rollout, use_stack=False, started_at=_time(scoring.start))
            client.finish_call(score_call, reward.model_dump() if reward is not None else None,
                               ended_at=_time(scoring.end))
        error = trace.errors[-1] if trace.errors else None
        client.finish_call(rollout,
                           {"reward": trace.reward, "metrics": {**{k: row[k] for k in trace.rewards}, **trace.metrics},
                                     "stop": trace.stop_condition, "ok": trace.ok},
                           ended_at=_time(scoring.end or trace.timing.agent.end),
                           exception=RuntimeError(f"{error.type}: {error.message}") if error else None)
    client.finish_call(root, summarize(pd.DataFrame(rows)) if rows else {"rollouts": 0},
                       ended_at=_time(max((e for e in ends if e), default=None)))
    client.flush()
    return root
