"""Scripts given a bad input stop at once with a message that names it, not a bare traceback or a long run:
the benchmark scripts' arguments (0 was read as "not given" by `args.x or default`, and a count of 0 or -1
reached a loader that reads -1 as "all")."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _started(*args, **kwargs):
    raise AssertionError("the bad value was taken: the benchmark started (machine_info is its first step)")


# (script, arguments, what the error must say). scripts/bench_learnability.py is not here: its --time-steps 0,
# --explore 0, --threads 0 and -p are still read as before (another change owns that file).
BAD_ARGUMENTS = [
    ("bench_endpoint", ["--repeats", "0"], "argument --repeats: 0 is out of range: it must be at least 1"),
    ("bench_eval", ["--rollouts", "0"], "argument --rollouts: 0 is out of range"),
    ("bench_eval", ["--rollouts", "1320"], "at most 1319 (GSM8K test problems)"),
    ("bench_eval", ["--max-tokens", "abc"], "argument --max-tokens: 'abc' is not a whole number"),
    ("bench_grpo", ["--seeds", "0", "-1"], "argument --seeds: -1 is out of range"),
    ("bench_grpo", ["-p", "max_stepz", "3"], "-p max_stepz: notebook 02 has no such parameter; its parameters"),
    ("bench_grpo", ["-p", "max_steps", "0"], "-p: max_steps=0: must be at least 1"),
    ("bench_grpo", ["-p", "learning_rate", "fast"], "-p: learning_rate='fast': must be a number above 0"),
    ("bench_hack", ["--steps", "0"], "argument --steps: 0 is out of range"),
    ("bench_hack", ["--num-eval", "-1"], "argument --num-eval: -1 is out of range"),
    ("bench_hack", ["--threads", "0"], "argument --threads: 0 is out of range"),
    ("bench_notebooks", ["2"], "there is no notebook '2'; the notebooks are 00 01 02 03 04"),
    ("bench_room", ["--learners", "0"], "argument --learners: 0 is out of range: it must be at least 1 and at most 32"),
    ("bench_room", ["--learners", "1,,2"], "argument --learners: '' is not a whole number"),
    ("bench_room", ["--slots", "0"], "argument --slots: 0 is out of range"),
    ("bench_room", ["--max-tokens", "0"], "argument --max-tokens: 0 is out of range"),
    ("bench_screen", ["--problems", "0"], "argument --problems: 0 is out of range"),
    ("bench_screen", ["--threads", "0"], "argument --threads: 0 is out of range"),
    ("bench_signal", ["--prompts", "0"], "argument --prompts: 0 is out of range"),
    ("bench_signal", ["--prompts", "-1"], "argument --prompts: -1 is out of range"),
    ("bench_signal", ["--group", "1"], "it must be at least 2 (GRPO compares at least 2 completions)"),
    ("bench_signal", ["--lengths", "96", "0"], "argument --lengths: 0 is out of range"),
    ("bench_signal", ["--temperature", "nan"], "argument --temperature: nan is out of range"),
    ("bench_tool_calls", ["--num-examples", "0"], "argument --num-examples: 0 is out of range"),
    ("bench_tool_calls", ["--threads", "0"], "argument --threads: 0 is out of range"),
    ("bench_tracing", ["--rollouts", "0"], "argument --rollouts: 0 is out of range"),
    ("bench_tracing", ["--repeats", "0"], "argument --repeats: 0 is out of range"),
    ("bench_update", ["--batch", "0"], "argument --batch: 0 is out of range"),
    ("bench_update", ["--threads", "0"], "argument --threads: 0 is out of range"),
    ("bench_update", ["--busy", "-1"], "argument --busy: -1 is out of range: it must be at least 0"),
]


@pytest.mark.parametrize("script, arguments, says", BAD_ARGUMENTS)
def test_a_bench_script_refuses_a_bad_argument_before_it_starts(script, arguments, says, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    module = importlib.import_module(script)
    monkeypatch.setattr(module, "machine_info", _started)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *arguments])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and says in said, said
