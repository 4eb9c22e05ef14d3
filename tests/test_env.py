import asyncio

import pytest
import verifiers as vf
from gsm8k_course import (
    HASH_SYSTEM_PROMPT,
    HashParser,
    canonical_number,
    correct_answer,
    make_rubric,
)

from helpers import build_gsm8k_env, load_gsm8k


def score(rubric, text, answer):
    completion = [{"role": "assistant", "content": text}]
    result = asyncio.run(rubric.score_rollout(prompt=[], completion=completion, answer=answer,
                                              state={"timing": {"total_ms": 0.0}}))
    return result.metrics


def test_seed_trap_is_fixed():
    """A correct <think>...</think>18 scores 1.0 only when the rubric gets parser=parser."""
    parser = vf.ThinkParser()
    text = "<think>6 * 3 = 18 apples</think>18"
    fixed = vf.Rubric(funcs=[correct_answer, parser.get_format_reward_func()], weights=[1.0, 0.2], parser=parser)
    trap = vf.Rubric(funcs=[correct_answer, parser.get_format_reward_func()], weights=[1.0, 0.2])
    assert score(fixed, text, "18")["correct_answer"] == 1.0
    assert score(trap, text, "18")["correct_answer"] == 0.0
    assert score(make_rubric(parser, "think"), text, "18")["correct_answer"] == 1.0


@pytest.mark.parametrize("text, correct, fmt", [
    ("3 + 4 = 7\n#### 7", 1.0, 1.0),
    ("#### $1,200.00", 1.0, 1.0),
    ("so #### 12 then #### 8", 0.0, 1.0),  # the last marker counts
    ("The answer is 1200", 0.0, 0.0),
    ("#### none", 0.0, 0.0),
])
def test_hash_variant(text, correct, fmt):
    parser = HashParser()
    metrics = score(make_rubric(parser, "hash"), text, "1200" if "1,200" in text or "1200" in text else "7")
    assert metrics["correct_answer"] == correct
    assert metrics["hash_format"] == fmt


def test_canonical_number():
    assert canonical_number(" $1,000. ") == "1000"
    assert canonical_number("18.50") == "18.5"
    assert canonical_number("<think>x</think>18") == "<think>x</think>18"


@pytest.mark.parametrize("variant", ["think", "hash"])
def test_load_environment_matches_explicit_construction(variant):
    env = vf.load_environment("gsm8k-course", variant=variant, num_examples=6, num_eval_examples=4)
    assert isinstance(env, vf.SingleTurnEnv)
    assert env.dataset["answer"] == load_gsm8k("train", n=6)["answer"]
    assert env.eval_dataset["answer"] == load_gsm8k("test", n=4)["answer"]
    expected_parser = vf.ThinkParser if variant == "think" else HashParser
    assert type(env.parser) is expected_parser and env.rubric.parser is env.parser
    assert env.rubric.get_reward_func_names()[0] == "correct_answer"
    assert env.rubric.get_reward_weights() == [1.0, 0.2 if variant == "think" else 0.5]
    helper_env = build_gsm8k_env(variant=variant, num_examples=6, num_eval_examples=4)
    assert helper_env.dataset.to_list() == env.dataset.to_list()
    assert helper_env.system_prompt == env.system_prompt
    if variant == "hash":
        assert env.system_prompt == HASH_SYSTEM_PROMPT


@pytest.mark.parametrize("args, name", [
    ({"variant": "boxed"}, "variant"),
    ({"num_examples": -5}, "num_examples"),
    ({"num_eval_examples": 2.5}, "num_eval_examples"),
    ({"num_eval_examples": 0}, "num_eval_examples"),  # verifiers would read 0 as "all 1319"
])
def test_bad_arguments_name_the_argument(args, name):
    with pytest.raises(ValueError, match=name):
        build_gsm8k_env(**args)
    with pytest.raises(RuntimeError, match=name):  # verifiers wraps it, keeping the message
        vf.load_environment("gsm8k-course", **args)
