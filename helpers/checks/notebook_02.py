"""Checks of notebook 02's exercises (GRPO): the right last number, the rubric as TRL reward functions,
advantages, a knob that kills the signal, GRPO's loss (against a reference on made-up inputs and against the
trainer's own loss on its last step), and a format term paid only with the right answer. The reward functions
are run next to the reference on replies built from GSM8K rows of both splits (real_inputs)."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import math
import sys
from collections.abc import Mapping

from helpers.checks import checks_exercise
from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import call_reward, completions, gold_hint, gsm8k_rows, write_number
from helpers.worker_thread import run_sync

GROUP = [1.5, 0.5, 0.0, 0.5]
# The solution shows the advantages to 2 decimals (+1.39, -0.20, -0.99): values rounded so must pass, and
# the mistakes below (std over n, no division) are all further off than that.
TOLERANCE = 0.006


def _advantages(rewards: list[float], unbiased: bool = True) -> list[float]:
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - (1 if unbiased else 0))
    return [(r - mean) / (math.sqrt(var) + 1e-4) for r in rewards]


def _close(values, expected) -> bool:
    return all(abs(v - e) < TOLERANCE for v, e in zip(values, expected))


@checks_exercise("02-group-advantages")
def group_advantages(advantages) -> str | None:
    try:
        values = [float(a) for a in advantages]  # a list, a numpy array or a torch tensor
    except (TypeError, ValueError):
        return "give a list of four numbers, one advantage per completion"
    if len(values) != len(GROUP):
        return f"one advantage per completion: {len(GROUP)} numbers, not {len(values)}"
    if _close(values, _advantages(GROUP)):
        return None
    if _close(values, _advantages(GROUP, unbiased=False)):
        return "close: torch.std divides by n - 1 (4 - 1 = 3 here), not by n"
    mean = sum(GROUP) / len(GROUP)
    if _close(values, [r - mean for r in GROUP]):
        return "that is reward minus the group mean; now divide by the group's standard deviation (+ 1e-4)"
    if abs(sum(values)) > 1e-3:
        return "the advantages of a group add up to 0: start from each reward minus the group's mean"
    return "advantage = (reward - mean of the group) / (standard deviation of the group + 1e-4)"


@checks_exercise("02-no-signal")
def no_signal(prediction) -> str | None:
    # any mapping (MappingProxyType, UserDict) holding the two keys; other keys are the learner's notes
    if not isinstance(prediction, Mapping) or {"frac_reward_zero_std", "grad_norm"} - set(prediction):
        return "a dict with the two keys 'frac_reward_zero_std' and 'grad_norm'"
    try:
        zero_std, grad = float(prediction["frac_reward_zero_std"]), float(prediction["grad_norm"])
    except (TypeError, ValueError):
        return "predict numbers: 'frac_reward_zero_std' is a share between 0 and 1, 'grad_norm' a norm"
    if zero_std != 1.0:
        return ("if every completion of a prompt is the same, every group's rewards are equal: what share of "
                "the groups is that?")
    if grad != 0.0:
        return ("every reward equals its group's mean, so every advantage is 0; with beta = 0 the loss is "
                "advantage x (log-prob ratio), so what is its gradient?")
    return None


# ----------------------------------------------------------------------------- the rubric as TRL reward functions


def last_number_right(completion, answer, **kwargs) -> float:
    """Notebook 02's reward with the exercise's signature (what the notebook's rubric holds): the course's own."""
    from word_arithmetic import last_number_right as reference

    return reference(completion, answer)


def _course_rubrics() -> tuple:
    """The rubrics the adapter meets: the course's two GSM8K rubrics ('####' and <think>: a different parser each,
    a different format weight), and notebook 02's own, as its cells build them: its functions not in alphabetical
    order, a weight of 0 (section 3) and of 0.5 (section 12). New ones for every check: the learner's code may
    change what it is given."""
    import verifiers as vf
    from gsm8k_course import HashParser, correct_answer, make_parser, make_rubric
    from word_arithmetic import right_answer_line

    warns = logging.getLogger("verifiers.parsers.ThinkParser")  # its warning is for notebook 01's model, not here
    warns.disabled = True
    try:
        course = [make_rubric(make_parser(variant), variant) for variant in ("hash", "think")]
    finally:
        warns.disabled = False
    return (*course, vf.Rubric(funcs=[last_number_right, correct_answer], weights=[1.0, 0.0], parser=HashParser()),
            vf.Rubric(funcs=[last_number_right, right_answer_line, correct_answer], weights=[1.0, 0.5, 0.0],
                      parser=HashParser()))


def _hash_line(number: str) -> str:
    return f"#### {number}"


def _after_thinking(number: str) -> str:
    return f"</think>{number}"


@functools.cache
def _adapter_batch() -> tuple[tuple[list[dict], str, str], ...]:
    """(completion, gold, question) over GSM8K rows: the shared completions with the answer after '####' and after
    </think> (the gold written every way, near misses, text after it, two answers, none, several messages)."""
    batch = []
    for question, gold in gsm8k_rows():
        for mark, work in ((_hash_line, f"{question[:60]} ..."), (_after_thinking, f"<think>{question[:60]} ...")):
            batch += [(completion, gold, question) for completion, _ in completions(gold, mark, work)]
    return tuple(batch)


@functools.cache
def _rubric_scores() -> tuple[dict[str, list[float]], ...]:
    """For each of _course_rubrics, each function's score of each completion of _adapter_batch: what TRL's
    function of that name should return (scored on rubrics of their own: the learner's code gets others)."""
    async def score_all(rubric):
        return [await rubric.score_rollout(prompt=[], completion=copy.deepcopy(completion), answer=gold,
                                           state={"timing": {"total_ms": 0.0}}) for completion, gold, _ in _adapter_batch()]

    rubrics = _course_rubrics()
    scores = [run_sync(score_all(rubric)) for rubric in rubrics]
    return tuple({name: [s.metrics[name] for s in each] for name in rubric.get_reward_func_names()}
                 for rubric, each in zip(rubrics, scores))


def _floats(got, n: int) -> list | None:
    """TRL's reading of a reward function's result: one number (or None) per completion, from any sequence
    (a list, a numpy array, a tensor); None when it is not that."""
    if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__len__") or len(got) != n:
        return None
    try:
        return [None if v is None else float(v) for v in got]
    except (TypeError, ValueError):
        return None


def _close_all(values: list, expected: list) -> bool:
    return all(v is not None and math.isclose(v, e, abs_tol=1e-9) for v, e in zip(values, expected))


def _calls(batch) -> list[tuple[str, dict]]:
    """(how, keywords) of each call a TRL reward function gets: TRL 0.24's (the batch's prompts, completions and
    completion ids, every other dataset column, trainer_state), and notebook 02's cells' (prompts, completions,
    answer)."""
    prompts = [[{"role": "user", "content": question}] for _, _, question in batch]
    completions_ = [copy.deepcopy(completion) for completion, _, _ in batch]
    answers = [gold for _, gold, _ in batch]
    trl = {"prompts": prompts, "completions": completions_, "completion_ids": [[1]] * len(batch),
           "question": [question for _, _, question in batch], "answer": answers, "info": [{}] * len(batch),
           "id": list(range(len(batch))), "trainer_state": None}
    return [("as TRL calls it", trl),
            ("as the notebook's cells call it", {"prompts": prompts, "completions": completions_, "answer": answers})]


def _adapter_references() -> tuple:
    from helpers.grpo.rewards import RubricRewards

    return (RubricRewards,)


@checks_exercise("02-reward-adapter")
def reward_adapter(build) -> str | None:
    """build(rubric) -> one TRL reward function per rubric function: (prompts, completions, answer, **kw) -> floats.
    Tried on the course's rubrics and notebook 02's, on batches of several sizes, called as TRL and as the
    notebook's cells call them, against the rubric's own scores."""
    if not callable(build):
        return "trl_reward_funcs should be a function that takes a rubric"
    full = _adapter_batch()
    for rubric, expected_full in zip(_course_rubrics(), _rubric_scores()):
        names = rubric.get_reward_func_names()
        try:
            funcs = list(build(rubric) or [])
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"trl_reward_funcs(rubric) raised {type(e).__name__}: {e}"
        own = not_your_own(build, *funcs, references=_adapter_references())
        if own:
            return own
        if len(funcs) != len(names) or not all(callable(f) for f in funcs):
            return f"one TRL function per rubric function: {len(names)} functions ({', '.join(names)}), not {len(funcs)}"
        if [getattr(f, "__name__", "") for f in funcs] != names:
            return (f"TRL logs each function as rewards/<its __name__>: name them {names}, in the rubric's order "
                    "(set reward.__name__ = func.__name__)")
        weights = dict(zip(names, rubric.get_reward_weights()))
        for size in (len(full), 3, 1):  # the batches TRL sends vary in size
            batch = full[:size]
            for how, keywords in _calls(batch):
                for func, name in zip(funcs, names):
                    hint = _adapter_difference(func, name, keywords, batch, expected_full[name][:size], weights[name],
                                               rubric, how)
                    if hint:
                        return hint
    return None


def _adapter_difference(func, name: str, keywords: dict, batch, expected: list, weight: float, rubric,
                        how: str) -> str | None:
    """The first difference between one TRL function's scores of a batch and the rubric's, with its mistake."""
    size = len(batch)
    try:
        got = func(**keywords)
    except TypeError as e:
        if any(f"'{key}'" in str(e) for key in set(keywords) - {"prompts", "completions", "answer"}):
            return (f"{name}, called {how} ({', '.join(f'{k}=' for k in keywords)}), raised TypeError: {e}. TRL passes "
                    "every column of the dataset as a keyword, and trainer_state: end the signature with **kwargs")
        return (f"{name} raised TypeError: {e}. TRL calls it with keywords (prompts=, completions=, answer=, ...); "
                "pass the rubric's parser to functions that take one")
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return (f"{name} raised {type(e).__name__}: {e}. TRL calls it with keywords (prompts=, completions=, "
                "answer=, ...); pass the rubric's parser to functions that take one")
    values = _floats(got, size)
    if values is None:
        return f"{name} must return one float per completion (a list of {size}), not {got!r}"
    if _close_all(values, expected):
        return None
    if weight != 1.0 and _close_all(values, [v * weight for v in expected]):
        return (f"{name} multiplied its scores by the weight {weight}: TRL applies reward_weights itself "
                "(GRPOConfig(reward_weights=...)), so return the function's own score")
    i = next(i for i, (v, e) in enumerate(zip(values, expected)) if v is None or not math.isclose(v, e))
    completion, gold, _ = batch[i]
    shown = repr(completion[0]["content"]) if len(completion) == 1 else f"the messages {completion!r}"
    fraction = (" (a score between 0 and 1 is a score too: return the function's own float)"
                if 0 < expected[i] < 1 else "")
    return (f"{name} gave {values[i]} for completion {i} of a batch of {size} ({shown}, gold {gold!r}), where the "
            f"rubric [{', '.join(rubric.get_reward_func_names())}] (parser {type(rubric.parser).__name__}) scores {expected[i]}{fraction}: score "
            "completion i (all its messages) against answer i with the rubric's function and the rubric's parser "
            "(rubric.parser)"
            + (f"; {gold_hint(gold)}" if gold_hint(gold) else ""))


# ----------------------------------------------------------------------------- a format term paid only with the answer

LINE_CASES = [  # (reply, expected score, what a wrong score here means); the gold answer is 72
    ("48 / 2 = 24, 48 + 24 = 72.\n#### 72", 1.0, "a worked answer ending in '#### 72' (the gold) must earn 1.0"),
    ("#### 72\nThe answer is: 72", 1.0,
     "text after the one answer line is fine (SmolLM2 often writes it): only a second '####' is a list"),
    ("Total: 72 apples\n#### 72.00", 1.0, "'#### 72.00' is 72 (compare with canonical_number)"),
    ("#### 9", 0.0, ("a '####' answer that is wrong must earn 0: a constant '#### 9' to every problem collected a "
                    "format term that paid for any number, whatever the answer")),
    ("It is 72.\n#### 70", 0.0, ("the number after '####' is the answer, not the last number before it: '#### 70' "
                                "is wrong")),
    ("So the answer is 72.", 0.0, "no '####' line earns 0: this term pays for the answer line the prompt asks for"),
    ("#### 72\n#### 72\n#### 72\n#### 72", 0.0, "a list of '#### N' lines earns 0: only ONE '####' earns it"),
    ("#### 12\n#### 72", 0.0, "several '####' lines earn 0, whatever they say"),
    ("The answer is #### 72 #### 72", 0.0, "count the '####' markers, not the lines: two on one line are two"),
    ("First, 48 divided by 2 is 24. Then we add 48 and", 0.0, "a reply cut before its answer earns 0"),
    ("So the answer is\n#### seventy-two", 0.0, "'#### seventy-two' holds no number"),
    ("", 0.0, "an empty reply earns 0"),
]


def _line_replies() -> list[tuple[list[dict], str, str]]:
    """(completion, gold, what it is) over GSM8K rows: one answer line (the gold as GSM8K writes it, plain, wrong,
    with text after it, with no space after the marker), lists on separate lines and on one line, no answer; then
    the shared completions with a '####' line (the gold written every way, near misses, text after it, two '####'
    lines with different numbers, none, several messages)."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in gsm8k_rows():
        number = canonical_number(gold)
        wrong = write_number(float(number) + 1)
        texts = [(f"{question[:80]}\nSo the answer is {gold}.\n#### {gold}", "one right answer line"),
                 (f"#### {number}\nThe answer is: {number}", "one right answer line, then text"),
                 (f"I think it is {wrong}.\n#### {wrong}", "one answer line with a wrong number: it must earn 0"),
                 (f"So the total is {number}.\n####{number}", "one right answer line, no space after the marker"),
                 (f"So it is {number}.\n#### {wrong}", "the right number before a wrong '####' answer: it must earn 0"),
                 (f"#### {gold}\n#### {gold}", "two '####' lines: a list earns 0"),
                 (f"#### {gold} #### {gold}", ("two '####' markers on one line that starts with one: a list (count "
                                               "the '####' markers, not the lines)")),
                 (f"It is {wrong}, so #### {wrong} #### {gold}", "two '####' markers on one line: a list"),
                 (f"{question[:80]}", "no answer line"),
                 (f"So the answer is {gold}\n####", "a '####' with no number after it")]
        cases += [([{"role": "assistant", "content": text}], gold, what) for text, what in texts]
        cases += [(completion, gold, what)
                  for completion, what in completions(gold, _hash_line, f"{question[:60]} ...", earlier_turns=False)]
    return cases


def _shown(completion: list[dict]) -> str:
    """A completion in a hint: its text when it is one message, else its messages."""
    return repr(completion[0]["content"]) if len(completion) == 1 else f"the completion {completion!r}"


def _reward_difference(func, cases, reference, adapter_call: bool) -> str | None:
    """`func` next to `reference` on (completion, gold, expected or None, what it is), called as a rubric calls a
    reward function (notebook 02's RubricRewards scores through one) and, with `adapter_call`, as the
    notebook's TRL adapter calls one: f(parser=..., completion=..., answer=...), without await. The first
    difference, with what it is."""
    from gsm8k_course import HashParser

    for completion, gold, expected, what in cases:
        expected = reference(completion, gold) if expected is None else expected
        case = f"for {_shown(completion)} (gold {gold!r})"
        try:
            if adapter_call:
                result = func(parser=HashParser(), completion=copy.deepcopy(completion), answer=gold)
                if inspect.isawaitable(result):
                    getattr(result, "close", lambda: None)()  # never awaited: close it quietly
                    return ("write it with def, not async def: the notebook's TRL adapter (trl_reward_funcs, section 3) "
                            "calls it as f(parser=..., completion=..., answer=...) without await, and a coroutine is "
                            "not a number")
                if float(result) != expected:
                    return f"{case} it gave {result}, expected {expected}: " + "; ".join(filter(None, [what, gold_hint(gold)]))
            got = call_reward(func, completion=copy.deepcopy(completion), answer=gold, parser=HashParser())
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"{case} it raised {type(e).__name__}: {e}" + (f"; {gold_hint(gold)}" if gold_hint(gold) else "")
        if got != expected:
            why = gold_hint(gold) if expected == 1.0 else ""
            return f"{case} it gave {got}, expected {expected}: " + "; ".join(filter(None, [what, why]))
    return None


@checks_exercise("02-close-the-hack")
def right_answer_line(func) -> str | None:
    """func(completion, answer) -> 1.0 only when the reply holds exactly one '####' and the number after it is the
    gold answer; tried next to the course's reference (word_arithmetic.right_answer_line)."""
    from word_arithmetic import right_answer_line as reference

    if not callable(func):
        return ("right_answer_line should be a reward function: "
                "def right_answer_line(completion, answer, **kwargs) -> float")
    own = not_your_own(func, references=(reference,))
    if own:
        return own
    cases = [([{"role": "assistant", "content": text}], "72", expected, hint) for text, expected, hint in LINE_CASES]
    number = ("one '####' whose number is the gold answer earns 1.0: extract_hash_answer reads every way a number is "
              "written ('$18', '-3', '1,000', '0.5.'), and canonical_number makes both sides the same number")
    cases += [(completion, gold, None, f"{what}; {number}") for completion, gold, what in _line_replies()]
    # section 12 scores it through RubricRewards only, which awaits it: an async def is fine there
    return _reward_difference(func, cases, lambda completion, gold: reference(completion, gold), adapter_call=False)


# ----------------------------------------------------------------------------- the right last number


def _arithmetic_rows() -> list[tuple[str, str]]:
    """(question, gold) from the word problems notebook 02 trains on (one step, numbers up to 20), then GSM8K's
    rows (golds written '1,080', '-3', '0.5')."""
    from word_arithmetic import generate

    problems = generate(4, "eval", "one-step", 20, 0)
    return [(p.question, str(p.answer)) for p in problems] + list(gsm8k_rows())


def _said(number: str) -> str:
    return f"So the answer is {number}"


def _last_number_replies() -> list[tuple[list[dict], str, str]]:
    """(completion, gold, what it is) for each row: the right number last, with and without a '####' line, written
    another way ('1,200', '1200', '12.0', '$12.'), followed by words; the right number early and another one last
    (a worked line, a second question), a number that only contains the gold, none at all; then the shared
    completions, the answer in words and in a '####' line (near misses, two answers, several messages)."""
    from gsm8k_course import canonical_number

    cases = []
    for question, gold in _arithmetic_rows():
        number = canonical_number(gold)
        value = float(number)
        wrong, bigger = write_number(value + 1), f"1{number.lstrip('-')}"
        with_comma = f"{int(value):,}" if value == int(value) else number
        texts = [
            (f"{question[:60]} ... = {number}", "the right number last, no '####' line (it must still earn 1)"),
            (f"So it is {number}.\n#### {number}", "the right number in a '####' line"),
            (f"#### {gold}\nThe answer is: {gold} apples.", "the right number, then words after it"),
            (f"It is {with_comma}.", "the right number written with a thousands comma"),
            (f"It is {number}.0", "the right number written as a decimal (12.0 is 12)"),
            (f"That makes ${number}.", "the right number after a '$', with a full stop"),
            (f"First {number}, then {wrong}, so the answer is {wrong}.", "the right number early, a wrong one last"),
            (f"#### {number}\nQuestion: Tom has {wrong} apples.",
             "the right answer, then a new question with another number: only the LAST number counts"),
            (f"It is {bigger}.", "a number that contains the gold's digits is another number"),
            (f"It is {wrong}.\n#### {number}", "a wrong number early, the right one last"),
            ("I do not know.", "no number at all"),
            ("", "an empty reply"),
        ]
        cases += [([{"role": "assistant", "content": text}], gold, what) for text, what in texts]
        for mark in (_said, _hash_line):
            cases += [(completion, gold, what)
                      for completion, what in completions(gold, mark, f"{question[:60]} ...", earlier_turns=False)]
    return cases


def _last_number_references() -> tuple:
    from word_arithmetic import last_number_right as reference

    return (reference, last_number_right)


@checks_exercise("02-last-number")
def last_number_reward(func) -> str | None:
    """func(completion, answer) -> 1.0 when the reply's last number is the gold one, whatever the format; tried
    next to the course's reference (word_arithmetic.last_number_right) on replies to real problems, called as the
    notebook's rubric and its TRL adapter call it."""
    if not callable(func):
        return "last_number_right should be a reward function: def last_number_right(completion, answer, **kwargs)"
    own = not_your_own(func, references=_last_number_references())
    if own:
        return own
    cases = [(completion, gold, None, what) for completion, gold, what in _last_number_replies()]
    return _reward_difference(func, cases, last_number_right, adapter_call=True)


# ----------------------------------------------------------------------------- GRPO's loss, as TRL 0.24 computes it


def _loss_reference(rewards, logps, old_logps, mask, num_generations: int, epsilon: float = 0.2, mistake: str = ""):
    """TRL 0.24's GRPO loss for notebook 02's settings (scale_rewards "group", beta 0, loss_type "dapo" in one
    process, epsilon_high = epsilon): group-normalised advantages, the clipped ratio, the token average. With
    `mistake`, the same computation with one of the mistakes the check names."""
    import torch

    grouped = rewards.float().view(-1, num_generations)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True, unbiased=mistake != "std over n")
    advantages = (centred if mistake == "not normalised" else centred / (std + 1e-4)).reshape(-1, 1)
    ratio = torch.exp(logps.float() - old_logps.float())
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    if mistake == "no clipping":
        per_token = -ratio * advantages
    elif mistake == "wrong side":
        per_token = -torch.max(ratio * advantages, clipped * advantages)
    else:
        per_token = -torch.min(ratio * advantages, clipped * advantages)
    if mistake == "no minus":
        per_token = -per_token
    mask = mask.float()
    if mistake == "mask ignored":
        return per_token.mean()
    if mistake == "mean over completions":
        return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


LOSS_MISTAKES = {  # mistake -> its hint
    "mean over completions": ("that is the mean over completions of each one's token mean (TRL's loss_type 'grpo'); "
                              "TRL 0.24's default 'dapo' sums over every completion token of the batch and divides "
                              "by their number, so a long completion weighs more than a short one"),
    "no clipping": ("no clipping: the ratio is taken as it is; clip it to [1 - epsilon, 1 + epsilon] and keep the "
                    "smaller of ratio x advantage and clipped ratio x advantage"),
    "wrong side": ("the larger of ratio x advantage and clipped ratio x advantage was kept; PPO's objective keeps the "
                   "smaller (torch.min), so a step never gains from pushing the ratio past the clip"),
    "not normalised": "the advantages are reward minus the group's mean; divide by the group's standard deviation + 1e-4",
    "std over n": "close: torch.std divides by n - 1 (the group's size - 1), not by n",
    "mask ignored": ("the padding counted: average over the completion tokens only (mask 1), not over every position "
                     "of the padded batch"),
    "no minus": "the sign: the loss is minus the objective (the optimizer minimises it)",
}


def _loss_inputs() -> list[tuple[dict, str]]:
    """(keywords, what they are): made-up batches shaped like a step's (completions x tokens), with ratios away from
    1 on both sides of the clip, completions of different lengths padded with nonsense log-probabilities, rewards
    that give advantages of both signs and a group whose rewards are all equal (advantages 0)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    cases = []
    for groups, size, tokens, epsilon in ((3, 4, 6, 0.2), (2, 3, 5, 0.1), (4, 2, 7, 0.28)):
        n = groups * size
        rewards = torch.randint(0, 3, (n,), generator=generator).float() * 0.5
        rewards[:size] = 1.0  # the first group: all equal
        logps = -torch.rand(n, tokens, generator=generator) * 3
        old = logps - (torch.rand(n, tokens, generator=generator) - 0.45) * 1.2  # ratios about 0.55 to 1.9
        lengths = torch.randint(1, tokens + 1, (n,), generator=generator)
        lengths[-1] = tokens
        mask = (torch.arange(tokens)[None, :] < lengths[:, None]).int()
        logps = torch.where(mask.bool(), logps, torch.full_like(logps, -20.0))  # padding: not a real log-prob
        cases.append(({"rewards": rewards, "logps": logps, "old_logps": old, "mask": mask, "num_generations": size,
                       "epsilon": epsilon},
                      f"{groups} groups of {size} completions, up to {tokens} tokens, epsilon {epsilon}"))
    return cases


def _loss_of(func, keywords: dict) -> float:
    import torch

    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
    return float(func(**copies))


def _gradient_of(func, keywords: dict):
    """(the loss, its gradient with respect to logps) as the trainer uses it: logps come from the model (a tensor
    that requires grad, not a leaf), and the loss is backpropagated. The gradient is None when the loss carries
    none (a number, or a tensor cut from logps)."""
    import torch

    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in keywords.items()}
    leaf = copies["logps"].float().requires_grad_()
    copies["logps"] = leaf * 1.0  # the model's output is no leaf: in-place work on it is allowed, as in training
    loss = func(**copies)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        return loss, None
    loss.backward()
    return loss, torch.zeros_like(leaf) if leaf.grad is None else leaf.grad


def _reference_gradient(keywords: dict):
    return _gradient_of(lambda **k: _loss_reference(**k), keywords)[1]


def _cut(func) -> str:
    """What in the learner's code cuts the loss from logps' gradient, in words (from the names its code reads)."""
    import numpy

    from helpers.checks.own_code import _reached, _reads

    learner, reached = _reached(func)
    names = set()
    for function in learner:
        reads = _reads(function.__code__)
        names |= reads["attribute"] | reads["global"]
    found = [words for name, words in (("item", ".item()"), ("tolist", ".tolist()"), ("numpy", ".numpy() or numpy"),
                                       ("detach", ".detach()"), ("no_grad", "torch.no_grad()"),
                                       ("inference_mode", "torch.inference_mode()"), ("data", ".data"),
                                       ("tensor", "torch.tensor(...) of a number")) if name in names]
    if any(obj is numpy for obj in reached) and ".numpy() or numpy" not in found:
        found.append("numpy")
    return f" (your code uses {', '.join(found)})" if found else ""


def _gradient_mistake(keywords: dict, grad, expected) -> str:
    """Where the learner's gradient parts from the reference's: padding, clipped tokens, the equal-reward group."""
    import torch

    mask = keywords["mask"].bool()
    differs = ~torch.isclose(grad, expected, rtol=1e-3, atol=1e-7)
    if (differs & ~mask).any():
        return ("the padding gets a gradient: positions with mask 0 are not tokens the model wrote; multiply by the "
                "mask (or select the tokens) before averaging")
    ratio = torch.exp(keywords["logps"].float() - keywords["old_logps"].float())
    epsilon = keywords["epsilon"]
    clipped = (ratio < 1 - epsilon) | (ratio > 1 + epsilon)
    if (differs & clipped & (expected == 0)).any():
        return ("the tokens whose ratio is outside [1 - epsilon, 1 + epsilon] on the clipped side still get a gradient: "
                "with -min(ratio x A, clip(ratio) x A) the clipped term wins there and carries none")
    size = keywords["num_generations"]
    if (differs[:size] & (expected[:size] == 0)).any():
        return "the first group's rewards are all equal (advantages 0): its tokens must get no gradient"
    return ("its value is right but its gradient is not: part of the loss is cut from logps (.detach()?) or counted "
            "twice; let the gradient flow through ratio = exp(logps - old_logps) in both terms")


@checks_exercise("02-grpo-loss")
def grpo_loss(func) -> str | None:
    """func(rewards, logps, old_logps, mask, num_generations, epsilon) -> the loss TRL 0.24 computes for notebook
    02's settings, as the trainer uses it: its value and its gradient with respect to logps, next to the reference
    on made-up batches where clipping, padding and both advantage signs matter (at the trainer's own step the
    ratio is 1 and the clip never acts), then its value on the trainer's own last step (its batch, and the loss
    TRL computed from it)."""
    import torch

    if not callable(func):
        return "grpo_loss should be a function: def grpo_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2)"
    own = not_your_own(func, references=_loss_references())
    if own:
        return own
    for keywords, what in _loss_inputs():
        try:
            loss, grad = _gradient_of(func, keywords)
            got = float(loss.detach() if hasattr(loss, "detach") else loss)
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            grad_words = (" The logps the trainer passes come from the model and require grad: keep every step in "
                          "torch (no .numpy()), so that loss.backward() reaches the model") if "grad" in str(e) else ""
            return (f"on a batch of {what}, it raised {type(e).__name__}: {e}. The arguments are torch tensors: "
                    f"rewards (completions), logps, old_logps and mask (completions x tokens).{grad_words}")
        expected = float(_loss_reference(**keywords))
        if not math.isclose(got, expected, rel_tol=1e-4, abs_tol=1e-6):
            for mistake, hint in LOSS_MISTAKES.items():
                if math.isclose(got, float(_loss_reference(**keywords, mistake=mistake)), rel_tol=1e-4, abs_tol=1e-6):
                    return f"on a batch of {what}: {hint}"
            return (f"on a batch of {what}, your loss is {got:.6f}, TRL's {expected:.6f}: advantages per group (reward - "
                    "mean) / (std + 1e-4), ratio = exp(logps - old_logps), per token -min(ratio x A, clip(ratio) x A), "
                    "summed over the completion tokens (mask 1) and divided by their number")
        if grad is None:
            kind = (f"a {type(loss).__module__.split('.')[0]} {type(loss).__name__}, not a torch tensor"
                    if not isinstance(loss, torch.Tensor) else "a tensor cut from logps (requires_grad is False)")
            return (f"on a batch of {what}, the value is right but the loss has no gradient: it is {kind}{_cut(func)}. "
                    "The trainer calls loss.backward() to train the model, and this loss cannot train it: keep every "
                    "step in torch on the tensors you are given (no .item(), float(), numpy, .detach() or "
                    "torch.no_grad())")
        reference = _reference_gradient(keywords)
        if not torch.allclose(grad.float(), reference, rtol=1e-3, atol=1e-7):
            return f"on a batch of {what}, the loss's gradient with respect to logps is wrong: " + _gradient_mistake(
                keywords, grad.float(), reference)
    batch = _trainer_batch()
    if batch is None:
        print("(no step of the trainer in this kernel to compare with yet: compared on made-up batches only)")
        return None
    keywords = {k: batch[k] for k in ("rewards", "logps", "old_logps", "mask", "num_generations", "epsilon")}
    try:
        got = _loss_of(func, keywords)
    except Exception as e:  # noqa: BLE001 - the hint names what went wrong
        return f"on the trainer's last step (step {batch['step']}) it raised {type(e).__name__}: {e}"
    trl = batch["loss"]
    if not math.isclose(got, trl, rel_tol=1e-3, abs_tol=1e-5):
        if not math.isclose(float(_loss_reference(**keywords)), trl, rel_tol=1e-3, abs_tol=1e-5):
            print(f"(the course's reference gives {float(_loss_reference(**keywords)):.6f} on the trainer's last step, "
                  f"where TRL computed {trl:.6f}: a TRL other than 0.24? compared on made-up batches only)")
            return None
        return (f"on the trainer's last step (step {batch['step']}: {len(batch['rewards'])} completions, "
                f"{int(batch['mask'].sum())} tokens), your loss is {got:.6f}, the trainer's {trl:.6f}")
    tokens = int(torch.as_tensor(batch["mask"]).sum())
    print(f"On the trainer's last step (step {batch['step']}: {len(batch['rewards'])} completions, {tokens} tokens) "
          f"your loss is {got:.6f} and TRL's {trl:.6f}.")
    return None


def _loss_references() -> tuple:
    """The exercise's answer as others wrote it: the course's reference and, when the learner's kernel loaded it,
    TRL's own loss methods (called with a stand-in for the trainer, they compute the answer for you)."""
    references = [_loss_reference]
    grpo_trainer = sys.modules.get("trl.trainer.grpo_trainer")  # loaded only if the learner's code could use it
    trainer = getattr(grpo_trainer, "GRPOTrainer", None)
    references += [getattr(trainer, name) for name in ("_compute_loss", "compute_loss") if hasattr(trainer, name)]
    return tuple(references)


def _trainer_batch() -> dict | None:
    """The last step's batch and loss of a ServerRolloutGRPOTrainer in this kernel (None: no such step yet), when
    it was computed as this exercise computes it (beta 0, 'dapo', the same epsilon both sides, 'group')."""
    from helpers.grpo import server_rollouts

    batch = server_rollouts.last_loss_batch
    if batch is None:
        return None
    if (batch["beta"], batch["loss_type"], batch["scale_rewards"]) != (0.0, "dapo", "group") \
            or batch["epsilon"] != batch["epsilon_high"]:
        print(f"(the trainer's last step used beta={batch['beta']}, loss_type={batch['loss_type']!r}, "
              f"scale_rewards={batch['scale_rewards']!r}: this exercise's loss is for beta 0, 'dapo' and 'group', so "
              "it was compared on made-up batches only)")
        return None
    return batch
