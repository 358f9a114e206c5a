"""A panning result as ``(index, relevance_score)`` pairs, best first: the shape scoring
rerankers return (LangChain's ``CohereRerank.rerank`` gives ``{"index", "relevance_score"}``
per document), so code written for them reads ours unchanged.

:func:`reranked` is what every ``rerank()`` returns (``GoldPanner.rerank``,
``GoldPanningCompressor.rerank``, ``GoldPanningPostprocessor.rerank``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .records import PanningResult

__all__ = ["RerankHit", "check_top_n", "reranked"]


class RerankHit(NamedTuple):
    """One document of a reranking: its ``index`` in the input and its
    ``relevance_score``, the posterior probability that it is relevant (in [0, 1]).

    A pair (``i, p = hit``; ``hit[0]``, ``hit[1]``), with named fields (``hit.index``,
    ``hit.relevance_score``), and readable by key as the dicts of LangChain's
    ``CohereRerank.rerank`` are (``hit["index"]``, ``hit["relevance_score"]``).
    """

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, as Cohere's key is named
    relevance_score: float

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        """``hit[0]``/``hit[1]`` as a tuple, ``hit["index"]``/``hit["relevance_score"]`` as a dict."""
        if isinstance(key, str):
            if key not in self._fields:
                raise KeyError(key)
            return getattr(self, key)
        return tuple.__getitem__(self, key)


def check_top_n(top_n: Any) -> int | None:
    """``top_n`` as an int >= 1, or None (every document); else a ValueError naming it."""
    if top_n is None:
        return None
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 1:
        raise ValueError(
            f"top_n must be an int >= 1 (how many documents to return) or None (all of them), got {top_n!r}"
        )
    return int(top_n)


def reranked(result: PanningResult, *, top_n: int | None = None) -> list[RerankHit]:
    """The first ``top_n`` documents of ``result.ranking`` (all when None) with their
    posteriors, best first: ``[(index, relevance_score), ...]``, ``min(top_n, n)`` pairs.

    The ranking and the probabilities are the result's own: ``min_relevance``,
    ``recall_target`` and ``k`` do not cut this list (they choose ``result.selected``);
    threshold the scores where you need to.
    """
    top_n = check_top_n(top_n)
    order = result.ranking if top_n is None else result.ranking[:top_n]
    post = result.posteriors
    return [RerankHit(int(i), float(post[i])) for i in order.tolist()]
