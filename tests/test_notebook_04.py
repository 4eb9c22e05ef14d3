"""Notebook 04 (verifiers 0.4's v1 API) in its own environment, .venv-v1: the environment is made by
scripts/setup_v1_env.sh (a no-op when it is up to date), the notebook runs under papermill in its
kernel against the real local llama.cpp server, its rollouts are read back from the local Weave store
from this (the main) environment, and its wandb run from the offline run folder. Its exercise checks
run in .venv-v1, where verifiers.v1 exists, against a table of the mistakes learners make."""

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from notebook_run import NOTEBOOKS, execute, outputs_text, solved_copy
from papermill.exceptions import PapermillExecutionError

from helpers.notebook_runner import execute as run_notebook

ROOT = NOTEBOOKS.parent
NOTEBOOK = NOTEBOOKS / "04_verifiers_v1.ipynb"
V1_PYTHON = ROOT / ".venv-v1" / "bin" / "python"
KERNEL = "verifiers-v1"
# Small: 2 problems x 1 rollout, short replies; what is checked does not depend on how many.
CI_PARAMETERS = {"num_examples": 2, "rollouts_per_example": 1, "max_tokens": 48, "max_concurrent": 2}


@pytest.fixture(scope="session")
def v1_env() -> Path:
    """.venv-v1 and its kernel, made by the project's own script (seconds when already made)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup_v1_env.sh")], cwd=ROOT, capture_output=True,
                          text=True, check=False, stdin=subprocess.DEVNULL, timeout=1800)
    assert done.returncode == 0, f"scripts/setup_v1_env.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return V1_PYTHON


def in_v1(code: str, timeout: int = 600) -> str:
    """Run `code` with .venv-v1's Python (from the project root) and return what it printed."""
    done = subprocess.run([str(V1_PYTHON), "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_notebook_names_its_own_kernel_and_no_colab():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == KERNEL
    assert "colab.research.google.com" not in "".join(notebook["cells"][0]["source"])


@pytest.mark.slow
def test_every_vf_name_the_notebook_uses_exists_in_verifiers_0_4(v1_env):
    """test_static's API-drift check runs in the main environment (verifiers 0.1.5); this one runs the
    notebook's `vf.*` names against verifiers.v1 in .venv-v1."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    tree = ast.parse(source.replace("await run_eval", "run_eval"))  # top-level await is a notebook thing
    names = sorted({node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name) and node.value.id == "vf"})
    assert names, "the notebook uses no vf.* name"
    missing = json.loads(in_v1(f"import json, verifiers.v1 as vf; print(json.dumps([n for n in {names!r} "
                                "if not hasattr(vf, n)]))"))
    assert missing == [], f"not in verifiers 0.4.0's verifiers.v1: {missing}"


@pytest.mark.slow
def test_the_rows_are_notebook_01s(v1_env, gsm8k_dir):
    """v1_bridge.load_gsm8k (in .venv-v1) returns exactly what notebook 01's loader returns here."""
    from gsm8k_course import load_gsm8k

    got = json.loads(in_v1("import json; from helpers.tracing.v1_bridge import load_gsm8k; "
                           "print(json.dumps(load_gsm8k('test', n=5, seed=3)))"))
    assert got == load_gsm8k("test", n=5, seed=3).to_list()


@pytest.mark.slow
@pytest.mark.parametrize("given, says", [
    ({"num_examples": 0}, "num_examples=0: must be at least 1"),
    ({"max_tokens": "48"}, "this one is text"),
    ({"num_examples": 5000}, "num_examples=5000: GSM8K's test split has 1,319 problems"),
    ({"rollout_per_example": 1}, "rollout_per_example: no notebook has this parameter (did you mean rollouts_"),
])
def test_a_wrong_parameter_stops_notebook_04_in_its_first_code_cell(v1_env, tmp_path, given, says):
    """Notebook 04's parameters went unchecked: num_examples=0 reached the loader, a misspelled name only made
    papermill warn. Its first code cell now checks them, in its own kernel, before anything else runs."""
    with pytest.raises(PapermillExecutionError) as stopped:
        run_notebook(NOTEBOOK, tmp_path / "04.ipynb", given)
    assert says in str(stopped.value), str(stopped.value)[-2000:]
    ran = [c for c in json.loads((tmp_path / "04.ipynb").read_text())["cells"]
           if c["cell_type"] == "code" and c.get("execution_count")]
    assert 'check_parameters(globals(), "04")' in "".join(ran[-1]["source"]), "something ran after the check"


# Episodes as verifiers' own writer stores them (write_episode: UTF-8, not escaped), for real GSM8K questions that
# hold non-ASCII; then what a killed or foreign run leaves: a line nested too deeply for Python's JSON parser,
# and a last line cut inside a UTF-8 character.
DAMAGED_RUN = r'''
import json, sys, warnings
from pathlib import Path
import verifiers.v1 as vf
from verifiers.v1.episode import WireEpisode
from verifiers.v1.utils.trace_store import TRACES_FILE, type_adapter, write_episode
from helpers.tracing.v1_bridge import read_run

questions, run = json.loads(sys.argv[1]), Path(sys.argv[2])
run.mkdir()
for idx, question in enumerate(questions):
    task = {"type": "GSM8KTask", "data": {"idx": idx, "prompt": question, "answer": "1"}}
    episode = WireEpisode.model_validate({"task": task, "traces": []})
    episode.traces = [type_adapter(vf.WireTrace).validate_python({"task": task, "agent": {"config": {}}})]
    write_episode(run, episode)
whole = (run / TRACES_FILE).read_bytes().splitlines(keepends=True)[0]
cut = next(i for i, byte in enumerate(whole) if byte >= 0xC0) + 1  # just after a character's first byte
with open(run / TRACES_FILE, "ab") as f:
    f.write(b"[" * 100_000 + b"]" * 100_000 + b"\n" + whole[:cut])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    _, kept = read_run(run)
(run / TRACES_FILE).unlink()
try:
    read_run(run)
    missing = "no error"
except RuntimeError as e:
    missing = str(e)
print(json.dumps({"kept": [e.traces[0].task.data.prompt for e in kept], "said": [str(w.message) for w in caught],
                  "missing": missing}))
'''


@pytest.mark.slow
def test_a_damaged_run_keeps_every_readable_episode_and_a_missing_one_says_why(v1_env, gsm8k_dir, tmp_path):
    """verifiers' read_episodes (and the bridge before) read text: a last line cut inside a UTF-8 character
    raised a bare UnicodeDecodeError and nothing was read; a deeply nested line raised RecursionError; a run
    without traces.jsonl, FileNotFoundError. Each damaged line is now skipped and named, and a missing file
    is a message that says what the folder should be."""
    rows = [json.loads(line) for line in (gsm8k_dir / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    questions = [r["question"] for r in rows if not r["question"].isascii()][:3]
    assert len(questions) == 3
    done = subprocess.run([str(V1_PYTHON), "-c", DAMAGED_RUN, json.dumps(questions), str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kept"] == questions
    (said,) = result["said"]
    assert "skipped 2 damaged record(s)" in said and "kept 3" in said, said
    assert "line 4: nested too deeply to read" in said and "line 5: not UTF-8 text" in said, said
    assert "traces.jsonl does not exist" in result["missing"] and "not a v1 eval run folder" in result["missing"]


# ---------------------------------------------------------------- the checks reject the mistakes learners make
# For each exercise: its right answer, the blank (the cell as committed) and plausible wrong answers, each with
# a fragment its hint must contain. Built and checked in .venv-v1; the hints come back as JSON.
CHECK_TABLE = r'''
import json, re
import verifiers.v1 as vf
from helpers.checks import CHECKS, _load_checks
from helpers.checks.notebook_04 import CONCEPT_MAP

_load_checks()
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")

def canonical_number(text):
    number = (text or "").strip().lstrip("$").rstrip(".").replace(",", "")
    if not NUMBER.fullmatch(number):
        return (text or "").strip()
    return number.rstrip("0").rstrip(".") if "." in number else number

def final_number(reply):
    if "####" not in reply:
        return ""
    match = NUMBER.search(reply.rsplit("####", 1)[1])
    return canonical_number(match.group()) if match else ""

class GSM8KData(vf.TaskData):
    answer: str

class Base(vf.Task[GSM8KData]):
    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        reply = final_number(trace.last_reply)
        return 1.0 if reply and reply == canonical_number(self.data.answer) else 0.0

class Right(Base):
    @vf.reward(weight=0.5)
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

class DefaultWeight(Base):
    @vf.reward
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

class NotDecorated(Base):
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

class NotAsync(Base):
    @vf.reward(weight=0.5)
    def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

class MarkerOnly(Base):
    @vf.reward(weight=0.5)
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if "####" in trace.last_reply else 0.0

class OnlyWhenRight(Base):
    @vf.reward(weight=0.5)
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) == canonical_number(self.data.answer) else 0.0

class DigitsOnly(Base):
    @vf.reward(weight=0.5)
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if re.search(r"####\s*\$?(\d[\d,.]*)", trace.last_reply) else 0.0

class ReturnsTheCoroutine(Base):  # also right: the task gathers what its rewards return, and a coroutine will do
    @vf.reward(weight=0.5)
    def hash_format(self, trace: vf.Trace):
        return self.format_of(trace)

    async def format_of(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

class Replaced(vf.Task[GSM8KData]):
    @vf.reward(weight=0.5)
    async def hash_format(self, trace: vf.Trace) -> float:
        return 1.0 if final_number(trace.last_reply) else 0.0

blank_map = dict.fromkeys(CONCEPT_MAP, "")

def changed(key, value):
    return {**CONCEPT_MAP, key: value}

table = {
    "04-format-reward": (Right, Base, [
        ("the default weight", DefaultWeight, "not 0.5"),
        ("no @vf.reward", NotDecorated, "plain method"),
        ("a plain def", NotAsync, "async def"),
        ("'####' without a number", MarkerOnly, "no number after it"),
        ("format only when right", OnlyWhenRight, "does not look at the answer"),
        ("correct_answer dropped", Replaced, "keep the correct_answer"),
        ("an instance, not the class", Right(GSM8KData(answer="1")), "the Task class itself"),
        ("a digits-only pattern", DigitsOnly, "negative"),
    ]),
    "04-concept-map": (dict(CONCEPT_MAP), blank_map, [
        ("Rubric -> Taskset", changed("vf.Rubric(funcs=..., weights=...)", "vf.Taskset"), "weights moved"),
        ("ThinkParser -> Toolset", changed("vf.ThinkParser", CONCEPT_MAP["vf.ToolEnv(tools=...)"]), "trace.last_reply"),
        ("GRPOTrainer -> vf-eval", changed("vf.GRPOTrainer", CONCEPT_MAP["env.evaluate(client, model, ...)"]),
         "no trainer"),
        ("evaluate -> prime-rl", changed("env.evaluate(client, model, ...)", CONCEPT_MAP["vf.GRPOTrainer"]), "vf-eval"),
        ("a list, not a dict", list(CONCEPT_MAP.values()), "give a dict"),
    ]),
}
also_right = {"04-format-reward": [ReturnsTheCoroutine]}
out = {}
for name, (right, blank, wrong) in table.items():
    check = CHECKS[name]
    out[name] = {"right": check(right), "blank": check(blank),
                 "also_right": [check(v) for v in also_right.get(name, [])],
                 "wrong": [(mistake, check(value), fragment) for mistake, value, fragment in wrong]}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def check_results(v1_env) -> dict:
    return json.loads(in_v1(CHECK_TABLE).strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["04-format-reward", "04-concept-map"])
def test_the_right_answer_passes_and_every_wrong_one_gets_its_hint(name, check_results):
    result = check_results[name]
    assert result["right"] is None, f"{name}: the right answer was refused: {result['right']}"
    for hint in result["also_right"]:
        assert hint is None, f"{name}: a valid answer other than the reference's was refused: {hint}"
    assert result["blank"], f"{name}: the blank exercise passed"
    assert len(result["wrong"]) >= 3
    for mistake, hint, fragment in result["wrong"]:
        assert hint, f"{name}: the mistake '{mistake}' passed"
        assert fragment in hint, f"{name}: the mistake '{mistake}' got a hint that does not name it: {hint!r}"


# ---------------------------------------------------------------- the notebook, run for real


def _read_back(runs: Path) -> tuple[list, dict]:
    """The run's Weave calls (opened from this environment) and its wandb history row."""
    from helpers.tracing.session import open_local_traces
    from helpers.tracing.wandb_offline import wandb_history

    session = open_local_traces("verifiers-course", store_path=runs / "traces" / "verifiers-course")
    history = wandb_history(runs / "wandb")
    return session.get_calls(), history.iloc[-1].to_dict()


@pytest.mark.notebook
def test_04_verifiers_v1(v1_env, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("COURSE_RUNS_DIR", str(runs))  # the kernel inherits it
    notebook = execute(NOTEBOOK.stem, tmp_path / "04.ipynb", **CI_PARAMETERS)
    assert notebook["metadata"]["kernelspec"]["name"] == KERNEL
    text = outputs_text(notebook)
    assert "verifiers 0.4.0" in text and "v0 names still in `verifiers`: []" in text
    assert "Weave's verifiers integration patched something: False" in text
    assert "not yet — 04-format-reward" in text and "not yet — 04-concept-map" in text  # as committed

    episodes = [json.loads(line) for line in next(runs.glob("v1_evals/*/traces.jsonl")).read_text().splitlines()]
    assert len(episodes) == 2 and all(e["ok"] for e in episodes), [e.get("errors") for e in episodes]

    calls, logged = _read_back(runs)
    by_op = {}
    for call in calls:
        by_op.setdefault(call.func_name, []).append(call)
    assert len(by_op["verifiers.v1.eval"]) == 1 and by_op["verifiers.v1.eval"][0].output["rollouts"] == 2
    rollouts, model_calls = by_op["verifiers.v1.rollout"], by_op["verifiers.v1.model_call"]
    assert len(rollouts) == 2 and len(model_calls) == 2
    assert all(isinstance(c.output["reward"], float) for c in rollouts)
    assert {c.parent_id for c in model_calls} == {c.id for c in rollouts}
    for call in model_calls:  # what the trace views read: the messages sent, the reply, the token usage
        assert [m["role"] for m in call.inputs["messages"]] == ["system", "user"]
        assert call.output["choices"][0]["message"]["role"] == "assistant"
        assert call.summary["usage"]["SmolLM2-135M-Instruct"]["completion_tokens"] > 0
    assert len(by_op["GSM8KTask.correct_answer"]) == 2
    assert logged["eval/rollouts"] == 2 and "eval/reward" in logged

    # A killed run leaves a torn last line; a foreign tool, a record of another shape. verifiers' read_episodes
    # raised on either and kept nothing; the bridge skips each, naming file and line, and keeps the rest.
    damaged = tmp_path / "damaged"
    shutil.copytree(next(runs.glob("v1_evals/*/traces.jsonl")).parent, damaged)
    with open(damaged / "traces.jsonl", "a") as traces:
        traces.write('{"wrong": "shape"}\n' + json.dumps(episodes[0])[:80])
    said = in_v1("import warnings\nfrom helpers.tracing.v1_bridge import read_run\n"
                 "with warnings.catch_warnings(record=True) as caught:\n"
                 "    warnings.simplefilter('always')\n"
                 f"    _, kept = read_run({str(damaged)!r})\n"
                 "print(len(kept), [str(w.message) for w in caught])")
    assert said.startswith("2 ") and "skipped 2 damaged record(s)" in said and "line 3:" in said, said
    assert "line 4: not JSON" in said, said


@pytest.mark.notebook
def test_04_with_the_solutions_every_check_says_correct(v1_env, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))
    executed = run_notebook(solved_copy(NOTEBOOK, tmp_path), tmp_path / "out.ipynb", CI_PARAMETERS)
    said = outputs_text(executed)
    for name in ("04-format-reward", "04-concept-map"):
        assert f"correct — {name}" in said, said[-2000:]
    assert "not yet —" not in said
    assert "mean hash_format" in said  # the solved task's second reward reached the run's summary
