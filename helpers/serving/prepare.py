"""`python -m helpers.serving.prepare`: get the local model ready once (binder's postBuild runs it).

Starts and stops the llama.cpp server (the packaged GGUF loads), then converts the GGUF to the
transformers folder that notebook 02 trains, so that no notebook spends its first minute on it.
"""

from __future__ import annotations


def main() -> None:
    from helpers.serving.gguf_convert import convert_gguf
    from helpers.serving.llama_server import LocalModelServer

    with LocalModelServer(parallel=1) as server:
        print(f"prepare: llama.cpp server ready in {server.startup_s:.1f} s")
    print(f"prepare: transformers copy at {convert_gguf(quiet=True)}")


if __name__ == "__main__":
    main()
