"""The model before and after GRPO training: the held-out evaluation both are judged by (which examples,
sampling and environment arguments they share: `eval_setup`, `EvalSetup`), and how far training moved the
weights (`weight_change`, read one tensor at a time by `SafetensorsReader`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar


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
    stay resident until the file is closed) would set the run's memory peak on an 8 GB laptop."""
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

    DTYPES: ClassVar[dict[str, str]] = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                                        "I64": "int64",
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
