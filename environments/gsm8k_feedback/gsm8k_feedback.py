"""GSM8K with feedback, a multi-turn verifiers environment: `vf.load_environment("gsm8k-feedback")`.

The model answers with '#### <number>'; the environment checks it and replies "Correct." or
"Not yet ... try again" (with `hints=True` it also says whether the answer is too high or too
low), until the answer is right or the model has had `max_turns` turns. The rubric pays a right
final answer `discount ** (turns - 1)`: 1.0 on the first try, 0.5 on the second (discount 0.5),
plus 0.5 x the '####' format of the final reply. Two metrics with weight 0: `solved` (right in
the end, whatever the turn) and `turns` (model turns used).

It depends on verifiers and the course's `gsm8k-course` module, whose GSM8K loader and answer checks
it uses: GSM8K from the HF hub (`openai/gsm8k`), or offline from a folder of `train.jsonl`/`test.jsonl`
named by `GSM8K_DIR`, every record checked (the same rows as `gsm8k-course` for the same
`num_eval_examples` and `seed`).
"""

from __future__ import annotations

import verifiers as vf
from gsm8k_course import (
    HASH_SYSTEM_PROMPT,
    canonical_number,
    check_counts,
    extract_hash_answer,
    load_gsm8k,
)

SYSTEM_PROMPT = HASH_SYSTEM_PROMPT
CORRECT_REPLY = "Correct."

# ----------------------------------------------------------------------------- answers


def is_correct(parsed: str | None, answer: str) -> bool:
    parsed = canonical_number(parsed)
    return bool(parsed) and parsed == canonical_number(answer)


def feedback_message(parsed: str | None, answer: str, hints: bool = False) -> str:
    """The environment's reply to an answer: what the model reads before its next turn."""
    parsed = canonical_number(parsed)
    if is_correct(parsed, answer):
        return CORRECT_REPLY
    if not _is_number(parsed):
        return "Not yet: I found no final answer. Try again, ending with '#### <number>'."
    reply = f"Not yet: {parsed} is not the answer."
    if hints:
        reply += " It is too high." if float(parsed) > float(canonical_number(answer)) else " It is too low."
    return reply + " Check your steps and try again, ending with '#### <number>'."


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
    check_counts(num_examples=num_examples, num_eval_examples=num_eval_examples)
    parser = FinalAnswerParser()
    return FeedbackEnv(
        hints=hints,
        max_turns=max_turns,
        dataset=load_gsm8k(split, n=num_examples, seed=seed),
        eval_dataset=load_gsm8k(eval_split, n=num_eval_examples, seed=seed),
        system_prompt=system_prompt or SYSTEM_PROMPT,
        parser=parser,
        rubric=make_rubric(parser, discount),
    )

