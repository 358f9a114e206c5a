"""``--reader simulated``: :class:`LexicalSimulatedReader`, no model behind it. The lab's
scripted readers are in the repository's ``benchmarks/_readers.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.records import Reading
from ..engine.simulator import SimulatedReader

__all__ = ["LexicalSimulatedReader"]


class LexicalSimulatedReader(SimulatedReader):
    """The engine's ``SimulatedReader`` taking, each round, the documents sharing most
    words with the question as the relevant ones. Its ``recommended_profile`` is the
    profile it follows (or the name given for it, e.g. ``--sim-profile``'s).
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
