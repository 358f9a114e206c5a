"""Calibration of held-out probabilities before and after a profile's recalibration map,
recomputed from ``bench compare --out`` files with no model call.

``bench compare --out DIR`` writes ``DIR/probabilities/<method>.jsonl`` (one ``{"qid",
"docs", "probabilities", "relevant"}`` per query). Panning applies a profile's map after
the last round (placement and stopping read the engine's own beliefs), so a run with a
profile and the same run with that profile plus a map differ only by the map: this
script applies the map of ``--profile`` to the stored probabilities and prints both
calibration tables (per-document ECE with 10 equal-width and 10 equal-count bins, Brier,
the top pick's mean probability against its accuracy, ``p_none``'s AUROC for "no
relevant candidate", and what ``min_relevance=0.5`` returns), over all queries and over
the subsets named by ``--subset NAME=FILE`` (a file of query ids, one per line; the
complement is reported too). Intervals: 95% percentile bootstrap over queries. "ECE if
calibrated" is what the ECE of these very probabilities would be if they were exactly
calibrated (labels drawn from them, mean and 95% range): the floor that the number of
pairs alone puts under a measured ECE.

    python -m benchmarks.probabilities_heldout out-test/probabilities/gp-defaults.jsonl \\
        --profile qwen-nq-map.json --subset emptied=nq-heldout/quarter-none-test.txt

``--fit-map TRACES...`` adds a row for a Platt map fitted on labelled traces' own
posteriors (pooled when several files are given), applied the same way.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations.calibration.metrics import CalibrationSummary, ece, summarize
from gold_panning_integrations.engine.beliefs import logit
from gold_panning_integrations.profiles import load_profile

Query = tuple[str, NDArray[np.float64], NDArray[np.float64]]


def read(path: Path) -> list[Query]:
    """``(qid, probabilities (n,), relevant (n,) as 0/1)`` per line of ``path``."""
    out: list[Query] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        p = np.asarray(row["probabilities"], dtype=np.float64)
        relevant = {str(d) for d in row["relevant"]}
        y = np.array([1.0 if str(d) in relevant else 0.0 for d in row["docs"]])
        out.append((str(row["qid"]), p, y))
    return out


def _boot(queries: Sequence[Query], stat: str, draws: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    vals: list[float] = []
    for _ in range(draws):
        pick = rng.integers(0, len(queries), len(queries))
        v = getattr(summarize([(queries[i][1], queries[i][2]) for i in pick]), stat)
        if v is not None:
            vals.append(float(v))
    if not vals:
        return float("nan"), float("nan")
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def null_ece(queries: Sequence[Query], draws: int, seed: int) -> tuple[float, float, float]:
    """ECE of the queries' probabilities against labels drawn from those probabilities
    (so exactly calibrated): ``(mean, 2.5th, 97.5th percentile)`` over ``draws``."""
    rng = np.random.default_rng(seed)
    p = np.concatenate([q[1] for q in queries])
    vals = [ece(p, (rng.random(p.size) < p).astype(np.float64)) for _ in range(draws)]
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(np.mean(vals)), float(lo), float(hi)


def row(name: str, queries: Sequence[Query], draws: int) -> list[str]:
    s: CalibrationSummary = summarize([(p, y) for _, p, y in queries])
    e_lo, e_hi = _boot(queries, "ece", draws, 0)
    g_lo, g_hi = _boot(queries, "top_gap", draws, 2)
    n_mean, n_lo, n_hi = null_ece(queries, draws, 3)
    auc = "-" if s.p_none_auroc is None else f"{s.p_none_auroc:.3f}"
    if s.p_none_auroc is not None:
        a_lo, a_hi = _boot(queries, "p_none_auroc", draws, 1)
        auc += f" [{a_lo:.2f}, {a_hi:.2f}]"
    prec = "-" if s.precision_at_threshold is None else f"{s.precision_at_threshold:.3f}"
    return [
        name,
        f"{s.queries}/{s.pairs}",
        f"{s.ece:.4f} [{e_lo:.3f}, {e_hi:.3f}]",
        f"{n_mean:.3f} [{n_lo:.3f}, {n_hi:.3f}]",
        f"{s.adaptive_ece:.4f}",
        f"{s.brier:.4f}",
        f"{s.top_mean:.3f} / {s.top_accuracy:.3f} ({s.top_gap:+.3f} [{g_lo:+.2f}, {g_hi:+.2f}])",
        auc,
        f"{s.p_none_mean:.3f} / {s.none_share:.3f}",
        f"{s.returned_at_threshold}, {prec}",
    ]


def replayed(traces: Path, profile: object, run: Sequence[Query]) -> list[Query]:
    """The run's queries as ``profile`` would have scored the same replies: each trace's
    final log-odds under ``profile`` (:func:`replay_log_odds`), through its map. Traces
    are matched to the run's queries in order (``bench compare --traces`` appends one per
    query as it finishes; a query resumed from a checkpoint has none and is left out)."""
    from gold_panning_integrations.calibration.recalibration import replay_log_odds
    from gold_panning_integrations.calibration.traces import read_traces

    by_relevant: list[Query] = []
    rows = read_traces(traces)
    m = getattr(profile, "recalibration_map", None)
    pool = list(run)
    for t in rows:
        lo = replay_log_odds(t, profile)
        p = m.probabilities(lo) if m is not None else 1.0 / (1.0 + np.exp(-lo))
        y = np.zeros(p.size)
        y[[int(i) for i in t.get("relevant", [])]] = 1.0
        # the run's query whose stored probabilities this trace reproduces (same size, same labels)
        match = next(
            (q for q in pool if q[1].size == p.size and np.array_equal(q[2], y) and _same(q[1], t)), None
        )
        if match is not None:
            pool.remove(match)
            by_relevant.append((match[0], p, y))
    return by_relevant


def _same(stored: NDArray[np.float64], trace: dict) -> bool:
    return bool(np.allclose(stored, np.asarray(trace["posteriors"], dtype=np.float64), atol=1e-5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probabilities", type=Path, help="probabilities/<method>.jsonl of bench compare --out")
    ap.add_argument(
        "--profile", default=None, help="profile whose recalibration map to apply (JSON or bundled)"
    )
    ap.add_argument(
        "--subset", action="append", default=[], metavar="NAME=FILE", help="query ids, one per line"
    )
    ap.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar="TRACES",
        help="the run's labelled traces (bench compare --traces): also replay each query's prompts and replies "
        "through --profile's rates (then its map): what that profile would have reported from the same replies "
        "(its placements would have differed; a counterfactual, labelled so)",
    )
    ap.add_argument(
        "--fit-map",
        nargs="+",
        type=Path,
        default=None,
        metavar="TRACES",
        help="also fit a Platt map on these labelled traces' own posteriors (several files: pooled, e.g. two "
        "models' calibration traces) and apply it to the stored probabilities, as an extra row",
    )
    ap.add_argument("--draws", type=int, default=1000, help="bootstrap draws (default 1000)")
    args = ap.parse_args()
    before = read(args.probabilities)
    versions = [("before", before)]
    if args.profile is not None:
        prof = load_profile(args.profile)
        m = prof.recalibration_map
        if m is None:
            raise SystemExit(f"{args.profile} has no recalibration map")
        after = [(q, m.probabilities(logit(np.clip(p, 1e-6, 1 - 1e-6))), y) for q, p, y in before]
        versions.append((f"after ({m.kind})", after))
        if args.replay is not None:
            versions.append(
                (f"replayed through {Path(args.profile).stem}", replayed(args.replay, prof, before))
            )
    if args.fit_map is not None:
        from gold_panning_integrations.calibration.recalibration import fit_platt, labelled_queries
        from gold_panning_integrations.calibration.traces import read_traces

        fitted = labelled_queries([t for path in args.fit_map for t in read_traces(path)])
        pm = fit_platt(np.concatenate([q[0] for q in fitted]), np.concatenate([q[1] for q in fitted]))
        name = "pooled platt" if len(args.fit_map) > 1 else "platt refit"
        print(
            f"{name}: a Platt map on {len(fitted)} labelled queries of {', '.join(map(str, args.fit_map))}: "
            f"slope {pm.slope:.3f}, intercept {pm.intercept:+.3f}"
        )
        versions.append(
            (name, [(q, pm.probabilities(logit(np.clip(p, 1e-6, 1 - 1e-6))), y) for q, p, y in before])
        )
    subsets: list[tuple[str, set[str]]] = [("all", {q for q, _, _ in before})]
    for spec in args.subset:
        name, _, path = spec.partition("=")
        ids = set(Path(path).read_text(encoding="utf-8").split())
        subsets += [(name, ids), (f"not {name}", {q for q, _, _ in before} - ids)]
    head = [
        "queries",
        "queries/pairs",
        "ECE [95% CI]",
        "ECE if calibrated",
        "ECE eq-n",
        "Brier",
        "top pick p / right (gap [95% CI])",
        "p_none AUROC [95% CI]",
        "mean p_none / share none",
        "p >= 0.5: pairs, precision",
    ]
    print("| map | " + " | ".join(head) + " |")
    print("|" + "---|" * (len(head) + 1))
    for vname, qs in versions:
        for sname, ids in subsets:
            chosen = [x for x in qs if x[0] in ids]
            if chosen:
                print(f"| {vname} | " + " | ".join(row(sname, chosen, args.draws)) + " |")


if __name__ == "__main__":
    main()
