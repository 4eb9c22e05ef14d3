"""Faults and bad input in the helpers (issue 25): a trace store with a record of the wrong shape, an
upload that fails part-way, a full disk at exit, a kernel ended by Jupyter, notebook 02's parameters.

Whatever traces runs in a subprocess (tracing patches libraries process-wide); these tests read
what it left behind. Each subprocess gets its own TMPDIR, so that wandb's temporary folders of other
processes on the machine are not counted.
"""

import ast
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helpers import parameters
from helpers.tracing.records import wal_files
from helpers.tracing.replay import ReplayInterrupted, replay
from helpers.tracing.store import LocalTraceServer

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_02 = ROOT / "notebooks" / "02_traced_grpo_training.ipynb"
PROJECT_ID = "local/faults"


# ----------------------------------------------------------------------------- upload


class RecordingServer:
    """A stand-in for W&B's trace server that keeps what it receives; with `fail_at=n` the n-th
    request (from 1) fails the way a dropped connection does, or raises `error` if given."""

    def __init__(self, fail_at: int | None = None, error: BaseException | None = None):
        self.received: list[tuple[str, dict]] = []
        self.fail_at, self.error = fail_at, error

    def _receive(self, kind: str, req: dict) -> None:
        if self.fail_at is not None and len(self.received) + 1 == self.fail_at:
            raise self.error or ConnectionError("W&B did not answer")
        self.received.append((kind, req))

    def call_start(self, req):
        self._receive("call_start", req)

    def call_end(self, req):
        self._receive("call_end", req)

    def call_update(self, req):
        self._receive("call_update", req)

    def obj_create(self, req):
        self._receive("obj_create", req)

    def table_create(self, req):
        self._receive("table_create", req)

    def file_create(self, req):
        self._receive("file_create", req)


def _store_with_a_bad_record(path: Path) -> tuple[Path, list[str]]:
    """A store of 3 traced calls (9 records, as Weave's client writes them) with one record of the
    wrong shape after the first call; returns the store and the ids of the calls."""
    server = LocalTraceServer(path)
    ids = []
    for i in range(3):
        call_id = f"call-{i}"
        server.obj_create({"obj": {"project_id": PROJECT_ID, "object_id": "double",
                                   "val": {"_type": "Op", "name": "double", "version": i}}})
        server.call_start({"start": {"project_id": PROJECT_ID, "id": call_id, "trace_id": call_id,
                                     "op_name": f"weave:///{PROJECT_ID}/op/double:v{i}",
                                     "started_at": "2026-12-04T10:00:00+00:00", "attributes": {}, "inputs": {"x": i}}})
        server.call_end({"end": {"project_id": PROJECT_ID, "id": call_id, "ended_at": "2026-12-04T10:00:01+00:00",
                                 "output": 2 * i, "summary": {}}})
        ids.append(call_id)
        if i == 0:
            server.flush()
            with open(wal_files(path)[0], "a") as f:  # what a crash or a hand edit can leave: no project_id
                f.write(json.dumps({"type": "obj_create", "req": {}}) + "\n")
    server.close()
    return path, ids


def _upload_to(server, runs: Path, monkeypatch):
    """upload_local_traces as a learner calls it, with W&B's server replaced by `server` (no network)."""
    from weave.trace import weave_init

    from helpers.tracing import session

    monkeypatch.setenv("COURSE_RUNS_DIR", str(runs))
    monkeypatch.setenv("WANDB_API_KEY", "f" * 40)
    monkeypatch.setattr(weave_init, "init_weave_get_server", lambda *a, **k: server)
    monkeypatch.setattr(weave_init, "get_entity_project_from_project_name", lambda name: ("me", name))
    monkeypatch.setattr("weave.wandb_interface.context.get_wandb_auth_context", lambda: None)
    return session.upload_local_traces


def test_upload_skips_what_the_reader_skips_and_says_how_many(tmp_path, monkeypatch, capsys):
    _store_with_a_bad_record(tmp_path / "traces" / "faults")
    target = RecordingServer()
    upload = _upload_to(target, tmp_path, monkeypatch)
    with pytest.warns(UserWarning, match=r"skipped 1 record\(s\) of the wrong shape"):
        reader_calls = LocalTraceServer(tmp_path / "traces" / "faults")._calls
    sent = upload("faults")
    said = capsys.readouterr().out
    assert sent == 9 and len(target.received) == 9  # every good record, the bad one left out
    assert {req["start"]["id"] for kind, req in target.received if kind == "call_start"} == set(reader_calls)
    assert all(req.get("obj", req.get("start", req.get("end", {}))).get("project_id") == "me/faults"
               for _, req in target.received)
    assert "uploaded 9 trace records" in said
    assert "not sent: 1 record(s) that the local reader skips too" in said and " line 4: a obj_create record" in said


def test_an_upload_that_fails_part_way_says_which_records_went_and_sends_the_rest(tmp_path, monkeypatch):
    _store_with_a_bad_record(tmp_path / "traces" / "faults")
    everything = RecordingServer()
    _upload_to(everything, tmp_path, monkeypatch)("faults")

    broken = RecordingServer(fail_at=5)
    with pytest.raises(ReplayInterrupted) as stopped:
        _upload_to(broken, tmp_path, monkeypatch)("faults")
    message = str(stopped.value)
    assert stopped.value.sent == 4 and len(broken.received) == 4
    assert "4 of 9 records went" in message and "the first not sent is" in message
    assert " line 6: call_start call-1" in message  # line 4 is the bad record, line 5 the op of call-1
    assert "ConnectionError: W&B did not answer" in message
    assert "helpers.upload_local_traces(project='faults', skip=4)" in message

    rest = RecordingServer()
    assert _upload_to(rest, tmp_path, monkeypatch)("faults", skip=4) == 5
    assert broken.received + rest.received == everything.received  # nothing lost, nothing twice

    interrupted = RecordingServer(fail_at=2, error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt) as pressed:  # Ctrl-C stays an interrupt, and says what went
        _upload_to(interrupted, tmp_path, monkeypatch)("faults")
    assert "1 of 9 records went" in "".join(pressed.value.__notes__)


class CallsCompleteServer(RecordingServer):
    """A stand-in for W&B's trace server for a project written in "calls_complete" mode: it refuses call
    starts and ends one by one, as W&B does (a 400 whose body carries CALLS_COMPLETE_MODE_REQUIRED), and
    takes finished calls whole through calls_complete."""

    def _refuse(self, path: str):
        import httpx
        from weave.vendor.weave_server_sdk import APIStatusError

        body = {"error_code": "CALLS_COMPLETE_MODE_REQUIRED", "reason": "this project takes calls_complete"}
        reply = httpx.Response(400, json=body, request=httpx.Request("POST", f"https://trace.invalid{path}"))
        raise APIStatusError("Error code: 400", response=reply, body=body)

    def call_start(self, req):
        self._refuse("/call/start")

    def call_end(self, req):
        self._refuse("/call/end")

    def calls_complete(self, req):
        self._receive("calls_complete", req)


def test_an_upload_to_a_project_in_calls_complete_mode_sends_whole_calls(tmp_path, monkeypatch, capsys):
    """upload_local_traces sent /call/start and /call/end one by one and stopped after 4 of 52 records against
    a project that demands calls_complete mode (its advice, skip=4, failed the same way). It now switches as
    weave's own client does: every finished call goes whole, and a call that never ended is named."""
    path, ids = _store_with_a_bad_record(tmp_path / "traces" / "faults")
    with pytest.warns(UserWarning, match="wrong shape"):  # the bad record, as in the tests above
        unfinished = LocalTraceServer(path)
    unfinished.call_start({"start": {"project_id": PROJECT_ID, "id": "call-unfinished", "trace_id": "t",
                                     "op_name": f"weave:///{PROJECT_ID}/op/double:v0",
                                     "started_at": "2026-12-04T10:00:02+00:00", "attributes": {}, "inputs": {"x": 9}}})
    unfinished.close()
    target = CallsCompleteServer()
    _upload_to(target, tmp_path, monkeypatch)("faults")
    complete = [req["batch"][0] for kind, req in target.received if kind == "calls_complete"]
    assert [call["id"] for call in complete] == ids  # every finished call, whole, in order
    assert [call["output"] for call in complete] == [0, 2, 4] and all(c["project_id"] == "me/faults" for c in complete)
    assert [call["inputs"] for call in complete] == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert sum(kind == "obj_create" for kind, _ in target.received) == 3
    said = capsys.readouterr().out
    assert "call call-unfinished never ended" in said


def test_replay_skips_the_end_of_a_call_whose_start_is_missing(tmp_path):
    store, _ = _store_with_a_bad_record(tmp_path / "store")
    with open(wal_files(store)[0], "a") as f:
        f.write(json.dumps({"type": "call_end", "req": {"end": {"project_id": PROJECT_ID, "id": "never-started",
                                                                "ended_at": "2026-12-04T10:00:02+00:00"}}}) + "\n")
    result = replay(store, RecordingServer())
    assert result.sent == 9 and len(result.skipped) == 2
    assert "the end of call never-started, whose start is missing" in result.skipped[1]


# ----------------------------------------------------------------------------- exit


def run_python(code: str, tmp_path: Path, **popen) -> subprocess.Popen:
    """A fresh interpreter on `code`, with runs and temporary files under tmp_path."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "WEAVE_"))}
    env.update(PYTHONPATH=str(ROOT), COURSE_RUNS_DIR=str(tmp_path / "runs"), TMPDIR=str(tmp_path / "tmp"))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def left_behind(tmp_path: Path, project: str) -> dict:
    """What a process that has ended left that it should have cleaned up."""
    store = tmp_path / "runs" / "traces" / project
    return {"locks": sorted(p.name for p in store.glob("*.lock")),
            "wandb_temp": sorted(p.name for p in (tmp_path / "tmp").iterdir() if "wandb" in p.name)}


FULL_DISK = """
import weave
from weave.durability import wal_writer
from helpers.tracing.session import init_tracing

original = wal_writer._JSONLWALFileWriter.__init__

def on_a_full_disk(self, path, **kwargs):  # the log file is opened as usual, and every write fails with ENOSPC
    original(self, path, **kwargs)
    self._file.close()
    self._file = open("/dev/full", "ab")

wal_writer._JSONLWALFileWriter.__init__ = on_a_full_disk
session = init_tracing("full-disk", quiet=True)

@weave.op
def double(x: int) -> int:
    return 2 * x

for i in range(3):
    double(i)
print("CALLS", len(session.get_calls()))
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to fail writes with ENOSPC")
def test_a_full_disk_is_said_once_and_exit_gives_no_traceback(tmp_path):
    process = run_python(FULL_DISK, tmp_path)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    assert "CALLS 3" in out  # still answered from memory
    assert err.count("could not be written") == 1 and "No space left on device" in err, err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    assert left_behind(tmp_path, "full-disk")["locks"] == []


TRACED_AND_LOGGED = """
import time
import wandb, weave
from helpers.tracing.session import init_tracing

session = init_tracing("ended", quiet=True)

@weave.op
def double(x: int) -> int:
    return 2 * x

double(21)
run = wandb.init(project="ended")
run.log({"reward": 0.5})
run.finish()
session.flush()
print("READY", flush=True)
time.sleep(120)
"""


def test_sigterm_ends_the_process_with_its_clean_up(tmp_path):
    """Jupyter ends a kernel that is slow to shut down with SIGTERM: the clean-up still runs."""
    process = run_python(TRACED_AND_LOGGED, tmp_path)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.stdout.readline().strip() != "READY":
            assert process.poll() is None, process.stderr.read()[-3000:]
        before = left_behind(tmp_path, "ended")
        assert before["locks"] and before["wandb_temp"]  # what a process killed now would leave
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + signal.SIGTERM, process.stderr.read()[-3000:]
    assert left_behind(tmp_path, "ended") == {"locks": [], "wandb_temp": []}
    store = LocalTraceServer(tmp_path / "runs" / "traces" / "ended")
    assert [c["output"] for c in store._calls.values()] == [42]


KERNEL = [
    """
import helpers, wandb, weave
tracing = helpers.init_tracing("kernel-exit")
endpoint = helpers.get_client()  # the local llama.cpp server: a child of this kernel, as in notebook 01
""",
    """
@weave.op
def ask(question: str) -> str:
    reply = endpoint.client.chat.completions.create(
        model=endpoint.model, max_tokens=4, messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content

ask("Say hi")
run = wandb.init(project="kernel-exit")
run.log({"reward": 0.5})
run.finish()
""",
]


@pytest.mark.slow
def test_a_kernel_ended_by_papermill_leaves_no_lock_and_no_wandb_temp_folders(tmp_path, monkeypatch):
    """Notebook 01's shape in two cells: tracing, the local model server, a wandb offline run. The
    kernel then ends as papermill ends it (shutdown request; SIGTERM when it is slow to go)."""
    import nbformat

    from helpers.notebook_runner import execute

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source.strip()) for source in KERNEL])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "exit.ipynb")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # the kernel's temporary folders, apart from others'
    executed = execute(tmp_path / "exit.ipynb", tmp_path / "out.ipynb")  # returns once the kernel is gone
    assert all(o.get("output_type") != "error" for c in executed["cells"] for o in c["outputs"])
    assert left_behind(tmp_path, "kernel-exit") == {"locks": [], "wandb_temp": []}
    assert len(LocalTraceServer(tmp_path / "runs" / "traces" / "kernel-exit")._calls) >= 2  # ask + the model call


# ----------------------------------------------------------------------------- notebook 02's parameters


def _parameters_cell() -> str:
    notebook = json.loads(NOTEBOOK_02.read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", []))
    return "".join(cell["source"])


def _defaults() -> dict:
    """The parameters cell's names and values (each a literal, as papermill requires)."""
    return {node.targets[0].id: ast.literal_eval(node.value)
            for node in ast.parse(_parameters_cell()).body if isinstance(node, ast.Assign)}


@pytest.mark.parametrize("notebook", sorted(parameters.NOTEBOOK_PARAMETERS))
def test_every_parameter_of_every_notebook_has_a_rule(notebook):
    """Each table names exactly its notebook's parameters, the defaults pass, and the first code cell checks
    them before anything else (nothing slow can run first)."""
    path = next(NOTEBOOK_02.parent.glob(f"{notebook}_*.ipynb"))
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    index = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    defaults = {node.targets[0].id: ast.literal_eval(node.value)
                for node in ast.parse("".join(cells[index]["source"])).body if isinstance(node, ast.Assign)}
    assert set(defaults) == set(parameters.NOTEBOOK_PARAMETERS[notebook])
    parameters.check_parameters(defaults, notebook)
    first = "".join(cells[index + 1]["source"])
    assert first.startswith("from helpers.parameters import check_parameters\n\n"
                            f'check_parameters(globals(), "{notebook}")'), first[:200]


@pytest.mark.parametrize("notebook, name, value, says", [
    ("00", "max_tokens", "abc", "max_tokens='abc': must be a whole number of at least 1"),
    ("00", "max_tokens", 0, "max_tokens=0: must be at least 1"),
    ("01", "max_tokens", "abc", "max_tokens='abc': must be a whole number of at least 1"),
    ("01", "max_tokens", 0, "max_tokens=0: must be at least 1"),
    ("01", "num_examples", -1, "num_examples=-1: must be at least 1 (GSM8K problems to evaluate)"),
    ("01", "split", "validation", "split='validation': must be one of 'train', 'test'"),
    ("01", "temperature", "0.7", "this one is text"),
    ("03", "num_examples", -1, "num_examples=-1: must be at least 1"),
    ("03", "max_turns", 0, "max_turns=0: must be at least 1"),
    ("03", "discount", 0, "discount=0: must be above 0"),
])
def test_notebooks_00_01_03_name_a_wrong_parameter_too(notebook, name, value, says):
    """max_tokens="abc" gave a long BadRequestError after 18 s, max_tokens=0 ran 105 s to 0/24, and
    num_examples=-1 silently meant all 1,319 problems: the first cell now stops, naming the parameter."""
    path = next(NOTEBOOK_02.parent.glob(f"{notebook}_*.ipynb"))
    cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    defaults = {node.targets[0].id: ast.literal_eval(node.value)
                for node in ast.parse("".join(cell["source"])).body if isinstance(node, ast.Assign)}
    with pytest.raises(ValueError, match="parameters cell") as refused:
        parameters.check_parameters({**defaults, name: value}, notebook)
    assert says in str(refused.value)


def test_backend_choices_are_the_ones_grpo_accepts():
    from helpers.grpo.backends import BACKENDS

    rule = parameters.GRPO_PARAMETERS["backend"]
    assert all(rule(backend) is None for backend in BACKENDS)
    assert rule("tpu") == "must be one of " + ", ".join(map(repr, BACKENDS))


@pytest.mark.parametrize("name, value, says", [
    ("max_steps", "abc", "max_steps='abc': must be a whole number of at least 1"),
    ("max_steps", "20", "this one is text"),  # papermill -r, or quotes
    ("max_steps", 0, "max_steps=0: must be at least 1"),
    ("max_steps", 2.5, "max_steps=2.5: must be a whole number"),
    ("learning_rate", "5e-5", "learning_rate='5e-5': must be a number above 0"),
    ("learning_rate", 0, "learning_rate=0: must be above 0"),
    ("num_generations", 1, "GRPO compares at least 2 completions"),
    ("per_device_train_batch_size", 12, "must be a multiple of num_generations=8"),
    ("hack_steps", -1, "hack_steps=-1: must be at least 0 (0: section 12 trains no second run)"),
    ("eval_samples", 0, "eval_samples=0: must be at least 1"),
    ("temperature", float("nan"), "temperature=nan: must be a number above 0"),
    ("beta", -0.1, "beta=-0.1: must be at least 0"),
    ("seed", True, "seed=True: must be a whole number"),
    ("save_steps", None, "save_steps=None"),
    ("backend", "tpu", "backend='tpu': must be one of 'auto', 'cpu', 'gpu', 'verifiers'"),
    ("rollouts", "vllm", "rollouts='vllm': must be one of 'server', 'generate'"),
    ("resume", True, "resume=True: must be one of 'auto', 'never'"),
    ("system_prompt", "", "system_prompt='': must be some text, or None"),
    ("run_name", "../elsewhere", "run_name='../elsewhere': must be a name"),
    ("before_run", None, "before_run=None: must be a name"),
    ("project", "", "project='': must be a name"),
])
def test_a_wrong_parameter_is_named_with_its_value_and_what_it_must_be(name, value, says):
    with pytest.raises(ValueError, match="parameters cell") as refused:
        parameters.check_parameters({**_defaults(), name: value}, "02")
    assert says in str(refused.value)


def test_every_wrong_parameter_is_named_at_once_and_a_missing_one_too():
    with pytest.raises(ValueError) as refused:
        parameters.check_parameters({**_defaults(), "max_steps": "abc", "beta": -1}, "02")
    assert "max_steps='abc'" in str(refused.value) and "beta=-1" in str(refused.value)
    defaults = _defaults()
    del defaults["seed"]
    with pytest.raises(ValueError, match="parameters cell has no seed"):
        parameters.check_parameters(defaults, "02")


# ----------------------------------------------------------------------------- a learner's code inside a check


def test_a_check_survives_what_a_learners_code_does(monkeypatch, capsys):
    """SystemExit escaped helpers.check, 1 MB printed three times came out whole, and a loop that never ends
    had no time limit: each now ends as a "not yet" that names it, with the printing cut short."""
    from helpers import checks

    def exits(completion, **kwargs):
        raise SystemExit(1)

    def chatty(completion, **kwargs):
        print("x" * 1_000_000)
        return 0.0

    def spins(completion, **kwargs):
        while True:
            pass

    checks.check("02-close-the-hack", exits)
    assert "not yet — 02-close-the-hack" in capsys.readouterr().out
    checks.check("02-close-the-hack", chatty)
    out = capsys.readouterr().out
    assert "not yet — 02-close-the-hack" in out and "more characters your code printed were cut" in out
    assert len(out) < checks.PRINT_LIMIT + 1000
    monkeypatch.setattr(checks, "TIME_LIMIT_S", 2.0)
    started = time.monotonic()
    checks.check("02-close-the-hack", spins)
    out = capsys.readouterr().out
    assert "did not finish within 2 s" in out and time.monotonic() - started < 15, out


def _workers_left(within_s: float = 3.0) -> list[str]:
    """The helpers-worker threads still alive after up to `within_s` (a stopped one takes a moment to exit)."""
    deadline = time.monotonic() + within_s
    while True:
        left = [t.name for t in threading.enumerate() if t.name == "helpers-worker"]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


async def _awaits_nothing(rubric, text, answer):
    return None


async def _spins(rubric, text, answer):
    while True:
        pass


async def _spins_printing(rubric, text, answer):
    while True:
        print("still spinning")


@pytest.mark.parametrize("score_text", [_spins, _spins_printing], ids=["silent", "printing"])
def test_a_check_stops_async_code_that_never_awaits(score_text, monkeypatch, capsys):
    """A task that never yields cannot be cancelled: the check said "it was stopped" while its worker thread kept
    spinning (66-87% of a core until the kernel restarted) and, printing, filled the cell after the verdict. The
    worker is now interrupted in Python itself: it has ended when the verdict is printed, and prints no more."""
    from helpers import checks

    checks.check("01-score-rollout", _awaits_nothing)  # the check's imports and data, within the full limit
    capsys.readouterr()
    monkeypatch.setattr(checks, "TIME_LIMIT_S", 2.0)
    checks.check("01-score-rollout", score_text)
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == ("not yet — 01-score-rollout: your code did not finish within 2 s when the check "
                                    "ran it (a loop that never ends, or a wait for something that never comes?); "
                                    "it was stopped"), out[-500:]
    assert _workers_left() == [], "the check said 'it was stopped' but its worker thread is still running"
    time.sleep(1.0)
    assert capsys.readouterr().out == "", "the learner's code printed after the verdict"


def test_a_check_says_so_when_code_cannot_be_stopped(monkeypatch, capsys):
    """Code blocked outside Python (here a lock's wait) gets the interrupt only when it returns: the check said "it
    was stopped" all the same. Now it says the code is still running and that restarting the kernel stops it. The
    time limit leaves the check's own set-up (building its cases) time to reach the learner's code on a busy
    machine; the code blocks until the test releases it."""
    from helpers import checks, worker_thread

    entered, release = threading.Event(), threading.Event()

    def blocks(completion, **kwargs):
        entered.set()
        release.wait()
        return 0.0

    monkeypatch.setattr(checks, "TIME_LIMIT_S", 8.0)
    monkeypatch.setattr(worker_thread, "STOP_WAIT_S", 1.0)
    try:
        checks.check("02-close-the-hack", blocks)
    finally:
        release.set()
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert entered.is_set(), "the check never reached the learner's code within its time limit"
    assert "did not finish within 8 s" in verdict and "it was stopped" not in verdict, verdict
    assert "still running" in verdict and "restart the kernel" in verdict, verdict
    assert _workers_left(within_s=20) == [], "the worker did not end once it was released"


def test_the_interrupt_button_says_so_when_code_cannot_be_stopped(monkeypatch):
    """The button's KeyboardInterrupt ended the cell as if the call were stopped while its worker slept on. Now
    the interrupt carries a note: still running, and how to stop it (restart the kernel)."""
    import _thread
    import signal

    from helpers import worker_thread

    # the kernel's SIGINT handler raises KeyboardInterrupt; an earlier test (a server's clean-up) may have left another
    monkeypatch.setattr(worker_thread, "STOP_WAIT_S", 1.0)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    release = threading.Event()
    button = threading.Timer(1.0, _thread.interrupt_main)  # as the kernel's interrupt: in the waiting thread
    button.start()
    try:
        with pytest.raises(KeyboardInterrupt) as pressed:
            worker_thread.in_worker_thread(release.wait, 30)
    finally:
        button.cancel()
        release.set()
        signal.signal(signal.SIGINT, previous)
    notes = "".join(getattr(pressed.value, "__notes__", []))
    assert "not stopped" in notes and "still running" in notes and "restart the kernel" in notes, notes
    assert _workers_left(within_s=20) == [], "the worker did not end once it was released"


async def _raises_interrupt_async(rubric, text, answer):
    raise KeyboardInterrupt


def _raises_interrupt(completion, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("name, value", [("02-close-the-hack", _raises_interrupt),
                                         ("01-score-rollout", _raises_interrupt_async)], ids=["sync", "async"])
def test_a_keyboard_interrupt_the_code_raises_is_a_hint_not_the_button(name, value, capsys):
    """helpers.check took a learner's own `raise KeyboardInterrupt` for the interrupt button: the cell ended in a
    traceback and Run All stopped. Only the button stops a check; what the code raises is a hint."""
    from helpers import checks

    try:
        checks.check(name, value)
    except KeyboardInterrupt:
        pytest.fail("the learner's own KeyboardInterrupt left helpers.check")
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.startswith(f"not yet — {name}: your code raised KeyboardInterrupt itself"), verdict
    assert _workers_left() == []


def test_what_code_writes_to_the_stdout_files_is_capped_too(capfd):
    """os.write(1, ...), a subprocess and a C printf write to the process's file descriptors 1 and 2, past
    sys.stdout: 1.3 MB went into the cell whole. Now they are captured with the check's print cap, before the
    verdict, with what libc still buffered (nothing of it comes out later)."""
    from helpers import checks

    libc = ctypes.CDLL(None)
    first = []

    def writes(completion, **kwargs):
        if not first:  # the check calls it once per case: write once
            first.append(True)
            os.write(1, b"y" * 1_000_000)
            os.write(2, b"e" * 100_000)
            subprocess.run([sys.executable, "-c", "print('z' * 100_000)"], check=True)
            libc.printf(b"%s\n", b"p" * 100_000)
        return 0.0

    checks.check("02-close-the-hack", writes)
    libc.fflush(None)  # what libc might still hold would come out now
    out, err = capfd.readouterr()
    assert len(out) + len(err) < checks.PRINT_LIMIT + 1000, f"{len(out):,} + {len(err):,} characters came out"
    assert out.startswith("y" * 100), out[:200]
    kept, cut = out.split("\n… (", 1)
    assert int(cut.split(" more characters your code printed were cut")[0].replace(",", "")) + len(kept) >= 1_300_002
    assert out.splitlines()[-1].startswith("not yet — 02-close-the-hack")


def test_an_endless_iterator_as_the_answer_is_a_hint_not_a_full_memory(monkeypatch, capsys):
    """`helpers.check("02-group-advantages", itertools.count())` read the iterator until the memory ran out (the
    time limit came far too late). An iterator is read for at most MAX_ITEMS items; a finite one is checked."""
    import itertools

    from helpers import checks
    from helpers.checks import notebook_02_advantages

    monkeypatch.setattr(checks, "TIME_LIMIT_S", 2.0)  # the old code's list stops here, at a few GB at most
    for endless in (itertools.count(), (float(i) for i in itertools.count())):
        checks.check("02-group-advantages", endless)
        verdict = capsys.readouterr().out.splitlines()[-1]
        assert verdict.startswith("not yet — 02-group-advantages: your answer is an iterator"), verdict
        assert f"more than {checks.MAX_ITEMS:,} items" in verdict
    checks.check("02-group-advantages", (a for a in notebook_02_advantages._advantages(notebook_02_advantages.GROUP)))
    assert capsys.readouterr().out == "correct — 02-group-advantages\n"


INTERRUPTED_CELLS = {  # each prints "started" just before the call that the interrupt must stop
    "evaluation": """
import helpers, verifiers as vf
from helpers.serving.llama_server import start_local_server
server = start_local_server(parallel=4)  # the kernel's own, as a notebook's
endpoint = server.endpoint()
env = vf.load_environment("gsm8k-course", variant="hash", num_eval_examples=40)
print("started", flush=True)
# Long replies (1000 tokens each, end-of-text ignored): the first ones come long after the interrupt.
helpers.in_worker_thread(env.evaluate, endpoint.client, endpoint.model, num_examples=40, rollouts_per_example=4,
                         max_concurrent=4,
                         sampling_args={{"max_tokens": 1000, "temperature": 0.9, "extra_body": {{"ignore_eos": True}}}})
""",
    "check": """
import asyncio, helpers
async def score_text(rubric, text, answer):
    await asyncio.sleep(3600)  # a learner's wait that never ends
print("started", flush=True)
helpers.check("01-score-rollout", score_text)
""",
    "check that never awaits": """
import helpers
async def nothing(rubric, text, answer):
    return None
helpers.check("01-score-rollout", nothing)  # the check's imports and data first: the interrupt meets the loop
async def score_text(rubric, text, answer):
    while True:  # never awaits: a task that cannot be cancelled
        print("still spinning")
print("started", flush=True)
helpers.check("01-score-rollout", score_text)
""",
}


def _stdout_until(client, msg_id: str, needle: str | None, timeout_s: float) -> str:
    """The cell's stdout, read until `needle` appears (None: until the cell is idle)."""
    text, deadline = "", time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            msg = client.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            text += msg["content"]["text"]
        if (needle and needle in text) or (needle is None and msg["msg_type"] == "status"
                                           and msg["content"]["execution_state"] == "idle"):
            return text
    raise AssertionError(f"waited {timeout_s:.0f} s for {needle or 'the cell to end'}; stdout: {text[-2000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(INTERRUPTED_CELLS))
def test_the_interrupt_button_stops_an_evaluation_and_a_check(what, local_server):
    """Interrupting the kernel during in_worker_thread(env.evaluate, ...) did nothing for over 300 s, and a
    learner's hanging async function inside helpers.check could not be interrupted at all. Later the cell ended
    but its worker lived on: an evaluation's until the model server's next reply (190 s seen with 400-token
    replies), a check's that never awaits for ever, printing into the next cells. Now the cell ends within
    seconds with KeyboardInterrupt, no worker thread is left when it ends, and the next cell works."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        msg_id = client.execute(INTERRUPTED_CELLS[what].format(
            base_url=local_server.base_url, key=local_server.api_key, model=local_server.alias))
        _stdout_until(client, msg_id, "started", timeout_s=120)
        time.sleep(3)  # well inside the call (the evaluation needs minutes, the checks never end)
        interrupted = time.monotonic()
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:  # a late reply to start_new_kernel's kernel_info
            reply = client.get_shell_msg(timeout=60)
        stopped_s = time.monotonic() - interrupted
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "KeyboardInterrupt", content
        # an evaluation's server, still writing the abandoned replies, is restarted (a few seconds)
        assert stopped_s < (30 if what == "evaluation" else 15), f"the {what} took {stopped_s:.0f} s to stop"
        # The cell ends once its worker has (the evaluation's requests are cancelled, code that never awaits is
        # interrupted): the next cell finds none, and nothing of the stopped code prints into it. Read until the
        # line itself: ipykernel may send the cell's idle status before its last stream message.
        msg_id = client.execute("import threading, time\ntime.sleep(1)\n"
                                "print([t.name for t in threading.enumerate() if t.name == 'helpers-worker'], 1 + 1)")
        out = _stdout_until(client, msg_id, " 2\n", timeout_s=60)
        assert "[] 2" in out and "still spinning" not in out, f"a worker ran on after the interrupt: {out[-300:]!r}"
        if what == "evaluation":  # and the server is free for the next cell, not finishing 1000-token replies
            msg_id = client.execute("print('busy slots:', server.busy_slots(), server.is_running())")
            out = _stdout_until(client, msg_id, "\n", timeout_s=60)
            assert "busy slots: 0 True" in out, out
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_every_evaluation_a_notebook_runs_goes_through_the_worker():
    """Through helpers.in_worker_thread, a server that dies mid-evaluation is an EndpointError naming its log,
    and the interrupt button stops the call; a direct env.evaluate(...) would give a bare APIConnectionError
    (verifiers 0.1.5 builds its own AsyncOpenAI from the client's key and URL, so no client of ours can
    change that) and would not stop. So no notebook calls it directly."""
    for path in sorted(NOTEBOOK_02.parent.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or source.startswith("%%"):  # a cell magic (%%writefile): not Python
                continue
            for node in ast.walk(ast.parse(source.replace("await ", ""))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "evaluate":
                    raise AssertionError(f"{path.name} calls {ast.unparse(node)[:80]} directly: "
                                         "use helpers.in_worker_thread(env.evaluate, ...)")
