"""Turn the packaged SmolLM2 GGUF into a transformers folder, once, cached under runs/models/ (or under
$COURSE_MODELS_DIR: the tests share one conversion among all the runs folders they make).

The local endpoint serves a GGUF with llama.cpp; CPU training needs the same weights as a
transformers model. transformers can read a GGUF (`gguf_file=`, needs the `gguf` package) and
de-quantizes it to float32. Three things need fixing before the folder is usable:

- a model loaded from a GGUF refuses `save_pretrained` while it still carries quantization
  state, so that is dropped first;
- the GGUF tokenizer comes back as a Llama tokenizer that adds a second BOS token and names
  `<|im_start|>` as end-of-sequence; SmolLM2 is a GPT-2 style BPE whose turns end with
  `<|im_end|>`, so the tokenizer is rebuilt as such (no BOS added, eos = pad = `<|im_end|>`);
- `rope_theta` must be SmolLM2's 100000, written as a plain config key (a config that only
  carries the newer `rope_parameters` makes transformers 4.57 fall back to 10000 silently,
  and the model then writes garbage); only `input_ids`/`attention_mask` go to the model
  (Llama models do not take `token_type_ids`).

Two processes converting at once (two notebooks, a test run beside a notebook) take turns: a lock file
beside the folder lets one convert while the other waits, says so, and then uses its result.

`check_against_server()` compares the converted model with the llama.cpp server on a fixed
prompt (greedy), so a silent conversion error shows up as different text.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path

from helpers.paths import runs_dir

DEFAULT_NAME = "smollm2-135m-instruct"
SMOLLM2_ROPE_THETA = 100000.0
CHECK_PROMPT = [
    {"role": "system", "content": "Solve the math problem step by step. "
     "On the last line, write the final answer as '#### <number>'."},
    {"role": "user", "content": "Tom has 3 apples and buys 5 more. How many apples does he have?"},
]
# How long a second process waits for another's conversion (a conversion takes seconds to minutes, longer on a
# busy machine) before it gives up with a message.
LOCK_WAIT_S = 600.0


def converted_model_dir(name: str = DEFAULT_NAME) -> Path:
    shared = os.environ.get("COURSE_MODELS_DIR")
    return Path(shared) / name if shared else runs_dir("models") / name


def convert_gguf(gguf_path: str | Path | None = None, name: str = DEFAULT_NAME,
                 force: bool = False, quiet: bool = False) -> Path:
    """The transformers folder for `gguf_path` (default: the packaged SmolLM2), converting it once."""
    from helpers.serving.llama_server import packaged_model_path

    gguf_path = Path(gguf_path or packaged_model_path())
    out = converted_model_dir(name)
    marker = out / "converted_from.json"
    if marker.is_file() and not force:
        if not quiet:
            print(f"model: using the converted copy at {out}")
        return out
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}. Run `bash scripts/setup_env.sh`.")
    with _conversion_lock(out):
        if marker.is_file() and not force:  # another process converted it while this one waited
            if not quiet:
                print(f"model: using the converted copy at {out}")
            return out
        started = time.monotonic()
        if not quiet:
            print(f"model: converting {gguf_path.name} to a transformers folder (once, ~1 minute)...")
        tmp = out.with_name(out.name + ".partial")  # a crash mid-way leaves no half folder behind
        shutil.rmtree(tmp, ignore_errors=True)
        model, tokenizer = _load_from_gguf(gguf_path)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        _fix_config(tmp / "config.json")
        (tmp / "converted_from.json").write_text(json.dumps(
            {"gguf": gguf_path.name, "seconds": round(time.monotonic() - started, 1)}, indent=2))
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    if not quiet:
        print(f"model: saved to {out} in {time.monotonic() - started:.0f} s")
    return out


@contextlib.contextmanager
def _conversion_lock(out: Path, wait_s: float = LOCK_WAIT_S):
    """Hold `<out>.lock` (fcntl.flock, released when this process ends, even killed) while converting into
    `out`; when another process holds it, say so and wait for it, up to `wait_s`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lock_path = out.with_name(out.name + ".lock")
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            print(f"model: {holder} is converting the model into {out}; waiting for it (up to "
                  f"{wait_s / 60:.0f} minutes)...", flush=True)
            deadline = time.monotonic() + wait_s
            while True:
                time.sleep(0.5)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"{holder} has been converting the model into {out} for over {wait_s / 60:.0f} "
                            f"minutes (it holds {lock_path}). Stop it (or restart the notebook kernel that "
                            "runs it), then run this again.") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"process {os.getpid()}")  # named to the next process that waits
        lock.flush()
        yield


def _load_from_gguf(gguf_path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = str(gguf_path.parent), gguf_path.name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    # save_pretrained refuses a model that still looks quantized; the weights are float32 now.
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            setattr(model, attr, None)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.rope_theta = SMOLLM2_ROPE_THETA
    gguf_tok = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    return model, _rebuild_tokenizer(gguf_tok)


def _rebuild_tokenizer(gguf_tok):
    """A GPT-2 style fast tokenizer with SmolLM2's special tokens and chat template, no BOS added."""
    from tokenizers import processors
    from transformers import GPT2TokenizerFast

    backend = gguf_tok.backend_tokenizer
    backend.post_processor = processors.ByteLevel(trim_offsets=False)  # drops the added BOS
    tok = GPT2TokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|im_end|>",
        unk_token="<|endoftext|>", add_bos_token=False,
    )
    tok.chat_template = gguf_tok.chat_template
    tok.model_input_names = ["input_ids", "attention_mask"]  # no token_type_ids for Llama
    return tok


def _fix_config(path: Path) -> None:
    config = json.loads(path.read_text())
    config["rope_theta"] = SMOLLM2_ROPE_THETA
    config.pop("rope_parameters", None)
    config.pop("quantization_config", None)
    config["eos_token_id"] = 2  # <|im_end|>
    config["pad_token_id"] = 2
    config["bos_token_id"] = 1
    path.write_text(json.dumps(config, indent=2))
    gen = path.with_name("generation_config.json")
    if gen.is_file():
        g = json.loads(gen.read_text())
        g.update(eos_token_id=2, pad_token_id=2, bos_token_id=1)
        gen.write_text(json.dumps(g, indent=2))


def load_converted(path: str | Path | None = None):
    """(model, tokenizer) from a converted folder, on CPU, float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path or convert_gguf(quiet=True))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def greedy_continuation(model, tokenizer, messages=CHECK_PROMPT, max_new_tokens: int = 24) -> str:
    import torch

    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def check_against_server(model_dir: str | Path, endpoint, max_new_tokens: int = 24) -> dict:
    """Greedy text from the converted model and from the llama.cpp endpoint for one fixed prompt.

    Returns {"transformers", "llama.cpp", "same", "common_prefix_chars", "note"}. The two may
    drift after many tokens: llama.cpp computes with the 4-bit blocks, transformers with their
    float32 copies, so a near-tie between two tokens can go either way; the first words must match.
    """
    model, tokenizer = load_converted(model_dir)
    ours = greedy_continuation(model, tokenizer, max_new_tokens=max_new_tokens)
    reply = endpoint.client.chat.completions.create(
        model=endpoint.model, messages=CHECK_PROMPT, max_tokens=max_new_tokens, temperature=0.0)
    theirs = reply.choices[0].message.content or ""
    common = 0
    for a, b in zip(ours, theirs):
        if a != b:
            break
        common += 1
    same = ours.strip() == theirs.strip()
    note = ("identical greedy text" if same else
            "texts drift apart after a near-tie (4-bit arithmetic in llama.cpp vs float32 here)"
            if common >= 20 else "texts differ early: the conversion is suspect")
    return {"transformers": ours, "llama.cpp": theirs, "same": same,
            "common_prefix_chars": common, "note": note}
