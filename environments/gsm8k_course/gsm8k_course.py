"""GSM8K as a verifiers environment: `vf.load_environment("gsm8k-course", ...)`.

Two variants of prompt, parser and rubric:

- `think` (the classic verifiers example): the model thinks inside <think>...</think> and answers
  after it; `vf.ThinkParser`, reward = correct_answer + 0.2 x <think> format.
- `hash` (fits a small model): the model ends with `#### <number>`, as GSM8K's own solutions do;
  the parser takes the number after the last `####`, reward = correct_answer + 0.5 x `####` format.

The rubric gets `parser=parser`. Without it, verifiers hands reward functions a plain `vf.Parser`,
which returns the whole completion, so a correct `<think>...</think>18` scores 0.
"""

from __future__ import annotations

import re

import verifiers as vf

THINK_SYSTEM_PROMPT = (
    "Think step by step inside <think>...</think> tags, then give only the final numeric answer."
)
HASH_SYSTEM_PROMPT = (
    "Solve the math problem step by step. "
    "On the last line, write the final answer as '#### <number>'."
)
VARIANTS = ("think", "hash")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def canonical_number(text: str | None) -> str:
    """'$1,200.00' -> '1200'. Text that is not a single number comes back stripped, unchanged."""
    text = (text or "").strip()
    number = text.lstrip("$").rstrip(".").replace(",", "")
    if not _NUMBER.fullmatch(number):
        return text
    return number.rstrip("0").rstrip(".") if "." in number else number


def extract_hash_answer(text: str) -> str:
    """The first number after the last '####' (GSM8K's answer marker), '' when there is none."""
    if "####" not in text:
        return ""
    match = _NUMBER.search(text.rsplit("####", 1)[1])
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
    from helpers.data import load_gsm8k

    _check_variant(variant)
    for name, value in (("num_examples", num_examples), ("num_eval_examples", num_eval_examples)):
        if not isinstance(value, int) or isinstance(value, bool) or (value < 0 and value != -1):
            raise ValueError(f"{name} must be a positive number of examples or -1 for all, not {value!r}")
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
