"""The field's ranking metrics through ir-measures, with intervals over queries.

Per query, from graded qrels and a ranking: nDCG@10 (trec_eval's ``ndcg_cut_10``: linear
gains, the ideal ranking from every judged document), MRR@10, Recall@k and, for one
relevant document per query, top-1 / top-3. Binary metrics count a document as relevant
from grade ``relevance_level`` (1 by default; TREC DL papers use 2). ir-measures runs
trec_eval's own code, so a run file we write scores the same in ``trec_eval``
(docs/bench-compare-collections.md, "Why ir-measures").

Intervals: a 95% percentile bootstrap over queries (explicit generator: a summary is a
pure function of its inputs); top-1/top-3 use Wilson intervals. Paired differences against
a baseline count wins, losses and ties, with the bootstrap interval of the mean difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import MissingExtraError

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "TIE_TOLERANCE",
    "bootstrap_interval",
    "metric_names",
    "paired_difference",
    "per_query_metrics",
    "run_scores",
    "single_relevant",
    "wilson_interval",
]

BOOTSTRAP_RESAMPLES = 10_000
"""Resamples of the percentile bootstrap over queries."""
TIE_TOLERANCE = 1e-9
"""Per-query differences within this are ties."""


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as err:
        raise MissingExtraError(
            "ir-measures", "compare", "Scoring with nDCG@10, MRR@10 and Recall@k"
        ) from err
    return ir_measures


def metric_names(*, recall_k: int = 10, single: bool = True) -> tuple[str, ...]:
    """Names of the metrics reported, in table order: ``ndcg@10``, ``mrr@10``,
    ``recall@{recall_k}`` and, when every query has one relevant document, ``top1``, ``top3``."""
    base = ("ndcg@10", "mrr@10", f"recall@{recall_k}")
    return base + (("top1", "top3") if single else ())


def single_relevant(qrels: Mapping[str, Mapping[str, int]], *, relevance_level: int = 1) -> bool:
    """True when every query has exactly one document of grade >= ``relevance_level``."""
    return all(sum(g >= relevance_level for g in j.values()) == 1 for j in qrels.values())


def run_scores(ranking: Sequence[str]) -> dict[str, float]:
    """A ranking as TREC run scores: ``len - rank`` (strictly decreasing), so every
    evaluation tool reads the order back unchanged (trec_eval sorts by score)."""
    n = len(ranking)
    return {d: float(n - i) for i, d in enumerate(ranking)}


def per_query_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    *,
    recall_k: int = 10,
    relevance_level: int = 1,
) -> dict[str, dict[str, float]]:
    """Each query's metrics (see the module docstring) computed by ir-measures.

    Args:
        qrels: Query id -> document id -> grade, for the evaluated queries.
        rankings: Query id -> document ids best first; a query without one scores 0.
        recall_k: The cutoff of Recall@k, ``>= 1``.
        relevance_level: Lowest grade the binary metrics count as relevant, ``>= 1``.

    Returns:
        Query id -> metric name (:func:`metric_names` with ``single=True``) -> value in
        [0, 1], for every query of ``qrels``.
    """
    if recall_k < 1:
        raise ValueError(f"--recall-k must be >= 1, got {recall_k!r}")
    if relevance_level < 1:
        raise ValueError(f"--relevance-level must be >= 1, got {relevance_level!r}")
    im = _ir_measures()
    rel = relevance_level
    measures = {
        "ndcg@10": im.nDCG @ 10,
        "mrr@10": im.RR(rel=rel) @ 10,
        f"recall@{recall_k}": im.R(rel=rel) @ recall_k,
        "top1": im.Success(rel=rel) @ 1,
        "top3": im.Success(rel=rel) @ 3,
    }
    by_measure = {m: name for name, m in measures.items()}
    out = {q: dict.fromkeys(measures, 0.0) for q in qrels}
    run = {q: run_scores(r) for q, r in rankings.items() if q in qrels and r}
    judged = {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items()}
    if run:
        for m in im.iter_calc(list(measures.values()), judged, run):
            out[m.query_id][by_measure[m.measure]] = float(m.value)
    return out


def bootstrap_interval(
    values: Sequence[float] | NDArray[np.float64],
    *,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (shape ``(q,)``, one per
    query); ``(nan, nan)`` for no values, ``(v, v)`` for one."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), float(x[0])
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // x.size)  # bounded memory for many queries
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def paired_difference(
    method: Sequence[float],
    baseline: Sequence[float],
    *,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, Any]:
    """Per-query ``method - baseline`` (same queries, same order): wins, losses, ties
    (within :data:`TIE_TOLERANCE`), the mean difference and its bootstrap 95% interval."""
    a, b = np.asarray(method, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same queries, got {a.shape} and {b.shape}")
    d = a - b
    lo, hi = bootstrap_interval(d, rng=rng, resamples=resamples)
    return {
        "wins": int(np.sum(d > TIE_TOLERANCE)),
        "losses": int(np.sum(d < -TIE_TOLERANCE)),
        "ties": int(np.sum(np.abs(d) <= TIE_TOLERANCE)),
        "mean_diff": round(float(d.mean()), 4) if d.size else None,
        "ci95": [round(lo, 4), round(hi, 4)] if d.size else None,
    }


def wilson_interval(successes: int, trials: int, *, z: float = 1.96) -> tuple[float, float]:
    """``(low, high)`` of the Wilson score interval for ``successes`` of ``trials`` (95% for
    ``z=1.96``): inside [0, 1] and not empty at 0 or ``trials`` successes (0/30 gives about
    (0, 0.114)); ``(0.0, 1.0)`` for no trials. Needs ``0 <= successes <= trials``."""
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"need 0 <= successes <= trials, got successes={successes!r}, trials={trials!r}")
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    denom = 1.0 + z2 / trials
    center = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    return max(0.0, center - half), min(1.0, center + half)
