"""Beliefs in log-odds and the Bayesian update of the paper's observation model.

A document shown at position ``j`` is cited with probability ``TPR_j`` if relevant,
``FPR_j`` if not; citations independent given relevance and position, one round adds
``log(TPR_j / FPR_j)`` to its log-odds when cited, ``log((1 - TPR_j) / (1 - FPR_j))`` when
shown and not cited, nothing when not shown. Rates are clamped into ``[eps, 1 - eps]``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEFAULT_EPS",
    "PriorSpec",
    "clamp_rates",
    "initial_log_odds",
    "log_likelihood_ratios",
    "logit",
    "sigmoid",
    "update_log_odds",
]

DEFAULT_EPS = 1e-3
"""Default clamp for rates: the largest single-round update is ``log(0.999/0.001) = 6.9``."""

PriorSpec = Literal["base-rate", "uniform"]


def clamp_rates(
    tpr: ArrayLike, fpr: ArrayLike, *, eps: float = DEFAULT_EPS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(tpr, fpr)`` (each shape ``(m,)``) clamped into ``[eps, 1 - eps]``, ``0 < eps < 0.5``."""
    if not 0.0 < eps < 0.5:
        raise ValueError(f"eps must be in (0, 0.5), got {eps!r}")
    # maximum then minimum is np.clip exactly (NaN stays NaN), without np.clip's wrapper.
    hi = 1.0 - eps
    t = np.minimum(np.maximum(np.asarray(tpr, dtype=np.float64), eps), hi)
    f = np.minimum(np.maximum(np.asarray(fpr, dtype=np.float64), eps), hi)
    return t, f


def log_likelihood_ratios(
    tpr: ArrayLike, fpr: ArrayLike, *, eps: float = DEFAULT_EPS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(log(TPR/FPR), log((1-TPR)/(1-FPR)))`` per position, each shape ``(m,)``, in nats,
    of the clamped rates (:func:`clamp_rates`)."""
    t, f = clamp_rates(tpr, fpr, eps=eps)
    return np.log(t) - np.log(f), np.log1p(-t) - np.log1p(-f)


def sigmoid(x: ArrayLike) -> NDArray[np.float64]:
    """Logistic function, elementwise (any shape); ``exp(-|x|)`` serves both branches, so
    no ``exp`` overflows."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0, e)
    out /= 1.0 + e
    return out


def logit(p: ArrayLike) -> NDArray[np.float64]:
    """Log-odds ``log(p / (1 - p))``, elementwise; ``p`` must lie strictly in (0, 1)."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def initial_log_odds(
    n: int,
    *,
    k: float = 1,
    prior: PriorSpec = "base-rate",
    prior_probs: ArrayLike | None = None,
    prior_log_odds: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Starting log-odds for ``n`` documents.

    ``prior`` is the option of that name (``"base-rate"``: ``min(k/n, 0.5)``, ``k`` the
    expected number of relevant documents; ``"uniform"``: 0.5). ``prior_probs`` (in (0,
    1)) or ``prior_log_odds`` (finite), shape ``(n,)``, override it; give at most one.
    Returns shape ``(n,)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if prior_probs is not None and prior_log_odds is not None:
        raise ValueError("give prior_probs or prior_log_odds, not both")
    if prior_probs is not None:
        p = np.asarray(prior_probs, dtype=np.float64).reshape(-1)
        if p.shape != (n,):
            raise ValueError(f"prior_probs must have shape ({n},), got {p.shape}")
        bad = ~((p > 0.0) & (p < 1.0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"prior_probs must lie strictly between 0 and 1; prior_probs[{i}] = {float(p[i])!r}"
            )
        return logit(p)
    if prior_log_odds is not None:
        lo = np.array(prior_log_odds, dtype=np.float64).reshape(-1)
        if lo.shape != (n,):
            raise ValueError(f"prior_log_odds must have shape ({n},), got {lo.shape}")
        bad = ~np.isfinite(lo)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"prior_log_odds must be finite; prior_log_odds[{i}] = {float(lo[i])!r}")
        return lo
    if prior == "uniform":
        return np.zeros(n, dtype=np.float64)
    if prior == "base-rate":
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        p0 = min(max(k, 1e-6) / n, 0.5)
        return np.full(n, float(logit(p0)), dtype=np.float64)
    raise ValueError(f"prior must be 'base-rate' or 'uniform', got {prior!r}")


def update_log_odds(
    log_odds: NDArray[np.float64],
    doc_positions: NDArray[np.intp],
    cited: NDArray[np.bool_],
    llr_cited: NDArray[np.float64],
    llr_missed: NDArray[np.float64],
) -> NDArray[np.float64]:
    """One Bayesian update in log-odds, a new array: ``log_odds``, ``doc_positions`` (-1:
    not shown, no update) and ``cited`` of shape ``(..., n)``; the ratios of
    :func:`log_likelihood_ratios` per position, shape ``(m,)``."""
    shown = doc_positions >= 0
    pos = np.where(shown, doc_positions, 0)
    delta = np.where(cited, llr_cited[pos], llr_missed[pos])
    return log_odds + np.where(shown, delta, 0.0)
