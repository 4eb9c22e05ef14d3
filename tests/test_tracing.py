"""Local-first tracing, end to end: a real verifiers evaluation against the local llama.cpp server,
traced by Weave's own client into the local store, read back, replayed, and shown.

Tracing patches libraries process-wide, so everything that traces runs in a subprocess (stdin
closed: nothing may prompt); this process only reads what they stored.
"""

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from helpers.tracing.records import read_records, wal_files
from helpers.tracing.replay import replay
from helpers.tracing.store import LocalTraceServer

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "tracing-test"
SECRET = "sk-course-test-" + "7f3a9c" * 6  # looks like a key; must never reach the store

# Writes a traced evaluation (plus a logprobs call, a secret-bearing op and an offline wandb run).
WRITER = """
import json, os, time
import openai, weave
from helpers.tracing.session import init_tracing
from helpers.gsm8k_env import build_gsm8k_env

session = init_tracing({project!r})
client = openai.OpenAI(base_url={base_url!r}, api_key=os.environ["COURSE_SERVER_KEY"])
env = build_gsm8k_env(variant="hash", num_eval_examples=2)
# interleave_scoring=False: scoring goes through Rubric.score_rollouts, as in the notebooks
env.evaluate(client, "SmolLM2-135M-Instruct", num_examples=2, rollouts_per_example=1,
             sampling_args={{"max_tokens": 24, "temperature": 0, "seed": 0}}, interleave_scoring=False)
client.chat.completions.create(model="SmolLM2-135M-Instruct", max_tokens=4, logprobs=True, top_logprobs=2,
                               messages=[{{"role": "user", "content": "Say hi"}}])

@weave.op
def echo(text: str) -> str:
    return text

echo("my key is " + os.environ["OPENAI_API_KEY"])

import wandb
run = wandb.init(project={project!r})
for step in range(3):
    run.log({{"reward": step / 10}})
run.finish()
print("IDS=" + json.dumps(sorted(c.id for c in session.get_calls())))
"""

# A new process reading the same project back through init_tracing / client.get_calls().
READER = """
import json, time
import verifiers, weave  # imported first: the time measured is the decision, not Python's imports
from helpers.tracing.session import init_tracing
started = time.monotonic()
session = init_tracing({project!r})
took = time.monotonic() - started
print("RESULT=" + json.dumps({{"mode": session.mode, "init_s": took, "describe": session.describe(),
                              "ids": sorted(c.id for c in session.client.get_calls())}}))
"""


def run_python(code: str, env_extra: dict, timeout: float = 900) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "WEAVE_", "WF_"))}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, cwd=ROOT, env=env, text=True,
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out, took


def tagged(out: subprocess.CompletedProcess, tag: str):
    line = next(line for line in out.stdout.splitlines() if line.startswith(tag + "="))
    return json.loads(line[len(tag) + 1:])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def traced(runs, local_server):
    """The store after one traced evaluation in another process, and the ids that process saw."""
    out, _ = run_python(WRITER.format(project=PROJECT, base_url=local_server.base_url),
                        {"COURSE_RUNS_DIR": str(runs), "OPENAI_API_KEY": SECRET,
                         "COURSE_SERVER_KEY": local_server.api_key})
    return runs / "traces" / PROJECT, tagged(out, "IDS")


@pytest.fixture(scope="module")
def store_session(traced):
    from helpers.tracing.session import open_local_traces

    return open_local_traces(PROJECT, store_path=traced[0])


def short(op_name: str) -> str:
    return op_name.rsplit("/", 1)[-1].split(":", 1)[0]


@pytest.mark.slow
def test_evaluate_is_traced_as_a_tree(store_session):
    calls = list(store_session.client.get_calls())
    by_id = {c.id: c for c in calls}
    paths = set()
    for c in calls:  # each call's chain of op names up to the root
        chain, node = [], c
        while node is not None:
            chain.insert(0, short(node.op_name))
            node = by_id.get(node.parent_id)
        paths.add(tuple(chain))
    model_path = ("verifiers.Environment.evaluate", "verifiers.Environment.generate",
                  "verifiers.Environment.a_generate", "verifiers.envs.multiturn_env.MultiTurnEnv.rollout",
                  "verifiers.Environment.get_model_response", "openai.chat.completions.create")
    score_path = model_path[:3] + ("verifiers.Rubric.score_rollouts", "verifiers.Rubric.score_rollout",
                                   "verifiers.Parser.parse")
    assert model_path in paths
    assert score_path in paths
    for c in calls:
        assert c.started_at and c.ended_at and c.ended_at >= c.started_at, c.op_name
        assert c.inputs is not None and c.exception is None, c.op_name
        assert c.output is not None or short(c.op_name) == "verifiers.Parser.parse", c.op_name
    model_calls = [c for c in calls if short(c.op_name) == "openai.chat.completions.create"]
    assert len(model_calls) == 3  # two rollouts, one direct call
    for c in model_calls:
        usage = next(iter(c.summary["usage"].values()))
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


@pytest.fixture(scope="module")
def reader(traced, runs):
    """A new process (no key, no network, stdin closed) that calls init_tracing on the same project."""
    out, _ = run_python(READER.format(project=PROJECT), {"COURSE_RUNS_DIR": str(runs)})
    return tagged(out, "RESULT")


@pytest.mark.slow
def test_a_new_process_reads_the_same_calls(traced, reader):
    writer_ids = traced[1]
    assert reader["mode"] == "local"
    assert reader["ids"] == writer_ids and len(writer_ids) > 20


def test_replay_into_an_empty_store_loses_nothing(traced, tmp_path):
    store, writer_ids = traced
    target = LocalTraceServer(tmp_path / "copy")
    sent = replay(store, target).sent
    target.close()
    assert sent == len(list(read_records(store)))
    reread = LocalTraceServer(tmp_path / "copy")  # from disk, as after a restart
    query = {"project_id": f"local/{PROJECT}"}
    assert sorted(c.id for c in reread.calls_query_stream(query)) == writer_ids
    original = LocalTraceServer(store)
    assert reread._objs.keys() == original._objs.keys() and reread._tables.keys() == original._tables.keys()
    # moved to another project (what the upload does), refs follow
    moved = LocalTraceServer(tmp_path / "moved")
    replay(store, moved, project_id="someone/elsewhere")
    calls = list(moved.calls_query_stream({"project_id": "someone/elsewhere"}))
    assert len(calls) == len(writer_ids)
    assert all(c.op_name.startswith("weave:///someone/elsewhere/op/") for c in calls)


def test_torn_last_line_loses_only_that_record(traced, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(traced[0], copy)
    total = len(list(read_records(copy)))
    last = wal_files(copy)[-1]
    data = last.read_bytes()
    last.write_bytes(data[: len(data) - 40])  # a kernel killed mid-write
    with pytest.warns(UserWarning, match="damaged record"):
        server = LocalTraceServer(copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(list(read_records(copy))) == total - 1
    assert server._calls  # the rest is still there


def test_secrets_and_logprobs_never_reach_the_store(traced):
    store = traced[0]
    text = "".join(p.read_text() for p in wal_files(store))
    assert SECRET not in text
    assert "***REDACTED***" in text  # the echo op's input, scrubbed

    def no_logprobs(value):
        if isinstance(value, dict):
            assert not value.get("logprobs") and not value.get("top_logprobs")
            for v in value.values():
                no_logprobs(v)
        elif isinstance(value, list):
            for v in value:
                no_logprobs(v)

    asked = [r for r in read_records(store) if r["type"] == "call_start" and r["req"]["start"]["inputs"].get("messages")
             == [{"role": "user", "content": "Say hi"}]]
    assert asked  # the direct call that asked for logprobs was traced
    for record in read_records(store):
        no_logprobs(record)


def test_viewers(store_session, tmp_path):
    from helpers.tracing.views import calls_table, export_trace_html, trace_tree_widget

    table = calls_table(session=store_session)
    assert {"op", "parent", "start", "latency_s", "total_tokens", "reward"} <= set(table.columns)
    root = table[table.op == "verifiers.Environment.evaluate"].iloc[0]
    assert root.total_tokens > 0 and root.reward is not None and root.latency_s > 0
    scores = calls_table(session=store_session, op="score_rollout")
    assert scores["reward"].notna().any()
    tree = trace_tree_widget(root.trace_id, session=store_session)
    assert tree.get_title(0).startswith("verifiers.Environment.evaluate")
    page = export_trace_html(root.call_id, tmp_path / "trace.html", session=store_session)
    html = page.read_text()
    assert "openai.chat.completions.create" in html and "<details" in html and SECRET not in html
    # each call reads as a conversation; Weave's bookkeeping only inside the raw JSON blocks
    assert "assistant · turn 1" in html and "class='msg user'" in html
    shown = re.sub(r"<pre class='raw'>.*?</pre>", "", html, flags=re.DOTALL)
    assert "raw JSON" in shown and "_bases" not in shown and "_class_name" not in shown


def test_wandb_offline_history(traced, runs):
    from helpers import wandb_history

    history = wandb_history(runs / "wandb")
    assert list(history["reward"]) == [0.0, 0.1, 0.2]


def test_no_key_picks_local_quickly(reader):
    assert reader["mode"] == "local" and reader["init_s"] < 5
    assert "local store at" in reader["describe"] and "WANDB_API_KEY" in reader["describe"]


@pytest.mark.slow
def test_unreachable_wandb_falls_back_to_local(tmp_path):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    out, _ = run_python(READER.format(project="fakekey"), {
        "COURSE_RUNS_DIR": str(tmp_path), "WANDB_API_KEY": "f" * 40,
        "WANDB_BASE_URL": f"http://127.0.0.1:{closed_port}"})
    result = tagged(out, "RESULT")
    assert result["mode"] == "local" and result["init_s"] < 20
    assert "could not be used" in result["describe"] and "stays local" in result["describe"]


def test_weave_op_check_gives_the_same_answers_after_the_speed_up():
    """helpers.tracing.session swaps weave's Python 3.11 `is_op` (a slow Protocol isinstance) for weave's
    own 3.12+ hasattr check, in every weave module that imported it: same answers."""
    import weave
    from weave.trace import object_record
    from weave.trace import op as weave_op

    from helpers.tracing.weave_clients import fast_op_check_on_python_311

    def shout(text: str) -> str:
        return text.upper()

    candidates = [weave.op(shout), shout, object(), "text", weave_op]
    expected = [weave_op.is_op(x) for x in candidates]
    fast_op_check_on_python_311()
    assert [object_record.is_op(x) for x in candidates] == expected == [True, False, False, False, False]


TELEMETRY = """
import json, os
{first}
import helpers
import wandb.env
from weave.telemetry import trace_sentry
sentry = trace_sentry.global_trace_sentry
print("RESULT=" + json.dumps({{"weave_reporting": not sentry._disabled, "weave_session": sentry.scope is not None,
                              "wandb_reporting": wandb.env.error_reporting_enabled(),
                              "hf_telemetry_off": os.environ.get("HF_HUB_DISABLE_TELEMETRY")}}))
"""


@pytest.mark.parametrize("first", ["", "import weave  # before helpers"], ids=["helpers-first", "weave-first"])
def test_no_error_reporting_leaves_the_machine_in_local_mode(first, tmp_path):
    out, _ = run_python(TELEMETRY.format(first=first), {"COURSE_RUNS_DIR": str(tmp_path)})
    assert tagged(out, "RESULT") == {"weave_reporting": False, "weave_session": False, "wandb_reporting": False,
                                     "hf_telemetry_off": "1"}


def test_cloud_mode_leaves_the_users_reporting_setting_alone(tmp_path):
    out, _ = run_python(TELEMETRY.format(first=""), {"COURSE_RUNS_DIR": str(tmp_path), "WANDB_API_KEY": "f" * 40})
    result = tagged(out, "RESULT")
    assert result["weave_reporting"] and result["wandb_reporting"]


class _Refuses(http.server.BaseHTTPRequestHandler):
    """W&B as it answers a wrong key: 401 to everything."""

    def _refuse(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"errors": [{"message": "user is not logged in"}]}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _refuse

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_a_rejected_wandb_key_is_named_in_one_whole_line(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out, _ = run_python(READER.format(project="rejected"), {
            "COURSE_RUNS_DIR": str(tmp_path), "WANDB_API_KEY": "f" * 40,
            "WANDB_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}"})
    finally:
        server.shutdown()
    result = tagged(out, "RESULT")
    assert result["mode"] == "local"
    first_line = result["describe"].splitlines()[0]
    assert "refused WANDB_API_KEY (HTTP 401)" in first_line and first_line.endswith("so tracing stays local."), \
        result["describe"]


def test_a_multi_line_error_becomes_one_line():
    from helpers.tracing.weave_clients import one_line

    error = RuntimeError("Could not determine a W&B entity. Fix with one of:\n  1. Pass entity/project\n  2. Set X")
    assert one_line(error) == ("RuntimeError: Could not determine a W&B entity. Fix with one of: 1. Pass "
                                "entity/project 2. Set X")


def test_records_of_the_wrong_shape_and_ends_without_starts_are_skipped_and_counted(traced, tmp_path):
    from helpers.tracing.session import open_local_traces
    from helpers.tracing.views import calls_table

    copy = tmp_path / "store"
    shutil.copytree(traced[0], copy)
    total_calls = len(LocalTraceServer(copy)._calls)
    bad = [
        {"type": "call_end", "req": {"end": {"id": "no-start-1", "project_id": f"local/{PROJECT}",
                                              "ended_at": "2026-01-01T00:00:00+00:00", "output": 1}}},
        {"type": "call_start", "req": {"start": "not an object"}},
        {"type": "obj_create", "req": {}},
        {"type": "table_create", "req": {"table": {"rows": 5}}},
    ]
    (copy / "9999999999999999999-damaged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.warns(UserWarning, match=r"skipped 3 record\(s\) of the wrong shape and 1 call end\(s\)"):
        session = open_local_traces(PROJECT, store_path=copy)
    assert len(session.get_calls()) == total_calls  # every real call, none of the damaged ones
    assert len(calls_table(session=session)) == total_calls


def test_a_full_disk_is_said_once(tmp_path, monkeypatch):
    from weave.durability.wal_writer import JSONLWALWriter

    def no_space(self, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JSONLWALWriter, "write", no_space)
    server = LocalTraceServer(tmp_path / "full")
    start = {"project_id": "local/full", "op_name": "op", "trace_id": "t", "started_at": "2026-01-01T00:00:00+00:00",
             "attributes": {}, "inputs": {}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(5):
            server.call_start({"start": {**start, "id": f"call-{i}"}})
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and str(tmp_path / "full") in said[0] and "No space left" in said[0], said
    assert len(list(server.calls_query_stream({"project_id": "local/full"}))) == 5  # still answered from memory


def test_upload_refuses_a_project_with_no_traces(tmp_path, monkeypatch):
    from helpers.tracing.session import upload_local_traces

    monkeypatch.setenv("COURSE_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_API_KEY", "f" * 40)
    with pytest.raises(FileNotFoundError, match="No local traces to upload for project 'never-traced'"):
        upload_local_traces("never-traced")


def _upload_to(server, runs: Path, monkeypatch):
    """upload_local_traces as a learner calls it, with W&B's trace server replaced by `server` (no network)."""
    from weave.trace import weave_init

    from helpers.tracing import session

    monkeypatch.setenv("COURSE_RUNS_DIR", str(runs))
    monkeypatch.setenv("WANDB_API_KEY", "f" * 40)
    monkeypatch.setattr(weave_init, "init_weave_get_server", lambda *a, **k: server)
    monkeypatch.setattr(weave_init, "get_entity_project_from_project_name", lambda name: ("me", name))
    monkeypatch.setattr("weave.wandb_interface.context.get_wandb_auth_context", lambda: None)
    return session.upload_local_traces


def test_upload_defaults_to_the_project_tracing_was_started_with(traced, runs, monkeypatch):
    """The replay target, with W&B's server replaced by a local store (no network here)."""
    from helpers.tracing import session

    target = LocalTraceServer(runs / "upload-target")
    monkeypatch.setattr(session, "_session", session.TracingSession("local", PROJECT, client=None))
    sent = _upload_to(target, runs, monkeypatch)()
    assert sent == len(list(read_records(traced[0])))
    calls = list(target.calls_query_stream({"project_id": f"me/{PROJECT}"}))
    assert sorted(c.id for c in calls) == traced[1]


# Real weave ops traced into a local store by weave's own client, as in the notebooks: nested calls from
# four threads, an object as input, and one call that never ends (a stopped kernel). Weave writes call
# starts and ends from its background threads, so a fast call's end is often written before its start
# (about 1 call in 10): calls are made until the store holds at least 3 of those.
ENDS_FIRST = """
import json
from concurrent.futures import ThreadPoolExecutor
import weave
from helpers.tracing.records import read_records
from helpers.tracing.session import init_tracing

session = init_tracing({project!r}, quiet=True)

class Task(weave.Object):
    n: int

@weave.op
def double(x: int) -> int:
    return 2 * x

@weave.op
def total(task: Task) -> int:
    return sum(double(i) for i in range(task.n))

def ends_first() -> list:  # the calls whose end the store holds before their start
    started, found = set(), []
    for record in read_records(session.store_path):
        if record["type"] == "call_start":
            started.add(record["req"]["start"]["id"])
        elif record["type"] == "call_end" and record["req"]["end"]["id"] not in started:
            found.append(record["req"]["end"]["id"])
    return found

for _ in range(30):
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(total, [Task(n=n) for n in range(8)]))
    session.flush()
    if len(ends_first()) >= 3:
        break
unfinished = session.client.create_call("unfinished", {{"x": 1}}, use_stack=False)
session.close()
print("RESULT=" + json.dumps({{"ends_first": ends_first(), "unfinished": unfinished.id}}))
"""


@pytest.fixture(scope="module")
def ends_first_store(tmp_path_factory):
    """(runs folder, project, what the writer saw) for a store weave wrote with some call ends before their starts."""
    runs, project = tmp_path_factory.mktemp("ends-first-runs"), "ends-first"
    out, _ = run_python(ENDS_FIRST.format(project=project), {"COURSE_RUNS_DIR": str(runs)})
    written = tagged(out, "RESULT")
    assert len(written["ends_first"]) >= 3, f"weave wrote too few ends before their starts: {written}"
    return runs, project, written


class CallsCompleteProject(LocalTraceServer):
    """W&B's trace server for a project in calls_complete mode, as weave's client meets it: a call start or end
    sent alone gets W&B's answer (HTTP 400 whose body says CALLS_COMPLETE_MODE_REQUIRED, which weave's own
    is_calls_complete_mode_error recognises); a whole call is taken once, and only after the ops and objects
    it refers to (a local store underneath resolves its refs). With `fail_at=n` the n-th whole call fails as
    a dropped connection does."""

    def __init__(self, path: Path, fail_at: int | None = None):
        super().__init__(path)
        self.whole_calls: list[str] = []
        self.requests: dict[str, int] = {}
        self.fail_at = fail_at

    def _write(self, record_type, req):
        self.requests[record_type] = self.requests.get(record_type, 0) + 1
        return super()._write(record_type, req)

    def _refuse(self, req):
        import httpx
        from weave.trace_server_bindings.http_utils import is_calls_complete_mode_error
        from weave.vendor.weave_server_sdk import APIStatusError

        body = {"error_code": "CALLS_COMPLETE_MODE_REQUIRED", "reason": "this project takes calls_complete"}
        reply = httpx.Response(400, json=body, request=httpx.Request("POST", "https://trace.invalid/call/start"))
        error = APIStatusError("Error code: 400", response=reply, body=body)
        assert is_calls_complete_mode_error(error)
        raise error

    call_start = call_end = _refuse

    def calls_complete(self, req):
        for call in req["batch"]:
            if self.fail_at == len(self.whole_calls) + 1:
                self.fail_at = None
                raise ConnectionError("W&B did not answer")
            assert call["id"] not in self.whole_calls, f"call {call['id']} sent twice"
            refs = re.findall(r"weave:///[^\s\"']+", json.dumps(call))
            for ref in refs:
                self._resolve(ref)  # KeyError: the call came before an op or object it refers to
            assert refs, call
            self.whole_calls.append(call["id"])
            start = {k: v for k, v in call.items() if k not in ("ended_at", "output", "summary", "exception",
                                                                 "wb_run_step_end")}
            end = {k: call[k] for k in ("project_id", "id", "ended_at", "output", "summary", "exception")}
            super()._write("call_start", {"start": start})
            super()._write("call_end", {"end": end})
        return {}


def test_an_upload_to_a_calls_complete_project_sends_every_call_whole_and_once(ends_first_store, tmp_path,
                                                                               monkeypatch, capsys):
    """Weave's store is not in call order (ends before starts): the upload pairs each call's start and end by
    id wherever they stand, sends each finished call whole and once, after what it refers to, names the call
    that never ended, and when W&B fails part-way says what went and a skip= that sends exactly the rest."""
    from helpers.tracing.replay import _retarget

    runs, project, written = ends_first_store
    store = runs / "traces" / project
    original = LocalTraceServer(store)._calls
    finished = {call_id: call for call_id, call in original.items() if call.get("ended_at")}
    assert set(original) - set(finished) == {written["unfinished"]}
    records = list(read_records(store))
    objects = sum(r["type"] == "obj_create" for r in records)

    target = CallsCompleteProject(tmp_path / "target", fail_at=len(finished) // 2)
    upload = _upload_to(target, runs, monkeypatch)
    with pytest.raises(RuntimeError) as stopped:
        upload(project)
    went = len(target.whole_calls)
    assert went == len(finished) // 2 - 1
    message = str(stopped.value)
    counted = re.search(r"(\d+) of (\d+) records went \(([^;]*);", message)
    assert counted, message  # every record that reached the server, of every kind, and nothing else
    assert int(counted[1]) == 2 * went + sum(target.requests.values()) and int(counted[2]) == len(records)
    assert re.search(rf"\b{went} whole calls\b", counted[3]), message
    assert re.search(rf"\b{target.requests['obj_create']} objects\b", counted[3]), message
    assert "ConnectionError: W&B did not answer" in message
    advice = re.search(r"upload_local_traces\(project='ends-first', skip=(\d+)\)", message)
    assert advice, message
    upload(project, skip=int(advice.group(1)))  # the advice, as a learner follows it
    said = capsys.readouterr().out

    assert sorted(target.whole_calls) == sorted(finished)  # every finished call once (sent twice fails above)
    assert target.requests["obj_create"] == objects  # every op and object once
    fields = ("op_name", "trace_id", "parent_id", "started_at", "ended_at", "inputs", "output", "exception",
              "summary", "attributes", "display_name")
    for call_id, call in finished.items():  # whole: what the store holds of it, start and end
        expected = _retarget(call, f"local/{project}", f"me/{project}")
        assert {k: target._calls[call_id].get(k) for k in fields} == {k: expected.get(k) for k in fields}
    assert set(written["ends_first"]) <= set(target.whole_calls)
    assert f"uploaded {len(records) - 1 - int(counted[1])} trace records" in said  # all but the unfinished start
    assert f"call {written['unfinished']} never ended" in said
