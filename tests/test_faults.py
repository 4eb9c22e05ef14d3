"""Faults and bad input in the helpers (issue 25): a trace store with a record of the wrong shape, an
upload that fails part-way, a full disk at exit, a kernel ended by Jupyter, notebook 02's parameters.

Whatever traces runs in a subprocess (tracing patches libraries process-wide); these tests read
what it left behind. Each subprocess gets its own TMPDIR, so that wandb's temporary folders of other
processes on the machine are not counted.
"""

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.local import run_folder
from helpers.local.trace_store import LocalTraceServer, ReplayInterrupted, replay, wal_files

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

    from helpers import tracing

    monkeypatch.setenv("COURSE_RUNS_DIR", str(runs))
    monkeypatch.setenv("WANDB_API_KEY", "f" * 40)
    monkeypatch.setattr(weave_init, "init_weave_get_server", lambda *a, **k: server)
    monkeypatch.setattr(weave_init, "get_entity_project_from_project_name", lambda name: ("me", name))
    monkeypatch.setattr("weave.wandb_interface.context.get_wandb_auth_context", lambda: None)
    return tracing.upload_local_traces


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
from helpers.tracing import init_tracing

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
from helpers.tracing import init_tracing

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


def test_a_kernel_ended_by_papermill_leaves_no_lock_and_no_wandb_temp_folders(tmp_path, monkeypatch):
    """Notebook 01's shape in two cells: tracing, the local model server, a wandb offline run. The
    kernel then ends as papermill ends it (shutdown request; SIGTERM when it is slow to go)."""
    import nbformat

    from helpers.local.notebook_runner import execute

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


def test_every_parameter_of_notebook_02_has_a_rule():
    assert set(_defaults()) == set(run_folder.GRPO_NOTEBOOK_PARAMETERS)
    run_folder.check_parameters(_defaults())  # the defaults pass


def test_backend_choices_are_the_ones_grpo_accepts():
    from helpers import grpo

    rule = run_folder.GRPO_NOTEBOOK_PARAMETERS["backend"]
    assert all(rule(backend) is None for backend in grpo.BACKENDS)
    assert rule("tpu") == "must be one of " + ", ".join(map(repr, grpo.BACKENDS))


@pytest.mark.parametrize("name, value, says", [
    ("max_steps", "abc", "max_steps='abc': must be a whole number of at least 1"),
    ("max_steps", "20", "this one is text"),  # papermill -r, or quotes
    ("max_steps", 0, "max_steps=0: must be at least 1"),
    ("max_steps", 2.5, "max_steps=2.5: must be a whole number"),
    ("learning_rate", "5e-5", "learning_rate='5e-5': must be a number above 0"),
    ("learning_rate", 0, "learning_rate=0: must be above 0"),
    ("num_generations", 1, "GRPO compares at least 2 completions"),
    ("per_device_train_batch_size", 6, "must be a multiple of num_generations=4"),
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
        run_folder.check_parameters({**_defaults(), name: value})
    assert says in str(refused.value)


def test_every_wrong_parameter_is_named_at_once_and_a_missing_one_too():
    with pytest.raises(ValueError) as refused:
        run_folder.check_parameters({**_defaults(), "max_steps": "abc", "beta": -1})
    assert "max_steps='abc'" in str(refused.value) and "beta=-1" in str(refused.value)
    defaults = _defaults()
    del defaults["seed"]
    with pytest.raises(ValueError, match="parameters cell has no seed"):
        run_folder.check_parameters(defaults)
