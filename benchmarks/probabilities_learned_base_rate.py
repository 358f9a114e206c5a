"""Issue 42's simulator acceptance line: the base rate is learned, not assumed.

"Simulator, 0/1/2 relevant of 20, the engine not told the base rate (it learns it from 200
labelled traces): ECE <= 0.02 and p_none AUROC >= 0.95 at k = 1, 4 and 10."

1. Training: ``--traces`` labelled traces of the library's panner (its defaults: 2 rounds
   of 3 prompts, the generic ``lost-in-the-middle`` profile, a flat prior) reading 20
   documents in random order, 0, 1 or 2 of them relevant with probabilities 0.2 / 0.4 /
   0.4 (true mean 1.2), cited by a :class:`SimulatedReader` that follows the profile's
   rates (no blind spots, no false leads, never silent for its own sake). The panner is
   told a wrong base rate on purpose (``expected_relevant=3.0``); the traces carry the
   labels. :func:`learn_profile` (the code of ``gold-panning calibrate --from-traces``)
   measures ``expected_relevant``, ``silent_rate``, ``blind_rate``, ``false_leads`` and
   the rates from them.
2. Evaluation: ``--queries`` other queries (another seed) of the batch simulator with the
   same truth (0/1/2 relevant of 20), panned with the learned profile (its rates as the
   decision rates, its learned options through ``PanningConfig().with_profile``) at
   ``k`` = 1, 4 and 10. ``k`` only selects: the posteriors must be identical across ``k``
   (checked). Per ``k``: the per-document ECE (10 equal-width bins), the AUROC of
   ``p_none = prod(1 - p)`` for "no relevant candidate", 95% percentile-bootstrap
   intervals over queries; then contrast rows (the engine told a base rate instead of
   learning it). Nothing is tuned on the evaluation queries.

    python -m benchmarks.probabilities_learned_base_rate --traces 200 --queries 4000
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations import DetectorProfile
from gold_panning_integrations.calibration.metrics import auroc, ece, summarize
from gold_panning_integrations.calibration.traces import LearnResult, learn_profile, trace_record
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.simulator import SimulatedReader, simulate
from gold_panning_integrations.panning import GoldPanner

__all__ = [
    "AUROC_FLOOR",
    "COUNTS",
    "ECE_FLOOR",
    "KS",
    "PROFILE",
    "WRONG_MASS",
    "N",
    "Row",
    "bootstrap",
    "evaluate",
    "labelled_traces",
    "row",
]

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
"""The simulated reader's rates (and the training panner's profile)."""
N = 20
"""Documents per query."""
COUNTS = (0.2, 0.4, 0.4)
"""Probabilities of 0, 1 and 2 relevant documents per query: mean 0.4 + 0.8 = 1.2."""
KS = (1, 4, 10)
"""The ``k`` of the acceptance line."""
WRONG_MASS = 3.0
"""The base rate the training panner is told (wrong on purpose: the truth is 1.2)."""
ECE_FLOOR = 0.02
AUROC_FLOOR = 0.95


def labelled_traces(
    *, queries: int, seed: int, expected_relevant: float = WRONG_MASS
) -> list[dict[str, Any]]:
    """``queries`` labelled trace records of :class:`GoldPanner` runs (library defaults, flat
    prior, told ``expected_relevant``) over :data:`N` documents, 0/1/2 relevant with
    :data:`COUNTS`, read by a :class:`SimulatedReader` that follows :data:`PROFILE`."""
    rng = np.random.default_rng(seed)
    reader = SimulatedReader(PROFILE, relevant=lambda d: str(d).startswith("GOLD"), rng=rng)
    panner = GoldPanner(
        reader, profile=PROFILE, retriever_prior="none", expected_relevant=expected_relevant, rng=rng
    )
    out = []
    for _ in range(queries):
        count = int(rng.choice(len(COUNTS), p=COUNTS))
        gold = sorted(int(g) for g in rng.choice(N, size=count, replace=False))
        docs = [f"GOLD{i}" if i in gold else f"d{i}" for i in range(N)]
        out.append(trace_record(panner.run("q", docs), relevant=gold))
    return out


def evaluate(
    learned: DetectorProfile,
    *,
    queries: int,
    seed: int,
    ks: Sequence[int] = KS,
    config: PanningConfig | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Final posteriors and truth, each shape ``(queries, N)``, of the batch simulator
    (the reader follows :data:`PROFILE`) panned with ``learned``'s rates and ``config``
    (default: ``PanningConfig()``) filled from ``learned``, at every ``k`` of ``ks``.
    AssertionError unless the posteriors are identical across ``ks`` (``k`` only
    selects)."""
    cfg = (config or PanningConfig()).with_profile(learned)
    kept: list[tuple[NDArray[np.float64], NDArray[np.bool_]]] = []
    for k in ks:
        res = simulate(
            PROFILE.tpr,
            PROFILE.fpr,
            n=N,
            k=k,
            rounds=cfg.rounds,
            trials=queries,
            policies=("belief",),
            rng=seed,
            config=cfg,
            prior=cfg.prior,
            keep_posteriors=True,
            relevant_counts=COUNTS,
            decision_tpr=learned.tpr,
            decision_fpr=learned.fpr,
        )
        assert res.posteriors is not None and res.truth is not None
        kept.append((res.posteriors["belief"], res.truth))
    p0, y0 = kept[0]
    for k, (p, y) in zip(ks[1:], kept[1:]):
        assert np.array_equal(y, y0), f"k={k} drew other needles than k={ks[0]}"
        assert np.array_equal(p, p0), f"the posteriors at k={k} differ from those at k={ks[0]}"
    return p0, y0


def bootstrap(
    p: NDArray[np.float64], y: NDArray[np.bool_], *, draws: int, seed: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile-bootstrap intervals over queries (rows of ``p``, ``y``, shape
    ``(queries, n)``) of the ECE (10 equal-width bins) and of p_none's AUROC."""
    rng = np.random.default_rng(seed)
    none: NDArray[np.bool_] = ~np.any(y, axis=1)
    p_none = np.prod(1.0 - p, axis=1)
    e, a = np.empty(draws), np.empty(draws)
    for i in range(draws):
        pick = rng.integers(0, p.shape[0], p.shape[0])
        e[i] = ece(p[pick].ravel(), y[pick].ravel())
        value = auroc(p_none[pick], none[pick])
        a[i] = math.nan if value is None else value
    lo_e, hi_e = np.percentile(e, [2.5, 97.5])
    lo_a, hi_a = np.nanpercentile(a, [2.5, 97.5])
    return (float(lo_e), float(hi_e)), (float(lo_a), float(hi_a))


@dataclass(frozen=True)
class Row:
    """One setting's figures: ``ece`` and ``auroc`` with 95% intervals, mean ``p_none``
    against the share of queries with no relevant document, the top pick's mean
    probability against how often it is right."""

    ece: float
    ece_ci: tuple[float, float]
    auroc: float
    auroc_ci: tuple[float, float]
    p_none_mean: float
    none_share: float
    top_mean: float
    top_accuracy: float


def row(p: NDArray[np.float64], y: NDArray[np.bool_], *, draws: int, seed: int) -> Row:
    """The :class:`Row` of posteriors ``p`` and truth ``y`` (shape ``(queries, n)``)."""
    s = summarize(list(zip(p, y)))
    ece_ci, auroc_ci = bootstrap(p, y, draws=draws, seed=seed)
    return Row(
        ece=s.ece,
        ece_ci=ece_ci,
        auroc=math.nan if s.p_none_auroc is None else s.p_none_auroc,
        auroc_ci=auroc_ci,
        p_none_mean=s.p_none_mean,
        none_share=s.none_share,
        top_mean=s.top_mean,
        top_accuracy=s.top_accuracy,
    )


def _print_row(label: str, r: Row, *, floors: bool) -> None:
    verdict = ""
    if floors:
        verdict = "  pass" if r.ece <= ECE_FLOOR and r.auroc >= AUROC_FLOOR else "  FAIL"
    print(
        f"{label:44s} {r.ece:6.4f} [{r.ece_ci[0]:.4f}, {r.ece_ci[1]:.4f}]   {r.auroc:5.3f} "
        f"[{r.auroc_ci[0]:.3f}, {r.auroc_ci[1]:.3f}]   {r.p_none_mean:.3f} / {r.none_share:.3f}"
        f"   {r.top_mean:.3f} / {r.top_accuracy:.3f}{verdict}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.probabilities_learned_base_rate [--traces 200] [--queries 4000]``."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--traces", type=int, default=200, help="labelled training traces (default 200)")
    ap.add_argument("--queries", type=int, default=4000, help="simulated evaluation queries (default 4000)")
    ap.add_argument("--train-seed", type=int, default=11)
    ap.add_argument("--seed", type=int, default=7, help="seed of the evaluation queries (default 7)")
    ap.add_argument("--draws", type=int, default=1000, help="bootstrap draws (default 1000)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    traces = labelled_traces(queries=args.traces, seed=args.train_seed)
    counts = np.asarray([len(t["relevant"]) for t in traces])
    fit: LearnResult = learn_profile(traces, PROFILE)
    learned = fit.profile
    se = counts.std(ddof=1) / math.sqrt(counts.size)
    print(
        f"training: {args.traces} labelled traces (seed {args.train_seed}), the panner told "
        f"expected_relevant={WRONG_MASS:g}; relevant per query {counts.mean():.3f} +- {1.96 * se:.3f} "
        f"(truth {np.dot(range(len(COUNTS)), COUNTS):.1f})"
    )
    silent = fit.mixture.silent_prompts if fit.mixture is not None else (0, 0.0, 0)
    print(
        f"learned: expected_relevant {learned.expected_relevant}, silent_rate {learned.silent_rate} "
        f"({silent[2]} empty prompts of {silent[0]}, {silent[1]:.1f} expected from the rates), "
        f"blind_rate {learned.blind_rate}, false_leads {learned.false_leads}"
    )
    print(
        f"evaluation: {args.queries} simulated queries (seed {args.seed}), {N} documents, 0/1/2 relevant "
        f"with p {COUNTS}; 95% bootstrap intervals over queries ({args.draws} draws)"
    )
    print(
        f"{'setting':44s} {'ECE':>6s} {'[95% CI]':17s}   {'p_none AUROC':21s}   mean p_none / share none"
        "   top pick p / right"
    )
    p, y = evaluate(learned, queries=args.queries, seed=args.seed)
    learned_row = row(p, y, draws=args.draws, seed=args.seed)
    for k in KS:  # identical posteriors (checked by evaluate): the same figures at every k
        _print_row(f"learned profile, k = {k}", learned_row, floors=True)
    print("contrast: told a base rate instead of learning it (learned rates otherwise; any k)")
    for label, cfg in (
        (f"  told expected_relevant={WRONG_MASS:g}", PanningConfig(expected_relevant=WRONG_MASS)),
        ("  told the default, expected_relevant=1", PanningConfig(expected_relevant=1.0)),
    ):
        p_c, y_c = evaluate(learned, queries=args.queries, seed=args.seed, ks=(4,), config=cfg)
        _print_row(label, row(p_c, y_c, draws=args.draws, seed=args.seed), floors=True)
    print("contrast: nothing learned (the generic profile and the library's defaults; any k)")
    p_d, y_d = evaluate(PROFILE, queries=args.queries, seed=args.seed, ks=(4,))
    _print_row("  library defaults", row(p_d, y_d, draws=args.draws, seed=args.seed), floors=True)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
