"""How many learners one shared model server holds: N simulated learners run notebook 01's evaluations
at once against the room's llama.cpp server (scripts/serve_room.py's); prints a table and writes
benchmarks/results/room-<date>.json.

    .venv/bin/python benchmarks/bench_room.py --lock /tmp/course-cpu.lock     # N = 1, 2, 4, 8, 16
    .venv/bin/python benchmarks/bench_room.py --learners 1,2 --max-tokens 32  # a quick look

Each simulated learner is a thread that runs notebook 01's section-5 evaluation with its default
parameters: the classic `<think>` GSM8K environment (`vf.load_environment("gsm8k-course",
variant="think")`), 12 test examples x 2 rollouts, temperature 0.7, max_tokens 256, max_concurrent 4,
through `env.evaluate` (notebook 01 runs a second evaluation of the same size in section 8:
`--variants think,hash` runs both). All N start at the same moment (the worst case: the whole room
presses Run at once).
Every model request is timed at the HTTP layer (latency = request sent to answer read) and counted:
an answer that is not 200, or a request that fails, is an error. The client makes no retries
(notebooks' clients retry twice), so a failure cannot hide. Traffic goes to 127.0.0.1 only; each
request has a 600 s timeout and there are 24 x N of them per evaluation, so every run is bounded.

`--wheelhouse` instead measures the offline kit a room needs (scripts/download_wheels.sh into a
temporary folder: wheels, MB, minutes) and writes benchmarks/results/room-wheelhouse-<date>.json.

With --lock, the run takes an exclusive flock on that file once, for all N (about 20 minutes on 2
cores; a fresh server per N): on a machine shared with other jobs that take shared locks, waiting for it
once is what lets an exclusive run start at all. Each row records the load average before and after.
The result file is rewritten after each N, so an interrupted run keeps the rows it finished.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # helpers; the scripts' shared arguments

import httpx2 as httpx  # the HTTP package openai 3.x is built on
import openai
import psutil
import verifiers as vf
from arguments import whole_number
from serve_room import ROOM_CTX_PER_SLOT, ROOM_SLOTS, room_server

from helpers.results import machine_info, write_result

# Notebook 01's parameters cell (notebooks/01_traced_gsm8k_eval.ipynb) and its two evaluations.
NOTEBOOK_01 = {"num_examples": 12, "rollouts_per_example": 2, "max_concurrent": 4, "temperature": 0.7,
               "max_tokens": 256, "seed": 0, "split": "test"}
VARIANTS = ("think", "hash")  # section 5 (the classic environment), section 8 ('#### N')
REQUEST_TIMEOUT_S = 600.0
os.environ.setdefault("TQDM_DISABLE", "1")  # 16 learners' progress bars would bury the table


class TimedTransport(httpx.AsyncHTTPTransport):
    """Records each request's latency, status and completion tokens (thread-safe list append)."""

    def __init__(self, records: list, learner: int):
        super().__init__()
        self.records, self.learner = records, learner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        record = {"learner": self.learner, "path": request.url.path}
        try:
            response = await super().handle_async_request(request)
            body = await response.aread()
        except Exception as e:
            record.update(latency_s=time.monotonic() - started, status=None, error=f"{type(e).__name__}: {e}")
            self.records.append(record)
            raise
        record.update(latency_s=time.monotonic() - started, status=response.status_code)
        if response.status_code == 200 and request.url.path.endswith("/chat/completions"):
            record["completion_tokens"] = json.loads(body).get("usage", {}).get("completion_tokens", 0)
        self.records.append(record)
        return response  # already read: httpx hands its content on as it is


def learner_client(base_url: str, key: str, records: list, learner: int) -> openai.AsyncOpenAI:
    http = openai.DefaultAsyncHttpxClient(transport=TimedTransport(records, learner), trust_env=False)
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, timeout=REQUEST_TIMEOUT_S, max_retries=0,
                              http_client=http)


def notebook_01_envs(variants: list[str]) -> list[vf.Environment]:
    return [vf.load_environment("gsm8k-course", variant=variant, eval_split=NOTEBOOK_01["split"],
                                num_eval_examples=NOTEBOOK_01["num_examples"], seed=NOTEBOOK_01["seed"])
            for variant in variants]


def run_learner(learner: int, envs, server, model: str, records: list, start: threading.Barrier,
                outcome: dict, max_tokens: int) -> None:
    sampling = {"temperature": NOTEBOOK_01["temperature"], "max_tokens": max_tokens}
    start.wait()
    began = time.monotonic()
    try:
        for env in envs:  # one client per evaluation: each evaluate runs its own event loop
            env.evaluate(learner_client(server.base_url, server.api_key, records, learner), model,
                         sampling_args=sampling, num_examples=NOTEBOOK_01["num_examples"],
                         rollouts_per_example=NOTEBOOK_01["rollouts_per_example"],
                         max_concurrent=NOTEBOOK_01["max_concurrent"])
        outcome[learner] = {"minutes": (time.monotonic() - began) / 60, "failed": None}
    except Exception as e:  # noqa: BLE001 - the run goes on; the failure is reported in the table
        outcome[learner] = {"minutes": (time.monotonic() - began) / 60, "failed": f"{type(e).__name__}: {e}"}


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@contextmanager
def exclusive(lock_path: str):
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def measure(n: int, variants: list[str], slots: int, max_tokens: int) -> dict:
    envs = [notebook_01_envs(variants) for _ in range(n)]  # each learner's own, as in a kernel
    records: list[dict] = []
    outcome: dict[int, dict] = {}
    load_before = [round(x, 2) for x in os.getloadavg()]
    with room_server(parallel=slots) as server:
        server_process = psutil.Process(server.process.pid)
        peak_rss = [server_process.memory_info().rss]
        done = threading.Event()

        def sample_memory():
            while not done.wait(0.5):
                peak_rss[0] = max(peak_rss[0], server_process.memory_info().rss)

        sampler = threading.Thread(target=sample_memory, daemon=True)
        sampler.start()
        start = threading.Barrier(n + 1)
        learners = [threading.Thread(target=run_learner, args=(i, envs[i], server, server.alias, records,
                                                               start, outcome, max_tokens)) for i in range(n)]
        for thread in learners:
            thread.start()
        start.wait()
        began = time.monotonic()
        for thread in learners:
            thread.join()
        wall_s = time.monotonic() - began
        done.set()
        sampler.join()
    load_after = [round(x, 2) for x in os.getloadavg()]
    chats = [r for r in records if r["path"].endswith("/chat/completions")]
    latencies = sorted(r["latency_s"] for r in chats if r["status"] == 200)
    errors = [r for r in records if r["status"] != 200]
    failed = {i: o["failed"] for i, o in outcome.items() if o["failed"]}
    minutes = sorted(o["minutes"] for o in outcome.values())
    tokens = sum(r.get("completion_tokens", 0) for r in chats)
    expected = n * len(variants) * NOTEBOOK_01["num_examples"] * NOTEBOOK_01["rollouts_per_example"]
    return {
        "learners": n, "requests": len(chats), "requests_expected": expected,
        "errors": len(errors) + (expected - len(chats) if failed else 0),
        "error_samples": [r.get("error") or f"HTTP {r['status']}" for r in errors[:5]],
        "failed_learners": failed,
        "latency_p50_s": round(percentile(latencies, 50), 2) if latencies else None,
        "latency_p95_s": round(percentile(latencies, 95), 2) if latencies else None,
        "learner_minutes_min": round(minutes[0], 2), "learner_minutes_median": round(statistics.median(minutes), 2),
        "learner_minutes_max": round(minutes[-1], 2),
        "completion_tokens": tokens, "tokens_per_completion": round(tokens / max(len(chats), 1), 1),
        "tokens_per_s": round(tokens / wall_s, 1), "wall_minutes": round(wall_s / 60, 2),
        "server_peak_rss_mb": round(peak_rss[0] / 2**20), "load_avg_before": load_before,
        "load_avg_after": load_after,
    }


def measure_wheelhouse() -> None:
    """The room's offline kit: every wheel setup_env.sh installs, as scripts/download_wheels.sh fetches it."""
    import subprocess
    import tempfile

    info = machine_info()
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        subprocess.run(["bash", str(root / "scripts" / "download_wheels.sh"), folder], check=True,
                       stdin=subprocess.DEVNULL)
        minutes = (time.monotonic() - started) / 60
        wheels = sorted(Path(folder).glob("*.whl"))
        sizes = {w.name: w.stat().st_size for w in wheels}
    total_mb = sum(sizes.values()) / 1e6
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    print(f"\nwheelhouse: {len(wheels)} wheels, {total_mb:.0f} MB, downloaded in {minutes:.1f} min")
    write_result("room", info, {"wheelhouse": {
        "wheels": len(wheels), "total_mb": round(total_mb), "download_minutes": round(minutes, 1),
        "largest_mb": {name: round(size / 1e6) for name, size in largest},
        "note": "downloaded from this machine's package index configuration (its pip mirror), Linux x86_64, Python "
                "3.11"}},
        suffix="wheelhouse")


DEFAULT_LEARNERS = [1, 2, 4, 8, 16]
LEARNER_COUNT = whole_number(1, 32, "learners; the run is bounded: 24 requests a learner per evaluation")


def learner_counts(text: str) -> list[int]:
    """--learners: comma-separated numbers of learners, each checked as LEARNER_COUNT."""
    return [LEARNER_COUNT(part.strip()) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=learner_counts, default=DEFAULT_LEARNERS,
                        help="comma-separated N (at most 32 each), e.g. 1,2,4")
    parser.add_argument("--slots", type=whole_number(1, 256, "request slots, as serve_room.py --parallel"),
                        default=ROOM_SLOTS, help="the server's request slots")
    parser.add_argument("--max-tokens", type=whole_number(1), default=NOTEBOOK_01["max_tokens"],
                        help="notebook 01's default; lower it only for a quick look (then no result file)")
    parser.add_argument("--variants", default="think", help=f"evaluations each learner runs, of {VARIANTS}")
    parser.add_argument("--lock", help="take an exclusive flock on this file for the whole run (see above)")
    parser.add_argument("--wheelhouse", action="store_true", help="measure the offline kit instead (see above)")
    args = parser.parse_args()
    if args.wheelhouse:
        measure_wheelhouse()
        return
    counts = args.learners
    variants = args.variants.split(",")
    if not set(variants) <= set(VARIANTS):
        raise SystemExit(f"bench_room: --variants takes {', '.join(VARIANTS)}")
    rows = []
    with exclusive(args.lock) if args.lock else nullcontext():
        info = machine_info()  # once the machine is ours: the load average now
        for n in counts:
            print(f"bench_room: {n} learner(s) ...", flush=True)
            rows.append(measure(n, variants, args.slots, args.max_tokens))
            row = rows[-1]
            print(f"  p50 {row['latency_p50_s']} s, p95 {row['latency_p95_s']} s, minutes/learner "
                  f"{row['learner_minutes_median']} (max {row['learner_minutes_max']}), {row['tokens_per_s']} "
                  f"tokens/s, errors {row['errors']}", flush=True)
            save(args, info, variants, rows)
    print(f"\nnotebook 01's {' + '.join(variants)} evaluation per learner ({NOTEBOOK_01['num_examples']} examples x "
          f"{NOTEBOOK_01['rollouts_per_example']} rollouts each, max_tokens {args.max_tokens}), one llama.cpp "
          f"server with {args.slots} slots, {os.cpu_count()} cores\n")
    print(f"{'N':>3} {'p50 s':>7} {'p95 s':>7} {'min/learner':>11} {'max min':>8} {'tokens/s':>9} {'errors':>6}")
    for r in rows:
        print(f"{r['learners']:>3} {r['latency_p50_s']:>7} {r['latency_p95_s']:>7} {r['learner_minutes_median']:>11} "
              f"{r['learner_minutes_max']:>8} {r['tokens_per_s']:>9} {r['errors']:>6}")
    if args.max_tokens != NOTEBOOK_01["max_tokens"]:
        print("\n(max_tokens differs from notebook 01's: no result file written)")


def save(args, info: dict, variants: list[str], rows: list[dict]) -> None:
    """Write (or rewrite, after each N) the result file; not for a quick look with other max_tokens."""
    if args.max_tokens != NOTEBOOK_01["max_tokens"]:
        return
    lock = "exclusive" if args.lock else "none"
    write_result("room", info, {
        "workload": {**NOTEBOOK_01, "evaluations_per_learner": variants, "client_retries": 0,
                     "request_timeout_s": REQUEST_TIMEOUT_S},
        "server": {"backend": "llama.cpp (helpers.serving.llama_server via scripts/serve_room.py)",
                   "slots": args.slots, "ctx_per_slot": ROOM_CTX_PER_SLOT, "threads": os.cpu_count()},
        "cpu_lock": lock,
        "runs": rows,
    }, suffix="" if args.learners == DEFAULT_LEARNERS else "n" + "-".join(map(str, args.learners)))


if __name__ == "__main__":
    main()
