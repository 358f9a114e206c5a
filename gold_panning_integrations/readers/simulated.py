"""The package's simulated and scripted readers, in one place (no model behind them).

* :class:`LexicalSimulatedReader`: what ``--reader simulated`` builds for the CLI: the
  engine's :class:`~gold_panning_integrations.engine.simulate.SimulatedReader` taking the
  documents that share most words with the question as the relevant ones.
* :class:`TokenCountingReader`: a profile-following reader that reports simulated
  prompt tokens (``gold-panning bench efficiency``).
* :class:`CachedReader`: memoises a deterministic reader's readings (``bench real``,
  ``bench real-efficiency``, the calibration study).
* :class:`FirstCitingReader`: cites the first shown document, at once (the engine's own
  time in ``bench engine``).

The engine's :class:`~gold_panning_integrations.engine.simulate.SimulatedReader` stays in
the engine: the batch simulator draws exactly what it draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.reading import Reading
from ..engine.simulate import SimulatedReader
from ._adapt import adapt_reader

__all__ = [
    "PROMPT_OVERHEAD",
    "TOKENS_PER_DOC",
    "CachedReader",
    "FirstCitingReader",
    "LexicalSimulatedReader",
    "TokenCountingReader",
]

TOKENS_PER_DOC = 120
"""Simulated prompt tokens per shown document (a ~90-word passage)."""
PROMPT_OVERHEAD = 60
"""Simulated prompt tokens per prompt besides the documents (question, instructions)."""


class LexicalSimulatedReader(SimulatedReader):
    """The engine's :class:`~gold_panning_integrations.engine.simulate.SimulatedReader`
    (citations at a profile's TPR/FPR by position) for prompts whose relevant document
    is unknown: each round, the documents sharing most words with the question are
    taken as the relevant ones. What ``--reader simulated`` builds (no model).

    Its ``recommended_profile`` is the profile it follows (``recommended_profile`` when
    given: the name to report, e.g. ``--sim-profile``'s), measured for it exactly.
    """

    model_name = "simulated"
    mode = "answer"
    max_concurrency = 1

    def __init__(self, profile: Any, *, rng: np.random.Generator, recommended_profile: Any = None) -> None:
        super().__init__(profile, self._is_best, rng=rng)
        self.profile = profile
        self.recommended_profile = profile if recommended_profile is None else recommended_profile
        self._best: set[str] = set()

    def _is_best(self, document: Any) -> bool:
        return str(document) in self._best

    def read(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Cite by position at the profile's rates; ``labels`` change nothing here
        (a simulated model reads positions, and cited positions are returned)."""
        from .answer import normalize_tokens

        q = set(normalize_tokens(question))
        overlap = [len(q & set(normalize_tokens(d))) for d in documents]
        top = max(overlap, default=0)
        self._best = {str(d) for d, o in zip(documents, overlap) if o == top}
        return super().read(question, documents)

    async def aread(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return self.read(question, documents, labels=labels)

    def answer(self, question: str, documents: Sequence[str]) -> str | None:
        return None


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
    (:func:`~._adapt.adapt_reader`: a reader whose ``read`` takes no labels is called
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
