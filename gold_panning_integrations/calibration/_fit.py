"""The calibration protocol's estimates (:mod:`~gold_panning_integrations.calibration`):
pure functions of the trial records, from outcome counts to the profile they make.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..engine.positions import grid_positions
from ..profiles import DetectorProfile, RateCounts

__all__ = [
    "OutcomeCounts",
    "build_profile",
    "count_outcomes",
    "estimate_rates",
    "expected_variance_reduction",
    "grid_indices",
    "next_grid_index",
    "rate_counts",
    "smoothed_rate",
]


def grid_indices(n: int, grid: int | Sequence[int] | NDArray[np.integer]) -> NDArray[np.intp]:
    """The grid positions (0-based, increasing, within ``0..n-1``) for a ``grid`` option:
    ``K`` positions spread over ``n`` (first and last included), or the positions given."""
    if isinstance(grid, (int, np.integer)):
        return grid_positions(n, int(grid))
    g = np.asarray(grid, dtype=np.intp)
    if g.ndim != 1 or g.size == 0 or np.any(np.diff(g) <= 0) or g[0] < 0 or g[-1] >= n:
        raise ValueError(f"grid must be increasing positions within 0..{n - 1}, got {list(np.asarray(grid))}")
    return g


def smoothed_rate(
    events: NDArray[np.integer] | int, trials: NDArray[np.integer] | int
) -> NDArray[np.float64]:
    """Jeffreys posterior mean ``(x + 0.5) / (m + 1)``; 0.5 where ``m == 0``."""
    x = np.asarray(events, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    return (x + 0.5) / (m + 1.0)


@dataclass(frozen=True)
class OutcomeCounts:
    """Event counts per grid position, each of shape ``(K,)``.

    Attributes:
        grid: The grid positions.
        tp: Trials with the gold at the position in which the gold was cited.
        tp_trials: Usable (not failed) trials with the gold at the position.
        fp: Trials with a distractor at the position in which that distractor was cited.
        fp_trials: Usable trials with a distractor at the position.
        failed: Failed trials (excluded from every rate).
    """

    grid: NDArray[np.intp]
    tp: NDArray[np.int64]
    tp_trials: NDArray[np.int64]
    fp: NDArray[np.int64]
    fp_trials: NDArray[np.int64]
    failed: int


def count_outcomes(records: Iterable[Mapping[str, Any]], n: int, grid: int | Sequence[int]) -> OutcomeCounts:
    """Count true/false positives per grid position from trial records.

    Each record needs ``position`` (gold's prompt position), ``cited`` (0-based cited
    positions) and ``failed``; ``gold`` (all gold positions) defaults to ``[position]``.
    A record's ``n`` (if present) must equal ``n``.
    """
    g = grid_indices(n, grid)
    index = {int(p): i for i, p in enumerate(g)}
    tp = np.zeros(g.size, np.int64)
    tpm = np.zeros(g.size, np.int64)
    fp = np.zeros(g.size, np.int64)
    fpm = np.zeros(g.size, np.int64)
    failed = 0
    for rec in records:
        if "n" in rec and int(rec["n"]) != n:
            raise ValueError(
                f"record {rec.get('trial_id')!r} has n={rec['n']} but the calibration uses n={n}"
            )
        if rec.get("failed"):
            failed += 1
            continue
        gold = {int(x) for x in rec.get("gold", [rec["position"]])}
        cited = {int(x) for x in rec.get("cited", ())}
        for p, i in index.items():
            if p in gold:
                if p == int(rec["position"]):
                    tpm[i] += 1
                    tp[i] += p in cited
            else:
                fpm[i] += 1
                fp[i] += p in cited
    return OutcomeCounts(grid=g, tp=tp, tp_trials=tpm, fp=fp, fp_trials=fpm, failed=failed)


def estimate_rates(
    records: Iterable[Mapping[str, Any]], n: int, grid: int | Sequence[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Smoothed ``(tpr, fpr)`` at each grid position, each of shape ``(K,)``: :func:`smoothed_rate`
    of the :class:`OutcomeCounts` (failed trials left out)."""
    c = count_outcomes(records, n, grid)
    return smoothed_rate(c.tp, c.tp_trials), smoothed_rate(c.fp, c.fp_trials)


def expected_variance_reduction(
    events: NDArray[np.floating] | float, trials: NDArray[np.floating] | float
) -> NDArray[np.float64]:
    """Expected drop, from one more trial, of the posterior variance of a rate's logit.

    With ``a = x + 1/2`` and ``b = m - x + 1/2`` the Jeffreys posterior is ``Beta(a, b)``
    and the variance of ``logit(rate)`` is about ``1/a + 1/b``. One more trial succeeds
    with the posterior mean ``p = a / (a+b)``. Returns
    ``(1/a + 1/b) - [p (1/(a+1) + 1/b) + (1-p) (1/a + 1/(b+1))]``, elementwise (shape of
    the inputs), always > 0.

    The logit scale is the one the update works on (log-likelihood ratios), so rates near
    0 or 1, whose few events swing the evidence most, get more trials (the comparison with
    other scales: docs/calibration-and-profiles.md).
    """
    a = np.asarray(events, dtype=np.float64) + 0.5
    b = np.asarray(trials, dtype=np.float64) - np.asarray(events, dtype=np.float64) + 0.5
    p = a / (a + b)
    now = 1.0 / a + 1.0 / b
    after = p * (1.0 / (a + 1.0) + 1.0 / b) + (1.0 - p) * (1.0 / a + 1.0 / (b + 1.0))
    return now - after


def next_grid_index(
    tp: NDArray[np.floating] | Sequence[float],
    tp_trials: NDArray[np.floating] | Sequence[float],
    *,
    min_trials: int = 1,
    attempts: NDArray[np.floating] | Sequence[float] | None = None,
) -> int:
    """The grid position the next budgeted trial should put the gold at.

    Every position first gets ``min_trials`` trials (lowest index first); then the one
    with the largest :func:`expected_variance_reduction` of its TPR wins (ties: lowest
    index), so the budget goes where the estimate is least certain.

    Args:
        tp: Gold cited at each grid position so far, shape ``(K,)`` (may be fractional:
            pending trials count at their predicted rate).
        tp_trials: Trials with the gold at each grid position so far, shape ``(K,)``.
        min_trials: Trials every position gets before the variance rule applies.
        attempts: Trials tried at each position, failed ones included, shape ``(K,)``
            (default ``tp_trials``): the coverage rule counts attempts, so a position
            whose trials keep failing does not soak up the whole budget.
    """
    x = np.asarray(tp, dtype=np.float64)
    m = np.asarray(tp_trials, dtype=np.float64)
    if x.shape != m.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"tp and tp_trials must be 1-D of equal length >= 1, got {x.shape} and {m.shape}")
    tried = m if attempts is None else np.maximum(np.asarray(attempts, dtype=np.float64), m)
    short = np.flatnonzero(tried < min_trials)
    if short.size:
        return int(short[np.argmin(tried[short])])  # first minimum: lowest index wins ties
    return int(np.argmax(expected_variance_reduction(x, m)))


def rate_counts(grid: NDArray[np.intp], *counts: NDArray[np.floating] | NDArray[np.integer]) -> RateCounts:
    """:class:`RateCounts` on ``grid`` from gold cited, gold shown, distractor cited and
    distractor shown, each of shape ``(K,)``."""
    fields = ("gold_cited", "gold_shown", "distractor_cited", "distractor_shown")
    return RateCounts(positions=grid.tolist(), **{f: c.tolist() for f, c in zip(fields, counts)})


def build_profile(
    records: Sequence[Mapping[str, Any]],
    *,
    n: int,
    grid: int | Sequence[int] = 11,
    model: str = "unknown",
    task: str = "unknown",
    notes: str = "",
    extra: Mapping[str, Any] | None = None,
) -> DetectorProfile:
    """A :class:`DetectorProfile` of ``n`` positions from trial records.

    ``trials`` in the profile is the number of usable gold-at-position trials per grid
    position; the counts behind every rate go to ``counts`` (schema 2) and, for readers
    of schema-1 files, to ``extra["counts"]``.
    """
    c = count_outcomes(records, n, grid)
    if int(c.tp_trials.sum()) == 0:
        raise ValueError("no usable calibration trials: every trial failed or none was run")
    tpr, fpr = smoothed_rate(c.tp, c.tp_trials), smoothed_rate(c.fp, c.fp_trials)
    counts = {
        "tp": c.tp.tolist(),
        "tp_trials": c.tp_trials.tolist(),
        "fp": c.fp.tolist(),
        "fp_trials": c.fp_trials.tolist(),
        "failed": c.failed,
        "smoothing": "jeffreys (x+0.5)/(m+1)",
    }
    return DetectorProfile.from_grid(
        c.grid,
        tpr,
        fpr,
        n_positions=n,
        trials=c.tp_trials,
        counts=rate_counts(c.grid, c.tp, c.tp_trials, c.fp, c.fp_trials),
        model=model,
        task=task,
        notes=notes,
        extra={**dict(extra or {}), "counts": counts},
    )
