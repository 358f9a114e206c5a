"""Same input, same output: a random stream derived from the question and the documents.

With no seed, the panner's generator is seeded by a SHA-256 digest of the input, so a
repeated query repeats its prompts and ranking (and a reply cache can serve it);
``rng="fresh"`` on the panner, ``seed="fresh"`` on the adapters draw fresh entropy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

__all__ = ["FRESH", "RngOption", "check_rng_option", "derived_rng", "input_digest"]

FRESH: Literal["fresh"] = "fresh"
"""The spelling that asks for fresh entropy on every run instead of a derived stream."""

RngOption = np.random.Generator | int | Literal["fresh"] | None
"""What ``rng=`` / ``seed=`` accept: a Generator or an int (a fixed stream), ``"fresh"``
(fresh entropy) or None (derived from the question and the documents)."""

_DOMAIN = b"gold-panning/rng/v1"


def _text(value: Any) -> bytes:
    """UTF-8 of ``value``'s text (``str(value)`` for a non-string); any string hashes."""
    s = value if isinstance(value, str) else str(value)
    return s.encode("utf-8", errors="surrogatepass")


def input_digest(question: Any, documents: Sequence[Any]) -> bytes:
    """SHA-256 (32 bytes) of ``question`` and ``documents``, each part length-prefixed
    after a version tag so no two inputs share an encoding. A non-string document is
    hashed by its ``str()``: give it a stable ``__str__`` (or pass a seed)."""
    h = hashlib.sha256(_DOMAIN)
    h.update(len(documents).to_bytes(8, "big"))
    for part in (question, *documents):
        data = _text(part)
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.digest()


def derived_rng(question: Any, documents: Sequence[Any]) -> np.random.Generator:
    """A generator seeded by :func:`input_digest`: the same stream for the same input on
    every platform."""
    return np.random.default_rng(int.from_bytes(input_digest(question, documents), "big"))


def check_rng_option(value: Any, *, name: str = "rng") -> RngOption:
    """``value`` if it is a Generator, an int (not a bool), ``"fresh"`` or None; else a
    ``ValueError`` naming ``name`` and the value."""
    if value is None or isinstance(value, np.random.Generator):
        return value
    if isinstance(value, str) and value == FRESH:
        return FRESH
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(
        f"{name} must be a non-negative int (a fixed stream), a numpy Generator, 'fresh' "
        f"(fresh entropy on every run) or None (derived from the question and the documents), "
        f"got {value!r}"
    )
