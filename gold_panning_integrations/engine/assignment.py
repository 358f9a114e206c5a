"""Greedy matching of documents to positions by score and diagnosticity.

Positions are ranked once by diagnosticity ``|TPR_j - FPR_j|`` (descending, stable, so
equal positions keep their prompt order); each round documents are ranked by score
(descending, stable, so ties keep the input order, e.g. the base retriever's rank) and
the r-th document gets the r-th most diagnostic position.

Asymmetric cases (the paper's appendix) reduce to this matching:

* more documents than positions: the surplus documents land on *dummy positions*
  (TPR = FPR = 0). They are left out of this round's prompt and get no update; they are
  marked with position ``-1``.
* more positions than documents: *dummy documents* with belief 0 fill the least
  diagnostic positions and are never rendered. Since a dummy's score is below every real
  document's, the real documents simply take the ``n`` most diagnostic positions.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["assign", "diagnosticity", "position_order", "shown_order"]


def diagnosticity(tpr: ArrayLike, fpr: ArrayLike) -> NDArray[np.float64]:
    """``|TPR_j - FPR_j|`` per position, shape ``(m,)``."""
    return np.abs(np.asarray(tpr, dtype=np.float64) - np.asarray(fpr, dtype=np.float64))


def position_order(tpr: ArrayLike, fpr: ArrayLike) -> NDArray[np.intp]:
    """Positions from most to least diagnostic (stable), shape ``(m,)``."""
    return np.argsort(-diagnosticity(tpr, fpr), kind="stable")


def assign(scores: NDArray[np.float64], pos_order: NDArray[np.intp]) -> NDArray[np.intp]:
    """Match documents to positions greedily.

    Args:
        scores: Placement scores, shape ``(..., n)``; higher is placed better.
        pos_order: Positions from most to least diagnostic, shape ``(m,)``.

    Returns:
        Position of each document, shape ``(..., n)``, ``-1`` for a document on a
        dummy position (left out of this round because ``n > m``). Real positions are
        used at most once: the map from shown documents to positions is injective, and
        a bijection when ``n == m``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[-1]
    m = pos_order.shape[0]
    doc_rank = np.argsort(-scores, axis=-1, kind="stable")  # (..., n): rank r -> doc
    # Rank r gets pos_order[r] for r < m; the rest go to dummy positions (-1).
    pos_by_rank = np.full(n, -1, dtype=np.intp)
    take = min(n, m)
    pos_by_rank[:take] = pos_order[:take]
    out = np.empty(scores.shape, dtype=np.intp)
    np.put_along_axis(out, doc_rank, np.broadcast_to(pos_by_rank, scores.shape), axis=-1)
    return out


def shown_order(doc_positions: NDArray[np.intp]) -> NDArray[np.intp]:
    """Indices of the shown documents in prompt order (by ascending position).

    Args:
        doc_positions: Position per document, shape ``(n,)``, ``-1`` = not shown.

    Returns:
        Document indices, shape ``(n_shown,)``; element ``i`` is the document rendered
        ``i``-th in the prompt.
    """
    shown = np.flatnonzero(doc_positions >= 0)
    return shown[np.argsort(doc_positions[shown], kind="stable")]
