"""Fake GGUF files: a header (no tensors) with the metadata a real model carries, for the
tests of model names and bundled-profile lookup (readers, evaluate)."""

from __future__ import annotations

import struct
from pathlib import Path

QWEN_META = {
    "general.architecture": "qwen2",
    "general.name": "Qwen2.5 Coder 0.5B Instruct AWQ",
    "general.basename": "Qwen2.5-Coder",
    "general.size_label": "0.5B",
    "general.finetune": "Instruct-AWQ",
    "qwen2.context_length": 32768,
}
SMOL_META = {"general.architecture": "llama", "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2"}


def gguf_string(text: str) -> bytes:
    b = text.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path: Path, meta: dict[str, object], *, tokens: int = 3) -> Path:
    """A GGUF v3 header (no tensors) holding ``meta`` (str -> string, int -> uint32,
    float -> float32, bool -> bool) and, first, a string array of ``tokens`` entries, as
    real files keep their vocabulary."""
    kv = [
        gguf_string("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, tokens)
        + b"".join(gguf_string(f"t{i}") for i in range(tokens))
    ]
    for key, value in meta.items():
        if isinstance(value, bool):
            kv.append(gguf_string(key) + struct.pack("<I?", 7, value))
        elif isinstance(value, int):
            kv.append(gguf_string(key) + struct.pack("<II", 4, value))
        elif isinstance(value, float):
            kv.append(gguf_string(key) + struct.pack("<If", 6, value))
        else:
            kv.append(gguf_string(key) + struct.pack("<I", 8) + gguf_string(str(value)))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
    return path
