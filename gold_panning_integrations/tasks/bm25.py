"""Okapi BM25 in pure Python and numpy: the retrieval that built the shipped NQ sample.

Deterministic (ties broken by document id) and dependency-free, so the sample build is
reproducible and a benchmark can rank the shipped passages without an extra package. For
an application, a maintained library such as ``bm25s`` is faster (the examples use it).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

__all__ = ["BM25", "STOP_WORDS", "strip_accents", "tokenize"]

STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the", "their", "there", "these", "this", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with"]
)
"""English stop words dropped from queries and documents."""

_WORD = re.compile(r"\w+", re.UNICODE)


def strip_accents(text: str) -> str:
    """``text`` with combining accents removed (NFKD)."""
    s = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in s if not unicodedata.combining(ch))


def tokenize(text: str) -> list[str]:
    """BM25 tokens: accent-free lower-cased word tokens without :data:`STOP_WORDS`."""
    return [t for t in _WORD.findall(strip_accents(text).lower()) if t not in STOP_WORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents (pure Python, deterministic).

    Args:
        documents: Document texts, shape ``(N,)``.
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        if not documents:
            raise ValueError("BM25 needs at least one document")
        self.k1 = k1
        self.b = b
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths = []
        for i, doc in enumerate(documents):
            toks = tokenize(doc)
            lengths.append(len(toks))
            for term, tf in sorted(Counter(toks).items()):
                self._postings[term].append((i, tf))
        self.n = len(documents)
        self._len = np.asarray(lengths, dtype=np.float64)
        self._avg = float(self._len.mean()) or 1.0

    def idf(self, term: str) -> float:
        """Lucene's non-negative idf, ``log(1 + (N - df + 0.5) / (df + 0.5))``."""
        df = len(self._postings.get(term, ()))
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, float array of shape ``(N,)``."""
        out = np.zeros(self.n, dtype=np.float64)
        norm = self.k1 * (1.0 - self.b + self.b * self._len / self._avg)
        for term in sorted(set(tokenize(query))):
            idf = self.idf(term)
            for i, tf in self._postings.get(term, ()):
                out[i] += idf * tf * (self.k1 + 1.0) / (tf + norm[i])
        return out

    def rank(self, query: str) -> list[int]:
        """Document ids by decreasing score, ties broken by id (all ``N`` of them)."""
        s = self.scores(query)
        return [int(i) for i in np.lexsort((np.arange(self.n), -s))]

    def top_k(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best ``(document id, score)`` pairs, best first (ties by id)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        s = self.scores(query)
        return [(i, float(s[i])) for i in self.rank(query)[:k]]
