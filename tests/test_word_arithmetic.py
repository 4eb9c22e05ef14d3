"""The word-arithmetic environment: the same problems for the same seed, a held-out split that
never shares a problem with training, gold answers that are right, and arguments refused with a
message that names the fix."""

import re

import pytest
import verifiers as vf
from gsm8k_course import HashParser, correct_answer
from word_arithmetic import DIFFICULTIES, Problem, generate, load_environment, split_of


def solve(problem: Problem) -> int:
    """An independent solver: reads the numbers back from the question text and applies the
    template's arithmetic in the order the words say."""
    q = problem.question
    n = [int(x) for x in re.findall(r"\d+", q)]
    if "gets" in q and "gives" in q:  # has a, gets b more, then gives c
        return n[0] + n[1] - n[2]
    if "gets" in q:
        return n[0] + n[1]
    if "eats" in q:  # has t, eats c, shares the rest among b
        return (n[0] - n[1]) // n[2]
    if "shares" in q:
        return n[0] // n[1]
    if "already had" in q:
        return n[0] * n[1] + n[2]
    if "boxes" in q:  # a boxes of b, gives c
        return n[0] * n[1] - n[2]
    if "gives" in q:
        return n[0] - n[1]
    return n[0] * n[1]  # bags of


def test_same_seed_same_problems_other_seed_others():
    assert generate(50, "train", seed=3) == generate(50, "train", seed=3)
    assert generate(50, "eval", seed=3) == generate(50, "eval", seed=3)
    assert generate(50, "train", seed=3) != generate(50, "train", seed=4)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_splits_are_disjoint_and_sized(difficulty):
    train = generate(2000, "train", difficulty, seed=0)
    held_out = generate(200, "eval", difficulty, seed=0)
    assert len(train) == 2000 and len(held_out) == 200
    assert len({p.key for p in train}) == 2000  # no problem twice
    assert not {p.key for p in train} & {p.key for p in held_out}
    assert not {p.question for p in train} & {p.question for p in held_out}
    # whatever the seeds: the split is a property of the problem's arithmetic
    other_train = generate(2000, "train", difficulty, seed=7)
    assert not {p.key for p in other_train} & {p.key for p in held_out}
    assert all(split_of(p) == "eval" for p in held_out) and all(split_of(p) == "train" for p in train)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_gold_answers_are_right(difficulty):
    problems = generate(500, "train", difficulty, seed=1) + generate(100, "eval", difficulty, seed=1)
    for p in problems:
        assert p.answer == solve(p), p.question
        assert p.answer > 0 and isinstance(p.answer, int)
    steps = {p.steps for p in problems}
    assert steps == {"one-step": {1}, "two-step": {2}, "mixed": {1, 2}}[difficulty]


def test_environment_scores_with_gsm8k_courses_rubric():
    env = vf.load_environment("word-arithmetic", num_examples=20, num_eval_examples=10, seed=0)
    assert len(env.dataset) == 20 and len(env.eval_dataset) == 10
    assert isinstance(env.parser, HashParser)
    row = env.eval_dataset[0]
    assert row["prompt"][0]["role"] == "system" and "####" in row["prompt"][0]["content"]
    assert row["prompt"][-1]["content"] in {p.question for p in generate(10, "eval", seed=0)}
    right = [{"role": "assistant", "content": f"Adding them up.\n#### {row['answer']}"}]
    wrong = [{"role": "assistant", "content": f"#### {int(row['answer']) + 1}"}]
    assert correct_answer(env.parser, right, row["answer"]) == 1.0
    assert correct_answer(env.parser, wrong, row["answer"]) == 0.0
    assert env.rubric.get_reward_func_names() == ["correct_answer", "hash_format"]


@pytest.mark.parametrize(("args", "says"), [
    ({"difficulty": "hard"}, "difficulty must be one of"),
    ({"num_examples": 0}, "num_examples must be a positive number"),
    ({"num_examples": -1}, "-1 is refused too"),
    ({"num_eval_examples": 2.5}, "num_eval_examples must be a positive number"),
    ({"max_number": 5}, "max_number must be a whole number from 10"),
    ({"max_number": True}, "max_number must be a whole number"),
    ({"seed": "0"}, "seed must be a whole number"),
])
def test_bad_arguments_are_refused_naming_the_fix(args, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        load_environment(**args)
    with pytest.raises(RuntimeError, match=re.escape(says)):  # verifiers' loader wraps it, message kept
        vf.load_environment("word-arithmetic", **args)


def test_asking_for_more_problems_than_exist_says_how_to_get_them():
    with pytest.raises(ValueError, match="ask for fewer than 3000 or raise max_number"):
        generate(3000, "eval", "one-step", max_number=10)


def test_eval_start_skips_the_held_out_problems_a_design_was_chosen_on():
    """Issue 43, item 3: notebook 02 is judged on held-out problems after the design set, never on it."""
    from word_arithmetic import DESIGN_PROBLEMS

    env = load_environment(difficulty="one-step", max_number=20, num_examples=5, num_eval_examples=10,
                           eval_start=DESIGN_PROBLEMS)
    every = generate(DESIGN_PROBLEMS + 10, "eval", "one-step", 20)
    assert list(env.eval_dataset["question"]) == [p.question for p in every[DESIGN_PROBLEMS:]]
    design = {p.question for p in every[:DESIGN_PROBLEMS]}
    assert not design & set(env.eval_dataset["question"])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="eval_start"):
            load_environment(num_eval_examples=2, eval_start=bad)
