"""Scoring ``gold-panning evaluate``'s rows the field's way: every method on a full ranking
(the ``top_n`` documents it returned, then the other candidates in first-stage order:
:func:`~._instances.complete_ranking`), with the metrics, intervals and paired differences
against the first stage of :mod:`~..ir.ranking_metrics`.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..engine.beliefs import vote_ranking
from ..engine.panner import PanningResult
from ..ir.ranking_metrics import (
    bootstrap_interval,
    metric_names,
    paired_difference,
    per_query_metrics,
    single_relevant,
)
from ._instances import CompareInstance, complete_ranking

__all__ = ["BOOTSTRAP_SEED", "carry_forward", "method_rankings", "per_round_hits", "score_methods"]

BOOTSTRAP_SEED = 0
"""Seed of the bootstrap generator: a summary is a pure function of its rows."""


def _rng(metric: str, *, paired: bool = False) -> np.random.Generator:
    """The bootstrap generator of one metric: the same resamples for every method."""
    return np.random.default_rng([BOOTSTRAP_SEED, zlib.crc32(metric.encode()), int(paired)])


def method_rankings(
    rows: Sequence[Mapping[str, Any]], instances: Sequence[CompareInstance], method: str, *, top_n: int
) -> dict[str, list[str]]:
    """Query id -> the method's full ranking (document ids), for every instance it has a row for."""
    by_index = {int(r["instance"]): r for r in rows if r["method"] == method}
    out: dict[str, list[str]] = {}
    for inst in (i for i in instances if i.index in by_index):
        ids = inst.document_ids
        order = complete_ranking(by_index[inst.index].get("ranking") or [], len(ids), top_n=top_n)
        out[inst.query_id] = [ids[i] for i in order]
    return out


def score_methods(
    rows: Sequence[Mapping[str, Any]],
    instances: Sequence[CompareInstance],
    qrels: Mapping[str, Mapping[str, int]],
    methods: Sequence[str],
    *,
    top_n: int,
    recall_k: int = 10,
    relevance_level: int = 1,
    baseline: str = "base",
) -> dict[str, dict[str, Any]]:
    """Each method's metrics over the instances it ran on.

    Returns:
        ``{method: {"<metric>": mean, "<metric>_ci95": [lo, hi], ..., "vs_first_stage":
        {"<metric>": {"wins", "losses", "ties", "mean_diff", "ci95"}}}}`` for the metrics of
        :func:`~..ir.ranking_metrics.metric_names` (top-1/top-3 only when every query has one
        relevant document; their intervals are left to the Wilson ones of the rows); no
        ``vs_first_stage`` for the baseline itself or when it did not run.
    """
    single = single_relevant(qrels, relevance_level=relevance_level)
    names = metric_names(recall_k=recall_k, single=single)
    per: dict[str, dict[str, dict[str, float]]] = {}
    for m in methods:
        ranks = method_rankings(rows, instances, m, top_n=top_n)
        if ranks:
            per[m] = per_query_metrics(
                {q: qrels[q] for q in ranks}, ranks, recall_k=recall_k, relevance_level=relevance_level
            )
    out: dict[str, dict[str, Any]] = {}
    for m, values in per.items():
        qids = list(values)
        d: dict[str, Any] = {}
        for name in names:
            x = np.array([values[q][name] for q in qids], dtype=np.float64)
            d[name] = round(float(x.mean()), 4)
            if name not in ("top1", "top3"):
                lo, hi = bootstrap_interval(x, rng=_rng(name))
                d[f"{name}_ci95"] = [round(lo, 4), round(hi, 4)]
        if m != baseline and baseline in per:
            shared = [q for q in qids if q in per[baseline]]
            d["vs_first_stage"] = {
                name: paired_difference(
                    [values[q][name] for q in shared],
                    [per[baseline][q][name] for q in shared],
                    rng=_rng(name, paired=True),
                )
                for name in names
            }
        out[m] = d
    return out


def per_round_hits(
    result: PanningResult, gold: Sequence[int], *, rng: np.random.Generator, rounds: int | None = None
) -> NDArray[np.float64]:
    """Top-1 F1 after each round, shape ``(len(result.rounds),)``, or ``(rounds,)`` when
    given: after an early stop the last value is carried forward (the answer stands).

    GP policies rank by posterior (stable: ties keep input order); PSC ranks by
    cumulative citation votes with random tie-breaks, as the panner does.
    """
    n = len(result.posteriors)
    counts = np.zeros(n, dtype=np.int64)
    out = np.zeros(len(result.rounds))
    gold_set = {int(g) for g in gold}
    for t, r in enumerate(result.rounds):
        if not r.failed:
            counts[list(r.cited)] += 1
        if result.policy == "random":
            top = int(vote_ranking(counts, rng=rng)[0])
        else:
            top = int(np.argsort(-r.posteriors, kind="stable")[0])
        out[t] = 1.0 if top in gold_set else 0.0
    return out if rounds is None else carry_forward(out, rounds)


def carry_forward(values: Sequence[float] | NDArray[np.float64], width: int) -> NDArray[np.float64]:
    """The first ``width`` of per-round ``values``, shape ``(width,)``: after a shorter run
    (an early stop, fewer rounds) the last value stands for the rounds it did not run; 0
    for no values."""
    x = np.asarray(values, dtype=np.float64)
    return np.concatenate([x[:width], np.full(max(width - x.size, 0), x[-1] if x.size else 0.0)])
