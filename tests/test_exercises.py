"""Exercises and review questions: each exercise cell is followed by its check, has a solution in
solutions/<notebook>.md and a registered check; each notebook ends with at least 10 review questions
whose answers are in its solutions file. Every check is a small test suite: the table below holds, per
exercise, the right answer, the blank (the cell as committed) and the plausible wrong answers, each of
which must get "not yet" with a hint that names its mistake. Under papermill, every notebook's solutions
get "correct" from their checks in context: 00-02 in one run with solution probes (tests/notebook_run.py),
03 here and 04 in its own test with the solutions put in place of the exercise cells."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from notebook_run import cells, exercises, solutions, solved_copy
from test_notebook_03 import CI_PARAMETERS as NOTEBOOK_03_CI

from helpers.checks import CHECKS, _load_checks
from helpers.checks.notebook_01 import _rollouts
from helpers.checks.notebook_02_advantages import _advantages as advantages
from helpers.notebook_runner import NOTEBOOKS, execute

ROOT = NOTEBOOKS.parent
NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
# Notebook 04 runs in its own environment (.venv-v1): tests/test_notebook_04.py runs it with its solutions and
# tries its checks' wrong-answer tables there.
OWN_ENVIRONMENT = {"04_verifiers_v1": ("04-format-reward", "04-concept-map")}
# Notebooks 00-02 run once, as committed with a solution probe after each check (tests/notebook_run.py says
# how that proves both): their own tests assert what every check said. Notebook 03 shows the learner's
# module *downstream* (vf-eval runs it), so it also runs here, solved, at its CI parameters.
PROBED = {"00_setup": "tests/test_notebooks.py", "01_traced_gsm8k_eval": "tests/test_notebooks.py",
          "02_traced_grpo_training": "tests/test_notebook_02.py"}
# Notebook 05 is notebook 02's appendix of committed results: it trains nothing, has no exercises, and ends with a few
# review questions (answered in its solutions file) about reading those results.
READS_RESULTS_ONLY = {"05_appendix_grpo_designs": 5}  # notebook -> its least number of review questions


def review_questions(path: Path) -> list[str]:
    last = "".join(cells(path)[-1]["source"])
    assert last.startswith("## Review questions"), f"{path.name} does not end with its review questions"
    return re.findall(r"^\d+\. ", last, flags=re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_exercises_have_checks_and_solutions(path):
    _load_checks()
    found = exercises(path)
    least = 0 if path.stem in READS_RESULTS_ONLY else 2
    assert len(found) >= least, f"{path.name} has {len(found)} exercises; each notebook has at least {least}"
    blocks, _ = solutions(path)
    for index, name, _ in found:
        assert name.startswith(path.name[:2] + "-"), f"{name}: exercise names start with the notebook number"
        assert name in CHECKS, f"no check registered for {name} (helpers/checks/notebook_{path.name[:2]}.py)"
        assert name in blocks, f"no solution for {name} in solutions/{path.stem}.md"
        assert "# your code here" in "".join(cells(path)[index]["source"]), f"{name}: the cell needs '# your code here'"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_review_questions_and_their_answers(path):
    questions = review_questions(path)
    least = READS_RESULTS_ONLY.get(path.stem, 10)
    assert len(questions) >= least, f"{path.name} has {len(questions)} review questions (at least {least})"
    _, review = solutions(path)
    answers = re.findall(r"^\d+\. \*\*", review, flags=re.MULTILINE)
    assert len(answers) == len(questions), f"solutions/{path.stem}.md answers {len(answers)} of {len(questions)}"


def test_every_check_belongs_to_an_exercise():
    _load_checks()
    used = {name for path in NOTEBOOK_PATHS for _, name, _ in exercises(path)}
    assert set(CHECKS) == used, set(CHECKS) ^ used


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_with_the_solutions_every_check_says_correct(path, tmp_path, monkeypatch, uninstall_learner_module):
    if path.stem in OWN_ENVIRONMENT:
        pytest.skip(f"{path.stem} runs with its solutions in its own environment "
                    f"(tests/test_notebook_{path.name[:2]}.py)")
    if path.stem in PROBED:
        pytest.skip(f"{path.stem} runs once, with a solution probe after each check ({PROBED[path.stem]})")
    if path.stem in READS_RESULTS_ONLY:
        pytest.skip(f"{path.stem} has no exercises; tests/test_notebook_05.py runs it")
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))  # the kernel inherits it
    names = [name for _, name, _ in exercises(path)]
    executed = execute(solved_copy(path, tmp_path), tmp_path / "out.ipynb", NOTEBOOK_03_CI)
    said = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    for name in names:
        assert f"correct — {name}" in said, f"{name}: {said[-1500:]}"
    assert "not yet —" not in said
    if path.stem == "03_multiturn_and_tools":  # the learner's module, written, installed and run by vf-eval
        assert "FeedbackEnv" in said and re.search(r"^reward: avg - [0-9.]+", said, re.MULTILINE), said[-3000:]
        assert "vf-eval on your module: exit code 0" in said


# ---------------------------------------------------------------- every check rejects the mistakes learners make
# For each exercise: its right answer, its blank (the exercise cell as committed) and the plausible wrong answers,
# each with a fragment of the hint it must get. A check registered without such a table fails
# test_every_check_has_a_wrong_answer_table.


def _texts(*texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def _think_rubric(parser_kind="think", weights=(1.0, 0.2), with_correct=True):
    import verifiers as vf
    from gsm8k_course import correct_answer

    parser = vf.ThinkParser()
    funcs = [correct_answer, parser.get_format_reward_func()] if with_correct else [parser.get_format_reward_func()]
    kwargs = {"parser": parser} if parser_kind == "think" else {"parser": vf.Parser()} if parser_kind == "plain" else {}
    return vf.Rubric(funcs=funcs, weights=list(weights)[: len(funcs)], **kwargs)


def _repaired(mistake):
    """A repaired rubric with one mistake that the weights list and the two examples do not show."""
    import verifiers as vf
    from gsm8k_course import correct_answer

    parser = vf.ThinkParser()
    if mistake == "functions swapped":  # the same weights list, on the other function each
        return vf.Rubric(funcs=[parser.get_format_reward_func(), correct_answer], weights=[1.0, 0.2], parser=parser)

    def correct_answer_as_text(parser, completion, answer, **kwargs) -> float:  # the learner's own
        return float(parser.parse_answer(completion) == answer)

    correct_answer_as_text.__name__ = "correct_answer"
    return vf.Rubric(funcs=[correct_answer_as_text, parser.get_format_reward_func()], weights=[1.0, 0.2], parser=parser)


def _score_text(mistake=None):
    """score_text written right (mistake None), or with one mistake."""
    from helpers.checks.notebook_01 import _think_rubrics

    notebook_rubric = _think_rubrics()[0]

    async def score_text(rubric, text, answer):
        if mistake == "the notebook's rubric":
            rubric = notebook_rubric
        completion = text if mistake == "a string" else [{"role": "assistant", "content": text}]
        if mistake == "fixed answer":
            answer = "18"
        if mistake == "int()":
            answer = str(int(answer))
        call = rubric.score_rollout(prompt=[], completion=completion, answer=answer,
                                    state={"timing": {"total_ms": 0.0}})
        if mistake == "not awaited":
            return call
        score = await call
        return score.reward if mistake == "only the reward" else score

    return score_text


def _score_text_plain(rubric, text, answer):
    """Also right: a plain function that returns score_rollout's coroutine, which the notebook awaits."""
    return rubric.score_rollout(prompt=[], completion=[{"role": "assistant", "content": text}], answer=answer,
                                state={"timing": {"total_ms": 0.0}})


async def _score_text_blank(rubric, text, answer):
    # your code here
    return None


def _signal_share(kind):
    def share(rollouts):
        groups = rollouts.groupby("example")["reward"]
        if kind == "right":
            return float((groups.nunique() > 1).mean())
        if kind == "rewarded rollouts":
            return float((rollouts["reward"] > 0).mean())
        if kind == "by rollout":
            return float((rollouts.groupby("rollout")["reward"].nunique() > 1).mean())
        if kind == "examples with a reward":
            return float((groups.mean() > 0).mean())
        if kind == "a count":
            return float((groups.nunique() > 1).sum())
        if kind == "std with NaN":
            return float(groups.std().mean())
        if kind == "the first two rollouts":
            return float(groups.agg(lambda r: len(r) > 1 and r.iloc[0] != r.iloc[1]).mean())
        if kind == "a right and a wrong rollout":
            return float(((groups.min() == 0) & (groups.max() > 0)).mean())
        if kind == "share of rollouts":
            return float(groups.transform("nunique").gt(1).mean())
        if kind == "equal groups reshaped":
            rewards = rollouts.sort_values(["example", "rollout"])["reward"].to_numpy()
            grid = rewards.reshape(rollouts["example"].nunique(), -1)
            return float((grid.max(axis=1) != grid.min(axis=1)).mean())
        raise ValueError(kind)
    return share


def _boxed(kind):
    import re

    from gsm8k_course import canonical_number
    from verifiers.utils.data_utils import extract_boxed_answer

    def boxed_reward(completion, answer, **kwargs) -> float:
        reply = completion[-1]["content"]
        if kind == "right":
            if "\\boxed{" not in reply:
                return 0.0
            inside = canonical_number(extract_boxed_answer(reply))
            return float(bool(inside) and inside == canonical_number(answer))
        if kind == "first box":
            found = re.findall(r"\\boxed\{([^{}]*)\}", reply)
            return float(bool(found) and canonical_number(found[0]) == canonical_number(answer))
        if kind == "any box":
            boxes = re.findall(r"\\boxed\{([^{}]*)\}", reply)
            return float(any(canonical_number(b) == canonical_number(answer) for b in boxes))
        if kind == "substring":
            found = re.findall(r"\\boxed\{([^{}]*)\}", reply)
            return float(bool(found) and answer in found[-1].replace(",", ""))
        if kind == "flat regex":
            found = re.findall(r"\\boxed\{([^{}]*)\}", reply)
            return float(bool(found) and found[-1].strip() != ""
                         and canonical_number(found[-1]) == canonical_number(answer))
        if kind == "no box check":
            inside = canonical_number(extract_boxed_answer(reply))
            return float(bool(inside) and inside == canonical_number(answer))
        if kind == "int()":
            try:
                return float("\\boxed{" in reply and int(canonical_number(extract_boxed_answer(reply))) == int(answer))
            except ValueError:
                return 0.0
        if kind == "raw gold":
            return float("\\boxed{" in reply and canonical_number(extract_boxed_answer(reply)) == answer)
        if kind == "digits only":
            found = re.search(r"\d+(?:\.\d+)?", extract_boxed_answer(reply).replace(",", ""))
            return float("\\boxed{" in reply and bool(found)
                         and canonical_number(found.group()) == canonical_number(answer))
        if kind == "digits on both sides":  # the sign dropped: a boxed 10 for a gold of -10
            inside = re.search(r"\d[\d,.]*", extract_boxed_answer(reply)) if "\\boxed{" in reply else None
            return float(bool(inside) and canonical_number(inside.group()) == canonical_number(answer.lstrip("-")))
        if kind == "int() of the numbers":  # 18.5 taken for 18
            try:
                inside = int(float(canonical_number(extract_boxed_answer(reply))))
            except ValueError:
                return 0.0
            return float("\\boxed{" in reply and inside == int(float(canonical_number(answer))))
        if kind == "the whole conversation":  # the last box of any message: an earlier turn's when the last has none
            text = "\n".join(m["content"] for m in completion)
            inside = canonical_number(extract_boxed_answer(text))
            return float("\\boxed{" in text and bool(inside) and inside == canonical_number(answer))
        if kind == "the first message":
            first = completion[0]["content"]
            inside = canonical_number(extract_boxed_answer(first))
            return float("\\boxed{" in first and bool(inside) and inside == canonical_number(answer))
        if kind == "blank":
            return float(reply.strip() == answer)
        raise ValueError(kind)
    return boxed_reward


def _adapter(kind):
    import numpy as np
    from gsm8k_course import HashParser

    def trl_reward_funcs(rubric):
        funcs = []
        parser = HashParser() if kind == "a '####' parser" else rubric.parser
        pairs = list(zip(rubric.get_reward_funcs(), rubric.get_reward_weights()))
        if kind == "alphabetical":
            pairs.sort(key=lambda pair: pair[0].__name__)
        if kind == "no **kwargs":
            funcs = []
            for func in rubric.get_reward_funcs():
                def reward(prompts, completions, answer, completion_ids=None, trainer_state=None, _func=func):
                    return [float(_func(parser=parser, completion=c, answer=a)) for c, a in zip(completions, answer)]
                reward.__name__ = func.__name__
                funcs.append(reward)
            return funcs
        for func, weight in pairs:
            def reward(prompts, completions, answer, _func=func, _weight=weight, **kwargs):
                if kind == "one answer":
                    answer = [answer[0]] * len(completions)
                if kind == "last message only":
                    completions = [c[-1:] for c in completions]
                scores = [float(_func(parser=parser, completion=c, answer=a)) for c, a in zip(completions, answer)]
                if kind == "rounded":
                    scores = [float(round(s)) for s in scores]
                if kind == "weighted":
                    scores = [s * _weight for s in scores]
                if kind == "a sum":
                    return sum(scores)
                if kind == "numpy":  # also right: TRL turns any sequence of numbers into its tensor
                    return np.array(scores)
                return scores
            if kind != "unnamed":
                reward.__name__ = func.__name__
            funcs.append(reward)
        if kind == "no parser":
            funcs = []
            for func in rubric.get_reward_funcs():
                def reward(prompts, completions, answer, _func=func, **kwargs):
                    return [float(_func(completion=c, answer=a)) for c, a in zip(completions, answer)]
                reward.__name__ = func.__name__
                funcs.append(reward)
        if kind == "one function":
            return funcs[:1]
        return funcs
    return trl_reward_funcs


def _right_line(kind):
    """right_answer_line (notebook 02, section 12) and the ways a learner gets it wrong."""
    from gsm8k_course import canonical_number, extract_hash_answer

    def right_answer_line(completion, answer, **kwargs) -> float:
        text = completion[-1]["content"]
        lines = [line for line in text.strip().splitlines() if line.strip()]
        one = text.count("####") == 1
        said = extract_hash_answer(text)
        right = bool(said) and canonical_number(said) == canonical_number(answer)
        if kind == "right":
            return float(one and right)
        if kind == "one_answer_line":  # the earlier exercise: any number after one '####' (pays without being right)
            return float(one and bool(said))
        if kind == "any '#### N'":
            return float(bool(said))
        if kind == "right anywhere":  # the '####' answer right, however many markers
            return float(right)
        if kind == "last number":  # the reply's last number, '####' or not
            from word_arithmetic import last_number

            return float(last_number(text) == canonical_number(answer) and last_number(text) != "")
        if kind == "lines":
            return float(sum("####" in line for line in lines) == 1 and right)
        if kind == "only the number on the line":  # '#### 26 dollars' refused
            line = next((line for line in text.splitlines() if "####" in line), "")
            found = re.search(r"####\s*(\S+)\s*$", line)
            return float(one and bool(found) and canonical_number(found.group(1)) == canonical_number(answer))
        if kind == "raw text":
            return float(one and said == answer)
        if kind == "digits only":
            found = re.search(r"####\s*(\d+)", text)
            return float(one and bool(found) and found.group(1) == canonical_number(answer))
        if kind == "int()":
            try:
                return float(one and bool(said) and int(float(said)) == int(float(canonical_number(answer))))
            except ValueError:
                return 0.0
        if kind == "the first message":
            first = completion[0]["content"]
            found = extract_hash_answer(first)
            return float(first.count("####") == 1 and bool(found)
                         and canonical_number(found) == canonical_number(answer))
        raise ValueError(kind)
    return right_answer_line


def _loss(kind):
    """grpo_loss (notebook 02, section 9) as a learner writes it: right, with one of the mistakes the check names,
    or with a value that is right and a gradient that is not (the trainer backpropagates it)."""
    import numpy
    import torch

    def grpo_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
        if kind == "blank":
            return torch_zero()
        if kind == "epsilon fixed":
            epsilon = 0.2
        grouped = rewards.float().view(-1, num_generations)
        std = grouped.std(dim=1, keepdim=True, unbiased=kind != "std over n")
        centred = grouped - grouped.mean(dim=1, keepdim=True)
        advantages = (centred if kind == "not normalised" else centred / (std + 1e-4)).reshape(-1, 1)
        if kind == "no_grad":
            with torch.no_grad():
                ratio = torch.exp(logps - old_logps)
        elif kind == "detached ratio":
            ratio = torch.exp(logps - old_logps).detach()
        else:
            ratio = torch.exp(logps - old_logps)
        clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
        if kind == "no clipping":
            per_token = -ratio * advantages
        elif kind == "wrong side":
            per_token = -torch.max(ratio * advantages, clipped * advantages)
        else:
            per_token = -torch.min(ratio * advantages, clipped * advantages)
        if kind == "no minus":
            per_token = -per_token
        mask = mask.float()
        if kind == "mask ignored":
            return per_token.mean()
        if kind == "mean over completions":
            return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
        if kind == "padding in the gradient":  # the padding's terms cancel in the value, not in the gradient
            return (per_token * mask).sum() / mask.sum() + (per_token * (1 - mask)).sum() * 0.0 + (
                logps * (1 - mask)).sum() * 1e-3 - (logps * (1 - mask)).detach().sum() * 1e-3
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1)
        if kind == ".item() in a tensor":
            return torch.tensor(loss.item())
        if kind == "numpy":
            return numpy.float32(loss.detach().numpy())
        return loss
    return grpo_loss


def _loss_where(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    """Also right: clipping written with torch.where (the clipped term's gradient is 0 where it wins), in float64,
    the tokens selected with the mask."""
    import torch

    groups = rewards.double().reshape(-1, num_generations)
    advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).reshape(-1, 1)
    ratio = (logps.double() - old_logps.double()).exp()
    unclipped, clipped = ratio * advantages, ratio.clamp(1 - epsilon, 1 + epsilon) * advantages
    objective = torch.where(unclipped < clipped, unclipped, clipped)
    return -objective[mask.bool()].mean()


def _loss_in_place(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    """Also right: the log-ratio worked on in place, -max of the negated terms, a loop over the groups."""
    import torch

    advantages = torch.empty(len(rewards), 1)
    for start in range(0, len(rewards), num_generations):
        group = rewards[start:start + num_generations].float()
        advantages[start:start + num_generations, 0] = (group - group.mean()) / (group.std() + 1e-4)
    log_ratio = logps.sub_(old_logps)  # the model's log-probabilities are no leaf: in-place is fine
    ratio = log_ratio.exp()
    per_token = torch.maximum(-ratio * advantages, -torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)
    return (per_token * mask).sum() / mask.sum()


def _trl_loss(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    """TRL's private loss method, called with a stand-in for the trainer."""
    from types import SimpleNamespace

    from trl import GRPOTrainer

    stand_in = SimpleNamespace(beta=0.0, epsilon_low=epsilon, epsilon_high=epsilon, loss_type="dapo")
    return GRPOTrainer._compute_loss(stand_in, None, {"logps": logps, "old_logps": old_logps, "mask": mask})


def _loss_wrapper(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    """A def that calls the check's own reference."""
    from helpers.checks.notebook_02_loss import _loss_reference

    return _loss_reference(rewards, logps, old_logps, mask, num_generations, epsilon)


def _loss_peeking(rewards, logps, old_logps, mask, num_generations, epsilon=0.2):
    """Borrows the reference from the module of the code that calls it (the check's)."""
    import sys

    return sys._getframe(1).f_globals["_loss_reference"](rewards, logps, old_logps, mask, num_generations, epsilon)


def torch_zero():
    import torch

    return torch.tensor(0.0)


def _last_number(kind):
    from gsm8k_course import canonical_number

    number = r"-?\d[\d,]*(?:\.\d+)?"

    def last_number_right(completion, answer, **kwargs) -> float:
        reply = completion[-1]["content"]
        numbers = re.findall(number, reply)
        if kind == "right":
            return float(bool(numbers) and canonical_number(numbers[-1]) == canonical_number(answer))
        if kind == "blank":  # as committed: the gold anywhere in the reply
            return float(canonical_number(answer) in reply)
        if kind == "first number":
            return float(bool(numbers) and canonical_number(numbers[0]) == canonical_number(answer))
        if kind == "any number":
            return float(any(canonical_number(n) == canonical_number(answer) for n in numbers))
        if kind == "raw text":
            return float(bool(numbers) and numbers[-1] == answer)
        if kind == "digits only":
            digits = re.findall(r"\d+", reply)
            return float(bool(digits) and digits[-1] == canonical_number(answer))
        if kind == "the '####' answer":
            return float(kwargs["parser"].parse_answer(completion) == canonical_number(answer))
        if kind == "float()":
            return float(bool(numbers) and float(numbers[-1]) == float(answer))
        if kind == "words after it":  # the reply must end with the number
            match = re.search(number + r"\W*$", reply)
            return float(bool(match) and canonical_number(match.group().rstrip(". ")) == canonical_number(answer))
        if kind == "int() of the numbers":  # 18.5 taken for 18
            return float(bool(numbers) and int(float(canonical_number(numbers[-1])))
                         == int(float(canonical_number(answer))))
        if kind == "zeros stripped":  # '100.' taken for 10
            def digits(text):
                return text.replace(",", "").rstrip(".0")
            return float(bool(numbers) and digits(numbers[-1]) == digits(answer))
        if kind == "the first message":
            found = re.findall(number, completion[0]["content"])
            return float(bool(found) and canonical_number(found[-1]) == canonical_number(answer))
        if kind == "the last assistant message":  # also right
            last = kwargs["parser"].get_assistant_messages(completion)[-1]["content"]
            found = re.findall(number, last)
            return float(bool(found) and canonical_number(found[-1]) == canonical_number(answer))
        raise ValueError(kind)
    return last_number_right


def _async_last_number():
    right = _last_number("right")

    async def last_number_right(completion, answer, **kwargs) -> float:  # awaited by a rubric, not by the adapter
        return right(completion, answer)

    return last_number_right


def _feedback(kind):
    from gsm8k_course import canonical_number

    def feedback_message(parsed, answer):
        if parsed and canonical_number(parsed) == canonical_number(answer):
            return "Correct."
        if not parsed:
            return "Not yet: I found no final answer. Try again, ending with '#### <number>'."
        if kind == "blank":
            return f"Not yet: {parsed} is not the answer. Try again, ending with '#### <number>'."
        if kind == "as text":
            high = canonical_number(parsed) > canonical_number(answer)
        elif kind == "float of raw text":
            high = float(parsed) > float(answer)
        elif kind == "inverted":
            high = float(canonical_number(parsed)) < float(canonical_number(answer))
        elif kind == "float of the raw gold":
            high = float(canonical_number(parsed)) > float(answer)
        elif kind == "int()":
            high = int(canonical_number(parsed)) > int(canonical_number(answer))
        elif kind == "digits only":
            high = int(re.sub(r"\D", "", parsed) or 0) > int(re.sub(r"\D", "", answer) or 0)
        else:
            high = float(canonical_number(parsed)) > float(canonical_number(answer))
        if kind == "higher/lower":  # also right: any wording that gives the direction
            return f"Not yet: {parsed} is {'higher' if high else 'lower'} than the answer. Try again."
        if kind == "go lower/higher":  # also right: where to go, and the words differ with the direction
            return f"Not yet: {parsed}? Go {'lower' if high else 'higher'}, and end with '#### <number>'."
        if kind == "always too high":
            return f"Not yet: {parsed} is too high. Try again, ending with '#### <number>'."
        return f"Not yet: {parsed} is {'too high' if high else 'too low'}. Try again, ending with '#### <number>'."
    return feedback_message


discount = 0.5  # notebook 03's parameter, a global its discounted_correct reads (the check tries other values)


def _discount(kind):
    def discounted_correct(parser, completion, answer, **kwargs) -> float:
        from gsm8k_course import canonical_number, correct_answer

        right = correct_answer(parser, completion, answer)
        if kind == "gold as text":
            right = float(parser.parse_answer(completion) == answer)
        if kind == "int()":
            right = float(parser.parse_answer(completion) != "" and int(parser.parse_answer(completion)) == int(answer))
        if kind == "int() of the numbers":  # 18.5 taken for 18
            parsed = parser.parse_answer(completion)
            right = float(bool(parsed) and int(float(parsed)) == int(float(canonical_number(answer))))
        turns = len(parser.get_assistant_messages(completion))
        exponent = {"messages": len(completion) - 1, "turns": turns,
                    "environment replies": sum(m["role"] == "user" for m in completion),
                    "replies - 1": sum(m["role"] == "user" for m in completion) - 1, "blank": 0}.get(kind, turns - 1)
        return right * (0.5 if kind == "a number, not the parameter" else discount) ** exponent
    return discounted_correct


def _discount_from_state(parser, completion, answer, state, **kwargs) -> float:
    """Also right: the model's turns as the rollout counted them (state["turn"])."""
    from gsm8k_course import correct_answer

    return correct_answer(parser, completion, answer) * discount ** (state["turn"] - 1)


def _is_completed(kind):
    import verifiers as vf

    async def is_completed(self, messages, state, **kwargs) -> bool:
        base = await vf.MultiTurnEnv.is_completed(self, messages, state, **kwargs)
        if kind == "right":
            return state.get("solved", False) or base
        if kind == "last message":  # also right: the loop asks when the last message is the environment's
            return messages[-1]["content"] == "Correct." or base
        if kind == "solved only":
            return state.get("solved", False)
        if kind == "one turn early":
            return state.get("solved", False) or state["turn"] >= self.max_turns - 1
        if kind == "one turn late":
            return state.get("solved", False) and state["turn"] > 1 or base
        if kind == "super()":  # also right: super() of the notebook's class is vf.MultiTurnEnv
            return state.get("solved", False) or await super(type(self), self).is_completed(messages, state, **kwargs)
        if kind == "super() alone":  # reached the course's solved FeedbackEnv when the check derived from it
            return await super(type(self), self).is_completed(messages, state, **kwargs)
        if kind == "turn >= max_turns":  # max_turns=-1 (no limit) ends it at once
            return state.get("solved", False) or state["turn"] >= self.max_turns
        if kind == "turns from the messages":  # the prompt taken as one message
            return state.get("solved", False) or len(messages) // 2 >= self.max_turns
        if kind == "'correct' anywhere":  # the model ends its own rollout by writing the word
            return "correct" in messages[-1]["content"].lower() or base
        if kind == "after state['prompt']":  # only a rollout's state holds 'prompt'
            turns = sum(m["role"] == "assistant" for m in messages[len(state["prompt"]):])
            return state.get("solved", False) or (self.max_turns > 0 and turns >= self.max_turns)
        return base  # blank
    return is_completed


def _env_response(kind):
    async def env_response(self, messages, state, **kwargs):
        import re

        from gsm8k_course import canonical_number, extract_hash_answer

        if kind == "super()":  # reached the course's solved FeedbackEnv when the check derived from it
            return await super(type(self), self).env_response(messages, state, **kwargs)
        parsed = self.parser.parse_answer(messages)
        if kind == "the first '####'":
            found = re.search(r"####\s*(\S+)", messages[-1]["content"])
            parsed = canonical_number(found.group(1)) if found else ""
        if kind == "the last '####' with a number":  # '#### 18\n####' read as 18
            found = re.findall(r"####\s*\$?(-?[\d,.]*\d)", messages[-1]["content"])
            parsed = canonical_number(found[-1]) if found else ""
        if kind == "digits and commas":  # '#### 18.5' read as 18
            found = re.search(r"####\s*(-?[\d,]+)", messages[-1]["content"])
            parsed = canonical_number(found.group(1)) if found else ""
        if kind == "turn found by counting":  # the prompt taken as one message
            parsed = extract_hash_answer(messages[2 * state["turn"] - 1]["content"])
        if kind == "the last message with '####'":  # an earlier turn, or the prompt's example, when the last has none
            parsed = extract_hash_answer(next(m["content"] for m in reversed(messages) if "####" in m["content"]))
        if kind == "the first model turn":
            parsed = extract_hash_answer(next(m["content"] for m in messages if m["role"] == "assistant"))
        right = bool(parsed) and canonical_number(parsed) == canonical_number(state["answer"])
        if kind == "numbers as text":
            right = parsed == state["answer"]
        if kind == "blank":
            right = False
        if kind == "self.hints":  # only the course's own FeedbackEnv has it
            right = right and not self.hints
        if kind in ("the last message with '####'", "the first model turn", "names the number", "inverted hint"):
            state["solved"] = right
            if right or not parsed:
                return [{"role": "user", "content": "Correct." if right else "Not yet: no '####' answer."}], state
            high = float(parsed) > float(canonical_number(state["answer"]))
            if kind == "inverted hint":
                high = not high
            return [{"role": "user", "content": f"Not yet: {parsed} is {'higher' if high else 'lower'} than the "
                     "answer. Try again."}], state
        if kind == "a copy of the state":  # also right: the rollout goes on with the state returned
            return ([{"role": "user", "content": "Correct." if right else "Not yet, try again."}],
                    {**state, "solved": right})
        reply = [{"role": "assistant" if kind == "assistant reply" else "user",
                  "content": "Correct." if right else "Not yet, try again."}]
        if kind == "new state":
            return reply, {"answer": state["answer"], "turn": state["turn"], "solved": right}
        if kind != "solved not set":
            state["solved"] = right
        return reply, state
    return env_response


def _tool_calls(kind):
    def tool_calls(completion, **kwargs) -> float:
        if kind == "right":
            return float(sum(len(m.get("tool_calls") or []) for m in completion if m["role"] == "assistant"))
        if kind == "tool results":
            return float(sum(m["role"] == "tool" for m in completion))
        if kind == "messages with calls":
            return float(sum(bool(m.get("tool_calls")) for m in completion))
        if kind == "key present":
            return float(sum(len(m["tool_calls"]) for m in completion if "tool_calls" in m))
        if kind == "calls as dicts":  # right on hand-made dicts; a real rollout holds the OpenAI client's objects
            return float(sum(c["type"] == "function" for m in completion if m["role"] == "assistant"
                             for c in m.get("tool_calls") or []))
        if kind == "blank":
            return 0.0
        raise ValueError(kind)
    return tool_calls


def _my_environment(kind):
    def load_environment(max_turns=3, discount=0.5, hints=True, num_eval_examples=20, seed=0):
        import verifiers as vf
        from gsm8k_course import HASH_SYSTEM_PROMPT, extract_hash_answer, load_gsm8k
        from gsm8k_feedback import FeedbackEnv, FinalAnswerParser, is_correct

        if kind == "blank":
            raise NotImplementedError("Implement your custom environment here.")
        parser = vf.Parser(extract_fn=extract_hash_answer) if kind == "last message" else FinalAnswerParser()

        def discounted_correct(parser, completion, answer, **kwargs) -> float:
            turns = len(parser.get_assistant_messages(completion))
            factor = 0.5 if kind == "discount not passed on" else discount
            return float(is_correct(parser.parse_answer(completion), answer)) * factor ** (turns - 1)

        def hash_format(parser, completion, **kwargs) -> float:
            return 1.0 if parser.parse_answer(completion) else 0.0

        def solved(parser, completion, answer, **kwargs) -> float:
            return float(is_correct(parser.parse_answer(completion), answer))

        def turns(parser, completion, **kwargs) -> float:
            return float(len(parser.get_assistant_messages(completion)))

        funcs, weights = [discounted_correct, hash_format, solved, turns], [1.0, 0.5, 0.0, 0.0]
        if kind == "no format weight":
            funcs, weights = [discounted_correct, turns], [1.0, 0.0]
        rubric = vf.Rubric(funcs=funcs, weights=weights, parser=parser)
        split, rows_seed = ("train" if kind == "the train split" else "test"), (0 if kind == "seed ignored" else seed)
        system = {} if kind == "no system prompt" else {"system_prompt": HASH_SYSTEM_PROMPT}
        return FeedbackEnv(hints=False if kind == "hints not passed on" else hints,
                           max_turns=3 if kind == "fixed max_turns" else max_turns,
                           eval_dataset=load_gsm8k(split, num_eval_examples, rows_seed), parser=parser, rubric=rubric,
                           **system)
    return load_environment


def _my_environment_wrapped(max_turns=3, discount=0.5, hints=True, num_eval_examples=20, seed=0):
    """The course's load_environment, wrapped in a def of one's own."""
    from gsm8k_feedback import load_environment as course

    return course(max_turns=max_turns, discount=discount, hints=hints, num_eval_examples=num_eval_examples, seed=seed)


def _course(module, name):
    """The course's own code, as a learner would import it."""
    import importlib

    return getattr(importlib.import_module(module), name)


def _table():
    """{exercise: (right, blank, [(mistake, wrong answer, a fragment of its hint), ...])}"""
    fixed, trap = _think_rubric(), _think_rubric(parser_kind="none")
    no_signal = _rollouts([[0.0, 0.0], [0.0, 0.0], [0.2, 0.2]])
    return {
        "01-repair-the-trap": (fixed, trap, [
            ("a plain vf.Parser", _think_rubric(parser_kind="plain"), "pass the ThinkParser"),
            ("other weights", _think_rubric(weights=(1.0, 0.5)), "keep the weights"),
            ("correct_answer left out", _think_rubric(with_correct=False, weights=(1.0,)), "keep the weights"),
            ("not a rubric", [fixed], "build a vf.Rubric"),
            ("the weights on the other functions", _repaired("functions swapped"), "keep the weights"),
            ("a correct_answer of one's own, on the text", _repaired("own correct_answer"),
             "notebook's correct_answer"),
        ]),
        "01-score-rollout": (_score_text(), _score_text_blank, [
            ("not awaited", _score_text("not awaited"), "await"),
            ("the notebook's rubric, not the one given", _score_text("the notebook's rubric"),
             "use the rubric you are given"),
            ("a fixed answer", _score_text("fixed answer"), "pass the gold answer"),
            ("the reply as a string", _score_text("a string"), "list of messages"),
            ("only the reward", _score_text("only the reward"), "RolloutScore"),
            ("not a coroutine function", lambda rubric, text, answer: None, "async def"),
            ("the gold answer through int()", _score_text("int()"), "with a comma"),
            ("the course's own score_text imported", _course("helpers.eval_views", "score_text"),
             "needs your own code"),
        ]),
        "01-signal-share": (_signal_share("right"), lambda rollouts: float("nan"), [
            ("share of rewarded rollouts", _signal_share("rewarded rollouts"), "group"),
            ("grouped by rollout", _signal_share("by rollout"), "group"),
            ("examples with any reward", _signal_share("examples with a reward"), "not a signal"),
            ("a count, not a share", _signal_share("a count"), "between 0 and 1"),
            ("mean of the std", _signal_share("std with NaN"), "group"),
            ("the first two rollouts compared", _signal_share("the first two rollouts"), "not the first two"),
            ("a right and a wrong rollout asked for", _signal_share("a right and a wrong rollout"), "are a signal too"),
            ("a share of rollouts", _signal_share("share of rollouts"), "count each example once"),
            ("equal groups assumed", _signal_share("equal groups reshaped"), "cannot reshape"),
            ("the course's own reference imported", _course("helpers.checks.notebook_01", "_signal_share"),
             "needs your own code"),
        ]),
        "01-signal-prediction": ({"predicted": 0.0, "rollouts": no_signal}, {"predicted": 0.5, "rollouts": no_signal}, [
            ("a share above 1", {"predicted": 2.0, "rollouts": no_signal}, "between 0 and 1"),
            ("far from the run", {"predicted": 0.9, "rollouts": _rollouts([[0.0, 0.0], [1.0, 0.0]])}, "measured 0.50"),
            ("a word, not a number", {"predicted": "none", "rollouts": no_signal}, "predict a number"),
            ("not a dict", 0.0, "pass {"),
        ]),
        "01-boxed-reward": (_boxed("right"), _boxed("blank"), [
            ("the first box", _boxed("first box"), "LAST"),
            ("any box", _boxed("any box"), "not any of them"),
            ("a substring test", _boxed("substring"), "whole numbers"),
            ("a regex without nested braces", _boxed("flat regex"), "nested braces"),
            ("no check that a box exists", _boxed("no box check"), "no \\boxed{}"),
            ("int() of both sides", _boxed("int()"), "with a comma"),
            ("the raw gold string", _boxed("raw gold"), "with a comma"),
            ("a digits-only pattern", _boxed("digits only"), "negative"),
            ("digits on both sides: a boxed 10 for a gold of -10", _boxed("digits on both sides"), "the sign changed"),
            ("int() of the numbers: 18.5 taken for 18", _boxed("int() of the numbers"), "other decimals"),
            ("the first message of several read", _boxed("the first message"), "LAST turn"),
            ("the last box of the whole conversation", _boxed("the whole conversation"), "EARLIER turn"),
            ("the course's own reference imported", _course("helpers.checks.notebook_01", "_boxed_reference"),
             "needs your own code"),
        ]),
        "02-group-advantages": (advantages([1.5, 0.5, 0.0, 0.5]), [0.0, 0.0, 0.0, 0.0], [
            ("std over n", advantages([1.5, 0.5, 0.0, 0.5], unbiased=False), "n - 1"),
            ("mean subtracted only", [0.875, -0.125, -0.625, -0.125], "divide by the group's standard deviation"),
            ("the rewards themselves", [1.5, 0.5, 0.0, 0.5], "add up to 0"),
            ("three numbers", [1.0, 0.0, -1.0], "one advantage per completion"),
        ]),
        "02-no-signal": ({"frac_reward_zero_std": 1.0, "grad_norm": 0.0},
                         {"frac_reward_zero_std": 0.5, "grad_norm": 1.0}, [
            ("no group has equal rewards", {"frac_reward_zero_std": 0.0, "grad_norm": 0.0}, "what share of the groups"),
            ("a gradient anyway", {"frac_reward_zero_std": 1.0, "grad_norm": 1.0}, "advantage is 0"),
            ("one key missing", {"frac_reward_zero_std": 1.0}, "two keys"),
        ]),
        "02-reward-adapter": (_adapter("right"), lambda rubric: [], [
            ("weighted scores", _adapter("weighted"), "TRL applies reward_weights"),
            ("one answer for the batch", _adapter("one answer"), "answer i"),
            ("one float per batch", _adapter("a sum"), "one float per completion"),
            ("functions not named", _adapter("unnamed"), "__name__"),
            ("parser not passed", _adapter("no parser"), "pass the rubric's parser"),
            ("only the first function", _adapter("one function"), "one TRL function per rubric function"),
            ("a '####' parser, not the rubric's", _adapter("a '####' parser"), "the rubric's parser"),
            ("functions in alphabetical order", _adapter("alphabetical"), "in the rubric's order"),
            ("scores rounded to 0 or 1", _adapter("rounded"), "a score between 0 and 1 is a score too"),
            ("no **kwargs: TRL's other columns refused", _adapter("no **kwargs"), "end the signature with **kwargs"),
            ("only the last message scored", _adapter("last message only"), "all its messages"),
            ("the course's RubricRewards handed back", lambda rubric: _course("helpers.grpo.rewards", "RubricRewards")(
                rubric).reward_funcs, "needs your own code"),
        ]),
        "02-last-number": (_last_number("right"), _last_number("blank"), [
            ("the first number", _last_number("first number"), "no '####' line"),
            ("any number in the reply", _last_number("any number"), "a wrong one last"),
            ("the raw text compared", _last_number("raw text"), "12.0 is 12"),
            ("a digits-only pattern", _last_number("digits only"), "12.0 is 12"),
            ("the '####' answer only", _last_number("the '####' answer"), "no '####' line"),
            ("float() of the raw text", _last_number("float()"), "with a comma"),
            ("the reply must end with the number", _last_number("words after it"), "words after it"),
            ("an async def: the TRL adapter does not await it", _async_last_number(), "not async def"),
            ("int() of the numbers: 18.5 taken for 18", _last_number("int() of the numbers"), "other decimals"),
            ("zeros stripped: '100.' taken for 10", _last_number("zeros stripped"), "zeros stripped"),
            ("the first message of several read", _last_number("the first message"), "LAST turn"),
            ("the course's own reference imported", _course("word_arithmetic", "last_number_right"),
             "needs your own code"),
        ]),
        "02-close-the-hack": (_right_line("right"), _right_line("one_answer_line"), [
            ("the earlier one_answer_line: pays without being right", _right_line("one_answer_line"),
             "a '####' answer that is wrong must earn 0"),
            ("any '#### N'", _right_line("any '#### N'"), "a '####' answer that is wrong must earn 0"),
            ("the '####' answer right, markers not counted", _right_line("right anywhere"), "only ONE '####'"),
            ("the last number, '####' or not", _right_line("last number"), "no '####' line earns 0"),
            ("'####' lines counted, not markers", _right_line("lines"), "count the '####' markers"),
            ("the answer line must end with the number", _right_line("only the number on the line"),
             "followed by a unit"),
            ("the raw text compared", _right_line("raw text"), "canonical_number makes it a plain number"),
            ("a digits-only pattern", _right_line("digits only"), "after a dollar sign"),
            ("int() of the numbers", _right_line("int()"), "other decimals"),
            ("the first message of several read", _right_line("the first message"), "LAST turn"),
            ("the course's own reference imported", _course("word_arithmetic", "right_answer_line"),
             "needs your own code"),
        ]),
        "02-grpo-loss": (_loss("right"), _loss("blank"), [
            ("the mean over completions (TRL's 'grpo' loss)", _loss("mean over completions"), "mean over completions"),
            ("no clipping", _loss("no clipping"), "no clipping"),
            ("clipped on the wrong side (torch.max)", _loss("wrong side"), "keeps the smaller"),
            ("advantages not normalised", _loss("not normalised"), "divide by the group's standard deviation"),
            ("the standard deviation over n", _loss("std over n"), "n - 1"),
            ("the mask ignored", _loss("mask ignored"), "the padding counted"),
            ("the objective, not the loss", _loss("no minus"), "the sign"),
            ("epsilon fixed at 0.2", _loss("epsilon fixed"), "epsilon 0.1"),
            ("the course's own reference imported", _course("helpers.checks.notebook_02_loss", "_loss_reference"),
             "needs your own code"),
            # the value right, the gradient not: the trainer backpropagates the loss
            ("a detached ratio", _loss("detached ratio"), "no gradient"),
            ("the ratio under torch.no_grad()", _loss("no_grad"), "torch.no_grad()"),
            (".item() wrapped back in a tensor", _loss(".item() in a tensor"), ".item()"),
            ("a numpy number", _loss("numpy"), "not a torch tensor"),
            ("the padding in the gradient", _loss("padding in the gradient"), "the padding gets a gradient"),
            # not the learner's own work
            ("a def that calls the check's reference", _loss_wrapper, "needs your own code"),
            ("TRL's private loss method with a stand-in trainer", _trl_loss, "needs your own code"),
            ("a look up the stack for what the check expects", _loss_peeking, "needs your own code"),
        ]),
        "03-feedback-hints": (_feedback("right"), _feedback("blank"), [
            ("numbers compared as text", _feedback("as text"), "as numbers"),
            ("float of the raw text", _feedback("float of raw text"), "'1,000' is a number"),
            ("high and low swapped", _feedback("inverted"), "too high"),
            ("float() of the raw gold", _feedback("float of the raw gold"), "with a comma"),
            ("int() of both", _feedback("int()"), "decimal"),
            ("digits only", _feedback("digits only"), "negative"),
            ("'too high' whatever the answer", _feedback("always too high"), "too low for a gold answer"),
            ("the course's own feedback_message imported", _course("gsm8k_feedback", "feedback_message"),
             "needs your own code"),
        ]),
        "03-is-completed": (_is_completed("right"), _is_completed("blank"), [
            ("replies to a right answer (solved never read)", _is_completed("blank"), "went on"),
            ("stops one turn late", _is_completed("one turn late"), "went on"),
            ("stops one turn early", _is_completed("one turn early"), "one turn early"),
            ("max_turns never asked", _is_completed("solved only"), "ask the base class"),
            ("a plain def", lambda self, messages, state, **kwargs: state.get("solved", False), "async def"),
            ("super() alone: it reached the course's FeedbackEnv", _is_completed("super() alone"), "went on"),
            ("max_turns=-1 (no limit) not handled", _is_completed("turn >= max_turns"), "max_turns=-1"),
            ("turns counted from the messages, the system prompt forgotten", _is_completed("turns from the messages"),
             "not the messages"),
            ("ends when 'correct' is anywhere in the last message", _is_completed("'correct' anywhere"), "yours"),
            ("turns counted after state['prompt'], which the cell driving it by hand has not",
             _is_completed("after state['prompt']"), "holds only 'answer' and 'turn'"),
            ("the course's FeedbackEnv.is_completed imported", _course("gsm8k_feedback", "FeedbackEnv").is_completed,
             "needs your own code"),
        ]),
        "03-env-response": (_env_response("right"), _env_response("blank"), [
            ("numbers compared as text", _env_response("numbers as text"), "compare the NUMBERS"),
            ("'Correct.' without state['solved']", _env_response("solved not set"), "state['solved'] = True"),
            ("the state lost between turns", _env_response("new state"), "the state lost"),
            ("the reply as the assistant", _env_response("assistant reply"), "role 'user'"),
            ("a plain def", lambda self, messages, state, **kwargs: ([], state), "async def"),
            ("super(): it reached the course's FeedbackEnv", _env_response("super()"),
             "(a list of messages, the state)"),
            ("self.hints: only the course's FeedbackEnv has it", _env_response("self.hints"), "and nothing more"),
            ("the first '####' read", _env_response("the first '####'"), "its LAST '####'"),
            ("digits and commas only: '#### 18.5' read as 18", _env_response("digits and commas"),
             "compare the NUMBERS"),
            ("the model's turn found by counting messages", _env_response("turn found by counting"),
             "parse the model's last turn"),
            ("the last message holding '####' read", _env_response("the last message with '####'"),
             "a number from another message"),
            ("the first model turn read", _env_response("the first model turn"), "parse the model's last turn"),
            ("the last '####' that has a number", _env_response("the last '####' with a number"), "its LAST '####'"),
            ("the hint's direction inverted", _env_response("inverted hint"), "not too"),
            ("the course's FeedbackEnv.env_response imported", _course("gsm8k_feedback", "FeedbackEnv").env_response,
             "needs your own code"),
        ]),
        "03-turn-discount": (_discount("right"), _discount("blank"), [
            ("every message counted", _discount("messages"), "count the MODEL's turns"),
            ("discount ** turns", _discount("turns"), "count the MODEL's turns"),
            ("environment replies counted", _discount("environment replies"), "count the MODEL's turns"),
            ("environment replies, minus one", _discount("replies - 1"), "the last allowed turn"),
            ("0.5, not the notebook's discount", _discount("a number, not the parameter"), "not a number"),
            ("the parsed answer compared with the gold as text", _discount("gold as text"), "with a comma"),
            ("int() of both", _discount("int()"), "with a comma"),
            ("int() of the numbers: 18.5 taken for 18", _discount("int() of the numbers"),
             "correct_answer(parser, completion, answer)"),
            ("the course's own discounted_correct", _course("gsm8k_feedback", "make_rubric")(
                _course("gsm8k_feedback", "FinalAnswerParser")()).get_reward_funcs()[0], "needs your own code"),
        ]),
        "03-tool-calls": (_tool_calls("right"), _tool_calls("blank"), [
            ("tool results counted", _tool_calls("tool results"), "max_turns"),
            ("messages with calls counted", _tool_calls("messages with calls"), "several calls"),
            ("None not handled", _tool_calls("key present"), "None"),
            ("the calls read as dicts", _tool_calls("calls as dicts"), "OpenAI client's objects"),
            ("the course's own tool_calls imported", _course("gsm8k_calculator", "tool_calls"), "needs your own code"),
        ]),
        "03-my-environment": (_my_environment("right"), _my_environment("blank"), [
            ("the format weight dropped", _my_environment("no format weight"), "counts 0.5"),
            ("max_turns not passed on", _my_environment("fixed max_turns"), "pass the argument on"),
            ("the last message parsed", _my_environment("last message"), "LAST turn"),
            ("not a loader", None, "pass your module's load_environment"),
            ("the discount not passed on", _my_environment("discount not passed on"), "see its `discount`"),
            ("hints not passed on", _my_environment("hints not passed on"), "FeedbackEnv(hints=hints)"),
            ("the train split", _my_environment("the train split"), "load_gsm8k('test', num_eval_examples, seed)"),
            ("the seed not passed on", _my_environment("seed ignored"), "load_gsm8k('test', num_eval_examples, seed)"),
            ("no system prompt", _my_environment("no system prompt"), "system_prompt=HASH_SYSTEM_PROMPT"),
            ("the course's own load_environment imported", _course("gsm8k_feedback", "load_environment"),
             "needs your own code"),
            ("the course's load_environment, wrapped", _my_environment_wrapped, "needs your own code"),
        ]),
    }

_EXERCISES_IN_TABLE = (
    "01-repair-the-trap",
    "01-score-rollout",
    "01-signal-share",
    "01-signal-prediction",
    "01-boxed-reward",
    "02-group-advantages",
    "02-no-signal",
    "02-reward-adapter",
    "02-last-number",
    "02-close-the-hack",
    "02-grpo-loss",
    "03-feedback-hints",
    "03-is-completed",
    "03-env-response",
    "03-turn-discount",
    "03-tool-calls",
    "03-my-environment",
)


def _returns_the_coroutine(method):
    """A plain function that returns the coroutine of the right async one: what the notebook awaits works."""
    right = method("right")
    return lambda self, messages, state, **kwargs: right(self, messages, state, **kwargs)


# Valid answers that are not the reference's, which each check must accept.
ALSO_RIGHT = {
    "01-score-rollout": [_score_text_plain],
    "02-group-advantages": [[round(a, 2) for a in advantages([1.5, 0.5, 0.0, 0.5])],  # as the solution shows them
                            np.array(advantages([1.5, 0.5, 0.0, 0.5]))],
    "02-reward-adapter": [_adapter("numpy")],
    "02-last-number": [_last_number("the last assistant message")],
    "02-grpo-loss": [_loss_where, _loss_in_place],
    "03-feedback-hints": [_feedback("higher/lower"), _feedback("go lower/higher")],
    "03-is-completed": [_is_completed("last message"), _returns_the_coroutine(_is_completed), _is_completed("super()")],
    "03-env-response": [_returns_the_coroutine(_env_response), _env_response("a copy of the state"),
                        _env_response("names the number")],
    "03-turn-discount": [_discount_from_state],
}


@pytest.fixture(scope="module")
def answer_table():
    _load_checks()
    return _table()


def test_every_check_has_a_wrong_answer_table(answer_table):
    tried = set(answer_table) | set(TRACED_EXERCISES) | {n for names in OWN_ENVIRONMENT.values() for n in names}
    missing = sorted(set(CHECKS) - tried)
    assert not missing, f"checks without a table of wrong answers: {missing}"
    for name, (_, _, wrong) in answer_table.items():
        assert len(wrong) >= 3, f"{name}: at least 3 plausible wrong answers, not {len(wrong)}"


@pytest.mark.parametrize("name", sorted(_EXERCISES_IN_TABLE))
def test_the_right_answer_passes_and_every_wrong_one_gets_its_hint(name, answer_table):
    right, blank, wrong = answer_table[name]
    check = CHECKS[name]
    assert check(right) is None, f"{name}: the right answer was refused: {check(right)}"
    for other in ALSO_RIGHT.get(name, []):
        assert check(other) is None, f"{name}: a valid answer other than the reference's was refused: {check(other)}"
    assert check(blank), f"{name}: the blank exercise passed"
    for mistake, value, fragment in wrong:
        hint = check(value)
        assert hint, f"{name}: the mistake '{mistake}' passed"
        assert fragment in hint, f"{name}: the mistake '{mistake}' got a hint that does not name it: {hint!r}"


# 00's checks read this session's traces; tracing patches libraries process-wide, so they run in a subprocess
# that makes the notebook's calls for real (the local llama.cpp server, a traced op) and prints each hint.
TRACED_EXERCISES = ("00-traced-function", "00-completion-tokens")
TRACED_TABLE = """
import json, os, re, weave
from helpers.checks import CHECKS, _load_checks
from helpers.serving.endpoint import get_client
from helpers.tracing.session import init_tracing

_load_checks()
tracing = init_tracing("exercise-checks", quiet=True)
endpoint = get_client(quiet=True)

@weave.op
def answer_briefly(question: str) -> str:
    reply = endpoint.client.chat.completions.create(
        model=endpoint.model, messages=[{"role": "user", "content": question}], max_tokens=8, temperature=0.0)
    return reply.choices[0].message.content

answer_briefly("What is the capital of France?")
reply = endpoint.client.chat.completions.create(  # section 6's plain call
    model=endpoint.model, messages=[{"role": "user", "content": "Name three colours."}], max_tokens=12,
    temperature=0.0).choices[0].message.content

def word_count_plain(text: str) -> int:
    return len(text.split())

@weave.op
def word_count(text: str) -> int:
    return len(text.split())

@weave.op
def word_count_uncalled(text: str) -> int:
    return len(text.split())

@weave.op
def word_count_chars(text: str) -> int:
    return len(text)

@weave.op
def word_count_spaces(text: str) -> int:
    return len(text.split(" "))

@weave.op
def word_count_text(text: str) -> str:
    return str(len(text.split()))

@weave.op
def word_count_word_characters(text: str) -> int:
    return len(re.findall(r"\\w+", text))

@weave.op
def word_count_other_text(text: str) -> int:
    return len(text.split())

for op in (word_count, word_count_chars, word_count_spaces, word_count_text, word_count_word_characters):
    op(reply)
word_count_other_text("one two three")  # traced, but not on a model reply

def blank_word_count(text: str) -> int:
    return 0

def model_calls(calls):
    return [c for c in calls if "chat.completions.create" in c.func_name]

def usage(call):
    return next(iter(call.summary["usage"].values()))

def tokens_right(calls):
    return sum(usage(c)["completion_tokens"] for c in model_calls(calls))

def tokens_every_call(calls):
    return sum(usage(c)["completion_tokens"] for c in calls if (c.summary or {}).get("usage"))

def tokens_prompt(calls):
    return sum(usage(c)["prompt_tokens"] for c in model_calls(calls))

def tokens_count(calls):
    return len(model_calls(calls))

def tokens_no_skip(calls):
    return sum(usage(c)["completion_tokens"] for c in calls)

def tokens_keyed_by_this_model(calls):
    return sum(c.summary["usage"][endpoint.model]["completion_tokens"] for c in model_calls(calls))

def tokens_one_per_trace(calls):
    return sum({c.trace_id: usage(c)["completion_tokens"] for c in model_calls(calls)}.values())

def tokens_blank(calls):
    return 0

table = {
    "00-traced-function": (word_count, blank_word_count, [
        ("not decorated", word_count_plain, "decorate the function"),
        ("never called", word_count_uncalled, "call it once"),
        ("called on another text", word_count_other_text, "none of them on a model reply"),
        ("characters counted", word_count_chars, "not the characters"),
        ("split on single spaces", word_count_spaces, "any run of whitespace"),
        ("a string returned", word_count_text, "as an int"),
        ("word characters counted", word_count_word_characters, "what whitespace separates"),
    ]),
    "00-completion-tokens": (tokens_right, tokens_blank, [
        ("every call with usage", tokens_every_call, "counts some tokens twice"),
        ("prompt tokens", tokens_prompt, "prompt tokens"),
        ("number of calls", tokens_count, "number of model calls"),
        ("calls without usage not skipped", tokens_no_skip, "skip the calls whose summary has no 'usage'"),
        ("usage read for this model's name only", tokens_keyed_by_this_model, "calls may use other models"),
        ("one model call per trace", tokens_one_per_trace, "not one per trace"),
    ]),
}
said = {name: {"right": CHECKS[name](right), "blank": CHECKS[name](blank),
               "wrong": [(mistake, fragment, CHECKS[name](value)) for mistake, value, fragment in wrong]}
        for name, (right, blank, wrong) in table.items()}
print("RESULT=" + json.dumps(said))
"""


def test_the_traced_checks_of_notebook_00(tmp_path):
    env = {**os.environ, "COURSE_RUNS_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(TRACED_TABLE)], cwd=ROOT, env=env, check=False,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT=")), None)
    assert line, result.stdout[-2000:] + result.stderr[-3000:]
    said = json.loads(line.removeprefix("RESULT="))
    assert set(said) == set(TRACED_EXERCISES)
    for name, outcome in said.items():
        assert outcome["right"] is None, f"{name}: the right answer was refused: {outcome['right']}"
        assert outcome["blank"], f"{name}: the blank exercise passed"
        assert len(outcome["wrong"]) >= 3
        for mistake, fragment, hint in outcome["wrong"]:
            assert hint, f"{name}: the mistake '{mistake}' passed"
            assert fragment in hint, f"{name}: the mistake '{mistake}' got a hint that does not name it: {hint!r}"
