"""The llama.cpp policy server of CPU GRPO (helpers.grpo.policy_server) when things go wrong: a server that
dies mid-batch or drops its connections, refuses a request or answers without token ids ends in an
EndpointError that names its log and what to do; the wait for a reply follows the server's measured speed,
so a hung server is named within minutes; wrong arguments are refused in plain words; and two first
conversions of the model at once give one folder (helpers.serving.gguf_convert)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_completion_server import FakeCompletionServer

from helpers.grpo.memory import HeapTrimmer
from helpers.grpo.policy_server import PolicyServer
from helpers.paths import display_path
from helpers.serving.child_process import EndpointError

ROOT = Path(__file__).resolve().parent.parent
RESUME = "run the training cell again"


def _sequences(body: dict, tokens: int = 8, generation_ms: float | None = None) -> list[dict]:
    """n_cmpl completions as llama.cpp gives them; with `generation_ms`, its own timings of each sequence."""
    timings = {} if generation_ms is None else {"timings": {"predicted_n": tokens, "predicted_ms": generation_ms}}
    return [{"index": i, "tokens": list(range(10, 10 + tokens)), "completion_probabilities": [],
             "stop_type": "limit", **timings} for i in range(body.get("n_cmpl", 1))]


@pytest.fixture
def fake_policy(tmp_path):
    """PolicyServer(parallel=2) on a FakeCompletionServer answering `reply`; the fake is stopped after."""
    fakes = []

    def make(reply) -> PolicyServer:
        fakes.append(FakeCompletionServer(tmp_path, reply))
        policy = PolicyServer(folder=tmp_path, parallel=2)
        policy.server = fakes[-1]
        return policy

    yield make
    for fake in fakes:
        fake.stop()


def _complete(policy: PolicyServer, **options):
    return policy.complete([[1, 2, 3], [4, 5, 6]], **{"n": 2, "max_tokens": 8, "temperature": 1.0, **options})


# ----------------------------------------------------------------------------- arguments


def test_wrong_arguments_are_refused_in_plain_words(fake_policy, tmp_path):
    """n <= 0 returned nothing or failed inside range(), a float n was a TypeError, parallel 0 a bare
    'range() arg 3 must not be zero'. Now each is a ValueError that names the argument."""
    policy = fake_policy(lambda body: (200, _sequences(body), 0.0))
    assert len(_complete(policy)) == 4  # the stand-in answers right arguments
    for n in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"^n must be a whole number of at least 1"):
            _complete(policy, n=n)
    for max_tokens in (0, 8.5):
        with pytest.raises(ValueError, match=r"^max_tokens must be a whole number of at least 1"):
            _complete(policy, max_tokens=max_tokens)
    with pytest.raises(ValueError, match=r"^parallel must be a whole number of at least 1"):
        PolicyServer(folder=tmp_path, parallel=0)
    # n=10**9 filled memory with a job list, then a bare MemoryError: refused first, with the bound and why
    with pytest.raises(ValueError, match=r"^n must be at most 1024 \(completions of each prompt"):
        _complete(policy, n=10**9)


# ----------------------------------------------------------------------------- what the server answers


def test_a_refused_request_says_the_servers_reason(local_server, tmp_path):
    """A real llama.cpp server answers a prompt longer than a slot's context with HTTP 400 and its reason; that
    reason was dropped (a bare 'HTTP Error 400: Bad Request'). Now it is in the message with the sizes."""
    policy = PolicyServer(folder=tmp_path, parallel=local_server.parallel, ctx_per_slot=local_server.ctx_per_slot)
    policy.server = local_server
    try:
        with pytest.raises(EndpointError) as refused:
            policy.complete([list(range(10, 10 + local_server.ctx_per_slot + 50))], n=1, max_tokens=8,
                            temperature=1.0)
    finally:
        policy.server = None  # the session's server stays up for other tests
    message = str(refused.value)
    assert "HTTP 400" in message and "exceeds the available context size" in message, message
    assert f"{local_server.ctx_per_slot + 50}-token prompt" in message and "ctx_per_slot=2048" in message, message


def test_a_reply_without_token_ids_is_named(fake_policy):
    """A server that is not the llama.cpp the course pins (no `tokens` in its reply, or not JSON at all) was a
    bare KeyError or JSONDecodeError; now an EndpointError says what is missing and how to install it."""
    policy = fake_policy(lambda body: (200, [{"index": 0, "content": "hi", "stop_type": "eos"}], 0.0))
    with pytest.raises(EndpointError, match=r"no token ids .*requirements\.txt.*policy\.log"):
        policy.complete([[1, 2, 3]], n=1, max_tokens=8, temperature=1.0)
    policy = fake_policy(lambda body: (200, b"<html>a proxy's page</html>", 0.0))
    with pytest.raises(EndpointError, match=r"not JSON .*html.*policy\.log"):
        policy.complete([[1, 2, 3]], n=1, max_tokens=8, temperature=1.0)


def test_a_dropped_connection_is_asked_again_then_named_like_a_hang(fake_policy):
    """A connection error of a server that still runs was re-raised bare (only a timeout was retried). Now it
    is asked again, like a hang, and a second failure names the log and says how to resume."""
    dropped = []

    def once(body):  # drops the first request only
        if not dropped:
            dropped.append(body)
            return None
        return 200, _sequences(body), 0.0

    policy = fake_policy(once)
    assert len(policy.complete([[1, 2, 3]], n=2, max_tokens=8, temperature=1.0)) == 2 and dropped
    policy = fake_policy(lambda body: None)
    policy.server.log_path.write_text("what the hung server wrote\n")
    with pytest.raises(EndpointError) as failed:
        policy.complete([[1, 2, 3]], n=2, max_tokens=8, temperature=1.0)
    message = str(failed.value)
    assert "when asked again" in message and "policy-failed-" in message and RESUME in message, message
    # the log it names is a copy: the restart the message advises rewrites policy.log (it named that, and the
    # crash's lines were gone when a learner opened it)
    kept = next(policy.server.log_path.parent.glob("policy-failed-*.log"))
    policy.server.log_path.write_text("the restarted server's log\n")
    assert kept.name in message and kept.read_text() == "what the hung server wrote\n"


# ----------------------------------------------------------------------------- how long a request may take


def test_the_wait_follows_the_servers_speed_and_a_hung_server_is_named_within_minutes(fake_policy):
    """The wait followed one reply's length over its time: after a batch of short replies (time spent reading
    the prompt) or a busy moment, a 48-token request waited 12-16 minutes (x3 with the retry), and before the
    first batch a 512-token request 85 minutes in all. Now it follows the generation speed llama.cpp reports,
    and the wait and its retry together stay under 5 minutes for 48 tokens and 30 minutes for any request."""
    speed = {"tokens": 8, "generation_ms": 400.0, "delay_s": 0.0}  # 20 tokens/s per sequence
    policy = fake_policy(lambda body: (200, _sequences(body, speed["tokens"], speed["generation_ms"]),
                                       speed["delay_s"]))

    def named_within_s(max_tokens: int) -> float:  # the first wait plus the retry's (twice as long)
        return 3 * policy.request_wait_s(max_tokens)

    assert named_within_s(48) <= 300 and named_within_s(512) <= 1800  # before the first batch
    _complete(policy)
    assert policy.request_wait_s(400) == pytest.approx(policy.SLACK * 400 / 20, rel=0.01)  # follows 20 tokens/s
    speed.update(tokens=1, generation_ms=5.0, delay_s=0.5)  # short replies after half a second of prompt reading
    _complete(policy)
    assert policy.request_wait_s(400) == pytest.approx(policy.SLACK * 400 / 20, rel=0.01)  # still 20 tokens/s
    speed.update(tokens=16, generation_ms=16 / 0.2 * 1000, delay_s=0.0)  # a busy moment: 0.2 tokens/s
    _complete(policy)
    assert policy.request_wait_s(400) > policy.SLACK * 400 / 20  # a slower server is waited for longer
    assert named_within_s(48) <= 300 and named_within_s(512) <= 1800


@pytest.mark.slow
def test_the_measured_speed_is_the_real_servers_generation_speed(local_server, tmp_path):
    """On a real llama.cpp server: the speed the wait follows, after long replies to a short prompt, is about
    the tokens per second of a sequence (tokens over the batch's time); after short replies to a long prompt
    it stays about the same, where the old measure fell ~10x (its time was spent reading the prompt). The
    bounds leave room for a shared machine's load to change between the two batches."""
    policy = PolicyServer(folder=tmp_path, parallel=local_server.parallel)
    policy.server = local_server
    # The rate the wait follows (the requests keep the wait's floor: reading a 1,490-token prompt on a busy machine
    # takes seconds before the first token)
    def rate() -> float:
        return policy.measured_rate

    try:
        started = time.monotonic()
        long = policy.complete([[1, 2, 3, 4]], n=2, max_tokens=32, temperature=1.0)
        reference = max(len(c.token_ids) for c in long) / (time.monotonic() - started)
        assert 0.8 * reference <= rate() <= 2 * reference, (rate(), reference)
        policy.complete([list(range(10, 1500))], n=2, max_tokens=12, temperature=1.0)
        assert 0.3 * reference <= rate() <= 3 * reference, (rate(), reference)
    finally:
        policy.server = None


@pytest.mark.slow
def test_an_evaluation_can_skip_logprobs_and_reuse_prompts_on_the_real_server(local_server, tmp_path):
    """An evaluation's requests (bench_learnability) ask for no log-probabilities and may reuse a slot's prompt:
    the real server then still answers the same greedy tokens, each logprob is None, and a repeated prompt is
    read from the cache (llama.cpp's own count of the prompt tokens it processed)."""
    policy = PolicyServer(folder=tmp_path, parallel=local_server.parallel)
    policy.server = local_server
    prompt = list(range(100, 160))
    try:
        fresh = policy.complete([prompt], n=1, max_tokens=8, temperature=0.0)[0]
        lean = policy.complete([prompt], n=1, max_tokens=8, temperature=0.0, logprobs=False, cache_prompt=True)[0]
        assert lean.token_ids == fresh.token_ids and lean.finished == fresh.finished
        assert lean.logprobs == [None] * len(lean.token_ids) and any(p is not None for p in fresh.logprobs)
        again = policy.complete([prompt], n=1, max_tokens=8, temperature=0.0, logprobs=False, cache_prompt=True)[0]
        assert again.token_ids == fresh.token_ids
    finally:
        policy.server = None
    import urllib.request

    from helpers.serving.child_process import NO_PROXY_OPENER

    body = {"prompt": prompt, "n_predict": 1, "temperature": 0.0, "cache_prompt": True}
    request = urllib.request.Request(local_server.base_url.removesuffix("/v1") + "/completion",
                                     data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {local_server.api_key}"})
    with NO_PROXY_OPENER.open(request, timeout=60) as reply:
        assert json.loads(reply.read())["timings"]["prompt_n"] < len(prompt) // 2  # read from the slot's cache


# ----------------------------------------------------------------------------- a server that dies


@pytest.mark.slow
def test_a_server_killed_mid_batch_is_named_and_the_trainer_restarts_it(tmp_path):
    """The policy server's process killed 1.5 s into a batch ended training with a bare RemoteDisconnected, and
    the next batch (or the Train cell run again) with 'not running: call sync(model) first'. Now both name the
    server's log and say to run the cell again, and the trainer's next batch restarts the server."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from helpers.grpo.server_rollouts import ServerRolloutGRPOTrainer
    from helpers.serving.gguf_convert import convert_gguf

    model_dir = convert_gguf(quiet=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    messages = [{"role": "user", "content": "Write a long story about a dragon who learns to count."}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    with PolicyServer(folder=tmp_path, name="killed", parallel=2, threads=1) as policy:
        policy.sync(model, step=0)
        log = display_path(policy.server.log_path)
        killer = threading.Timer(1.5, policy.server.process.kill)
        killer.start()
        started = time.monotonic()
        with pytest.raises(EndpointError) as died:
            policy.complete([prompt], n=2, max_tokens=400, temperature=1.0)
        killer.join()
        assert time.monotonic() - started < 10, "the dead server was not noticed at once"
        for message in (str(died.value), str(pytest.raises(EndpointError, policy.complete, [prompt], n=2,
                                                            max_tokens=8, temperature=1.0).value)):
            assert "stopped" in message and log in message and RESUME in message, message
        # The Train cell run again: the trainer's generation (on a stand-in for its other attributes) finds the
        # server stopped at the step it serves, and starts it again.
        trainer = SimpleNamespace(
            policy_server=policy, state=SimpleNamespace(global_step=0), model=model, processing_class=tokenizer,
            max_prompt_length=256, num_generations=2, max_completion_length=8, temperature=1.0, top_p=1.0,
            top_k=0, min_p=None, repetition_penalty=1.0, args=SimpleNamespace(seed=0),
            heap_trimmer=HeapTrimmer())
        _, completion_ids, _, _ = ServerRolloutGRPOTrainer._generate_single_turn(trainer, [messages] * 2, None)
        # restarted (a second sync), and stopped again once the batch was sampled: the update gets its memory
        assert len(completion_ids) == 2 and policy.syncs == 2 and policy.server is None


@pytest.mark.slow
def test_a_server_asked_to_stop_mid_batch_is_named_at_once_with_the_signal(tmp_path):
    """SIGTERM to the policy server in the middle of a batch gave 83 s of silence (the server finished the batch
    before it exited) and then "stopped (exit code 0)", as if it had ended normally. It ends at once now, and the
    error says what ended it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from helpers.serving.gguf_convert import convert_gguf

    model_dir = convert_gguf(quiet=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Write a long story about a dragon."}],
                                           add_generation_prompt=True)
    with PolicyServer(folder=tmp_path, name="terminated", parallel=8, threads=1) as policy:
        policy.sync(model, step=0)
        process = policy.server.process
        stopper = threading.Timer(1.5, lambda: process.send_signal(signal.SIGTERM))
        stopper.start()
        started = time.monotonic()
        with pytest.raises(EndpointError) as stopped:
            policy.complete([prompt] * 4, n=8, max_tokens=400, temperature=1.0)  # notebook 02's shape
        stopper.join()
        assert time.monotonic() - started < 10, "the stopped server was not noticed at once"
        assert "SIGTERM" in str(stopped.value) and RESUME in str(stopped.value), str(stopped.value)


# ----------------------------------------------------------------------------- the first model conversion


@pytest.mark.slow
def test_two_first_conversions_at_once_make_one_folder(tmp_path):
    """Two processes converting the model at once shared one `.partial` folder with no lock: the second deleted
    the first's half-written folder. Now the second waits for the first, says so, and uses its result."""
    env = {**os.environ, "COURSE_MODELS_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    code = "from helpers.serving.gguf_convert import convert_gguf; print('folder:', convert_gguf())"
    processes = []

    def start() -> subprocess.Popen:
        processes.append(subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        return processes[-1]

    try:
        first = start()
        line = first.stdout.readline()  # the first is converting (holds the lock) when it says so
        assert line.startswith("model: converting"), line + first.stdout.read()
        second = start()
        second_out = second.communicate(timeout=400)[0]
        first_out = line + first.communicate(timeout=400)[0]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert first.returncode == 0 and second.returncode == 0, first_out + second_out
    assert "model: converting" not in second_out and "waiting for it" in second_out, second_out
    folder = tmp_path / "smollm2-135m-instruct"
    assert f"folder: {folder}" in first_out and f"folder: {folder}" in second_out
    assert json.loads((folder / "config.json").read_text())["rope_theta"] == 100000.0
    assert (folder / "converted_from.json").is_file() and (folder / "model.safetensors").is_file()
    assert not folder.with_name(folder.name + ".partial").exists()


# ----------------------------------------------------------------------------- a hung server, and the button


def _hung(fake_policy, wait_s: float) -> PolicyServer:
    policy = fake_policy(lambda body: (200, _sequences(body), 30.0))  # answers after 30 s: hung for the client
    policy.MIN_WAIT_S = policy.MAX_WAIT_S = wait_s
    return policy


def test_a_hung_server_is_named_within_the_stated_bound_for_a_whole_batch(fake_policy):
    """Notebook 02's shape (several prompts, more requests than the pool runs at once): the pool started the next
    request after the first failed, so a hung server was named after twice the stated bound (3 waits) or more.
    The first failure now cancels the requests that wait."""
    policy = _hung(fake_policy, 1.0)  # the bound: the wait and the retry's twice as long, 3 s
    started = time.monotonic()
    with pytest.raises(EndpointError, match="when asked again"):
        policy.complete([[1, 2, 3]] * 4, n=2, max_tokens=8, temperature=1.0)  # 4 requests, 1 at a time
    assert time.monotonic() - started < 4.5, "named after more than the bound: the next request waited too"


def test_the_button_during_complete_reaches_the_caller_at_once(fake_policy):
    """The interrupt button during complete() reached the caller only after the requests in the pool had waited
    (up to ~5 min at the defaults): the pool's exit waited for them. It now ends the call at once."""
    import _thread

    policy = _hung(fake_policy, 20.0)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    button = threading.Timer(0.5, _thread.interrupt_main)
    button.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            policy.complete([[1, 2, 3]] * 4, n=2, max_tokens=8, temperature=1.0)
    finally:
        button.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 5.0
