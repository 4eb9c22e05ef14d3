"""The policy on a llama.cpp server, for CPU GRPO: verifiers' architecture in miniature.

verifiers trains with two processes: an inference server (`vf-vllm`) samples the rollouts, and
the trainer sends it the new weights after every optimizer step. On a CPU the course does the same
with llama.cpp, which samples several sequences at once faster than transformers' generate (benchmarks/bench_grpo.py
compares the two):

- `sync(model, step)` writes the trainer's current weights as a GGUF (float16 by default, see
  helpers.serving.gguf_export) and restarts the llama.cpp server on it (`last_sync_s` says how long it took);
- `complete(prompt_ids, n=...)` samples `n` completions per prompt as token ids, with the
  log-probability the server's model gave each sampled token (before temperature); one request per
  prompt (llama.cpp's `n_cmpl`): the prompt is read once and its n completions sampled side by side;
- `endpoint()` is an OpenAI-compatible endpoint on the same weights, for `env.evaluate`.

`CheckpointServer` has the same `sync`/`endpoint`/`stop`, with transformers serving a saved
checkpoint: what the one-GPU backend evaluates with before and after training.

Sampling is plain temperature sampling over the whole vocabulary, as TRL's own generate does:
llama.cpp's defaults (top-k 40, top-p 0.95, min-p 0.05) are switched off, unless asked for.
"""

from __future__ import annotations

import http.client
import json
import numbers
import shutil
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from helpers.paths import display_path
from helpers.serving.child_process import NO_PROXY_OPENER, EndpointError, how_it_ended
from helpers.serving.gguf_export import GGUFExporter
from helpers.serving.hf_server import HFModelServer
from helpers.serving.llama_server import LocalModelServer, packaged_model_path

# What every failure of the policy server mid-training says: notebook 02's Train cell resumes from the last
# checkpoint (helpers.grpo.run_folder), and the trainer restarts a stopped server (server_rollouts).
RESUME_HINT = ("The steps finished so far are saved in the run's checkpoints: run the training cell again to "
               "resume (it starts the server again).")


@dataclass
class Completion:
    token_ids: list[int]
    # The server's log-probability of each sampled token (at temperature 1), or None where llama.cpp
    # reports none: it reports one per whole UTF-8 character, so the first bytes of a character split
    # over several tokens have none (nor has the end-of-turn token).
    logprobs: list[float | None]
    finished: bool  # True: the model ended it (end-of-turn token, kept as the last id); False: cut at max_tokens


def _aligned_logprobs(token_ids: list[int], reported: list[dict]) -> list[float | None]:
    """llama.cpp's per-character log-probabilities, put at the tokens they belong to (by token id)."""
    logprobs: list[float | None] = [None] * len(token_ids)
    position = 0
    for entry in reported:
        while position < len(token_ids) and token_ids[position] != entry["id"]:
            position += 1
        if position < len(token_ids):
            logprobs[position] = entry["logprob"]
            position += 1
    return logprobs


def _timed_out(error: Exception) -> bool:
    """A request that waited too long: a socket timeout, or urllib's URLError around one."""
    return isinstance(error, TimeoutError) or isinstance(getattr(error, "reason", None), TimeoutError)


def _whole_number(name: str, value, most: int | None = None, why: str = "") -> int:
    """`value` when it is a whole number >= 1 (not a bool, not a float) and at most `most`, else a ValueError
    naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    if most is not None and value > most:
        raise ValueError(f"{name} must be at most {most}{f' ({why})' if why else ''}, not {value!r}")
    return int(value)


# n=10**9 built a billion-entry job list: a bare MemoryError after filling memory. A GRPO group is a few to a
# few dozen completions of one prompt; far more than this is a mistake, not a batch.
MAX_N = 1024


def _kept_log(server) -> str:
    """The server's log, copied aside (<name>-failed-<time>.log) for an error that names it: the restart the
    error advises (run the training cell again) starts a server that rewrites the same file. Shown as a path;
    the log itself where it cannot be copied."""
    log = Path(server.log_path)
    kept = log.with_name(f"{log.stem}-failed-{time.strftime('%Y%m%d-%H%M%S')}{log.suffix}")
    try:
        shutil.copyfile(log, kept)
    except OSError:
        return display_path(log)
    return f"{display_path(kept)} (a copy of {display_path(log)}, which the next start rewrites)"


def _speed_sample(replies: list[dict], seconds: float) -> tuple[int, float]:
    """(tokens, seconds) of one request's sequences for the server's speed: llama.cpp's own timings of each
    sequence's generation (reading the prompt is not in them), else the longest sequence over the request's
    time (the sequences are sampled side by side)."""
    timings = [o.get("timings") or {} for o in replies]
    if all("predicted_n" in t and "predicted_ms" in t for t in timings):
        return sum(t["predicted_n"] for t in timings), sum(t["predicted_ms"] for t in timings) / 1000
    return max(len(o["tokens"]) for o in replies), seconds


class _StoppedOnExit:
    """The one model server a sync started (`self.server`): stopped by `stop()` or on leaving `with`."""

    server = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def is_running(self) -> bool:
        """Whether the server of the last sync is up (it may have stopped by itself: sync again)."""
        return self.server is not None and self.server.is_running()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class PolicyServer(_StoppedOnExit):
    """A llama.cpp server that serves whatever weights `sync(model)` gave it last."""

    folder: Path  # where the GGUF goes (one file, replaced at every sync)
    name: str = "policy"  # the model name the endpoint answers to
    precision: str = "F16"
    parallel: int = 16  # sequences sampled at once: a step's 32 completions in two halves
    threads: int | None = None  # None: every core (the trainer waits while the server samples)
    ctx_per_slot: int = 512  # a sequence's prompt + completion: the CPU task's are ~80 + 48 tokens
    eos_token_id: int = 2  # SmolLM2's <|im_end|>
    server: LocalModelServer | None = field(default=None, init=False, repr=False)
    step: int | None = field(default=None, init=False)  # the training step whose weights it serves
    syncs: int = field(default=0, init=False)
    last_sync_s: float = field(default=0.0, init=False)  # export + restart, seconds
    _exporter: GGUFExporter | None = field(default=None, init=False, repr=False)
    # The server's speed: tokens/s of one sequence (the slots share the cores), over the last batch that
    # generated at least MIN_MEASURED_TOKENS (fewer say more about noise than speed); None before.
    measured_rate: float | None = field(default=None, init=False)
    # A request's wait (request_wait_s) is SLACK times what max_tokens needs at that speed, at least MIN_WAIT_S
    # (reading the prompt), and at most MAX_WAIT_S. The speed counts as at least MIN_RATE, which is also the
    # guess before the first batch: a low rate for the 135M model's slots on 2 busy cores (benchmarks/bench_endpoint.py
    # measures the rates). So the wait is at most 2 s a token, and a hung server is named (the wait, then the
    # retry's twice as long) within 3 x max(MIN_WAIT_S, 2 s x max_tokens), each wait MAX_WAIT_S at most. A slow server
    # is still waited for: one at a tenth of MIN_RATE a sequence (as when two llama.cpp servers share the same 2 cores)
    # completes 48 tokens at the first try, and any one at least SLACK times slower than the batch before at the
    # second.
    SLACK: ClassVar[float] = 10.0
    MIN_RATE: ClassVar[float] = 5.0
    MIN_WAIT_S: ClassVar[float] = 60.0
    MAX_WAIT_S: ClassVar[float] = 600.0
    MIN_MEASURED_TOKENS: ClassVar[int] = 16

    def __post_init__(self) -> None:
        _whole_number("parallel", self.parallel)

    def sync(self, model, step: int | None = None) -> float:
        """Serve `model`'s current weights (those of training step `step`) from now on; returns the
        seconds it took."""
        started = time.monotonic()
        if self._exporter is None:
            self._exporter = GGUFExporter(model, packaged_model_path(), self.precision)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._exporter.export(model, self.folder / f"{self.name}.{self.precision}.gguf")
        port = self.server.port if self.server is not None else None
        self.stop()
        options = {"threads": self.threads} if self.threads else {}
        self.server = LocalModelServer(model_path=path, alias=self.name, port=port, parallel=self.parallel,
                                       ctx_per_slot=self.ctx_per_slot, **options).start()
        self.step = step
        self.syncs += 1
        self.last_sync_s = time.monotonic() - started
        return self.last_sync_s

    def endpoint(self):
        """An OpenAI-compatible endpoint on the weights of the last sync (helpers.serving.endpoint.Endpoint)."""
        return self._running().endpoint()

    def request_wait_s(self, max_tokens: int) -> float:
        """How long one request for `max_tokens` tokens may take: SLACK times what they need at the server's
        measured speed (at least MIN_RATE), between MIN_WAIT_S and MAX_WAIT_S (see the class's fields)."""
        rate = max(self.measured_rate or 0.0, self.MIN_RATE)
        return min(self.MAX_WAIT_S, max(self.MIN_WAIT_S, self.SLACK * max_tokens / rate))

    def complete(self, prompts: list[list[int]], n: int, max_tokens: int, temperature: float, *,
                 top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, repetition_penalty: float = 1.0,
                 seed: int = 0, logprobs: bool = True, cache_prompt: bool = False) -> list[Completion]:
        """`n` completions of each prompt (token ids), grouped by prompt: prompt 0's n first. A request that
        takes longer than request_wait_s, or whose connection breaks, is sent once more with twice the wait;
        then, or when the server stopped or refused the request, EndpointError names the server's log and
        what to do (the trainer's finished steps are in its checkpoints).

        `logprobs=False` skips the per-token log-probabilities (None each), which cost the server a pass over
        the vocabulary per token; `cache_prompt=True` lets a request reuse the part of its prompt a slot
        already holds (a shared system prompt, the same problem's earlier request), which may change a greedy
        reply's floating-point path: only for evaluations that are all run the same way."""
        n = _whole_number("n", n, MAX_N, "completions of each prompt: a GRPO group is a few to a few dozen")
        max_tokens = _whole_number("max_tokens", max_tokens)
        server = self._running()
        url = server.base_url.removesuffix("/v1") + "/completion"
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"}
        samples: list[tuple[int, float]] = []  # (tokens, seconds) per request: the server's speed

        def one(job: tuple[int, list[int], int]) -> list[Completion]:
            first, prompt, count = job
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": temperature, "top_p": top_p,
                    "top_k": top_k, "min_p": min_p, "typical_p": 1.0, "repeat_penalty": repetition_penalty,
                    "seed": seed + first, "n_probs": int(logprobs), "return_tokens": True,
                    "cache_prompt": cache_prompt, "n_cmpl": count}
            wait_s = self.request_wait_s(max_tokens)
            failures = []
            for wait in (wait_s, 2 * wait_s):  # once more: a busy moment passes, a dropped connection is redone
                if not server.is_running():
                    raise self._stopped(server)
                request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
                started = time.monotonic()
                try:
                    with NO_PROXY_OPENER.open(request, timeout=wait) as reply:
                        raw = reply.read()
                except urllib.error.HTTPError as e:
                    raise self._refused(e, server, len(prompt), count, max_tokens) from None
                except (OSError, http.client.HTTPException) as e:  # RemoteDisconnected, IncompleteRead, timeouts
                    if _timed_out(e):
                        failures.append(f"no answer within {wait:.0f} s")
                    else:
                        failures.append(f"the connection broke: {type(e).__name__}")
                        time.sleep(1.0)  # a killed server's exit shows a moment after its connections close
                    continue
                replies = self._replies(raw, count, server, logprobs)
                samples.append(_speed_sample(replies, time.monotonic() - started))
                return [self._completion(o) for o in replies]
            if not server.is_running():
                raise self._stopped(server)
            raise EndpointError(
                f"The policy server did not complete a {max_tokens}-token request ({failures[0]}), nor when "
                f"asked again ({failures[1]}): another program may be using the cores, or the server hung. Its "
                f"log is {_kept_log(server)}. {RESUME_HINT}")

        # One request per prompt holds `count` of the server's slots (more than `parallel` are split), and as
        # many requests run at once as fill the slots.
        per_request = min(n, self.parallel)
        jobs = [(index * n + first, prompt, min(per_request, n - first))
                for index, prompt in enumerate(prompts) for first in range(0, n, per_request)]
        # Not `with pool: pool.map(...)`: its exit waits for every job, so after the first failure the queued
        # ones would each wait their own bound (a hung server named only after twice the stated bound), and the
        # interrupt button would reach the caller only then. The first failure (or a press) cancels what waits.
        pool = ThreadPoolExecutor(max(1, self.parallel // per_request))
        try:
            futures = [pool.submit(one, job) for job in jobs]
            # in short waits: the button's KeyboardInterrupt reaches this thread between them
            while not all(f.done() for f in futures) and not any(f.done() and f.exception() for f in futures):
                wait_for_futures(futures, timeout=0.25, return_when=FIRST_EXCEPTION)
            completions = [c for future in futures for c in future.result()]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # requests in flight end at their own wait
        tokens, seconds = sum(t for t, _ in samples), sum(s for _, s in samples)
        if tokens >= self.MIN_MEASURED_TOKENS and seconds > 0:
            self.measured_rate = tokens / seconds  # what the next batch's wait follows
        return completions

    def _replies(self, raw: bytes, count: int, server, logprobs: bool = True) -> list[dict]:
        """The `count` completions of one reply, in order, as llama.cpp's /completion gives them."""
        log = display_path(server.log_path)
        try:
            out = json.loads(raw)
        except ValueError:
            raise EndpointError(f"The policy server's reply is not JSON (it begins {raw[:60]!r}): is another "
                                f"program answering on its port? Its log is {log}.") from None
        out = out if isinstance(out, list) else [out]
        if not all(isinstance(o, dict) and isinstance(o.get("tokens"), list)
                   and (not logprobs or isinstance(o.get("completion_probabilities"), list)) for o in out):
            raise EndpointError(
                "The policy server's reply has no token ids ('tokens' and 'completion_probabilities'): it "
                "must be llama.cpp's server as the xllamacpp pinned in requirements.txt has it (`bash "
                f"scripts/setup_env.sh` installs it). Its log is {log}.")
        if len(out) != count:
            raise EndpointError(f"The policy server returned {len(out)} completions where {count} were asked "
                                f"for (an xllamacpp without n_cmpl?); its log is {log}.")
        return sorted(out, key=lambda o: o.get("index", 0))

    def _refused(self, error: urllib.error.HTTPError, server, prompt_tokens: int, count: int,
                 max_tokens: int) -> EndpointError:
        """An HTTP error of the server, with its reason (llama.cpp sends {"error": {"message": ...}})."""
        try:
            reason = json.loads(error.read())["error"]["message"]
        except (OSError, ValueError, KeyError, TypeError):
            reason = error.reason
        return EndpointError(
            f"The policy server refused a request (HTTP {error.code}: {reason}). The request: a {prompt_tokens}-"
            f"token prompt, {count} completions of up to {max_tokens} tokens; the server: parallel={self.parallel}"
            f", ctx_per_slot={self.ctx_per_slot} (the tokens of one sequence's prompt and completion). Its log "
            f"is {display_path(server.log_path)}.")

    @staticmethod
    def _stopped(server) -> EndpointError:
        code = server.process.returncode if getattr(server, "process", None) is not None else None
        how = "" if code is None else f" ({how_it_ended(code)})"
        return EndpointError(f"The policy server stopped{how}; its log is {_kept_log(server)}. {RESUME_HINT}")

    def _completion(self, out: dict) -> Completion:
        ids = list(out["tokens"])
        logprobs = _aligned_logprobs(ids, out.get("completion_probabilities") or [])
        finished = out.get("stop_type") == "eos"
        if finished and (not ids or ids[-1] != self.eos_token_id):
            ids.append(self.eos_token_id)  # as transformers' generate keeps it: the model learns to stop
            logprobs.append(None)
        return Completion(ids, logprobs, finished)

    def _running(self) -> LocalModelServer:
        if self.server is None:
            raise EndpointError("The policy server is not running: call sync(model) first.")
        if not self.server.is_running():
            raise self._stopped(self.server)
        return self.server


@dataclass
class CheckpointServer(_StoppedOnExit):
    """The GPU path's evaluation server: `sync(model)` saves the weights as a transformers folder and
    (re)starts helpers.serving.hf_server on it, on the GPU (llama.cpp here serves Llama GGUFs only)."""

    folder: Path  # the checkpoint folder, rewritten at every sync
    tokenizer: object
    name: str = "policy"
    device: str = "cuda"
    # helpers.grpo.gpu_plan.eval_server_dtype(): float32 below compute capability 8.0, never float16
    dtype: str = "bfloat16"
    max_batch: int = 32
    server: HFModelServer | None = field(default=None, init=False, repr=False)
    step: int | None = field(default=None, init=False)
    syncs: int = field(default=0, init=False)
    last_sync_s: float = field(default=0.0, init=False)

    def sync(self, model, step: int | None = None) -> float:
        started = time.monotonic()
        self.stop()
        model.save_pretrained(self.folder)
        self.tokenizer.save_pretrained(self.folder)
        self.server = HFModelServer(self.folder, model_name=self.name, device=self.device, dtype=self.dtype,
                                    max_batch=self.max_batch).start()
        self.step, self.syncs, self.last_sync_s = step, self.syncs + 1, time.monotonic() - started
        return self.last_sync_s

    def endpoint(self):
        if self.server is None or not self.server.is_running():
            raise EndpointError("The checkpoint server is not running: call sync(model) first.")
        return self.server.endpoint()
