"""GSM8K as a verifiers environment: `vf.load_environment("gsm8k-course", ...)`.

It depends on verifiers only. GSM8K comes from the HF hub (`openai/gsm8k`), or offline from a
folder of `train.jsonl`/`test.jsonl` named by `GSM8K_DIR`; `load_gsm8k` returns exactly what
`vf.load_example_dataset("gsm8k", split)` returns.

Two variants of prompt, parser and rubric:

- `think` (the classic verifiers example): the model thinks inside <think>...</think> and answers
  after it; `vf.ThinkParser`, reward = correct_answer + 0.2 x <think> format.
- `hash` (fits a small model): the model ends with `#### <number>`, as GSM8K's own solutions do;
  the parser takes the number after the last `####`, reward = correct_answer + 0.5 x `####` format.

The rubric gets `parser=parser`. Without it, verifiers hands reward functions a plain `vf.Parser`,
which returns the whole completion, so a correct `<think>...</think>18` scores 0.

The course's other GSM8K modules (`gsm8k-feedback`, `gsm8k-calculator`) import their data loader
and answer checks from here, so all three refuse the same bad inputs with the same messages.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import verifiers as vf
from datasets import Dataset
from verifiers.utils.data_utils import extract_hash_answer as gold_answer  # GSM8K's "#### N" -> "N"

THINK_SYSTEM_PROMPT = (
    "Think step by step inside <think>...</think> tags, then give only the final numeric answer."
)
HASH_SYSTEM_PROMPT = (
    "Solve the math problem step by step. "
    "On the last line, write the final answer as '#### <number>'."
)
VARIANTS = ("think", "hash")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def canonical_number(text: str | None) -> str:
    """'$1,200.00' -> '1200'. Text that is not a single number comes back stripped, unchanged."""
    text = (text or "").strip()
    number = text.lstrip("$").rstrip(".").replace(",", "")
    if not NUMBER.fullmatch(number):
        return text
    return number.rstrip("0").rstrip(".") if "." in number else number


def extract_hash_answer(text: str | None) -> str:
    """The first number after the last '####' (GSM8K's answer marker), '' when there is none."""
    if "####" not in (text or ""):
        return ""
    match = NUMBER.search(text.rsplit("####", 1)[1])
    return canonical_number(match.group()) if match else ""


class HashParser(vf.Parser):
    """Parses the number after the last `####`; its format reward checks that there is one."""

    def __init__(self):
        super().__init__(extract_fn=extract_hash_answer)

    def get_format_reward_func(self):
        def hash_format(completion, **kwargs) -> float:
            messages = self.get_assistant_messages(completion)
            return sum(bool(self.parse(m["content"])) for m in messages) / max(len(messages), 1)

        return hash_format


def correct_answer(parser: vf.Parser, completion, answer: str, **kwargs) -> float:
    """1.0 when the parsed answer is the gold number (commas, '$' and trailing '.0' ignored)."""
    response = canonical_number(parser.parse_answer(completion))
    return 1.0 if response and response == canonical_number(answer) else 0.0


def make_parser(variant: str) -> vf.Parser:
    _check_variant(variant)
    return vf.ThinkParser() if variant == "think" else HashParser()


def make_rubric(parser: vf.Parser, variant: str) -> vf.Rubric:
    format_weight = 0.2 if variant == "think" else 0.5
    return vf.Rubric(
        funcs=[correct_answer, parser.get_format_reward_func()],
        weights=[1.0, format_weight],
        parser=parser,  # the fix for the trap described in the module docstring
    )


def load_environment(
    variant: str = "think",
    split: str = "train",
    num_examples: int = -1,
    eval_split: str = "test",
    num_eval_examples: int = -1,
    system_prompt: str | None = None,
    seed: int = 0,
) -> vf.SingleTurnEnv:
    """The course's GSM8K `vf.SingleTurnEnv`.

    variant: "think" (classic, <think> tags) or "hash" (`#### N`, fits small models).
    split / eval_split: GSM8K splits for `dataset` (training) and `eval_dataset` (evaluate()).
    num_examples / num_eval_examples: rows to keep after a shuffle with `seed`; -1 keeps all.
    system_prompt: overrides the variant's prompt.
    """
    _check_variant(variant)
    check_counts(num_examples=num_examples, num_eval_examples=num_eval_examples)
    parser = make_parser(variant)
    return vf.SingleTurnEnv(
        dataset=load_gsm8k(split, n=num_examples, seed=seed),
        eval_dataset=load_gsm8k(eval_split, n=num_eval_examples, seed=seed),
        system_prompt=system_prompt or (THINK_SYSTEM_PROMPT if variant == "think" else HASH_SYSTEM_PROMPT),
        parser=parser,
        rubric=make_rubric(parser, variant),
    )


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")


# ----------------------------------------------------------------------------- GSM8K data

SPLITS = ("train", "test")
HUB_DATASET = ("openai", "gsm8k")


class GSM8KUnavailable(RuntimeError):
    """GSM8K cannot be loaded; the message names the fix."""


def load_gsm8k(split: str = "test", n: int | None = None, seed: int = 0,
               data_dir: str | os.PathLike | None = None) -> Dataset:
    """Columns `question` and `answer` (the number after `####`), like vf.load_example_dataset.

    `n` picks `n` rows after a shuffle with `seed`, as verifiers does; None or -1 keeps all.
    """
    if n is not None:
        check_counts(n=n)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    data_dir = data_dir or os.environ.get("GSM8K_DIR") or None
    raw = _raw_from_dir(Path(data_dir), split) if data_dir else _raw_from_hub(split)
    return prepare(raw, n=n, seed=seed)


def check_counts(**counts) -> None:
    """Numbers of examples, by argument name: each a positive int, or -1 for all (verifiers would
    silently read 0 or -5 as all rows, and '5' fails deep inside with a type error)."""
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value == 0 or value < -1:
            raise ValueError(f"{name} must be a positive number of examples or -1 for all, not {value!r}")


def prepare(raw: Dataset, n: int | None = None, seed: int = 0) -> Dataset:
    """The same steps as vf.load_example_dataset: optional shuffle+select, then `####` extraction."""
    if n is not None and n > 0:
        if n > len(raw):
            raise ValueError(f"n={n} is more than the {len(raw)} rows of this split: "
                             f"ask for at most {len(raw)}, or -1 for all")
        raw = raw.shuffle(seed=seed).select(range(n))
    return raw.map(
        lambda x: {"question": x["question"], "answer": gold_answer(x["answer"])},
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
                rows.append(_record(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise GSM8KUnavailable(
                    f"{path}, line {number}: not a GSM8K record ({type(e).__name__}: {e}). Each line "
                    "must be a JSON object with a text 'question' and an 'answer' ending in '#### <number>'."
                ) from None
    if not rows:
        raise GSM8KUnavailable(f"{path} holds no records.")
    return Dataset.from_list(rows)


def _record(row) -> dict:
    """One GSM8K line, checked: the gold answer is the text after '####', so it must be there."""
    question, answer = row["question"], row["answer"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError("'question' is missing or empty")
    if not isinstance(answer, str) or "####" not in answer \
            or not NUMBER.fullmatch(canonical_number(gold_answer(answer))):
        raise ValueError("'answer' does not end in '#### <number>'")
    return {"question": question, "answer": answer}


def _hub_reachable(timeout: float = 5.0) -> bool:
    """Does the HF hub answer HTTP within `timeout`? (A hub that accepts connections but never
    answers would otherwise keep `load_dataset` retrying for over a minute.)"""
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        with urllib.request.urlopen(f"{endpoint}/api/datasets/{'/'.join(HUB_DATASET)}", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _raw_from_hub(split: str) -> Dataset:
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if not offline and not _hub_reachable():
        offline = True
    if offline and not _in_hf_cache():
        raise GSM8KUnavailable(
            "GSM8K is not available: the HF hub did not answer and openai/gsm8k is not in the "
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
