"""How good a probability is: calibration error, Brier score, the top pick's gap, AUROC
(numpy only).

Used by ``gold-panning evaluate``, the simulator check of the engine's posteriors, and the
choice of recalibration map. Both ECEs weigh each bin's ``|mean probability - share
relevant|`` by its share of the pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "ECE_BINS",
    "CalibrationSummary",
    "adaptive_ece",
    "auroc",
    "brier",
    "ece",
    "reliability_rows",
    "summarize",
    "top_pick_gap",
]

ECE_BINS = 10
"""Bins of :func:`ece` and :func:`adaptive_ece` unless told otherwise."""


def _pairs(probs: ArrayLike, labels: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    if p.shape != y.shape:
        raise ValueError(f"probs and labels must have the same size, got {p.size} and {y.size}")
    if p.size and not (np.all(np.isfinite(p)) and p.min() >= 0.0 and p.max() <= 1.0):
        raise ValueError("probs must be probabilities in [0, 1]")
    return p, y


def reliability_rows(probs: ArrayLike, labels: ArrayLike, *, bins: int = ECE_BINS) -> list[dict[str, float]]:
    """The reliability diagram's non-empty equal-width bins on [0, 1] (a probability of exactly
    1 falls in the last): ``lo``, ``hi``, ``count``, ``mean_prob`` and ``frac_pos`` (share of
    the bin's pairs that are relevant)."""
    p, y = _pairs(probs, labels)
    idx = np.minimum((p * bins).astype(np.intp), bins - 1)
    rows = []
    for b in range(bins):
        m = idx == b
        c = int(m.sum())
        if c:
            rows.append(
                {
                    "lo": b / bins,
                    "hi": (b + 1) / bins,
                    "count": c,
                    "mean_prob": float(p[m].mean()),
                    "frac_pos": float(y[m].mean()),
                }
            )
    return rows


def ece(probs: ArrayLike, labels: ArrayLike, *, bins: int = ECE_BINS) -> float:
    """Expected calibration error with ``bins`` equal-width bins (0.0 for no pairs).

    Example: probabilities ``[0.1, 0.1, 0.9, 0.9]`` with labels ``[0, 1, 1, 1]`` make two
    bins: ``|0.1 - 0.5| / 2 + |0.9 - 1| / 2 = 0.25``.
    """
    rows = reliability_rows(probs, labels, bins=bins)
    total = sum(r["count"] for r in rows)
    return (
        float(sum(r["count"] / total * abs(r["mean_prob"] - r["frac_pos"]) for r in rows)) if total else 0.0
    )


def adaptive_ece(probs: ArrayLike, labels: ArrayLike, *, bins: int = ECE_BINS) -> float:
    """Expected calibration error with ``bins`` bins of equal count (the sorted probabilities
    split into ``bins`` nearly equal runs)."""
    p, y = _pairs(probs, labels)
    if p.size == 0:
        return 0.0
    order = np.argsort(p, kind="stable")
    return float(
        sum(c.size / p.size * abs(p[c].mean() - y[c].mean()) for c in np.array_split(order, bins) if c.size)
    )


def brier(probs: ArrayLike, labels: ArrayLike) -> float:
    """Mean squared difference between probability and outcome (0.0 for no pairs)."""
    p, y = _pairs(probs, labels)
    return float(np.mean((p - y) ** 2)) if p.size else 0.0


def top_pick_gap(top_probs: ArrayLike, top_right: ArrayLike) -> tuple[float, float, float]:
    """The top pick's ``(mean probability, accuracy, mean probability - accuracy)`` over
    queries (each query's highest-scored document; ``top_right`` whether it is relevant)."""
    p, y = _pairs(top_probs, top_right)
    if p.size == 0:
        return 0.0, 0.0, 0.0
    return float(p.mean()), float(y.mean()), float(p.mean() - y.mean())


def auroc(scores: ArrayLike, labels: ArrayLike) -> float | None:
    """Area under the ROC curve of ``scores`` for ``labels`` (ties count one half), by
    the rank-sum formula; None when one class is missing."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels, dtype=bool).reshape(-1)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return None
    order = np.argsort(s, kind="stable")
    _, first, counts = np.unique(s[order], return_index=True, return_counts=True)
    ranks = np.empty(s.size)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)  # 1-based, ties averaged
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


@dataclass(frozen=True)
class CalibrationSummary:
    """Calibration of per-document probabilities over judged (query, document) pairs.

    Attributes:
        pairs: Judged pairs counted.
        queries: Queries counted (for the top pick and ``p_none``).
        ece: :func:`ece` (``bins`` equal-width bins).
        adaptive_ece: :func:`adaptive_ece` (``bins`` equal-count bins).
        brier: :func:`brier`.
        top_mean: The top pick's mean probability.
        top_accuracy: How often the top pick is relevant.
        top_gap: ``top_mean - top_accuracy``.
        p_none_auroc: AUROC of ``prod(1 - p)`` for "no candidate relevant" (None: every
            query had one, or none had).
        rows: :func:`reliability_rows` (for a reliability diagram).
        bins: Bins used.
        p_none_mean: Mean ``p_none`` over queries (against ``none_share``).
        none_share: Share of queries with no relevant candidate.
        threshold: The ``min_relevance`` of the next two figures.
        precision_at_threshold: Share relevant among the pairs at ``threshold`` or more
            (what ``min_relevance=threshold`` returns); None when no pair reaches it.
        returned_at_threshold: Pairs at ``threshold`` or more.
    """

    pairs: int
    queries: int
    ece: float
    adaptive_ece: float
    brier: float
    top_mean: float
    top_accuracy: float
    top_gap: float
    p_none_auroc: float | None
    rows: list[dict[str, float]]
    bins: int = ECE_BINS
    p_none_mean: float = 0.0
    none_share: float = 0.0
    threshold: float = 0.5
    precision_at_threshold: float | None = None
    returned_at_threshold: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def summarize(
    queries: Sequence[tuple[ArrayLike, ArrayLike]], *, bins: int = ECE_BINS, threshold: float = 0.5
) -> CalibrationSummary:
    """Calibration of per-document probabilities over queries.

    Args:
        queries: Per query ``(probs, relevant)``: each judged candidate's probability and
            whether it is relevant, both shape ``(n_q,)`` (queries with no candidate are
            skipped).
        bins: Bins of both ECEs.
        threshold: The ``min_relevance`` whose precision is reported.
    """
    judged = [(p, y) for p, y in (_pairs(probs, rel) for probs, rel in queries) if p.size]
    best = [int(np.argmax(p)) for p, _ in judged]
    tops = [float(p[i]) for (p, _), i in zip(judged, best)]
    rights = [float(y[i]) for (_, y), i in zip(judged, best)]
    nones = [float(np.prod(1.0 - p)) for p, _ in judged]
    empty = [not bool(y.any()) for _, y in judged]
    p_all = np.concatenate([p for p, _ in judged]) if judged else np.zeros(0)
    y_all = np.concatenate([y for _, y in judged]) if judged else np.zeros(0)
    mean, acc, gap = top_pick_gap(tops, rights)
    passed = p_all >= threshold
    return CalibrationSummary(
        pairs=int(p_all.size),
        queries=len(tops),
        ece=ece(p_all, y_all, bins=bins),
        adaptive_ece=adaptive_ece(p_all, y_all, bins=bins),
        brier=brier(p_all, y_all),
        top_mean=mean,
        top_accuracy=acc,
        top_gap=gap,
        p_none_auroc=auroc(nones, empty),
        rows=reliability_rows(p_all, y_all, bins=bins),
        bins=bins,
        p_none_mean=float(np.mean(nones)) if nones else 0.0,
        none_share=float(np.mean(empty)) if empty else 0.0,
        threshold=threshold,
        precision_at_threshold=float(y_all[passed].mean()) if passed.any() else None,
        returned_at_threshold=int(passed.sum()),
    )
