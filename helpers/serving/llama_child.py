"""Process entry point that serves a GGUF model with llama.cpp's own HTTP server (PyPI xllamacpp).

Started by helpers.serving.llama_server.LocalModelServer as `python -P helpers/serving/llama_child.py ...`;
it runs in its own process so that the notebook kernel stays responsive, a kernel restart does not
leave a server behind, and stopping it frees the port at once. It binds 127.0.0.1 unless the
parent names another address (a workshop's shared server, which the parent allows only with an
instructor's key), answers only requests that carry the key, and allows no other web origin.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # for child_guard (stdlib only)
from child_guard import exit_with_parent, server_key


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (the parent checks it)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--parallel", type=int, required=True)
    parser.add_argument("--ctx-per-slot", type=int, required=True)
    parser.add_argument("--batch", type=int, help="llama.cpp's n_batch and n_ubatch (default: its own)")
    parser.add_argument("--poll", type=int, help="thread polling level 0-100 (default: llama.cpp's 50)")
    parser.add_argument("--chat-template", help="a Jinja chat template instead of the model's own")
    args = parser.parse_args()
    exit_with_parent(args.parent_pid)  # before the model loads: a killed kernel leaves nothing behind

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}  # a set of names: a plain string would become a set of its letters
    params.hostnames = [args.host]  # 127.0.0.1 unless an instructor named an address (with a key)
    params.port = args.port
    params.api_keys = [server_key()]  # requests without it get 401 (only /health is open)
    # Browsers may only read answers for the server's own origin, and it serves no pages (ui off):
    # a web page open in the learner's browser cannot use this server.
    params.cors_origins = f"http://{args.host}:{args.port}"
    params.cors_origins_explicit = True
    params.ui = False
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel
    # No prompt cache: with it a repeated request can decode differently from a fresh one, and
    # the course compares runs (before/after training, vf-eval vs evaluate) at temperature 0.
    params.cache_prompt = False
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    if args.batch:
        params.n_batch = params.n_ubatch = args.batch
    if args.poll is not None:
        params.cpuparams.poll = params.cpuparams_batch.poll = args.poll
    if args.chat_template:
        params.chat_template = args.chat_template
    server = xlc.Server(params)  # starts listening; lives as long as this object
    print(f"listening on {server.listening_address}", flush=True)
    # SIGTERM keeps its default action, ending the process at once: exiting through Python instead ran the
    # server's destructor, which first finished every request in flight (a minute of silence mid-batch)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:  # exit_with_parent's watcher (or SIGTERM) ends the process
        time.sleep(3600)


if __name__ == "__main__":
    main()
