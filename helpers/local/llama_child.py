"""Process entry point that serves a GGUF model with llama.cpp's own HTTP server.

Started by helpers.local.llama_server.LocalModelServer as `python -P helpers/local/llama_child.py ...`;
it runs in its own process so that the notebook kernel stays responsive, a kernel restart
does not leave a server behind, and stopping it frees the port at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--parallel", type=int, required=True)
    parser.add_argument("--ctx-per-slot", type=int, required=True)
    args = parser.parse_args()

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    params.model_alias = args.alias
    params.hostnames = ["127.0.0.1"]  # loopback only, never 0.0.0.0
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel
    # No prompt cache: with it a repeated request can decode differently from a fresh one, and
    # the course compares runs (before/after training, vf-eval vs evaluate) at temperature 0.
    params.cache_prompt = False
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xlc.Server(params)  # starts listening; lives as long as this object
    print(f"listening on {server.listening_address}", flush=True)

    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Exit when the process that started us is gone (a killed kernel must not leave us behind).
    while os.getppid() == parent:
        time.sleep(1)


if __name__ == "__main__":
    main()
