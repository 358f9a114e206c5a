"""How sharp the first stage's scores should make the panning prior: ``prior_temperature``
fitted on labelled queries, with no model call.

``retriever_prior="auto"`` (the default) turns a retriever's scores into prior
probabilities: a softmax over the scores divided by their standard deviation, at
``prior_temperature``. Which temperature makes those probabilities right is a property of
the first stage, not of the model: for every query whose candidates hold a relevant
document, the softmax should give the relevant ones their share. This script reads a BEIR
folder and a run file (or several: one per first stage), keeps the queries with a relevant
candidate, and prints for a grid of temperatures the mean log-likelihood
``log sum_{relevant i} p_i(T)`` per query, the maximum-likelihood temperature, and, beside
it, the rank prior's log-likelihood (``retriever_prior="rank"`` with its defaults) on the
same queries. It also prints the gap between the first and the second score (in standard
deviations) by stratum: the first candidate relevant, a lower one relevant, none.

    python -m benchmarks.score_prior_fit nq-heldout --split calibration \\
        --run nq-heldout/run-calibration-bm25.trec --run nq-heldout/run-calibration-minilm.trec

It also fits the profile's ``score_map`` on every query of each run, those without a
relevant candidate included (:func:`fit_score_map_on`: the scores' level, which the
softmax ignores), and prints it as JSON; with ``--heldout-split test --heldout-run RUN``
it reports, on that split, what the map's prior alone says: its per-document ECE and the
AUROC of its ``p_none`` for "no relevant candidate", beside that of the softmax prior
alone (``--softmax-temperature``, ``--softmax-mass``: the bundled NQ profiles' 0.5, 0.75).

    python -m benchmarks.score_prior_fit nq-heldout --run nq-heldout/run-calibration-bm25-quarter-none.trec \\
        --heldout-split test --heldout-run nq-heldout/run-test-bm25-quarter-none.trec
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations.calibration.metrics import summarize
from gold_panning_integrations.calibration.traces import fit_score_map_on
from gold_panning_integrations.engine.priors import ScoreMap, rank_prior_probs, score_prior_probs
from gold_panning_integrations.ir.collection import load_beir

GRID = tuple(round(float(t), 2) for t in np.arange(0.2, 3.01, 0.05))
"""Temperatures tried, in standard deviations of a query's scores."""


def labelled(
    qrels: Mapping[str, Mapping[str, int]],
    candidates: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float]],
    *,
    level: int = 1,
) -> list[tuple[NDArray[np.float64], NDArray[np.bool_]]]:
    """``(z, relevant)`` per query with a relevant candidate and scores that vary: ``z`` the
    scores over their standard deviation, shape ``(n,)``."""
    out = []
    for q, docs in candidates.items():
        rel = np.array([qrels.get(q, {}).get(d, 0) >= level for d in docs])
        s = np.asarray(scores[q], dtype=np.float64)
        if rel.any() and s.size > 1 and s.std() > 0:
            out.append((s / s.std(), rel))
    return out


def log_likelihood(
    rows: Sequence[tuple[NDArray[np.float64], NDArray[np.bool_]]], temperature: float
) -> float:
    """Mean over queries of ``log`` (the score prior's mass on the relevant candidates)."""
    return float(
        np.mean([np.log(score_prior_probs(z, temperature=temperature)[rel].sum()) for z, rel in rows])
    )


def rank_log_likelihood(rows: Sequence[tuple[NDArray[np.float64], NDArray[np.bool_]]]) -> float:
    """The same for the default rank prior (``prior_top10_recall`` 0.5, head decay 0.6)."""
    return float(np.mean([np.log(rank_prior_probs(z.size)[rel].sum()) for z, rel in rows]))


def first_gaps(
    qrels: Mapping[str, Mapping[str, int]],
    candidates: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float]],
    *,
    level: int = 1,
) -> dict[str, list[float]]:
    """Stratum -> the gap between the first and the second score, in standard deviations."""
    out: dict[str, list[float]] = {"first": [], "slice": [], "none": []}
    for q, docs in candidates.items():
        s = np.asarray(scores[q], dtype=np.float64)
        if s.size < 2 or s.std() == 0:
            continue
        rel = [qrels.get(q, {}).get(d, 0) >= level for d in docs]
        key = "first" if rel[0] else ("slice" if any(rel) else "none")
        out[key].append(float((s[0] - s[1]) / s.std()))
    return out


def map_rows(
    qrels: Mapping[str, Mapping[str, int]],
    candidates: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float]],
    *,
    level: int = 1,
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]]]:
    """Every query's scores ``(n,)`` and 0/1 labels ``(n,)``, with or without a relevant one."""
    s_out, y_out = [], []
    for q, docs in candidates.items():
        s_out.append(np.asarray(scores[q], dtype=np.float64))
        y_out.append(np.array([float(qrels.get(q, {}).get(d, 0) >= level) for d in docs]))
    return s_out, y_out


def softmax_none_auroc(
    scores: Sequence[NDArray[np.float64]],
    labels: Sequence[NDArray[np.float64]],
    *,
    temperature: float,
    mass: float,
) -> float | None:
    """``p_none``'s AUROC from the softmax prior alone (scores over their standard deviation
    at ``temperature``, summing to ``mass``): what the shape of the scores says."""
    pairs = [
        (score_prior_probs(s / s.std(), k=mass, temperature=temperature), y)
        for s, y in zip(scores, labels)
        if s.size > 1 and s.std() > 0
    ]
    return summarize(pairs).p_none_auroc


def heldout_report(
    score_map: ScoreMap, scores: Sequence[NDArray[np.float64]], labels: Sequence[NDArray[np.float64]]
) -> str:
    """The map's prior alone on held-out queries: per-document ECE, ``p_none`` AUROC."""
    pairs = []
    for s, y in zip(scores, labels):
        p = score_map.probabilities(s)
        if p is not None:
            pairs.append((p, y))
    summary = summarize(pairs)
    return (
        f"held out: {len(pairs)} of {len(scores)} queries on the map's scale; prior alone: per-document ECE "
        f"{summary.ece:.4f}, p_none AUROC {summary.p_none_auroc:.3f}, mean prior mass "
        f"{np.mean([p.sum() for p, _ in pairs]):.3f} against {np.mean([y.sum() for _, y in pairs]):.3f} relevant"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "folder", type=Path, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
    )
    ap.add_argument("--split", default="calibration", help="the qrels to fit on (default calibration)")
    ap.add_argument(
        "--run", action="append", required=True, help="a run file (repeatable: one per first stage)"
    )
    ap.add_argument("--depth", type=int, default=10, help="candidates per query (default 10)")
    ap.add_argument("--level", type=int, default=1, help="lowest grade counted relevant (default 1)")
    ap.add_argument("--heldout-split", default=None, help="a split to report the fitted score map on")
    ap.add_argument("--heldout-run", default=None, help="that split's run file (one --run only)")
    ap.add_argument(
        "--softmax-temperature", type=float, default=0.5, help="the softmax compared (default 0.5)"
    )
    ap.add_argument("--softmax-mass", type=float, default=0.75, help="its prior mass (default 0.75)")
    args = ap.parse_args(argv)
    for run in args.run:
        c = load_beir(args.folder, split=args.split, run=run, depth=args.depth)
        assert c.candidates is not None and c.candidate_scores is not None
        rows = labelled(c.qrels, c.candidates, c.candidate_scores, level=args.level)
        curve = {t: log_likelihood(rows, t) for t in GRID}
        best = max(curve, key=lambda t: curve[t])
        print(f"## {run}: {len(rows)} queries with a relevant candidate (split {args.split})")
        print("| temperature | mean log-likelihood |")
        print("|---|---|")
        for t in (0.3, 0.5, 0.75, 1.0, 1.5, 2.0, best):
            print(
                f"| {t:g}{' (ML)' if t == best else ''} | {curve[min(GRID, key=lambda g: abs(g - t))]:.4f} |"
            )
        print(f"| rank prior (defaults) | {rank_log_likelihood(rows):.4f} |")
        gaps = first_gaps(c.qrels, c.candidates, c.candidate_scores, level=args.level)
        print(
            "first-minus-second gap (std), median [quartiles]: "
            + "; ".join(
                f"{k} {np.median(v):.2f} [{np.quantile(v, 0.25):.2f}, {np.quantile(v, 0.75):.2f}] (n={len(v)})"
                for k, v in gaps.items()
                if v
            )
        )
        fitted = fit_score_map_on(*map_rows(c.qrels, c.candidates, c.candidate_scores, level=args.level))
        if fitted is None:
            print("score map: too few queries to fit one")
        else:
            print(f"score map: {json.dumps(fitted[0].to_dict())} ({fitted[1]['queries']} queries)")
            if args.heldout_split and args.heldout_run:
                h = load_beir(args.folder, split=args.heldout_split, run=args.heldout_run, depth=args.depth)
                assert h.candidates is not None and h.candidate_scores is not None
                rows_h = map_rows(h.qrels, h.candidates, h.candidate_scores, level=args.level)
                print(heldout_report(fitted[0], *rows_h))
                shape = softmax_none_auroc(
                    *rows_h, temperature=args.softmax_temperature, mass=args.softmax_mass
                )
                print(
                    f"the softmax prior alone (temperature {args.softmax_temperature:g}, mass "
                    f"{args.softmax_mass:g}): p_none AUROC {shape:.3f}"
                )
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
