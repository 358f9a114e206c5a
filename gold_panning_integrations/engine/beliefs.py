"""Beliefs in log-odds and the Bayesian update of the paper's observation model.

A document shown at position ``j`` is cited with probability ``TPR_j`` if it is
relevant and ``FPR_j`` if it is not. Treating citations as independent given relevance
and position, one round adds to a document's log-odds

* ``log(TPR_j / FPR_j)`` when it was cited, and
* ``log((1 - TPR_j) / (1 - FPR_j))`` when it was shown and not cited,

and nothing when it was not shown (a dummy position). Rates are clamped into
``[eps, 1 - eps]`` first so that a 0 or 1 in a profile never yields ``inf`` or ``NaN``.
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
    """Clamp TPR and FPR into ``[eps, 1 - eps]``.

    Args:
        tpr: True positive rate per position, shape ``(m,)``.
        fpr: False positive rate per position, shape ``(m,)``.
        eps: Clamp margin, ``0 < eps < 0.5``.

    Returns:
        ``(tpr, fpr)`` as float64 arrays of shape ``(m,)``.
    """
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
    """Per-position log-likelihood ratios of a citation and of a non-citation.

    Args:
        tpr: True positive rate per position, shape ``(m,)``.
        fpr: False positive rate per position, shape ``(m,)``.
        eps: Clamp margin applied to both rates first.

    Returns:
        ``(llr_cited, llr_missed)``, each shape ``(m,)``, in nats:
        ``log(TPR/FPR)`` and ``log((1-TPR)/(1-FPR))``.
    """
    t, f = clamp_rates(tpr, fpr, eps=eps)
    return np.log(t) - np.log(f), np.log1p(-t) - np.log1p(-f)


def sigmoid(x: ArrayLike) -> NDArray[np.float64]:
    """Numerically stable logistic function, elementwise (any shape).

    ``1 / (1 + e^-x)`` for ``x >= 0`` and ``e^x / (1 + e^x)`` for ``x < 0``: one
    ``e = exp(-|x|)`` serves both branches, so no ``exp`` ever overflows.
    """
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

    Args:
        n: Number of documents.
        k: Expected number of relevant documents (used by the base-rate prior; may be
            below 1 when some questions have none).
        prior: ``"base-rate"`` starts every document at probability ``min(k/n, 0.5)``
            so that reported posteriors are probabilities of relevance;
            ``"uniform"`` starts every document at 0.5 as in the paper (GP-Belief's
            and PSC's rankings are the same either way, GP-Entropy's are not).
        prior_probs: Per-document prior probabilities, shape ``(n,)``, each in (0, 1).
            Overrides ``prior``.
        prior_log_odds: Per-document prior log-odds, shape ``(n,)``, finite.
            Overrides ``prior``; give at most one of the two arrays.

    Returns:
        Log-odds, shape ``(n,)``.
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
    """One Bayesian update in log-odds (returns a new array; works on batches too).

    Args:
        log_odds: Current log-odds, shape ``(..., n)``.
        doc_positions: Position of each document this round, shape ``(..., n)``;
            ``-1`` marks a document left out of the prompt (dummy position): it
            receives no update.
        cited: Whether each document was cited, shape ``(..., n)``.
        llr_cited: ``log(TPR/FPR)`` per position, shape ``(m,)``.
        llr_missed: ``log((1-TPR)/(1-FPR))`` per position, shape ``(m,)``.

    Returns:
        Updated log-odds, shape ``(..., n)``.
    """
    shown = doc_positions >= 0
    pos = np.where(shown, doc_positions, 0)
    delta = np.where(cited, llr_cited[pos], llr_missed[pos])
    return log_odds + np.where(shown, delta, 0.0)
