"""One model server for a whole workshop room, OpenAI-compatible, behind a key.

    .venv/bin/python scripts/serve_room.py                       # CPU: llama.cpp, 127.0.0.1 (this machine only)
    .venv/bin/python scripts/serve_room.py --host 192.168.1.20   # reachable from the room's network (key + warning)
    .venv/bin/python scripts/serve_room.py --backend vllm --model Qwen/Qwen3-0.6B   # a GPU machine (not run here)
    .venv/bin/python scripts/serve_room.py --model my-model.gguf --model-name my-model  # another GGUF, on the CPU

It prints the three variables every learner sets (a JupyterHub built from workshop/ sets them for
everyone), writes them to runs/room/room.env (mode 0600) and serves until Ctrl-C. The notebooks run
against it unchanged: helpers.get_client() reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.

The key is COURSE_ROOM_KEY when set (at least 16 characters), else a random one printed here once.
It never goes on a command line (`ps` would show it to every user of the machine).

CPU: the course's own llama.cpp server (helpers.serving.llama_server) with ROOM_SLOTS request slots;
how many learners it holds is measured by benchmarks/bench_room.py (benchmarks/results/room-*.json).
GPU: `vllm serve` with the same key and model name; vLLM is not in this course's requirements and
this path was not run here (no GPU on the machine the course is developed on).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arguments import whole_number

from helpers.paths import display_path, runs_dir
from helpers.serving.child_process import HOST, MIN_KEY_CHARS, EndpointError, check_bind_address, how_it_ended
from helpers.serving.llama_server import LOCAL_MODEL_NAME, LocalModelServer, packaged_model_path

ROOM_SLOTS = 16  # requests decoded together; more wait in llama.cpp's queue (bench_room.py: 0 errors at 64 in flight)
ROOM_CTX_PER_SLOT = 2048  # notebook 03's multi-turn rollouts need more than 01's 256-token answers
DEFAULT_PORT = 8080  # JupyterHub takes 8000 (workshop/jupyterhub_config.py)
KEY_ENV = "COURSE_ROOM_KEY"


def room_server(host: str = HOST, port: int | None = None, key: str | None = None,
                parallel: int = ROOM_SLOTS, threads: int | None = None, model: Path | None = None,
                name: str | None = None) -> LocalModelServer:
    """The room's llama.cpp server, not yet started (benchmarks/bench_room.py measures this one): the course's
    SmolLM2-135M-Instruct, or the GGUF file `model`, served as `name` (default: the file's name)."""
    options = {"threads": threads} if threads else {}
    return LocalModelServer(host=host, port=port, key=key, parallel=parallel, ctx_per_slot=ROOM_CTX_PER_SLOT,
                            startup_timeout_s=180, model_path=model or packaged_model_path(),
                            alias=name or (Path(model).stem if model else LOCAL_MODEL_NAME), **options)


def room_key() -> str:
    key = os.environ.get(KEY_ENV) or secrets.token_urlsafe(24)
    if len(key) < MIN_KEY_CHARS:
        raise SystemExit(f"serve_room: {KEY_ENV} is {len(key)} characters long; use at least {MIN_KEY_CHARS} "
                         f"(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`), or unset it "
                         "for a random one.")
    return key


def url_host(host: str) -> str:
    """The address as a URL holds it: an IPv6 one in brackets (http://[::1]:8080/v1)."""
    return f"[{host}]" if ":" in host else host


def learner_variables(base_url: str, key: str, model: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key, "OPENAI_MODEL": model}


def announce(variables: dict[str, str], host: str) -> Path:
    """Print the learners' variables once and write them to runs/room/room.env (owner-only)."""
    env_file = runs_dir("room") / "room.env"
    env_file.touch(mode=0o600, exist_ok=True)
    env_file.chmod(0o600)
    env_file.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
    print("\nLearners set these three variables before starting Jupyter (a hub built from workshop/ sets them):\n")
    for name, value in variables.items():
        print(f"  export {name}={value}")
    if host in ("0.0.0.0", "::"):
        print("\n  (0.0.0.0 listens on every interface: replace the address in OPENAI_BASE_URL with this "
              "machine's address on the room's network)")
    print(f"\nThe same, for the hub or your own shell: {display_path(env_file)} "
          f"(`set -a; . {display_path(env_file)}; set +a`). Stop the server with Ctrl-C.\n", flush=True)
    return env_file


def serve_llama(args: argparse.Namespace, key: str) -> None:
    server = room_server(args.host, args.port, key, args.parallel, args.threads, args.model, args.model_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # main() has printed the address warning already
        server.start()
    print(f"serve_room: {server.alias} on llama.cpp at {args.host}:{server.port}, {server.parallel} request "
          f"slots, {server.threads} threads; started in {server.startup_s:.1f} s; log "
          f"{display_path(server.log_path)}", flush=True)
    base_url = f"http://{url_host(args.host)}:{server.port}/v1"
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the variables are shown: whoever reads them may stop us
        signal.signal(sig, lambda *_: stopped.set())
    announce(learner_variables(base_url, key, server.alias), args.host)
    while not stopped.wait(1.0):
        if not server.is_running():
            server_code = server.process.returncode if server.process else None
            server.stop()
            raise SystemExit(f"serve_room: the llama.cpp server stopped ({how_it_ended(server_code)}); "
                             f"see {display_path(server.log_path)}, then run this command again.")
    server.stop()
    print("serve_room: stopped", flush=True)


def vllm_command(args: argparse.Namespace) -> list[str]:
    """`vllm serve` with the room's address, port and model name; the key goes in VLLM_API_KEY."""
    return ["vllm", "serve", args.model, "--host", args.host, "--port", str(args.port),
            "--served-model-name", args.model_name or args.model]


def serve_vllm(args: argparse.Namespace, key: str) -> None:
    """Not run here (no GPU): vLLM reads the key from VLLM_API_KEY and refuses requests without it."""
    if not args.model:
        raise SystemExit("serve_room: --backend vllm needs --model (a Hugging Face model id, e.g. Qwen/Qwen3-0.6B).")
    if shutil.which("vllm") is None:
        raise SystemExit("serve_room: `vllm` is not installed in this environment. On a GPU machine: "
                         "`pip install vllm` (it brings its own CUDA build of torch), then run this again.")
    announce(learner_variables(f"http://{url_host(args.host)}:{args.port}/v1", key, args.model_name or args.model),
             args.host)
    os.execvpe("vllm", vllm_command(args), {**os.environ, "VLLM_API_KEY": key})


def bind_address(text: str) -> str:
    """--host: an address of this machine, checked by binding it now, before a server starts (llama.cpp given
    an empty one did not exit: the start waited its full 180 s)."""
    every = (f"give {HOST} (this machine only), this machine's address on the room's network, or 0.0.0.0 "
             "(every interface)")
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty address: {every}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(text, 0, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as e:  # socket.gaierror too: a name that does not resolve
        raise argparse.ArgumentTypeError(f"{text!r} is not an address of this machine ({e.strerror or e}): "
                                         f"{every}") from None
    return text


def check_model(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--model means a Hugging Face model id to vLLM and a GGUF file to llama.cpp: refuse one for the other."""
    if args.backend == "llama" and args.model is not None:
        model = Path(args.model)
        if model.suffix.lower() != ".gguf":
            parser.error(f"--model {args.model!r}: the llama backend serves a GGUF file; give the path of one "
                         "(default: the course's SmolLM2-135M-Instruct), or --backend vllm for a Hugging Face model")
        if not model.is_file():
            parser.error(f"--model {args.model!r}: there is no such file")
        args.model = model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("llama", "vllm"), default="llama",
                        help="llama: llama.cpp on the CPU (the course's model); vllm: `vllm serve` on a GPU")
    parser.add_argument("--host", type=bind_address, default=HOST,
                        help=f"address to listen on (default {HOST}: this machine only; any other needs a key "
                             "and prints a warning)")
    parser.add_argument("--port", type=whole_number(1, 65535, "a TCP port, which learners will be told"),
                        default=DEFAULT_PORT)
    parser.add_argument("--parallel", type=whole_number(1, 256, "request slots, about one per learner"),
                        default=ROOM_SLOTS, help="llama: request slots decoded together")
    parser.add_argument("--threads", type=whole_number(1, 1024, "CPU threads"),
                        help="llama: CPU threads (default: every core)")
    parser.add_argument("--model", help="the model to serve: vllm, a Hugging Face model id; llama, a GGUF file "
                                        f"(default: {LOCAL_MODEL_NAME})")
    parser.add_argument("--model-name", help="the name learners use (OPENAI_MODEL); default: vllm, --model; "
                                             f"llama, the GGUF file's name, or {LOCAL_MODEL_NAME}")
    args = parser.parse_args(argv)
    check_model(parser, args)
    key = room_key()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_bind_address(args.host, key)
        for warning in caught:
            print(f"serve_room: WARNING: {warning.message}", file=sys.stderr, flush=True)
        if args.backend == "vllm":
            serve_vllm(args, key)
        else:
            serve_llama(args, key)
    except EndpointError as e:
        raise SystemExit(f"serve_room: {e}") from None


if __name__ == "__main__":
    main()
