"""The model endpoint: a local llama.cpp server by default, OpenAI or any compatible URL on request.

`get_client()` is the one place that decides which endpoint a notebook talks to:

- `OPENAI_BASE_URL` set            -> that endpoint (vLLM, Ollama, ...); model from `OPENAI_MODEL`
                                      or the first model the endpoint lists
- `OPENAI_API_KEY` set (no URL)    -> OpenAI, model `gpt-4.1-mini` unless `OPENAI_MODEL` says otherwise
- neither                          -> SmolLM2-135M-Instruct on a llama.cpp server on 127.0.0.1
"""

from __future__ import annotations

import os
from pathlib import Path

import openai

from helpers.serving.child_process import Endpoint, EndpointError
from helpers.serving.llama_server import start_local_server

OPENAI_DEFAULT_MODEL = "gpt-4.1-mini"


def get_client(model: str | None = None, base_url: str | None = None, *,
               check: bool = True, quiet: bool = False) -> Endpoint:
    """Resolve the endpoint a notebook talks to (see the module docstring) and say which, in plain words.

    `model`/`base_url` override the environment (empty strings count as unset, as in papermill
    parameters). With `check`, the endpoint is asked for its models first, so that a wrong key or a
    server that is down fails here with a clear message rather than in the middle of an evaluation.
    """
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    model = model or os.environ.get("OPENAI_MODEL") or None
    api_key = os.environ.get("OPENAI_API_KEY") or None
    if base_url:
        kind = "custom"
        client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=600, max_retries=2)
    elif api_key:
        kind, model = "openai", model or OPENAI_DEFAULT_MODEL
        client = openai.OpenAI(api_key=api_key, timeout=600, max_retries=2)
        base_url = str(client.base_url)
    else:
        local = start_local_server().endpoint()
        kind, model, base_url, client = local.kind, local.model, local.base_url, local.client
    if check or (kind == "custom" and not model):
        listed = _list_models(client, base_url)
        model = model or _served_model_name(listed[0], base_url)
    endpoint = Endpoint(client=client, model=model, kind=kind, base_url=base_url)
    if not quiet:
        print(endpoint.describe())
    return endpoint


def _served_model_name(listed, base_url: str) -> str:
    """A name worth recording for the first listed model: its id, else an alias (llama.cpp lists
    aliases), a GGUF path shortened to its file name; never '-' (some servers list that)."""
    for name in [listed.id, *((listed.model_extra or {}).get("aliases") or [])]:
        name = (name or "").strip()
        if name and name != "-":
            return Path(name).stem if name.endswith(".gguf") else name
    raise EndpointError(
        f"The endpoint at {base_url} does not name its model (its /v1/models lists {listed.id!r}). "
        "Set OPENAI_MODEL to the model's name, so that saved runs and vf-eval commands name a real model."
    )


def _list_models(client: openai.OpenAI, base_url: str) -> list:
    try:
        models = list(client.with_options(timeout=10, max_retries=0).models.list())
    except openai.AuthenticationError as e:
        raise EndpointError(
            f"The endpoint at {base_url} refused the API key (HTTP 401). Check OPENAI_API_KEY."
        ) from e
    except openai.APIConnectionError as e:
        raise EndpointError(
            f"Cannot reach the model endpoint at {base_url}. Is the server running and the URL "
            "right? Unset OPENAI_BASE_URL and OPENAI_API_KEY to use the local model instead."
        ) from e
    if not models:
        raise EndpointError(f"The endpoint at {base_url} lists no models; set OPENAI_MODEL.")
    return models


def connection_lost(error: openai.APIConnectionError) -> EndpointError:
    """What a lost connection means, in plain words: the course's own server stopped, or another endpoint."""
    from helpers.paths import display_path
    from helpers.serving import llama_server
    from helpers.serving.child_process import how_it_ended

    server = llama_server._shared_server
    if server is not None and server.process is not None and server.process.poll() is not None:
        return EndpointError(
            f"The local model server stopped during the call ({how_it_ended(server.process.returncode)}); its log "
            f"is {display_path(server.log_path)}. Run the cell with helpers.get_client() again (it starts a "
            "new server), then this one.")
    url = getattr(getattr(error, "request", None), "url", "the model endpoint")
    return EndpointError(f"Lost the connection to {url} during the call ({error}). Is the server still running?")
