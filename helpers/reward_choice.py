"""Which reward notebook 02's run trains on, said before and after it trains: the learner's finished exercise,
or the exercise's placeholder as committed, with what the placeholder taught in its committed runs
(`which_reward`, `reward_note`, and `fix_runs` for section 12's second run)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from helpers.results import seeds_table

# bench_learnability's runs of the reward exercise's placeholder (gold_anywhere): in bfloat16, and in float32 (as a
# laptop without bfloat16 instructions trains) on a CPU with AVX2 only and on one with AVX-512, each file one class
# of CPU
PLACEHOLDER_RUNS = ("nb02-placeholder", "nb02-placeholder-fp32-avx2", "nb02-placeholder-fp32")


PLACEHOLDER_WORDS = (
    "The placeholder pays 1.0 whenever the gold number appears anywhere in the reply (18 is in 118, and in "
    "'18 - 5 = 13'), so a reply that writes more numbers earns it more often, right or not: it pays for writing "
    "numbers, not for ending on the right one.")


def _show_placeholder_runs(results: str | Path | None) -> None:
    """The placeholder's committed runs in each precision, on the confirmation problems (no design was chosen on
    them), each seed's change beside the mean."""
    from IPython.display import display

    for setting in PLACEHOLDER_RUNS:
        display(seeds_table(setting, block="confirm", kinds=["pass1", "greedy", "cut", "constant"], results=results))


def _agrees_with_placeholder(func) -> bool:
    """`func` scores every reply of the reward exercise's check as the committed placeholder does."""
    from gsm8k_course import HashParser
    from word_arithmetic import gold_anywhere

    from helpers.checks.notebook_02 import _last_number_replies
    from helpers.checks.real_inputs import call_reward

    try:
        return all(call_reward(func, completion=c, answer=gold, parser=HashParser()) == gold_anywhere(c, gold)
                   for c, gold, _ in _last_number_replies())
    except Exception:  # noqa: BLE001 - a function that raises is not the placeholder
        return False


def _passes(exercise: str, func) -> bool:
    """The exercise's check, run quietly: True when it says correct."""
    from helpers.checks import check

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        check(exercise, func)
    return f"correct — {exercise}" in said.getvalue()


def which_reward(func, results: str | Path | None = None) -> bool:
    """Say which reward the training below uses, and return True when it is the learner's finished
    `last_number_right` (the reward exercise's check passes; the check runs here quietly). Otherwise the function
    trains as written: the committed placeholder (or another answer that does not pass yet), and what the
    placeholder taught in its committed runs is shown, from its result files."""
    if _passes("02-last-number", func):
        print("The training below uses your last_number_right (its check passed): 1.0 for the right last number, "
              "whatever the format.")
        return True
    what = ("the exercise's placeholder, as committed" if _agrees_with_placeholder(func)
            else "your function as written (it does not pass its check yet)")
    print(f"The training below uses {what}: last_number_right is not finished. {PLACEHOLDER_WORDS} Training on it "
          "is allowed, and section 11 explains what it taught. To train on the right answer instead, finish the "
          "exercise in section 3 and run the notebook again from there: the run starts over, since its reward "
          "differs. What the placeholder taught in its committed runs, in bfloat16 and in float32 on two CPUs "
          "(problems no design was chosen on):")
    _show_placeholder_runs(results)
    return False


def reward_note(output_dir: str | Path, results: str | Path | None = None) -> bool:
    """After training: which reward the run in `output_dir` trained on, read from the run itself (recorded when it
    started; a run resumes only with the same reward code), never from what the cells hold now; for the
    placeholder, what it pays for and what its committed runs did. Returns whether it was the learner's."""
    from helpers.grpo.run_folder import trained_reward

    yours = trained_reward(output_dir)["reward_is_yours"]
    if yours:
        print("This run trained on your last_number_right: the rows above are what a reward for the right last "
              "number taught this seed, beside what nothing paid for.")
        return True
    if yours is None:
        print("This run's folder does not record which reward it trained on (it was started by other code).")
        return False
    print("This run trained on the reward exercise's function as written, not on a reward for the right answer. "
          f"{PLACEHOLDER_WORDS} In the rows above, look at the right last number, 'cut at max_tokens' and "
          "'numbers per completion' before and after: a run paid for numbers anywhere is free to fill every reply up "
          "to the cap with them. The committed runs of the placeholder, in bfloat16 and in float32 on two CPUs:")
    _show_placeholder_runs(results)
    return False


def fix_runs(func, hack_steps: int) -> bool:
    """Section 12: whether its second run trains, said before it does. It trains only on the learner's finished
    `right_answer_line` (its check passes): as committed, the exercise's placeholder pays for exactly one '#### N'
    line with any number, the '+ one #### line' arm of the committed runs, so the run would repeat that arm
    instead of showing the fix."""
    if not hack_steps:
        print("Section 12's run is off (hack_steps = 0); the committed runs below show what it would measure.")
        return False
    if _passes("02-close-the-hack", func):
        print(f"The run below trains last_number_right + 0.5 x your right_answer_line (its check passed) for "
              f"{hack_steps} steps from the starting weights.")
        return True
    print("The run below is skipped: right_answer_line is not finished. As committed it pays 0.5 for exactly one "
          "'#### N' line, right or wrong: the '+ one #### line' arm of the table below, whose runs it would repeat "
          "(one of its seeds wrote '#### 9' in all three example replies its file keeps). Finish the exercise and "
          "run this cell again to train with the fix.")
    return False
