"""The key-value metadata in a GGUF file's header, read with the standard library (no
llama.cpp, no weights, nothing printed).

GGUF (spec: ggml-org/ggml ``docs/gguf.md``) starts with ``b"GGUF"``, a uint32 version,
a uint64 tensor count, a uint64 key-value count, then the pairs: a string key, a uint32
value type and the value, little-endian; a string is a uint64 length and UTF-8 bytes.
Scalars come back as strings, as ``llama_cpp.Llama.metadata`` gives them; arrays are
skipped. Every length is checked against the bytes left, so a corrupt or hostile file
fails with :class:`GGUFError` instead of allocating without bound.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection
from typing import BinaryIO

__all__ = ["GGUFError", "read_gguf_metadata"]

# scalar value types as struct formats: 0-7 uint8, int8, uint16, int16, uint32, int32,
# float32, bool; 10-12 uint64, int64, float64
_SCALARS: dict[int, str] = {**dict(enumerate("BbHhIif?")), 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 20  # a key or a scalar string longer than 1 MiB is not metadata we read


class GGUFError(ValueError):
    """The file is not a GGUF model file, or its header is corrupt."""


class _Header:
    def __init__(self, fh: BinaryIO, size: int, where: str) -> None:
        self.fh, self.size, self.where = fh, size, where

    def take(self, n: int) -> bytes:
        b = self.fh.read(n)
        if len(b) != n:
            raise GGUFError(f"{self.where}: the GGUF header ends early (truncated file)")
        return b

    def num(self, fmt: str) -> int | float | bool:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]  # type: ignore[no-any-return]

    def length(self, limit: int) -> int:
        n = int(self.num("Q"))
        if n > min(limit, self.size - self.fh.tell()):
            raise GGUFError(f"{self.where}: a length of {n} in the GGUF header exceeds the file")
        return n

    def string(self) -> str:
        return self.take(self.length(_MAX_STRING)).decode("utf-8", errors="replace")

    def skip(self, kind: int) -> None:
        if kind == _STRING:
            self.fh.seek(self.length(self.size), os.SEEK_CUR)
        elif kind == _ARRAY:
            inner, count = int(self.num("I")), self.length(self.size)
            if inner in _SCALARS:
                self.fh.seek(count * struct.calcsize(_SCALARS[inner]), os.SEEK_CUR)
            else:
                for _ in range(count):
                    self.skip(inner)
        elif kind in _SCALARS:
            self.fh.seek(struct.calcsize(_SCALARS[kind]), os.SEEK_CUR)
        else:
            raise GGUFError(f"{self.where}: unknown GGUF value type {kind}")


def read_gguf_metadata(
    path: str | os.PathLike[str], *, keys: Collection[str] | None = None
) -> dict[str, str]:
    """The scalar key-value metadata of the GGUF file ``path``, values as strings; reading
    stops once every key in ``keys`` is found (None: every pair).

    Raises:
        GGUFError: Not a GGUF file (wrong magic or version), or a corrupt header.
        OSError: The file cannot be opened.
    """
    where = repr(str(path))
    out: dict[str, str] = {}
    with open(path, "rb") as fh:
        h = _Header(fh, os.fstat(fh.fileno()).st_size, where)
        if fh.read(4) != b"GGUF":
            raise GGUFError(f"{where} is not a GGUF model file (it does not start with 'GGUF')")
        version = h.num("I")
        if version not in (2, 3):
            raise GGUFError(f"{where}: GGUF version {version} is not read here (2 and 3 are)")
        h.num("Q")  # tensor count
        for _ in range(int(h.num("Q"))):
            key, kind = h.string(), int(h.num("I"))
            if kind == _STRING:
                out[key] = h.string()
            elif kind in _SCALARS:
                v = h.num(_SCALARS[kind])
                out[key] = (
                    str(v).lower() if isinstance(v, bool) else f"{v:f}" if isinstance(v, float) else str(v)
                )
            else:
                h.skip(kind)
            if keys is not None and all(k in out for k in keys):
                break
    return out
