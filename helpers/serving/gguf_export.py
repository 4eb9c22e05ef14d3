"""Write a transformers SmolLM2 (Llama) model as a GGUF that llama.cpp serves: the weight sync of
CPU GRPO, done after every optimizer step, so it must take about a second.

The metadata (tokenizer, chat template, architecture numbers) comes from the packaged GGUF the
model was converted from; only the tensors change. The header is built once; each export writes
it and then the tensors, in llama.cpp's layout:

- names as llama.cpp's converter gives them (`blk.N.attn_q.weight`, ...; gguf's own name map);
- q and k projections permuted back to llama.cpp's rotary layout (transformers' GGUF loader
  undoes this permutation when it reads a GGUF, see helpers.serving.gguf_convert);
- 2-D weights in float16 ("F16", the default: half the bytes, generation ~45% faster than float32
  here) or float32 ("F32"), 1-D norms always float32; the embedding doubles as the output layer.

The file is written under a temporary name and moved into place, so a server that still has the
previous file mapped keeps reading it until it is restarted.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

PRECISIONS = ("F16", "F32")
_SKIPPED_METADATA = ("GGUF.", "general.architecture", "general.file_type", "general.quantization_version")


class GGUFExporter:
    """`export(model, path)` writes `model`'s current weights as a GGUF; the header is made once."""

    def __init__(self, model, template_gguf: str | Path, precision: str = "F16"):
        import gguf

        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        config = model.config
        if config.model_type != "llama":
            raise ValueError(f"only Llama-architecture models (SmolLM2) can be exported, not {config.model_type!r}")
        self.precision = precision
        names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
        self.plan: list[tuple[str, int | None, str]] = []  # (HF name, heads to permute by, torch dtype name)
        writer = gguf.GGUFWriter(path=None, arch="llama")
        for key, field in gguf.GGUFReader(str(template_gguf)).fields.items():
            if not key.startswith(_SKIPPED_METADATA):
                sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
                writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if precision == "F16" else gguf.LlamaFileType.ALL_F32)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for hf_name, param in model.state_dict().items():
            if hf_name == "lm_head.weight" and config.tie_word_embeddings:
                continue  # llama.cpp uses token_embd as the output layer
            dtype = np.float16 if precision == "F16" and param.dim() > 1 else np.float32
            heads = (config.num_attention_heads if hf_name.endswith("q_proj.weight") else
                     config.num_key_value_heads if hf_name.endswith("k_proj.weight") else None)
            gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise ValueError(f"no GGUF name for the tensor {hf_name!r}")
            writer.add_tensor_info(gguf_name, tuple(param.shape), np.dtype(dtype),
                                   param.numel() * np.dtype(dtype).itemsize)
            self.plan.append((hf_name, heads, np.dtype(dtype).name))
        self.alignment = writer.data_alignment
        with tempfile.TemporaryDirectory() as tmp:  # the writer only writes headers to a file
            header = Path(tmp) / "header.gguf"
            writer.write_header_to_file(header)
            writer.write_kv_data_to_file()
            writer.write_ti_data_to_file()
            writer.close()
            self.header = header.read_bytes()
        self.header += bytes(-len(self.header) % self.alignment)  # tensor data starts aligned
        self._staging = None  # one byte buffer, as large as the largest tensor

    def export(self, model, path: str | Path) -> Path:
        """Write `model`'s weights (the same architecture as at construction) to `path`."""
        import torch

        path = Path(path)
        state = model.state_dict()
        if self._staging is None:  # kept between exports (no fresh pages to fault in), but one tensor's size, not
            # a second copy of the model: training's memory peak is what decides whether an 8 GB laptop fits
            largest = max(state[name].numel() * getattr(torch, dtype).itemsize for name, _, dtype in self.plan)
            self._staging = torch.empty(largest, dtype=torch.uint8)
        partial = path.with_name(path.name + ".partial")
        with torch.no_grad(), open(partial, "wb") as f:
            f.write(self.header)
            for hf_name, heads, dtype in self.plan:
                source = state[hf_name].detach()
                size = source.numel() * getattr(torch, dtype).itemsize
                buffer = self._staging[:size].view(getattr(torch, dtype)).view(source.shape)
                if heads is None:
                    buffer.copy_(source)
                else:  # HF -> llama.cpp rotary layout, as llama.cpp's own converter permutes q and k
                    rows, cols = source.shape
                    half = rows // heads // 2
                    buffer.view(heads, half, 2, cols).copy_(source.view(heads, 2, half, cols).transpose(1, 2))
                f.write(memoryview(buffer.numpy()).cast("B"))
                f.write(bytes(-size % self.alignment))
        os.replace(partial, path)
        return path
