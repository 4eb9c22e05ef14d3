"""The check of notebook 03's last exercise: the feedback environment as an installable module
(`load_environment`), next to the course's gsm8k_feedback with the notebook's arguments and with every parameter
at another value."""

from __future__ import annotations

import copy
from collections.abc import Callable

from helpers.checks.notebook_03_discount import _discount_references
from helpers.checks.notebook_03_replays import (
    QUIET,
    _judged_with_hints,
    _replay,
    _rows,
    _scripts,
    _transcript,
)
from helpers.checks.own_code import not_your_own
from helpers.checks.real_inputs import (
    quiet_datasets,
    same_score,
)
from helpers.checks.registry import checks_exercise
from helpers.worker_thread import run_sync

FEEDBACK_RUBRIC = {"discounted_correct": 1.0, "hash_format": 0.5, "solved": 0.0, "turns": 0.0}


MODULE_ARGUMENTS = [  # the first as the notebook calls it; then every parameter at another value
    {"max_turns": 2, "discount": 0.5, "hints": True, "num_eval_examples": 2, "seed": 0},
    {"max_turns": 3, "discount": 0.25, "hints": False, "num_eval_examples": 3, "seed": 7},
    {"max_turns": 1, "discount": 0.9, "hints": True, "num_eval_examples": 1, "seed": 1},
]


def _reference_module(max_turns: int, discount: float, hints: bool, num_eval_examples: int, seed: int):
    """The solution's load_environment: section 2's FeedbackEnv on GSM8K's test split, with section 2's rubric."""
    from gsm8k_course import HASH_SYSTEM_PROMPT, load_gsm8k
    from gsm8k_feedback import FeedbackEnv, FinalAnswerParser, make_rubric

    parser = FinalAnswerParser()
    return FeedbackEnv(hints=hints, max_turns=max_turns, eval_dataset=load_gsm8k("test", num_eval_examples, seed),
                       system_prompt=HASH_SYSTEM_PROMPT, parser=parser, rubric=make_rubric(parser, discount))


@checks_exercise("03-my-environment")
def my_environment(load_environment: Callable) -> str | None:
    """load_environment(max_turns=, discount=, hints=, num_eval_examples=, seed=) of the learner's module, next to
    the solution's at several values of every parameter: the same rows and prompts, the same conversations, the
    same scores."""
    import verifiers as vf

    if not callable(load_environment):
        return "pass your module's load_environment function"
    own = not_your_own(load_environment, references=_module_references())
    if own:
        return own
    for arguments in MODULE_ARGUMENTS:
        call = f"load_environment({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
        try:
            with quiet_datasets():
                env = load_environment(**arguments)
                reference = _reference_module(**arguments)
        except NotImplementedError:
            return "load_environment still raises NotImplementedError: write its body"
        except Exception as e:  # noqa: BLE001 - the hint names what went wrong
            return f"{call} raised {type(e).__name__}: {e}"
        if not isinstance(env, vf.MultiTurnEnv):
            return f"return the feedback environment (a vf.MultiTurnEnv), not {type(env).__name__}"
        hint = _module_difference(env, reference, arguments)
        if hint:
            return f"{call}: {hint}"
    return None


def _module_difference(env, reference, arguments: dict) -> str | None:
    if env.max_turns != arguments["max_turns"]:
        return f"an environment with max_turns={env.max_turns}: pass the argument on"
    if env.eval_dataset is None or list(env.eval_dataset["answer"]) != list(reference.eval_dataset["answer"]):
        return ("its eval_dataset is not the rows load_gsm8k('test', num_eval_examples, seed) gives: GSM8K's test "
                "split, num_eval_examples rows after a shuffle with seed")
    system = [next((m["content"] for m in p if m["role"] == "system"), None) for p in env.eval_dataset["prompt"]]
    if system != [p[0]["content"] for p in reference.eval_dataset["prompt"]]:
        return f"its prompts' system message is {system[0]!r}: pass system_prompt=HASH_SYSTEM_PROMPT"
    rubric = dict(zip(env.rubric.get_reward_func_names(), env.rubric.get_reward_weights()))
    if rubric != FEEDBACK_RUBRIC:
        return (f"the rubric is {rubric}; section 2's is {FEEDBACK_RUBRIC}: the same four functions with the "
                "same weights (the '####' format counts 0.5)")
    own = not_your_own(*env.rubric.get_reward_funcs(), references=_discount_references())
    if own:  # the four reward functions are the exercise's to write
        return own
    return run_sync(_conversations_differ(env, reference, arguments))


async def _conversations_differ(env, reference, arguments: dict) -> str | None:
    """The same scripted conversations with both environments (their own methods, verifiers' own rollout loop),
    then scored by both rubrics."""
    from gsm8k_feedback import FinalAnswerParser, make_rubric

    at_half = make_rubric(FinalAnswerParser(), 0.5)  # the rubric of a module that ignores its discount
    env.logger = reference.logger = QUIET
    rows = dict(zip(reference.eval_dataset["answer"], reference.eval_dataset["question"]))
    rows.update({gold: question for question, gold in _rows() if gold not in rows})
    for gold, question in rows.items():
        for what, answers in _scripts(gold):
            case = f"gold answer {gold!r}, the model {what}"
            try:
                yours = await _replay(env, env.format_prompt(question, env.system_prompt, env.few_shot), gold, answers,
                                      _judged_with_hints)
            except Exception as e:  # noqa: BLE001 - the hint names what went wrong
                return f"with {case}, the environment raised {type(e).__name__}: {e}"
            expected = await _replay(reference, reference.format_prompt(question, reference.system_prompt), gold,
                                     answers, _judged_with_hints)
            if yours.said != expected.said:
                why = (f"pass hints={arguments['hints']} on to FeedbackEnv(hints=hints)"
                       if [s.split(" (")[0] for _, s in yours.said] == [s.split(" (")[0] for _, s in expected.said]
                       else "use section 2's FeedbackEnv and FinalAnswerParser (from gsm8k_feedback)")
                return (f"with {case}:\n  expected {_transcript(expected.said)}\n  yours    {_transcript(yours.said)}\n"
                        + why)
            if expected.state is None:
                continue  # never ended: nothing to score
            score, want = [await rubric.score_rollout(prompt=expected.state["prompt"], completion=expected.completion,
                                                      answer=gold, state=copy.deepcopy(expected.state))
                           for rubric in (env.rubric, reference.rubric)]
            if not same_score(score, want):
                half = await at_half.score_rollout(prompt=expected.state["prompt"], completion=expected.completion,
                                                   answer=gold, state=copy.deepcopy(expected.state))
                why = (f"its rewards use a discount of 0.5, not discount={arguments['discount']}: define the reward "
                       "functions inside load_environment, so that they see its `discount`"
                       if arguments["discount"] != 0.5 and same_score(score, half) else
                       "parse the model's LAST turn (its last assistant message, not the environment's 'Correct.'), "
                       "and discount per model turn")
                return (f"with {case} ({_transcript(expected.said)}), your rubric scored {score.metrics} (reward "
                        f"{score.reward}); section 2's scores {want.metrics} (reward {want.reward}): {why}")
    return None


def _module_references() -> tuple:
    from gsm8k_feedback import load_environment

    return (load_environment, _reference_module)
