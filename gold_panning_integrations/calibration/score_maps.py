"""A retriever's score map (:class:`~..engine.priors.ScoreMap`) and rank map
(:class:`~..engine.priors.RankMap`): each candidate's probability of relevance from its
score and rank, or its rank alone, by logistic regression on labels (0/1) or on an EM's
soft labels (probabilities). ``calibrate --from-traces`` fits them from traces. Pure numpy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine.beliefs import sigmoid
from ..engine.priors import RankMap, ScoreMap

__all__ = ["MIN_SCORE_MAP_QUERIES", "fit_rank_map_on", "fit_score_map", "fit_score_map_on"]

MIN_SCORE_MAP_QUERIES = 20
"""Labelled queries with scores (and at least 5 relevant and 5 irrelevant candidates among
them) below which :func:`fit_score_map_on` fits nothing."""


def _ridge_logistic(a: NDArray[np.float64], y: NDArray[np.float64], ridge: float) -> NDArray[np.float64]:
    """The weights ``(d,)`` of a logistic regression of ``y`` (``(m,)``, 0/1 or
    probabilities) on the columns of ``a`` (``(m, d)``, the last a column of ones, the
    others standardised), a ridge of ``ridge`` on all but the intercept, by Newton's method
    from the base rate (the penalised log-likelihood is concave)."""
    d = a.shape[1]
    penalty = np.diag([ridge] * (d - 1) + [0.0])
    w = np.zeros(d)
    w[-1] = float(np.log(y.mean() / (1.0 - y.mean())))
    for _ in range(100):
        p = sigmoid(a @ w)
        grad = a.T @ (y - p) - penalty @ w
        hess = (a * (p * (1.0 - p))[:, None]).T @ a + penalty
        step = np.linalg.solve(hess, grad)
        w += step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return w


def fit_score_map_on(
    scores: Sequence[ArrayLike], relevant: Sequence[ArrayLike], *, ridge: float = 1.0
) -> tuple[ScoreMap, dict[str, Any]] | None:
    """A retriever's :class:`~..engine.priors.ScoreMap` from labelled queries, with how it
    was fitted; None below :data:`MIN_SCORE_MAP_QUERIES`.

    Logistic regression of each candidate's relevance on its score and ``log(1 + rank)``
    (features standardised; a ridge of ``ridge`` on the two slopes, so a few or separable
    queries give a finite map), by Newton's method. ``low``/``high`` are the lowest and
    highest top score among the queries: the scale the map knows.

    Args:
        scores: Per query, the finite scores of its candidates in the retriever's order,
            shape ``(n_q,)``.
        relevant: Per query, whether each candidate is relevant, shape ``(n_q,)``.
    """
    if len(scores) != len(relevant):
        raise ValueError(
            f"scores and relevant must list the same queries, got {len(scores)} and {len(relevant)}"
        )
    xs, ys, tops = [], [], []
    for s_q, y_q in zip(scores, relevant):
        s = np.asarray(s_q, dtype=np.float64).reshape(-1)
        y = np.asarray(y_q, dtype=np.float64).reshape(-1)
        if s.shape != y.shape:
            raise ValueError(f"a query has {s.size} scores but {y.size} labels")
        if s.size == 0:
            continue
        if not np.all(np.isfinite(s)):
            raise ValueError("scores must be finite numbers")
        xs.append(np.stack([s, np.log1p(np.arange(s.size, dtype=np.float64))], axis=1))
        ys.append(y)
        tops.append(float(s.max()))
    y = np.concatenate(ys) if ys else np.zeros(0)
    if len(xs) < MIN_SCORE_MAP_QUERIES or y.sum() < 5 or (1.0 - y).sum() < 5:
        return None
    x = np.concatenate(xs)
    mean, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0.0, sd, 1.0)
    a = np.column_stack([(x - mean) / sd, np.ones(len(x))])
    w = _ridge_logistic(a, y, ridge)
    slopes = w[:2] / sd
    fitted = ScoreMap(
        score=round(float(slopes[0]), 6),
        log_rank=round(float(slopes[1]), 6),
        offset=round(float(w[2] - slopes @ mean), 6),
        low=min(tops),
        high=max(tops),
    )
    how = {"queries": len(xs), "candidates": int(y.size), "relevant": int(y.sum()), "ridge": ridge}
    return fitted, how


def fit_score_map(traces: Iterable[Mapping[str, Any]]) -> tuple[ScoreMap, dict[str, Any]] | None:
    """:func:`fit_score_map_on` the labelled traces that record the retriever's scores
    (``"scores"``, written when every candidate had one); None when too few do."""
    scores, labels = [], []
    for t in traces:
        s, rel = t.get("scores"), t.get("relevant")
        if s is None or rel is None or len(s) != int(t["n"]):
            continue
        y = np.zeros(len(s))
        y[[int(i) for i in rel]] = 1.0
        scores.append(np.asarray(s, dtype=np.float64))
        labels.append(y)
    return fit_score_map_on(scores, labels)


def fit_rank_map_on(relevant: Sequence[ArrayLike], *, ridge: float = 1.0) -> RankMap | None:
    """A retriever's :class:`~..engine.priors.RankMap` from queries whose candidates are
    in the retriever's order: logistic regression of each candidate's relevance (0/1, or a
    probability) on ``log(1 + rank)`` by Newton's method, a ridge of ``ridge`` on the slope
    (standardised), the slope held at 0 if the fit would make later ranks likelier. None
    with fewer than 5 relevant or 5 irrelevant candidates in expectation.

    Example: two queries of two candidates, the first relevant in both: a falling map.
    """
    ys = [np.asarray(y, dtype=np.float64).reshape(-1) for y in relevant]
    y = np.concatenate(ys) if ys else np.zeros(0)
    if y.sum() < 5 or (1.0 - y).sum() < 5:
        return None
    x = np.concatenate([np.log1p(np.arange(v.size, dtype=np.float64)) for v in ys])
    mean, sd = float(x.mean()), float(x.std()) or 1.0
    a = np.column_stack([(x - mean) / sd, np.ones(x.size)])
    w = _ridge_logistic(a, y, ridge)
    slope = float(w[0] / sd)
    if slope > 0.0:  # later ranks likelier: read the order as no information
        return RankMap(log_rank=0.0, offset=round(float(np.log(y.mean() / (1.0 - y.mean()))), 6))
    return RankMap(log_rank=round(slope, 6), offset=round(float(w[1] - slope * mean), 6))
