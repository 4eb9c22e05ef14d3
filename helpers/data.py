"""GSM8K, exactly as `vf.load_example_dataset("gsm8k", split)` returns it, from the HF hub or a folder.

Set `GSM8K_DIR` to a folder with `train.jsonl` and `test.jsonl` (the original GSM8K files) to
work offline; otherwise the data comes from the HF hub as `openai/gsm8k` (or its local cache).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from datasets import Dataset

SPLITS = ("train", "test")
HUB_DATASET = ("openai", "gsm8k")


class GSM8KUnavailable(RuntimeError):
    """GSM8K cannot be loaded; the message names the fix."""


def load_gsm8k(split: str = "test", n: int | None = None, seed: int = 0,
               data_dir: str | os.PathLike | None = None) -> Dataset:
    """Columns `question` and `answer` (the number after `####`), like vf.load_example_dataset.

    `n` picks `n` rows after a shuffle with `seed`, as verifiers does; None or -1 keeps all.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    data_dir = data_dir or os.environ.get("GSM8K_DIR") or None
    raw = _raw_from_dir(Path(data_dir), split) if data_dir else _raw_from_hub(split)
    return prepare(raw, n=n, seed=seed)


def prepare(raw: Dataset, n: int | None = None, seed: int = 0) -> Dataset:
    """The same steps as vf.load_example_dataset: optional shuffle+select, then `####` extraction."""
    from verifiers.utils.data_utils import extract_hash_answer

    if n is not None and n > 0:
        if n > len(raw):
            raise ValueError(f"n={n} is more than the {len(raw)} rows of this split")
        raw = raw.shuffle(seed=seed).select(range(n))
    return raw.map(
        lambda x: {"question": x["question"], "answer": extract_hash_answer(x["answer"])},
        remove_columns=raw.column_names,
        load_from_cache_file=False,
    )


def _raw_from_dir(folder: Path, split: str) -> Dataset:
    if not folder.is_dir():
        raise GSM8KUnavailable(
            f"GSM8K_DIR points to {folder}, which is not a folder. Point it at a folder with "
            "train.jsonl and test.jsonl, or unset it to load openai/gsm8k from the HF hub."
        )
    path = folder / f"{split}.jsonl"
    if not path.is_file():
        raise GSM8KUnavailable(f"{path} is missing: GSM8K_DIR must hold {split}.jsonl (and the other split).")
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows.append({"question": str(row["question"]), "answer": str(row["answer"])})
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise GSM8KUnavailable(
                    f"{path}, line {number}: not a GSM8K record ({type(e).__name__}: {e}). "
                    "Each line must be a JSON object with 'question' and 'answer'."
                ) from None
    if not rows:
        raise GSM8KUnavailable(f"{path} holds no records.")
    return Dataset.from_list(rows)


def _hub_reachable(timeout: float = 3.0) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    url = urlparse(endpoint)
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def _raw_from_hub(split: str) -> Dataset:
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if not offline and not _hub_reachable():
        offline = True
    if offline and not _in_hf_cache():
        raise GSM8KUnavailable(
            "GSM8K is not available: the HF hub cannot be reached and openai/gsm8k is not in the "
            "local HF cache. Set GSM8K_DIR to a folder with train.jsonl and test.jsonl "
            "(e.g. GSM8K_DIR=../shared/data/gsm8k), or connect to the internet once."
        )
    import datasets
    from datasets import load_dataset

    previous = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = offline  # read the cache without a retry loop when offline
    try:
        raw = load_dataset("/".join(HUB_DATASET), "main", split=split)
    except Exception as e:  # network errors come in many types; all mean the same here
        raise GSM8KUnavailable(
            f"Loading openai/gsm8k from the HF hub failed ({type(e).__name__}: {e}). "
            "Set GSM8K_DIR to a folder with train.jsonl and test.jsonl to load it offline."
        ) from e
    finally:
        datasets.config.HF_HUB_OFFLINE = previous
    return raw.select_columns(["question", "answer"])


def _in_hf_cache() -> bool:
    import datasets

    cache = Path(datasets.config.HF_DATASETS_CACHE)
    return any(cache.glob("___".join(HUB_DATASET) + "*"))
