"""The first stage of a reranking evaluation: the candidates each query starts from.

A collection's own candidates (a run file, the passages of a RAG line) are cut to
``depth``; without them, BM25 (:class:`~.bm25.BM25`, bm25s) over the collection's
documents returns its ``depth`` best documents with a score above 0, ties by corpus
order. A query BM25 matches nothing for is reported, not evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence

from .bm25 import BM25
from .collection import Collection

__all__ = ["first_stage"]


def first_stage(
    collection: Collection, qids: Sequence[str], *, depth: int, stemmer: str | None = None
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Candidates of ``qids`` in first-stage order, at most ``depth`` each.

    Args:
        collection: The collection (with or without its own candidates).
        qids: Queries to retrieve for (evaluated queries of ``collection``).
        depth: Candidates per query, ``>= 1``.
        stemmer: PyStemmer algorithm for the BM25 first stage (``None``: no stemming).

    Returns:
        ``(candidates, without)``: query id -> document ids best first, and query id ->
        why it has none (BM25 matched no document).
    """
    if depth < 1:
        raise ValueError(f"--depth must be >= 1, got {depth!r}")
    if collection.candidates is not None:
        if stemmer is not None:
            raise ValueError(
                f"--bm25-stemmer applies to the BM25 first stage; this one is {collection.first_stage}"
            )
        return {q: tuple(collection.candidates[q][:depth]) for q in qids}, {}
    ids = list(collection.documents)
    bm25 = BM25([collection.documents[d] for d in ids], stemmer=stemmer)
    out: dict[str, tuple[str, ...]] = {}
    without: dict[str, str] = {}
    for q in qids:
        hits = tuple(ids[i] for i, s in bm25.top_k(collection.queries[q], depth) if s > 0.0)
        if hits:
            out[q] = hits
        else:
            without[q] = (
                "BM25 matched no document (every query term is a stop word or absent from the corpus)"
            )
    return out, without
