"""A panning result in the shape LangChain's ``CohereRerank.rerank`` returns:
``[{"index": i, "relevance_score": p}, ...]``, best first, so code written for Cohere reads
ours unchanged (``hit["index"]``, ``json.dumps(hits)``).

:func:`reranked` is what every ``rerank(documents, query, *, top_n=None)`` returns
(``GoldPanner.rerank``, ``GoldPanningCompressor.rerank``, ``GoldPanningPostprocessor.rerank``);
:func:`check_top_n` reads their ``top_n`` and :func:`document_text` the documents they take
as Cohere takes them (texts, or ``{"text": ...}`` dicts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from ..errors import InvalidInputError
from .records import PanningResult

__all__ = ["ALL", "RerankHit", "check_top_n", "document_text", "reranked"]

ALL = -1
"""``top_n=-1``: every document (Cohere's spelling of "all"; None says the same)."""


class RerankHit(TypedDict):
    """One document of a reranking, a plain dict: its ``index`` in the input and its
    ``relevance_score``, the posterior probability that it is relevant (in [0, 1])."""

    index: int
    relevance_score: float


def check_top_n(top_n: Any) -> int | None:
    """``top_n`` as an int >= 1, or None for every document (``None`` or ``-1``, as
    Cohere's ``top_n``); else a ValueError naming it."""
    if top_n is None:
        return None
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or (top_n < 1 and top_n != ALL):
        raise ValueError(
            "top_n must be an int >= 1 (how many documents to return), or None or -1 (all of them), "
            f"got {top_n!r}"
        )
    return None if top_n == ALL else int(top_n)


def document_text(document: Any, index: int) -> Any:
    """The text to rerank of one document as ``CohereRerank.rerank`` takes it: a ``str`` as
    it is, a mapping by its ``"text"`` field (the other fields are not read); anything else
    is returned as given, for the caller to accept (a LangChain Document, a LlamaIndex node)
    or refuse.

    Raises:
        InvalidInputError: A mapping without a ``"text"`` string (the message names the
            document's index and its keys).
    """
    if isinstance(document, Mapping):
        text = document.get("text")
        if not isinstance(text, str):
            keys = ", ".join(repr(k) for k in list(document)[:8])
            raise InvalidInputError(
                f'document {index} is a dict without a "text" string (keys: {keys or "none"}); pass '
                '{"text": "..."} (Cohere\'s form), or the text itself'
            )
        return text
    return document


def reranked(result: PanningResult, *, top_n: int | None = None) -> list[RerankHit]:
    """The first ``top_n`` documents of ``result.ranking`` (all when None) with their
    posteriors, best first: ``[{"index": i, "relevance_score": p}, ...]``, ``min(top_n, n)``
    dicts.

    The ranking and the probabilities are the result's own: ``min_relevance``,
    ``recall_target`` and ``k`` do not cut this list (they choose ``result.selected``);
    threshold the scores where you need to.
    """
    top_n = check_top_n(top_n)
    order = result.ranking if top_n is None else result.ranking[:top_n]
    post = result.posteriors
    return [{"index": int(i), "relevance_score": float(post[i])} for i in order.tolist()]
