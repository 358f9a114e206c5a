"""Priors from the base retriever: its order (and scores) as prior log-odds.

The paper starts from an uninformative prior and notes that retrieval scores could
inform it. A base retriever's rank is real evidence: the needle is more likely near the
top. We model the rank of a relevant document as geometric, with the single parameter
chosen from a figure users can measure for their retriever: the probability that the
top 10 holds the relevant document (``top10_recall``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .beliefs import logit

__all__ = ["rank_prior_probs", "score_prior_probs", "MAX_PRIOR"]

MAX_PRIOR = 0.95
"""No prior probability exceeds this: a prior never overrules the evidence entirely."""


def _to_expected_k(weights: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Scale non-negative weights so they sum to ``k`` (the expected number of relevant
    documents), capping each at :data:`MAX_PRIOR` and redistributing the excess."""
    n = weights.size
    k_eff = min(float(k), MAX_PRIOR * n)
    w = weights / weights.sum()
    p = k_eff * w
    for _ in range(n):  # water-filling: at most n passes, usually one or two
        over = p > MAX_PRIOR
        if not over.any():
            break
        excess = float((p[over] - MAX_PRIOR).sum())
        p[over] = MAX_PRIOR
        free = ~over & (p < MAX_PRIOR)
        if not free.any():
            break
        p[free] += excess * w[free] / w[free].sum()
    return np.clip(p, 1e-6, MAX_PRIOR)


def rank_prior_probs(n: int, *, k: int = 1, top10_recall: float = 0.5) -> NDArray[np.float64]:
    """Prior probability of relevance by base-retriever rank (rank 0 first).

    The relevant document's rank is taken as geometric with ratio ``q`` such that
    ``P(rank < 10) = top10_recall`` (before truncation to ``n``):
    ``q = (1 - top10_recall) ** (1/10)``. Probabilities sum to ``k``, each capped at
    :data:`MAX_PRIOR`. ``top10_recall = 0`` gives the flat base rate ``k/n``.

    Args:
        n: Number of documents, in the base retriever's order.
        k: Expected number of relevant documents.
        top10_recall: How often your retriever's top 10 holds the answer, in [0, 1).

    Returns:
        Prior probabilities, shape ``(n,)``, non-increasing in rank.
    """
    if not 0.0 <= top10_recall < 1.0:
        raise ValueError(f"top10_recall must be in [0, 1), got {top10_recall!r}")
    if n == 0:
        return np.zeros(0)
    q = (1.0 - top10_recall) ** 0.1
    w = q ** np.arange(n, dtype=np.float64) if q < 1.0 else np.ones(n)
    # Floor the tail so deep ranks keep a small chance (q**r underflows for large n).
    w = np.maximum(w, 1e-12)
    return _to_expected_k(w, k)


def score_prior_probs(
    scores: ArrayLike, *, k: int = 1, temperature: float = 1.0
) -> NDArray[np.float64]:
    """Prior probabilities from retriever scores (higher = more relevant): a softmax at
    ``temperature`` scaled to sum to ``k``, each capped at :data:`MAX_PRIOR`.

    Args:
        scores: One finite score per document, shape ``(n,)``.
        k: Expected number of relevant documents.
        temperature: Softmax temperature in score units (> 0); larger is flatter.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"scores must be finite; scores[{i}] = {s[i]!r}")
    if s.size == 0:
        return np.zeros(0)
    z = (s - s.max()) / temperature
    return _to_expected_k(np.maximum(np.exp(z), 1e-12), k)


def as_log_odds(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """Log-odds of prior probabilities (convenience for ``prior_log_odds=``)."""
    return logit(p)
