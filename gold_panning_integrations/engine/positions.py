"""Positions in a prompt: a profile's per-position curves and the matching of documents to
positions (numpy only).

Curves: grid interpolation and resampling by relative position. Matching: positions are
ranked by diagnosticity ``|TPR_j - FPR_j|``, documents by score (both descending and
stable); the r-th document gets the r-th most diagnostic position. Surplus documents land
on dummy positions (``-1``: not shown, no update); surplus positions are left to dummy
documents (the least diagnostic ones, never rendered).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "assign",
    "diagnosticity",
    "grid_positions",
    "interpolate_grid",
    "position_order",
    "resample_curve",
    "shown_order",
]


# ------------------------------------------------------------------------------ curves
def grid_positions(n_positions: int, k: int = 11) -> NDArray[np.intp]:
    """``k`` evenly spread 0-based positions over ``n_positions``, first and last included,
    without duplicates (``n_positions=100, k=11``: ``0, 10, 20, ..., 89, 99``)."""
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1, got {n_positions!r}")
    if k < 1:
        raise ValueError(f"grid size k must be >= 1, got {k!r}")
    if n_positions == 1:
        return np.zeros(1, dtype=np.intp)
    g = np.rint(np.linspace(0, n_positions - 1, min(k, n_positions))).astype(np.intp)
    return np.unique(g)


def interpolate_grid(grid: ArrayLike, values: ArrayLike, n_positions: int) -> NDArray[np.float64]:
    """``values`` measured at ``grid`` (strictly increasing 0-based positions, both shape
    ``(K,)``) interpolated linearly to all ``n_positions`` (nearest end value outside)."""
    g = np.asarray(grid, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if g.ndim != 1 or g.shape != v.shape or g.size == 0:
        raise ValueError(f"grid and values must be 1-D of equal length >= 1, got {g.shape} and {v.shape}")
    if np.any(np.diff(g) <= 0):
        raise ValueError(f"grid positions must be strictly increasing, got {g.tolist()}")
    return np.interp(np.arange(n_positions, dtype=np.float64), g, v)


def resample_curve(values: ArrayLike, n_positions: int) -> NDArray[np.float64]:
    """A curve of shape ``(m,)`` resampled to ``(n_positions,)`` by relative position
    ``j / (m - 1)``, linearly: the first and last values are kept."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1, got {n_positions!r}")
    m = v.size
    if m == n_positions:
        return v.copy()
    if m == 1:
        return np.full(n_positions, v[0])
    if n_positions == 1:
        return v[:1].copy()
    old = np.linspace(0.0, 1.0, m)
    new = np.linspace(0.0, 1.0, n_positions)
    return np.interp(new, old, v)


# ------------------------------------------------------------------------------ matching
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
