"""What a profile's ``score_map`` changes on held-out questions, from kept labelled traces
and no model call.

Each ``--set TRACES CHECKPOINT`` pair is a ``gold-panning evaluate --traces`` file and the
checkpoint of the same run (the traces carry no question ids: they are matched, in order,
to the checkpoint's panning rows, as ``benchmarks.replay_options rescore`` does). A
question in several sets counts once (its first set). For each question the replies are
replayed through the update (:func:`replay_log_odds`) twice:

- ``before``: under ``--before`` (the profile the traces were panned with) from the prior
  they were panned with, which reproduces the run's own probabilities;
- ``after``: under ``--after``, from the prior its options give the question's scores in
  ``--run`` (its ``score_map`` where it covers them).

It prints the per-document ECE (10 equal-width bins), ``p_none``'s AUROC for "no relevant
candidate" (``--emptied``: the question ids with nothing relevant) with a 95% percentile
bootstrap interval over questions, nDCG@10 (ir-measures) against the run's own order, and
the mean ``p_none``. Placement is the run's: with the other prior the engine might have
shown other documents in the second round, so a real run can differ.

    python -m benchmarks.score_map_replay --before qwen2.5-coder-0.5b-nq --after new.json \\
        --set docs/runs/qwen-nq-test-2026-11-28/qwen-test-auto-traces.jsonl \\
              docs/runs/qwen-nq-test-2026-11-28/ck-qwen-test-auto.jsonl \\
        --run nq-heldout/run-test-bm25-quarter-none.trec --qrels nq-heldout/qrels/test.tsv \\
        --emptied nq-heldout/quarter-none-test.txt
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations.calibration.metrics import summarize
from gold_panning_integrations.calibration.recalibration import replay_log_odds
from gold_panning_integrations.calibration.traces import read_traces
from gold_panning_integrations.engine.beliefs import logit, sigmoid
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.panner import (
    _retriever_prior,
    rank_map_of,
    rank_shape_of,
    score_map_of,
    score_temperature,
)
from gold_panning_integrations.ir.collection import read_qrels, read_run
from gold_panning_integrations.ir.ranking_metrics import per_query_metrics
from gold_panning_integrations.profiles import load_profile


def questions(sets: Sequence[tuple[Path, Path]], method: str) -> dict[str, dict[str, Any]]:
    """Question id -> its trace, the first set's where several sets ran it."""
    out: dict[str, dict[str, Any]] = {}
    for traces_path, checkpoint in sets:
        traces = read_traces(traces_path)
        rows = [json.loads(line) for line in checkpoint.read_text(encoding="utf-8").splitlines()]
        qids = [str(r["qid"]) for r in rows if r.get("type") == "row" and r.get("method") == method]
        if len(qids) != len(traces):
            raise SystemExit(
                f"{len(traces)} traces in {traces_path} but {len(qids)} {method} rows in {checkpoint}"
            )
        for t, q in zip(traces, qids):
            out.setdefault(q, t)
    return out


def auroc(scores: NDArray[np.float64], positive: NDArray[np.bool_]) -> float:
    """Probability that a positive outscores a negative (ties half)."""
    a, b = scores[positive][:, None], scores[~positive][None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def replayed(
    profile: Any,
    traces: Mapping[str, dict[str, Any]],
    run: Mapping[str, list[tuple[str, float]]],
    *,
    rescore: bool,
) -> dict[str, NDArray[np.float64]]:
    """Question -> the probabilities ``profile`` gives its replies (after its map)."""
    config = PanningConfig().with_profile(profile)
    score_map, temperature = score_map_of(config, profile), score_temperature(config, profile)
    recalibration = profile.recalibration_map
    out = {}
    for q, t in traces.items():
        n = int(t["n"])
        if rescore:
            prior = _retriever_prior(
                config,
                n,
                [s for _, s in run[q][:n]],
                temperature,
                score_map,
                rank_map_of(config, profile),
                rank_shape_of(config, profile),
            )
            t = {**t, "prior_log_odds": None if prior is None else logit(prior).tolist()}
        lo = replay_log_odds(t, profile)
        out[q] = recalibration.probabilities(lo) if recalibration is not None else sigmoid(lo)
    return out


def report(
    name: str,
    probs: Mapping[str, NDArray[np.float64]],
    traces: Mapping[str, dict[str, Any]],
    run: Mapping[str, list[tuple[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    emptied: set[str],
    draws: int,
) -> str:
    qids = list(probs)
    pairs = []
    for q in qids:
        y = np.zeros(probs[q].size)
        y[[int(i) for i in traces[q]["relevant"]]] = 1.0
        pairs.append((probs[q], y))
    none = np.array([float(np.prod(1.0 - probs[q])) for q in qids])
    empty = np.array([q in emptied for q in qids])
    rng = np.random.default_rng(0)
    boots = []
    for _ in range(draws):
        pick = rng.integers(0, len(qids), len(qids))
        if 0 < empty[pick].sum() < pick.size:
            boots.append(auroc(none[pick], empty[pick]))
    lo, hi = np.percentile(boots, [2.5, 97.5])
    judged = {q: dict(qrels[q]) for q in qids if q in qrels}
    ranked = {q: [run[q][int(i)][0] for i in np.argsort(-probs[q], kind="stable")] for q in judged}
    base = {q: [d for d, _ in run[q][: probs[q].size]] for q in judged}
    ours, theirs = per_query_metrics(judged, ranked), per_query_metrics(judged, base)
    key = next(k for k in next(iter(ours.values())) if k.lower().startswith("ndcg"))
    ndcg = float(np.mean([v[key] for v in ours.values()]))
    gap = ndcg - float(np.mean([v[key] for v in theirs.values()]))
    return (
        f"| {name} | {len(qids)} ({int(empty.sum())} emptied) | {summarize(pairs).ece:.4f} | "
        f"{auroc(none, empty):.3f} [{lo:.2f}, {hi:.2f}] | {ndcg:.4f} ({gap:+.4f}) | {none.mean():.3f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the profile the traces were panned with")
    ap.add_argument(
        "--after",
        required=True,
        action="append",
        help="a profile to compare (its score_map, rank_map and map); repeat for several",
    )
    ap.add_argument(
        "--set", nargs=2, action="append", type=Path, required=True, metavar=("TRACES", "CHECKPOINT")
    )
    ap.add_argument(
        "--run", type=Path, required=True, help="the run file the traces' questions were panned from"
    )
    ap.add_argument("--qrels", type=Path, required=True, help="that split's qrels (BEIR TSV)")
    ap.add_argument("--emptied", type=Path, required=True, help="ids of the questions with nothing relevant")
    ap.add_argument("--method", default="gp-defaults", help="the checkpoints' panning method")
    ap.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default 2000)")
    args = ap.parse_args(argv)
    traces = questions([tuple(s) for s in args.set], args.method)
    depth = max(int(t["n"]) for t in traces.values())
    first_stage = read_run(args.run, depth=depth, queries=set(traces))
    run = {q: list(zip(docs, first_stage.scores[q])) for q, docs in first_stage.candidates.items()}
    qrels, _ = read_qrels(args.qrels)
    emptied = set(args.emptied.read_text(encoding="utf-8").split())
    print(
        "| profile | questions | per-document ECE | p_none AUROC [95% CI] | nDCG@10 (vs the run's order) | mean p_none |"
    )
    print("|---|---|---|---|---|---|")
    for name, path, rescore in (
        ("before: " + args.before, args.before, False),
        *(("after: " + after, after, True) for after in args.after),
    ):
        probs = replayed(load_profile(path), traces, run, rescore=rescore)
        print(report(name, probs, traces, run, qrels, emptied, args.draws))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
