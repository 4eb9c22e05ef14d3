"""GSM8K with feedback, a multi-turn verifiers environment: `vf.load_environment("gsm8k-feedback")`.

The model answers with '#### <number>'; the environment checks it and replies "Correct." or
"Not yet ... try again" (with `hints=True` it also says whether the answer is too high or too
low), until the answer is right or the model has had `max_turns` turns. The rubric pays a right
final answer `discount ** (turns - 1)`: 1.0 on the first try, 0.5 on the second (discount 0.5),
plus 0.5 x the '####' format of the final reply. Two metrics with weight 0: `solved` (right in
the end, whatever the turn) and `turns` (model turns used).

It depends on verifiers only. GSM8K comes from the HF hub (`openai/gsm8k`), or offline from a
folder of `train.jsonl`/`test.jsonl` named by `GSM8K_DIR` (the same rows as the course's
`gsm8k-course` environment for the same `num_eval_examples` and `seed`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = (
    "Solve the math problem step by step. "
    "On the last line, write the final answer as '#### <number>'."
)
CORRECT_REPLY = "Correct."

# ----------------------------------------------------------------------------- answers


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def canonical_number(text: str | None) -> str:
    """'$1,200.00' -> '1200'. Text that is not a single number comes back stripped, unchanged."""
    text = (text or "").strip()
    number = text.lstrip("$").rstrip(".").replace(",", "")
    if not _NUMBER.fullmatch(number):
        return text
    return number.rstrip("0").rstrip(".") if "." in number else number


def extract_hash_answer(text: str) -> str:
    """The first number after the last '####', '' when there is none."""
    if "####" not in (text or ""):
        return ""
    match = _NUMBER.search(text.rsplit("####", 1)[1])
    return canonical_number(match.group()) if match else ""


def is_correct(parsed: str | None, answer: str) -> bool:
    parsed = canonical_number(parsed)
    return bool(parsed) and parsed == canonical_number(answer)


def feedback_message(parsed: str | None, answer: str, hints: bool = False) -> str:
    """The environment's reply to an answer: what the model reads before its next turn."""
    parsed = canonical_number(parsed)
    if is_correct(parsed, answer):
        return CORRECT_REPLY
    if not _NUMBER.fullmatch(parsed):
        return "Not yet: I found no final answer. Try again, ending with '#### <number>'."
    reply = f"Not yet: {parsed} is not the answer."
    if hints:
        reply += " It is too high." if float(parsed) > float(canonical_number(answer)) else " It is too low."
    return reply + " Check your steps and try again, ending with '#### <number>'."


# ----------------------------------------------------------------------------- the environment


class FeedbackEnv(vf.MultiTurnEnv):
    """After each model turn the environment checks the answer and says whether it is right."""

    def __init__(self, hints: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.hints = hints

    async def is_completed(self, messages, state, **kwargs) -> bool:
        # Done when the last answer was right, or at max_turns (the base class checks that).
        return state.get("solved", False) or await super().is_completed(messages, state, **kwargs)

    async def env_response(self, messages, state, **kwargs):
        parsed = self.parser.parse_answer(messages)  # the '####' number of the last model turn
        state["solved"] = is_correct(parsed, state["answer"])
        return [{"role": "user", "content": feedback_message(parsed, state["answer"], self.hints)}], state


# ----------------------------------------------------------------------------- the rubric


def model_turns(completion) -> int:
    return sum(1 for m in completion if m["role"] == "assistant")


def make_rubric(parser: vf.Parser, discount: float = 0.5) -> vf.Rubric:
    """Right final answer x discount ** (turns - 1), + 0.5 x format; `solved` and `turns` as metrics."""

    def discounted_correct(completion, answer, **kwargs) -> float:
        solved = is_correct(parser.parse_answer(completion), answer)
        return discount ** (model_turns(completion) - 1) if solved else 0.0

    def hash_format(completion, **kwargs) -> float:
        return 1.0 if parser.parse_answer(completion) else 0.0

    def solved(completion, answer, **kwargs) -> float:
        return float(is_correct(parser.parse_answer(completion), answer))

    def turns(completion, **kwargs) -> float:
        return float(model_turns(completion))

    return vf.Rubric(funcs=[discounted_correct, hash_format, solved, turns],
                     weights=[1.0, 0.5, 0.0, 0.0], parser=parser)


class FinalAnswerParser(vf.Parser):
    """Parses the '####' number of the last model turn (the environment's replies come after it)."""

    def __init__(self):
        super().__init__(extract_fn=extract_hash_answer)

    def parse_answer(self, completion) -> str:
        if isinstance(completion, str):
            return self.parse(completion)
        replies = self.get_assistant_messages(completion)
        return self.parse(replies[-1]["content"] or "") if replies else ""


def load_environment(
    max_turns: int = 3,
    discount: float = 0.5,
    hints: bool = False,
    split: str = "train",
    num_examples: int = -1,
    eval_split: str = "test",
    num_eval_examples: int = -1,
    system_prompt: str | None = None,
    seed: int = 0,
) -> FeedbackEnv:
    """GSM8K with feedback as a `vf.MultiTurnEnv`.

    max_turns: answers the model may give (the last one gets no feedback).
    discount: reward factor per extra turn (1.0 = no discount).
    hints: say "too high" / "too low" in the feedback.
    split / eval_split, num_examples / num_eval_examples, seed: GSM8K rows (-1 = all), as in gsm8k-course.
    """
    if not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be a positive number of model turns, not {max_turns!r}")
    if not 0 < discount <= 1:
        raise ValueError(f"discount must be in (0, 1], not {discount!r}")
    parser = FinalAnswerParser()
    return FeedbackEnv(
        hints=hints,
        max_turns=max_turns,
        dataset=load_gsm8k(split, num_examples, seed),
        eval_dataset=load_gsm8k(eval_split, num_eval_examples, seed),
        system_prompt=system_prompt or SYSTEM_PROMPT,
        parser=parser,
        rubric=make_rubric(parser, discount),
    )


def load_gsm8k(split: str, n: int = -1, seed: int = 0) -> Dataset:
    """`question` and `answer` (the number after '####'), like vf.load_example_dataset("gsm8k")."""
    folder = os.environ.get("GSM8K_DIR")
    if not folder:
        return vf.load_example_dataset("gsm8k", split=split, n=n if n > 0 else None, seed=seed)
    path = Path(folder) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"GSM8K_DIR is set, but {path} is missing: it must hold {split}.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    raw = Dataset.from_list([{"question": r["question"], "answer": r["answer"]} for r in rows])
    if n > 0:
        raw = raw.shuffle(seed=seed).select(range(min(n, len(raw))))
    return raw.map(lambda x: {"answer": extract_hash_answer(x["answer"])}, load_from_cache_file=False)
