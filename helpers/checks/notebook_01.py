"""Checks of notebook 01's exercises (rubrics and reward functions)."""

from __future__ import annotations

from helpers.checks import checks_exercise
from helpers.worker_thread import run_sync

TRAP_EXAMPLES = [
    ("<think>Each box holds 6 apples, 3 boxes: 6 * 3 = 18.</think>18", "18"),
    ("<think>48 / 2 = 24, then 48 + 24 = 72.</think>72", "72"),
]
BOXED_CASES = [  # (reply, gold answer, expected reward)
    ("So the total is \\boxed{18}.", "18", 1.0),
    ("First \\boxed{7}, no wait: \\boxed{1,200}", "1200", 1.0),
    ("\\boxed{$72.00}", "72", 1.0),
    ("The answer is \\boxed{19}.", "18", 0.0),
    ("The answer is 18.", "18", 0.0),
    ("\\boxed{}", "18", 0.0),
]


def _scores(rubric, text: str, answer: str) -> dict:
    completion = [{"role": "assistant", "content": text}]
    score = run_sync(rubric.score_rollout(prompt=[], completion=completion, answer=answer,
                                          state={"timing": {"total_ms": 0.0}}))
    return score.metrics


@checks_exercise("01-repair-the-trap")
def repair_the_trap(rubric) -> str | None:
    import verifiers as vf

    if not isinstance(rubric, vf.Rubric):
        return "build a vf.Rubric(funcs=[...], weights=[...], ...)"
    if rubric.get_reward_weights() != [1.0, 0.2]:
        return "keep the weights [1.0, 0.2]: only one argument is missing"
    if not isinstance(rubric.parser, vf.ThinkParser):
        return ("the rubric hands its reward functions its own parser, a plain vf.Parser by default: "
                "pass the ThinkParser with parser=parser")
    for text, answer in TRAP_EXAMPLES:
        if _scores(rubric, text, answer).get("correct_answer") != 1.0:
            return f"{text!r} should score 1.0 for correct_answer: use the notebook's correct_answer function"
    return None


@checks_exercise("01-signal-prediction")
def signal_prediction(value) -> str | None:
    predicted, measured = float(value["predicted"]), float(value["measured"])
    if not 0.0 <= predicted <= 1.0:
        return "a share is between 0 and 1"
    if abs(predicted - measured) <= 0.1:
        return None
    return (f"the run measured {measured:.2f}. An example gives signal only if its rollouts got different "
            "rewards: how often did this model write <think> tags, and what did every rollout score then?")


@checks_exercise("01-boxed-reward")
def boxed_reward(func) -> str | None:
    for text, answer, expected in BOXED_CASES:
        got = func(completion=[{"role": "assistant", "content": text}], answer=answer)
        if float(got) != expected:
            hint = ("take the LAST \\boxed{...}" if "no wait" in text else
                    "compare canonical_number(...) of both sides" if "," in text or "$" in text else
                    "return 0.0 when there is no \\boxed{...} or an empty one" if expected == 0.0 else "")
            return f"for {text!r} (gold {answer}) it gave {got}, expected {expected}. {hint}".strip()
    return None
