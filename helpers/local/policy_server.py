"""The policy on a llama.cpp server, for CPU GRPO: verifiers' architecture in miniature.

verifiers trains with two processes: an inference server (`vf-vllm`) samples the rollouts, and
the trainer sends it the new weights after every optimizer step. On a CPU the course does the same
with llama.cpp, which samples several sequences at once in half the time of transformers' generate:

- `sync(model, step)` writes the trainer's current weights as a GGUF (float16 by default, see
  helpers.local.gguf_export) and restarts the llama.cpp server on it: about 2 s for 135M on 2 cores
  (benchmarks/results/grpo-2026-12-03.json);
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

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from helpers.local.child_process import NO_PROXY_OPENER, EndpointError
from helpers.local.gguf_export import GGUFExporter
from helpers.local.hf_server import HFModelServer
from helpers.local.llama_server import LocalModelServer, packaged_model_path


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


def _timed_out(error: OSError) -> bool:
    """A request that waited too long: a socket timeout, or urllib's URLError around one."""
    return isinstance(error, TimeoutError) or isinstance(getattr(error, "reason", None), TimeoutError)


class _StoppedOnExit:
    """The one model server a sync started (`self.server`): stopped by `stop()` or on leaving `with`."""

    server = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

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
    parallel: int = 8  # sequences sampled at once: one step's completions
    threads: int | None = None  # None: every core (the trainer waits while the server samples)
    ctx_per_slot: int = 1024
    eos_token_id: int = 2  # SmolLM2's <|im_end|>
    server: LocalModelServer | None = field(default=None, init=False, repr=False)
    step: int | None = field(default=None, init=False)  # the training step whose weights it serves
    syncs: int = field(default=0, init=False)
    last_sync_s: float = field(default=0.0, init=False)  # export + restart, seconds
    _exporter: GGUFExporter | None = field(default=None, init=False, repr=False)
    slowest_rate: float | None = field(default=None, init=False)  # tokens/s of the slowest request of the last batch
    # A request's wait (request_wait_s): on 2 idle cores, 4 parallel requests to the 135M model got 85-111
    # tokens/s in all, 21-28 each (benchmarks/results/endpoint-2026-12-03.json). A server up to SLACK times
    # slower than the slowest request of the batch before completes at the first try (3x that with the
    # retry). Before the first batch has shown a rate, 3 tokens/s is assumed: what a second model server on
    # the same 2 cores left of it (issue 31), so a 200-token request then waits about 11 minutes.
    SLACK: ClassVar[float] = 10.0
    FIRST_RATE: ClassVar[float] = 3.0
    MIN_WAIT_S: ClassVar[float] = 60.0

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
        """An OpenAI-compatible endpoint on the weights of the last sync (helpers.endpoint.Endpoint)."""
        return self._running().endpoint()

    def request_wait_s(self, max_tokens: int) -> float:
        """How long one request may take: SLACK times what `max_tokens` needs at the slowest rate (tokens/s of
        one request) the server has shown in this run, or at FIRST_RATE before it has shown one; at least
        MIN_WAIT_S. A server slowed down by another program (a second model server on the same 2 cores fell
        to ~3 tokens/s) is waited for; a hung one is given up on after about SLACK times its expected time."""
        rate = self.slowest_rate or self.FIRST_RATE
        return max(self.MIN_WAIT_S, self.SLACK * max_tokens / rate)

    def complete(self, prompts: list[list[int]], n: int, max_tokens: int, temperature: float, *,
                 top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, repetition_penalty: float = 1.0,
                 seed: int = 0) -> list[Completion]:
        """`n` completions of each prompt (token ids), grouped by prompt: prompt 0's n first. A request that
        takes longer than request_wait_s is sent once more with twice the wait; then EndpointError names
        the server's log (the trainer's finished steps are in its checkpoints)."""
        server = self._running()
        url = server.base_url.removesuffix("/v1") + "/completion"
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"}
        rates: list[float] = []

        def send(body: dict, wait_s: float) -> list[dict]:
            request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
            started = time.monotonic()
            with NO_PROXY_OPENER.open(request, timeout=wait_s) as reply:
                out = json.loads(reply.read())
            out = sorted(out, key=lambda o: o.get("index", 0)) if isinstance(out, list) else [out]
            longest = max(len(o.get("tokens") or []) for o in out)  # the n sequences are sampled side by side
            rates.append(max(longest, 1) / max(time.monotonic() - started, 1e-3))
            return out

        def one(job: tuple[int, list[int], int]) -> list[Completion]:
            first, prompt, count = job
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": temperature, "top_p": top_p,
                    "top_k": top_k, "min_p": min_p, "typical_p": 1.0, "repeat_penalty": repetition_penalty,
                    "seed": seed + first, "n_probs": 1, "return_tokens": True, "cache_prompt": False,
                    "n_cmpl": count}
            wait_s = self.request_wait_s(max_tokens)
            try:
                out = send(body, wait_s)
            except OSError as e:
                if not _timed_out(e):
                    raise
                try:
                    out = send(body, 2 * wait_s)  # once more: a busy moment passes
                except OSError as again:
                    if not _timed_out(again):
                        raise
                    raise EndpointError(
                        f"The policy server did not answer a {max_tokens}-token request within {wait_s:.0f} s, nor "
                        f"within {2 * wait_s:.0f} s when asked again (another program may be using the cores, or "
                        f"the server hung: its log is {server.log_path}). The steps finished so far are saved "
                        "in the run's checkpoints: run the training cell again to resume.") from None
            if len(out) != count:
                raise EndpointError(f"The policy server returned {len(out)} completions where {count} were asked "
                                    f"for (an xllamacpp without n_cmpl?); its log is {server.log_path}")
            return [self._completion(o) for o in out]

        # One request per prompt holds `count` of the server's slots (more than `parallel` are split), and as
        # many requests run at once as fill the slots.
        per_request = min(n, self.parallel)
        jobs = [(index * n + first, prompt, min(per_request, n - first))
                for index, prompt in enumerate(prompts) for first in range(0, n, per_request)]
        with ThreadPoolExecutor(max(1, self.parallel // per_request)) as pool:
            completions = [c for group in pool.map(one, jobs) for c in group]
        if rates:
            self.slowest_rate = min(rates)  # what the next batch's wait follows
        return completions

    def _completion(self, out: dict) -> Completion:
        ids = list(out["tokens"])
        logprobs = _aligned_logprobs(ids, out["completion_probabilities"])
        finished = out.get("stop_type") == "eos"
        if finished and (not ids or ids[-1] != self.eos_token_id):
            ids.append(self.eos_token_id)  # as transformers' generate keeps it: the model learns to stop
            logprobs.append(None)
        return Completion(ids, logprobs, finished)

    def _running(self) -> LocalModelServer:
        if self.server is None or not self.server.is_running():
            raise EndpointError("The policy server is not running: call sync(model) first.")
        return self.server


@dataclass
class CheckpointServer(_StoppedOnExit):
    """The GPU path's evaluation server: `sync(model)` saves the weights as a transformers folder and
    (re)starts helpers.local.hf_server on it, on the GPU (llama.cpp here serves Llama GGUFs only)."""

    folder: Path  # the checkpoint folder, rewritten at every sync
    tokenizer: object
    name: str = "policy"
    device: str = "cuda"
    dtype: str = "bfloat16"  # helpers.grpo.eval_server_dtype(): float32 below compute capability 8.0, never float16
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
