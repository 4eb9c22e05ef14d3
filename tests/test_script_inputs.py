"""Scripts given a bad input stop at once with a message that names it, not a bare traceback or a long run:
the benchmark scripts' arguments (0 was read as "not given" by `args.x or default`, and a count of 0 or -1
reached a loader that reads -1 as "all"); scripts/minute_plan.py's damaged inputs; workshop/admin_password.py's
data folder and password."""

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _started(*args, **kwargs):
    raise AssertionError("the bad value was taken: the benchmark started (machine_info is its first step)")


# (script, arguments, what the error must say). benchmarks/bench_learnability.py is not here: its --time-steps 0,
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
    ("bench_notebooks", ["02", "-p", "max_stepz", "3"], "no notebook to run has the parameter(s) max_stepz"),
    ("bench_notebooks", ["01", "02", "-p", "max_steps", "0"], "-p, notebook 02: max_steps=0: must be at least 1"),
    ("bench_notebooks", ["02", "-p", "learning_rate", "fast"], "learning_rate='fast': must be a number above 0"),
    ("bench_trainer_memory", ["--steps", "1"], "argument --steps: 1 is out of range: it must be at least 2"),
    ("bench_trainer_memory", ["--other", "/nonexistent"], "/nonexistent is not a checkout of the course"),
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
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    module = importlib.import_module(script)
    monkeypatch.setattr(module, "machine_info", _started)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *arguments])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and says in said, said


# ---------------------------------------------------------------- scripts/minute_plan.py on damaged inputs


def _plan_inputs(root: Path) -> Path:
    """A copy of scripts/minute_plan.py and everything it reads (the plan, the run files it names, the
    notebooks, the guide) under `root`, where an input can be damaged without touching the project's."""
    plan = json.loads((ROOT / "workshop" / "minute_plan.json").read_text())
    run_files = {f"benchmarks/results/{b['run_file']}" for b in plan["blocks"] if "run_file" in b}
    notebooks = [str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")]
    for name in ["scripts/minute_plan.py", "workshop/minute_plan.json", "INSTRUCTOR_GUIDE.md", *run_files, *notebooks]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    return root


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _edit_plan(change):
    def damage(root: Path) -> None:
        path = root / "workshop" / "minute_plan.json"
        plan = json.loads(path.read_text())
        change(plan)
        path.write_text(json.dumps(plan))
    return damage


def _first_run_file(root: Path) -> Path:
    plan = json.loads((root / "workshop" / "minute_plan.json").read_text())
    return root / "benchmarks" / "results" / next(b["run_file"] for b in plan["blocks"] if "run_file" in b)


def _rename_a_block(root: Path) -> None:
    """A notebook's block misnamed, and a plan change that the guide's agenda would show (it was written
    before the notebook's block was found wrong): a shorter opening, which keeps the plan within its rules."""
    path = root / "notebooks" / "01_traced_gsm8k_eval.ipynb"
    path.write_text(path.read_text().replace("<!-- minute-plan:01_traced_gsm8k_eval -->",
                                             "<!-- minute-plan:01_typo -->"))
    _edit_plan(lambda plan: plan["blocks"][0].update(teach=plan["blocks"][0]["teach"] - 1))(root)


DAMAGED_PLAN_INPUTS = [
    ("the plan cut short", lambda root: _cut(root / "workshop" / "minute_plan.json"), [],
     "workshop/minute_plan.json cannot be read as JSON"),
    ("the plan missing", lambda root: (root / "workshop" / "minute_plan.json").unlink(), [],
     "workshop/minute_plan.json is missing"),
    ("the plan not UTF-8", lambda root: (root / "workshop" / "minute_plan.json").write_bytes(b'{"blocks": "\xff"}'), [],
     "workshop/minute_plan.json cannot be read as JSON"),
    ("a notebook's rows missing", _edit_plan(lambda plan: plan["blocks"][1].pop("rows")), [],
     "workshop/minute_plan.json, block 2 (00_setup): no 'rows' in it"),
    ("a row's teaching minutes as text", _edit_plan(lambda plan: plan["blocks"][1]["rows"][0].update(teach="four")), [],
     "block 2 (00_setup): TypeError"),
    ("a row's teaching minutes infinite (1e999)",
     _edit_plan(lambda plan: plan["blocks"][1]["rows"][0].update(teach=float("inf"))), [],
     "block 2 (00_setup): ValueError: row '1–3. What is installed"),
    ("a row's teaching minutes NaN", _edit_plan(lambda plan: plan["blocks"][1]["rows"][0].update(teach=float("nan"))),
     [], "teach is nan minutes; give a number from 0 up"),
    ("a row's teaching minutes negative", _edit_plan(lambda plan: plan["blocks"][1]["rows"][0].update(teach=-30)),
     [], "teach is -30 minutes; give a number from 0 up"),
    ("a session block's minutes infinite", _edit_plan(lambda plan: plan["blocks"][0].update(teach=float("inf"))),
     ["--write"], "teach is inf minutes"),
    ("the session's minutes missing", _edit_plan(lambda plan: plan.pop("session_minutes")), [],
     "workshop/minute_plan.json: no 'session_minutes' in it"),
    ("a run file cut short", lambda root: _cut(_first_run_file(root)), [], "cannot be read as JSON"),
    ("a run file missing", lambda root: _first_run_file(root).unlink(), [], "is missing; restore it from git"),
    ("a run file without the notebook", _edit_plan(lambda plan: plan["blocks"][1].update(notebook="09_none")), [],
     "records of notebook 09_none, not one"),
    ("a notebook cut short", lambda root: _cut(root / "notebooks" / "02_traced_grpo_training.ipynb"), ["--write"],
     "notebooks/02_traced_grpo_training.ipynb cannot be read as JSON"),
    ("the guide missing", lambda root: (root / "INSTRUCTOR_GUIDE.md").unlink(), ["--write"],
     "INSTRUCTOR_GUIDE.md cannot be read"),
    ("a notebook's block misnamed", _rename_a_block, ["--write"],
     "a minute-plan block is named '01_typo', and workshop/minute_plan.json has no block of that name"),
    ("the session over its minutes",
     _edit_plan(lambda plan: plan["session"]["rows"].append({"block": "x", "teach": 60})),
     ["--write"], "breaks the workshop's rules: The 150-minute session: it sums to"),
    ("the session's training too late",
     _edit_plan(lambda plan: plan["session"]["rows"].insert(0, {"block": "x", "teach": 30})),
     ["--write"], "later than minute 45"),
    ("a section counted twice", _edit_plan(lambda plan: plan["session"]["rows"].append(plan["session"]["rows"][2])),
     ["--write"], "is counted twice"),
    ("a plan row naming no row of its notebook",
     _edit_plan(lambda plan: plan["session"]["rows"][2].update(row="99")), [], "has no row '99'"),
]


@pytest.mark.parametrize("damage, arguments, says", [case[1:] for case in DAMAGED_PLAN_INPUTS],
                         ids=[case[0] for case in DAMAGED_PLAN_INPUTS])
def test_minute_plan_names_a_damaged_input_and_writes_nothing(tmp_path, damage, arguments, says):
    root = _plan_inputs(tmp_path)
    damage(root)
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    done = subprocess.run([sys.executable, str(root / "scripts" / "minute_plan.py"), *arguments], cwd=root,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 1 and done.stderr.startswith("minute_plan: ") and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file()} == before


def test_minute_plan_on_whole_inputs_still_writes_what_is_committed(tmp_path):
    root = _plan_inputs(tmp_path)
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    done = subprocess.run([sys.executable, str(root / "scripts" / "minute_plan.py"), "--write"], cwd=root,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file()} == before


def test_minute_plan_with_one_file_unwritable_writes_none(tmp_path):
    """--write with one notebook read-only rewrote the guide and the notebooks before it, not the rest: every file
    to change is opened for writing first. (As root a mode does not stop a write: the file is made immutable.)"""
    root = _plan_inputs(tmp_path)
    _edit_plan(lambda plan: plan["blocks"][1]["rows"][0].update(teach=5))(root)  # the guide and 00_setup change
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    locked = root / "notebooks" / "00_setup.ipynb"
    as_root = os.geteuid() == 0
    locked.chmod(0o444)
    if as_root and subprocess.run(["chattr", "+i", str(locked)], capture_output=True, check=False).returncode:
        pytest.skip("root, and chattr cannot make a file read-only here")
    try:
        done = subprocess.run([sys.executable, str(root / "scripts" / "minute_plan.py"), "--write"], cwd=root,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    finally:
        if as_root:
            subprocess.run(["chattr", "-i", str(locked)], check=True)
        locked.chmod(0o644)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "minute_plan: notebooks/00_setup.ipynb cannot be written" in done.stderr, done.stderr
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file()} == before


# ---------------------------------------------------------------- workshop/admin_password.py


def _admin_password(tmp_path: Path, data: Path, password: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_HUB_")}
    env["COURSE_HUB_DATA"] = str(data)
    if password is not None:
        env["COURSE_HUB_ADMIN_PASSWORD"] = password
    return subprocess.run([sys.executable, str(ROOT / "workshop" / "admin_password.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_admin_password_on_a_data_path_under_a_file_says_so(tmp_path):
    """COURSE_HUB_DATA under a file (a typo, a path copied wrong) gave a bare NotADirectoryError."""
    (tmp_path / "a-file").write_text("not a folder")
    data = tmp_path / "a-file" / "hub"
    done = _admin_password(tmp_path, data, "a-good-password")
    assert done.returncode == 1, done.stderr
    assert (f"admin_password: the hub's data folder {data} cannot hold the password file (Not a directory): set "
            "COURSE_HUB_DATA to a folder path") in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("blank", ["", "   "])
def test_admin_password_refuses_an_empty_data_folder_and_touches_nothing(tmp_path, blank):
    """COURSE_HUB_DATA='' was Path(''): the current folder, chmodded 0700 and given the password file."""
    mode = tmp_path.stat().st_mode
    done = _admin_password(tmp_path, blank, "a-good-password")
    assert done.returncode == 1 and "COURSE_HUB_DATA is set but empty" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == [] and tmp_path.stat().st_mode == mode


def test_admin_password_refuses_a_password_bcrypt_would_not_read_whole(tmp_path):
    """bcrypt reads 72 bytes of a password; bcrypt 5 (what requirements-hub.txt installs) raises on more, and
    its message advised cutting the password. 37 accented letters are 74 bytes: refused, with the count and
    what a character costs, before any file is made."""
    done = _admin_password(tmp_path, tmp_path / "hub", "é" * 37)
    assert done.returncode == 1 and "the password is 74 bytes long; bcrypt reads at most 72" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "hub").exists()
