"""Process entry point of helpers.serving.hf_server.HFModelServer: an OpenAI-compatible server for a
transformers checkpoint on 127.0.0.1 (`GET /v1/models`, `POST /v1/chat/completions`).

Started by path (`python -P helpers/serving/hf_child.py ...`), so it imports no course code. Like
the llama.cpp server it binds 127.0.0.1 only, answers only requests with the per-start API key
(`/health` aside), and refuses every request from a web page (any `Origin` header).
"""

from __future__ import annotations

import argparse
import hmac
import json
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"


def stop_token_ids(tokenizer, generation_config=None) -> list[int]:
    """Every token id that ends a completion, the one that ends a chat turn first: the token the chat
    template puts after an assistant message, the tokenizer's eos (now and as loaded), and the
    generation config's eos ids. Qwen3-0.6B-Base's tokenizer ends text with <|endoftext|> while its
    chat template ends turns with <|im_end|>: stopping only at the eos lets a completion run on into
    invented turns, which skip_special_tokens then hides. (helpers.grpo uses this for TRL too.)"""
    ids = []
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "2 + 2?"},
                                              {"role": "assistant", "content": "STOP-MARKER"}], tokenize=False)
        after = tokenizer.encode(text.split("STOP-MARKER", 1)[1], add_special_tokens=False)
    except Exception:  # noqa: BLE001 - no chat template (or an unusual one): the eos ids below
        after = []
    if after and tokenizer.convert_ids_to_tokens(after[0]) in {*tokenizer.all_special_tokens,
                                                               *tokenizer.get_added_vocab()}:
        ids.append(after[0])
    loaded_eos = tokenizer.init_kwargs.get("eos_token")  # eos_token may have been changed since
    loaded_eos = tokenizer.get_vocab().get(str(getattr(loaded_eos, "content", loaded_eos)))
    config_eos = getattr(generation_config, "eos_token_id", None)
    for token_id in [tokenizer.eos_token_id, loaded_eos,
                     *(config_eos if isinstance(config_eos, list) else [config_eos])]:
        if isinstance(token_id, int) and token_id not in ids:
            ids.append(token_id)
    return ids


class _Generator:
    """Loads the model once; a worker thread answers queued requests in batches."""

    def __init__(self, model_dir: str, max_batch: int, device: str, dtype: str):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "left"  # generation continues from the right end
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device).eval()
        self.stop_ids = stop_token_ids(self.tokenizer, self.model.generation_config)
        self.max_batch = max_batch
        self.requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._worker, daemon=True).start()

    def submit(self, body: dict) -> dict:
        done = threading.Event()
        job = {"body": body, "done": done}
        self.requests.put(job)
        done.wait()
        if "error" in job:
            raise job["error"]
        return job["result"]

    def _worker(self) -> None:
        while True:
            jobs = [self.requests.get()]
            time.sleep(0.05)  # let requests sent together arrive together
            key = _sampling_key(jobs[0]["body"])
            waiting = []
            while True:
                try:
                    job = self.requests.get_nowait()
                except queue.Empty:
                    break
                (jobs if len(jobs) < self.max_batch and _sampling_key(job["body"]) == key else waiting).append(job)
            for job in waiting:
                self.requests.put(job)
            try:
                for job, result in zip(jobs, self._generate([j["body"] for j in jobs], key)):
                    job["result"] = result
            except Exception as e:  # noqa: BLE001 - answer every caller, then keep serving
                for job in jobs:
                    job["error"] = e
            for job in jobs:
                job["done"].set()

    def _generate(self, bodies: list[dict], key: tuple) -> list[dict]:
        torch = self.torch
        max_tokens, temperature, top_p, n, seed = key
        prompts = [self.tokenizer.apply_chat_template(b["messages"], tokenize=False, add_generation_prompt=True)
                   for b in bodies for _ in range(n)]
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        if seed is not None:
            torch.manual_seed(seed)
        sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p} if temperature > 0 else {
            "do_sample": False}
        with torch.no_grad():
            out = self.model.generate(**enc, max_new_tokens=max_tokens, pad_token_id=self.tokenizer.pad_token_id,
                                      eos_token_id=self.stop_ids, **sampling)
        new = out[:, enc["input_ids"].shape[1]:]
        results = []
        for b_index, body in enumerate(bodies):
            choices, completion_tokens = [], 0
            for c_index in range(n):
                row = new[b_index * n + c_index].tolist()
                end = next((i for i, token in enumerate(row) if token in self.stop_ids), None)
                ended = end is not None
                row = row[:end] if ended else row
                completion_tokens += len(row)
                choices.append({"index": c_index, "finish_reason": "stop" if ended else "length",
                                "message": {"role": "assistant",
                                            "content": self.tokenizer.decode(row, skip_special_tokens=True)},
                                "logprobs": None})
            prompt_tokens = int(enc["attention_mask"][b_index * n].sum())
            results.append({"choices": choices, "usage": {
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}})
        return results


def _sampling_key(body: dict) -> tuple:
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 256
    temperature = body.get("temperature")
    return (int(max_tokens), 1.0 if temperature is None else float(temperature),
            float(body.get("top_p") or 1.0), int(body.get("n") or 1), body.get("seed"))


def _handler(generator: _Generator, model_name: str, api_key: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):  # one line per request in the log file
            sys.stdout.write(f"{self.address_string()} {fmt % args}\n")
            sys.stdout.flush()

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def _refused(self) -> bool:
            """403 for a request from a web page, 401 without this start's key; False when allowed."""
            if self.headers.get("Origin") is not None:
                self._error(403, "requests from web pages (an Origin header) are not allowed")
                return True
            if self.path.rstrip("/") == "/health":
                return False
            sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(sent.encode(), api_key.encode()):
                self._error(401, "missing or wrong API key")
                return True
            return False

        def do_OPTIONS(self):  # a browser's CORS preflight: no web page may use this server
            self._error(403, "requests from web pages are not allowed")

        def do_GET(self):
            if self._refused():
                return
            if self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            elif self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": model_name, "object": "model", "created": 0, "owned_by": "local"}]})
            else:
                self._error(404, f"unknown path {self.path}")

        def do_POST(self):
            if self._refused():
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._error(404, f"unknown path {self.path}; this server only does chat completions")
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            except json.JSONDecodeError as e:
                return self._error(400, f"body is not JSON: {e}")
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                return self._error(400, "'messages' must be a non-empty list")
            if body.get("stream"):
                return self._error(400, "streaming is not supported by this server")
            try:
                result = generator.submit(body)
            except Exception as e:  # noqa: BLE001 - the client gets the error as JSON
                return self._error(500, f"generation failed: {type(e).__name__}: {e}")
            self._send(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                             "created": int(time.time()), "model": model_name, **result})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    sys.path.append(str(Path(__file__).resolve().parent))  # for child_guard (stdlib only)
    from child_guard import exit_with_parent, server_key

    exit_with_parent(args.parent_pid)  # before the model loads: a killed kernel leaves nothing behind
    api_key = server_key()

    import torch

    torch.set_num_threads(args.threads)
    generator = _Generator(args.model, args.max_batch, args.device, args.dtype)
    server = ThreadingHTTPServer((HOST, args.port), _handler(generator, args.name, api_key))  # loopback only
    print(f"listening on http://{HOST}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
