"""Position curves: grid interpolation and resampling by relative position (numpy only)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["grid_positions", "interpolate_grid", "resample_curve"]


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
