"""Okapi BM25 through ``bm25s``: the one BM25 of the package (``evaluate``'s first stage
and the shipped NQ sample's retriever).

Scoring is bm25s's Lucene variant (``k1 = 1.5``, ``b = 0.75``) in float64, on tokens made by
``bm25s.tokenize`` from accent-free lower-cased ``\\w+`` words without :data:`STOP_WORDS`,
optionally stemmed by PyStemmer. Query terms count once each and are summed in sorted
order; ranks break score ties by document id, so a ranking is a pure function of the texts.
Scores are ``1 / (k1 + 1)`` of the textbook formula's, rankings equal
(docs/bench-compare-collections.md).
"""

from __future__ import annotations

import importlib.util
import logging
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import MissingExtraError

__all__ = ["BM25", "STOP_WORDS", "stemmers", "strip_accents", "tokenize"]

_STOP_WORD_TEXT = """
a an and are as at be but by did do does for from had has have how i in is it its of on or that
the their there these this to was were what when where which who whom whose why will with
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())
"""English stop words dropped from queries and documents (the list that built the NQ sample)."""

_TOKEN_PATTERN = r"(?u)\w+"


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as err:
        raise MissingExtraError(
            "bm25s", "compare", "BM25 (evaluate's first stage, the NQ sample build)"
        ) from err
    quiet = logging.getLogger("bm25s")
    if quiet.level < logging.INFO:  # bm25s sets DEBUG on import: its per-index notes would reach our logs
        quiet.setLevel(logging.WARNING)
    return bm25s


def stemmers() -> tuple[str, ...]:
    """Names of the PyStemmer algorithms ``BM25(stemmer=...)`` accepts (empty without PyStemmer)."""
    if importlib.util.find_spec("Stemmer") is None:
        return ()
    import Stemmer

    return tuple(sorted(Stemmer.algorithms()))


def _stemmer(name: str | None) -> Any:
    if name is None:
        return None
    try:
        import Stemmer
    except ImportError as err:
        raise MissingExtraError("PyStemmer", "compare", f"The BM25 stemmer {name!r}") from err
    if name not in Stemmer.algorithms():
        raise ValueError(f"unknown stemmer {name!r}; choose one of {', '.join(sorted(Stemmer.algorithms()))}")
    return Stemmer.Stemmer(name)


def strip_accents(text: str) -> str:
    """``text`` with combining accents removed (NFKD)."""
    s = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in s if not unicodedata.combining(ch))


def tokenize(texts: Sequence[str], *, stemmer: Any = None) -> list[list[str]]:
    """BM25 tokens of each text (``len(texts)`` lists; see the module docstring), stemmed
    when ``stemmer`` (a PyStemmer object) is given."""
    if not texts:
        return []
    out = _bm25s().tokenize(
        [strip_accents(t) for t in texts],
        lower=True,
        token_pattern=_TOKEN_PATTERN,
        stopwords=sorted(STOP_WORDS),
        stemmer=stemmer,
        return_ids=False,
        show_progress=False,
    )
    return [list(t) for t in out]


class BM25:
    """Okapi BM25 over a fixed list of documents, through ``bm25s`` (see the module docstring).

    Args:
        documents: Document texts, shape ``(N,)``, ``N >= 1``.
        k1: Term-frequency saturation, ``> 0``.
        b: Length normalisation, in ``[0, 1]``.
        stemmer: A PyStemmer algorithm (e.g. ``"english"``; :func:`stemmers` lists them)
            applied to documents and queries, or ``None`` (the default) for none.
    """

    def __init__(
        self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75, stemmer: str | None = None
    ) -> None:
        if not documents:
            raise ValueError("BM25 needs at least one document")
        if not k1 > 0:
            raise ValueError(f"k1 must be > 0, got {k1!r}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b!r}")
        bm25s = _bm25s()
        self.k1 = k1
        self.b = b
        self.n = len(documents)
        self._stemmer = _stemmer(stemmer)
        toks = tokenize(documents, stemmer=self._stemmer)
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in toks]
        self._index: Any = None
        if vocab:  # a corpus of stop words only has no index: every score is 0
            self._index = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
            self._index.index(
                bm25s.tokenization.Tokenized(ids=ids, vocab=vocab),
                create_empty_token=False,
                show_progress=False,
            )

    def scores(self, query: str) -> NDArray[np.float64]:
        """BM25 score of every document for ``query``, shape ``(N,)`` (0 where no term matches)."""
        terms = sorted(set(tokenize([query], stemmer=self._stemmer)[0]))
        known = [t for t in terms if self._index is not None and t in self._index.vocab_dict]
        if not known:
            return np.zeros(self.n, dtype=np.float64)
        return np.asarray(self._index.get_scores(known), dtype=np.float64)

    def rank(self, query: str) -> list[int]:
        """Document ids by decreasing score, ties broken by id (all ``N`` of them)."""
        return [i for i, _ in self.top_k(query, self.n)]

    def top_k(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best ``(document id, score)`` pairs, best first (ties by id)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        s = self.scores(query)
        return [(int(i), float(s[i])) for i in np.lexsort((np.arange(self.n), -s))[:k]]
