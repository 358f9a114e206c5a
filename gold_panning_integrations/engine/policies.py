"""Placement policies: how documents are scored before they are matched to positions
(the option ``policy`` says what each does). Scores are computed on log-odds, which never
saturate: ``belief`` scores the log-odds, ``entropy`` ``-|log-odds|`` (the order of the
binary entropy), ``random`` a uniform permutation (ranked by :func:`vote_ranking`),
``oracle`` the true needles first (the upper bound of any placement)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["POLICIES", "Policy", "binary_entropy", "score_documents", "vote_ranking"]

Policy = Literal["belief", "entropy", "random", "oracle"]
POLICIES: tuple[str, ...] = ("belief", "entropy", "random", "oracle")


def binary_entropy(log_odds: NDArray[np.float64]) -> NDArray[np.float64]:
    """Binary entropy in nats of ``sigmoid(log_odds)``, elementwise, stable for any input."""
    a = np.abs(np.asarray(log_odds, dtype=np.float64))
    # H(p) with p = sigmoid(-a) <= 0.5: H = log(1 + e^-a) + a * e^-a / (1 + e^-a)
    ea = np.exp(-a)
    return np.log1p(ea) + a * ea / (1.0 + ea)


def score_documents(
    policy: str,
    log_odds: NDArray[np.float64],
    *,
    rng: np.random.Generator,
    truth: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Placement scores of ``policy``, shape ``(..., n)`` like ``log_odds`` (higher gets a
    more diagnostic position); ``truth`` (same shape) for ``oracle`` only."""
    lo = np.asarray(log_odds, dtype=np.float64)
    if policy == "belief":
        return lo
    if policy == "entropy":
        return -np.abs(lo)
    if policy == "random":
        return rng.random(lo.shape)
    if policy == "oracle":
        if truth is None:
            raise ValueError("policy 'oracle' needs the true labels: it is for simulation only")
        return np.asarray(truth, dtype=np.float64) * 2.0 + rng.random(lo.shape)
    raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")


def vote_ranking(
    citation_counts: NDArray[np.integer] | NDArray[np.floating],
    *,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """PSC's majority-vote ranking of ``citation_counts`` (shape ``(..., n)``): indices,
    most-cited first, ties broken uniformly at random."""
    counts = np.asarray(citation_counts, dtype=np.float64)
    # A jitter in [0, 1) never reorders different integer counts, and orders equal
    # counts by an independent uniform draw: a uniform random tie-break.
    keyed = counts + rng.random(counts.shape)
    return np.argsort(-keyed, axis=-1, kind="stable")
