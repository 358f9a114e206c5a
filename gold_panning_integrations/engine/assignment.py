"""Greedy matching of documents to positions by score and diagnosticity.

Positions are ranked by diagnosticity ``|TPR_j - FPR_j|``, documents by score (both
descending and stable); the r-th document gets the r-th most diagnostic position.
Surplus documents land on dummy positions (``-1``: not shown, no update); surplus
positions are left to dummy documents (the least diagnostic ones, never rendered).
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
    """Position of each document, shape ``(..., n)`` like ``scores`` (higher is placed
    better), matched greedily to ``pos_order`` (most diagnostic first, shape ``(m,)``);
    -1 beyond ``m``. Each real position is used at most once."""
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
    """Indices of the shown documents (``doc_positions`` >= 0, shape ``(n,)``) in prompt
    order, by ascending position, shape ``(n_shown,)``."""
    shown = np.flatnonzero(doc_positions >= 0)
    return shown[np.argsort(doc_positions[shown], kind="stable")]
