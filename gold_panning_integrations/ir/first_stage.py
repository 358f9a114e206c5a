"""The first stage of a reranking evaluation: the candidates each query starts from."""

from __future__ import annotations

from collections.abc import Sequence

from .bm25 import BM25
from .collection import Collection

__all__ = ["first_stage"]

_NO_MATCH = "BM25 matched no document (every query term is a stop word or absent from the corpus)"


def first_stage(
    collection: Collection, qids: Sequence[str], *, depth: int, stemmer: str | None = None
) -> tuple[dict[str, tuple[str, ...]], dict[str, str], dict[str, tuple[float, ...]]]:
    """Candidates of ``qids`` (evaluated queries of ``collection``) in first-stage order, at
    most ``depth`` (``>= 1``) each: the collection's own (a run file, a RAG line's passages),
    else the ``depth`` best documents BM25 scores above 0 (ties by corpus order; ``stemmer``
    a PyStemmer algorithm).

    Returns:
        ``(candidates, without, scores)``: query id -> document ids best first; query id ->
        why it has none (BM25 matched no document: the query is reported, not evaluated);
        query id -> the first stage's score of each candidate, in candidate order (BM25's,
        or the run file's; a query whose first stage gave no scores, a RAG line's, is absent).
    """
    if depth < 1:
        raise ValueError(f"--depth must be >= 1, got {depth!r}")
    if collection.candidates is not None:
        if stemmer is not None:
            raise ValueError(
                f"--bm25-stemmer applies to the BM25 first stage; this one is {collection.first_stage}"
            )
        known = collection.candidate_scores or {}
        return (
            {q: tuple(collection.candidates[q][:depth]) for q in qids},
            {},
            {q: tuple(known[q][:depth]) for q in qids if q in known},
        )
    ids = list(collection.documents)
    bm25 = BM25([collection.documents[d] for d in ids], stemmer=stemmer)
    out: dict[str, tuple[str, ...]] = {}
    without: dict[str, str] = {}
    scores: dict[str, tuple[float, ...]] = {}
    for q in qids:
        hits = [(ids[i], float(s)) for i, s in bm25.top_k(collection.queries[q], depth) if s > 0.0]
        if hits:
            out[q] = tuple(d for d, _ in hits)
            scores[q] = tuple(s for _, s in hits)
        else:
            without[q] = _NO_MATCH
    return out, without, scores
