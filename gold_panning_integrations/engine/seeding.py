"""Same input, same output: a random stream derived from the question and the documents.

With no seed given, the panner draws its placements, labels and tie-breaks from a
generator seeded by a SHA-256 digest of the question and the documents' text, so a
repeated query repeats its prompts, its readings (for a deterministic model) and its
ranking, and a reply cache can serve the repeat. A fresh draw is one option away:
``rng="fresh"`` on the panner, ``seed="fresh"`` on the adapters.
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
    """UTF-8 of ``value``'s text (``str(value)`` for a non-string), lone surrogates
    replaced so that any Python string hashes."""
    s = value if isinstance(value, str) else str(value)
    return s.encode("utf-8", errors="surrogatepass")


def input_digest(question: Any, documents: Sequence[Any]) -> bytes:
    """SHA-256 over a canonical encoding of ``question`` and ``documents`` (32 bytes).

    Each part is length-prefixed (8 bytes, big-endian) after a version tag, so no two
    different inputs share an encoding: ``("ab", ["c"])`` and ``("a", ["bc"])`` differ,
    as do documents in another order. A document that is not a string is hashed by its
    ``str()``; give such documents a stable ``__str__`` (or pass a seed).
    """
    h = hashlib.sha256(_DOMAIN)
    h.update(len(documents).to_bytes(8, "big"))
    for part in (question, *documents):
        data = _text(part)
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.digest()


def derived_rng(question: Any, documents: Sequence[Any]) -> np.random.Generator:
    """A generator seeded by :func:`input_digest` of the question and the documents: the
    same input gives the same stream in every process and on every platform (numpy's
    ``default_rng`` is PCG64 seeded through ``SeedSequence``)."""
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
