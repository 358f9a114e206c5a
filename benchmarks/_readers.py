"""The lab's scripted readers (moved out of the package's ``readers/simulated.py`` in 0.6):
:class:`TokenCountingReader` (``efficiency``), :class:`CachedReader` (``real``,
``real-efficiency``, the calibration study) and :class:`FirstCitingReader` (``engine``,
``latency``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gold_panning_integrations.engine.records import Reading
from gold_panning_integrations.engine.simulator import SimulatedReader
from gold_panning_integrations.readers._adapted import adapt_reader

__all__ = ["PROMPT_OVERHEAD", "TOKENS_PER_DOC", "CachedReader", "FirstCitingReader", "TokenCountingReader"]

TOKENS_PER_DOC = 120
"""Simulated prompt tokens per shown document (a ~90-word passage)."""
PROMPT_OVERHEAD = 60
"""Simulated prompt tokens per prompt besides the documents (question, instructions)."""


class TokenCountingReader(SimulatedReader):
    """A profile-following reader that reports simulated prompt tokens:
    :data:`PROMPT_OVERHEAD` plus :data:`TOKENS_PER_DOC` per shown document."""

    def read(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        r = super().read(question, documents, labels=labels)
        return Reading(
            cited=r.cited,
            prompt_tokens=PROMPT_OVERHEAD + TOKENS_PER_DOC * len(documents),
            completion_tokens=8,
        )


class CachedReader:
    """Memoises ``read`` by (question, documents, labels) for a deterministic reader
    (``enabled=False`` passes every call through, still counting calls).

    ``labels`` (the label each document is shown under) is part of the key, since it
    changes the prompt. The wrapped reader is adapted to the reader protocol once, here
    (:func:`~gold_panning_integrations.readers._adapted.adapt_reader`: a reader whose ``read`` takes no labels is called
    without them).
    """

    def __init__(self, reader: Any) -> None:
        self.reader = adapt_reader(reader)
        self.cache: dict[tuple[str, tuple[str, ...], tuple[int, ...] | None], Reading] = {}
        self.hits = 0
        self.misses = 0
        self.enabled = True

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        key = (question, tuple(documents), None if labels is None else tuple(int(x) for x in labels))
        if self.enabled and key in self.cache:
            self.hits += 1
            return self.cache[key]
        self.misses += 1
        if labels is None:
            labels = list(range(1, len(documents) + 1))
        r: Reading = self.reader.read(question, documents, labels=labels)
        if not r.failed:
            self.cache[key] = r
        return r


class FirstCitingReader:
    """Trivial in-memory reader: cites the first shown document every round."""

    model_name = "first-citing"
    recommended_profile = None
    max_concurrency = 1

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=(0,) if documents else ())
