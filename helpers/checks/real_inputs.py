"""What the checks try a learner's answer on, next to the reference: real GSM8K rows of both splits (gold
answers as the data writes them: '1,080', '-3'), and reward functions called the way verifiers 0.1.5's
Rubric calls them. A check accepts whatever agrees with the reference on all of its inputs and names the
first input where they part (DESIGN.md, "Exercise checks that catch mistakes").

This module imports in both environments (the course's, and notebook 04's .venv-v1)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import math

# Shaped like GSM8K's gold answers: a comma, minus signs, decimals (GSM8K's own golds have none, but replies
# do), plain numbers, one that ends in a zero. Always tried, and all there is when no data is reachable.
BUILT_IN_ROWS = (
    (("Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
      "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
      "egg. How much in dollars does she make every day at the farmers' market?"), "18"),
    (("The temperature was 2 degrees Celsius. It dropped 8 degrees Celsius overnight and then increased 3 degrees "
      "Celsius in the morning. What was the temperature, in degrees Celsius, in the morning?"), "-3"),
    ("A school sold 250 tickets on each of 4 days, at $1 a ticket. How many dollars did it take in?", "1,000"),
    ("Tom pours 2 liters of juice equally into 4 glasses. How many liters are in each glass?", "0.5"),
    ("A diver 4 meters below the surface swims 6 meters further down. Where is she, in meters, from the surface?",
     "-10"),
    ("Mia has 4 red marbles and 6 blue ones. How many marbles does she have?", "10"),
    ("A bus carries 19 passengers, and 7 more get on at the next stop. How many passengers are on the bus?", "26"),
    ("A rope 15 meters long is cut into 2 equal pieces. How long is each piece, in meters?", "7.5"),
)


@functools.cache
def gsm8k_rows() -> tuple[tuple[str, str], ...]:
    """(question, gold answer) pairs as the course's loader gives them: from each split, the first two rows, the
    first two whose gold has a comma and the first two negative ones; then BUILT_IN_ROWS. Deterministic, and
    few enough that a check takes seconds."""
    rows: list[tuple[str, str]] = []
    for split in ("test", "train"):
        try:
            data = _load(split)
        except Exception:  # noqa: BLE001, S112 - no data reachable (offline, no GSM8K_DIR): the built-in rows stand in
            continue
        rows += data[:2] + [r for r in data if "," in r[1]][:2] + [r for r in data if r[1].startswith("-")][:2]
    return tuple(dict.fromkeys(rows + list(BUILT_IN_ROWS)))


def gsm8k_golds() -> tuple[str, ...]:
    return tuple(dict.fromkeys(gold for _, gold in gsm8k_rows()))


def _load(split: str) -> list[tuple[str, str]]:
    """The project's own loader: gsm8k_course's (GSM8K_DIR, else the HF hub or its cache); in .venv-v1, where
    that module cannot be imported (it needs verifiers 0.1.5), notebook 04's bridge to it."""
    if importlib.util.find_spec("verifiers.v1") is not None:
        from helpers.tracing.v1_bridge import load_gsm8k as load_in_main_environment

        return [(row["question"], row["answer"]) for row in load_in_main_environment(split)]
    from gsm8k_course import load_gsm8k

    with quiet_datasets():
        data = load_gsm8k(split)
    return list(zip(data["question"], data["answer"]))


@contextlib.contextmanager
def quiet_datasets():
    """No `datasets` progress bars (a check maps small datasets) in the learner's output."""
    import datasets

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if bars:
            datasets.enable_progress_bars()


def write_number(x: float) -> str:
    """A number as a reply writes it: '12', '-3', '0.5'."""
    return str(int(x)) if x == int(x) else str(x)


def written_forms(gold: str) -> list[tuple[str, str]]:
    """(the gold number as a reply may write it, how): as GSM8K writes it ('1,000'), plain, after a dollar sign
    ('$26'), with a full stop ('26.'), with a thousands comma, with a zero after the point ('26.0', '0.50')."""
    value = float(gold.replace(",", ""))
    plain = write_number(value)
    forms = [(gold, "as GSM8K writes it"), (plain, "plain"), (f"{plain}.", "with a full stop after it"),
             (f"{int(value):,}" if value == int(value) else f"{value:,}", "with a thousands comma"),
             (f"{plain}.0" if value == int(value) else f"{plain}0", "with a zero after the point")]
    if value >= 0:  # '-$10' is not how a number is written
        forms.append((f"${plain}", "after a dollar sign"))
    unique: dict[str, str] = {}
    for text, how in forms:
        unique.setdefault(text, how)  # each text once, with its first description
    return list(unique.items())


def near_misses(gold: str) -> list[tuple[str, str]]:
    """(another number, the careless comparison that takes it for the gold): its negative, the same whole part
    with other decimals ('18.5' and '18.9' for 18, '0.2' for 0.5), its tenfold with a full stop ('100.' for 10),
    its digits inside a longer number ('118' for 18), one more."""
    value = float(gold.replace(",", ""))
    plain = write_number(value)
    whole = plain.split(".")[0]
    if value == int(value):
        decimals = [f"{whole}.5", f"{whole}.9"]
    else:
        decimals = [f"{whole}.{digit}" for digit in "27" if digit != plain.split(".")[1][0]][:1]
    misses = {}
    if value:
        misses[write_number(-value)] = "the sign changed: the minus sign is part of the number (a negative one differs)"
    misses.update({d: "the same whole part, other decimals: int(), round() and a digits-only pattern cut them"
                   for d in decimals})
    misses[f"{write_number(value * 10)}."] = "ten times the gold with a full stop: zeros stripped from a whole number"
    misses[f"1{plain.lstrip('-')}"] = "the gold's digits inside a longer number (a substring test)"
    misses[write_number(value + 1)] = "one more than the gold"
    return [(number, why) for number, why in misses.items() if number.rstrip(".") != plain]


def replies(gold: str, mark, work: str) -> list[tuple[str, str]]:
    """(reply, what it is) for one gold answer, the answer marked by `mark` (e.g. lambda n: f"#### {n}"), after
    `work` (a start of working, with the question's own numbers): the gold written every way a reply writes it,
    each near miss, the answer line followed by one or two lines of text, two answer lines with different
    numbers (either one last), the marker followed by words ('#### seventy-two') and by a unit ('#### 26 dollars'),
    two markers the last of which holds no number, no answer at all."""
    wrong = write_number(float(gold.replace(",", "")) + 1)
    cases = [(f"{work}\n{mark(number)}", f"the right answer, written {how}") for number, how in written_forms(gold)]
    cases += [(f"{work}\n{mark(number)}", f"a wrong answer, {number} for {gold}: {why}")
              for number, why in near_misses(gold)]
    cases += [
        (f"{work}\n{mark(gold)}\nI hope this helps.", "the right answer line, then a line of text"),
        (f"{work}\n{mark(gold)}\nI hope this helps.\nLet me know if anything is unclear.",
         "the right answer line, then two lines of text"),
        (f"{mark(wrong)}\n{mark(gold)}", "two answer lines with different numbers, the right one last"),
        (f"{mark(gold)}\n{mark(wrong)}", "two answer lines with different numbers, the right one first"),
        (f"{work}\n{mark('seventy-two')}", "the answer marker followed by words, no number"),
        (f"{work}\n{mark(gold)} dollars", "the right answer followed by a unit"),
        (f"{work}\n{mark(gold)}\n{mark('')}", "two answer markers, the last without a number: the last one counts"),
        (work, "no answer at all"),
    ]
    return cases


def multi_message(reply: str) -> list[dict]:
    """A completion of several messages, as a multi-turn rollout holds it: a first model turn (no number in it),
    the environment's reply, then `reply`, the model's last turn."""
    return [{"role": "assistant", "content": "Let me work it out step by step."},
            {"role": "user", "content": "Go on."}, {"role": "assistant", "content": reply}]


def earlier_answer(gold: str, mark, work: str, reply: str) -> list[dict]:
    """A completion whose EARLIER model turn holds the right answer (marked) and whose last turn is `reply`, with the
    environment's reply between them quoting the answer format ('#### <number>') and a number."""
    return [{"role": "assistant", "content": f"{work}\n{mark(gold)}"},
            {"role": "user", "content": "Not yet: check step 2 and end with '#### <number>'."},
            {"role": "assistant", "content": reply}]


def completions(gold: str, mark, work: str, earlier_turns: bool = True) -> list[tuple[list[dict], str]]:
    """(completion, what it is): each of `replies` as a one-message completion; the right answer, a near miss and no
    answer as the last turn of a multi-message completion; and (`earlier_turns`) a near miss or no answer last after
    an EARLIER turn that held the right answer (a reward that reads another message than the last turn takes it).
    Notebook 02 trains on one-message completions, and its references read all the model's words as one text: its
    checks leave the earlier turns out."""
    cases = [([{"role": "assistant", "content": text}], what) for text, what in replies(gold, mark, work)]
    several = [f"{work}\n{mark(gold)}", f"{work}\n{mark(near_misses(gold)[0][0])}", work]
    cases += [(multi_message(text), "several messages: the model's LAST turn holds its answer") for text in several]
    if earlier_turns:
        what = "several messages: an EARLIER turn held the right answer, the model's LAST turn is what counts"
        cases += [(earlier_answer(gold, mark, work, text), what) for text in several[1:]]
    return cases


def gold_hint(gold: str) -> str:
    """What is special about a gold answer as GSM8K writes it, and how to compare with it ('' if nothing)."""
    if "," in gold:
        return (f"GSM8K writes this gold answer with a comma ({gold!r}): canonical_number makes it a plain number "
                "(the raw text, int() and a digits-only pattern do not)")
    if gold.startswith("-"):
        return f"this gold answer is negative ({gold!r}): the minus sign is part of the number"
    if "." in gold:
        return f"this gold answer is a decimal ({gold!r}): int() fails on it and a digits-only pattern cuts it"
    return ""


def call_reward(func, **arguments) -> float:
    """`func` called as verifiers 0.1.5's Rubric.call_reward_func calls a reward function: with the arguments it
    names among prompt, completion, answer, state, task, info and parser (all of them when it takes **kwargs),
    awaited when it returns an awaitable, as a float. Unlike the rubric, it lets an exception through."""
    from helpers.worker_thread import run_sync

    arguments = {"prompt": [], "state": {}, "task": "default", "info": {}, **arguments}
    parameters = inspect.signature(func).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        arguments = {k: v for k, v in arguments.items() if k in parameters}
    result = func(**arguments)
    if inspect.isawaitable(result):
        result = run_sync(result)
    return float(result)


def same_score(score, expected) -> bool:
    """Two RolloutScores agree: the same reward and the same metrics, up to float rounding."""
    return (math.isclose(score.reward, expected.reward, abs_tol=1e-9) and set(score.metrics) == set(expected.metrics)
            and all(math.isclose(score.metrics[k], v, abs_tol=1e-9) for k, v in expected.metrics.items()))
