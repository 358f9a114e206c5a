"""A reranker against its first stage on a whole split, estimated from runs on strata of it,
recomputed from ``gold-panning evaluate --out`` folders with no model call.

A reranker can only change a question's score where the first stage's first document is
wrong or where it moves that document down, so a split falls into three strata by the
first stage alone: ``first`` (its first document is relevant), ``slice`` (a relevant
document among its top ``depth``, the first not) and ``none`` (no relevant document there:
nDCG@10 is 0 whatever the order). Their shares come from the run file and the qrels over
every question of the split; each stratum's mean paired difference comes from the
questions that were run in it (any number of ``--out`` folders: a random draw of the
split, a slice folder), and the split's difference is the share-weighted sum. Intervals:
95% percentile bootstrap within each stratum, shares fixed.

The second table lists every question where the method's first document is not the first
stage's: whether the method put a relevant document first (``win``), pushed a relevant
first document down (``loss``) or changed an irrelevant first document for another
(``other``), and the probability it gave its new first document. An ``evaluate
--checkpoint`` file can stand for a folder (a run still going, or stopped): its rows'
rankings are read against ``--run``'s candidates, which must be the first stage the
checkpoint ranked. ``--against`` compares the method with another run of it (the same
questions with other options, say) instead of with the first stage. With ``--peers``, a
third table compares every method on one stratum (``--stratum``, default ``slice``), over
the questions of it that every method ran: MRR@10 and nDCG@10, and the method minus each
(paired, same bootstrap).

    python -m benchmarks.nq_strata --run nq-heldout/run-test-bm25-quarter-none.trec \\
        --qrels nq-heldout/qrels/test.tsv out-qwen-test out-qwen-slice-peers out-qwen-slice2-peers \\
        --peers langchain-listwise,llamaindex-llmrerank,llamaindex-rankgpt
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from gold_panning_integrations.evaluate._instances import complete_ranking
from gold_panning_integrations.ir.collection import read_qrels, read_run
from gold_panning_integrations.ir.ranking_metrics import (
    bootstrap_interval,
    paired_difference,
    per_query_metrics,
)

STRATA = ("first", "slice", "none")


def stratum(candidates: Sequence[str], judged: Mapping[str, int]) -> str:
    """``first``, ``slice`` or ``none`` for a question's first-stage ``candidates``."""
    if candidates and judged.get(candidates[0], 0) > 0:
        return "first"
    return "slice" if any(judged.get(d, 0) > 0 for d in candidates) else "none"


def _probabilities(path: Path) -> dict[str, dict[str, float]]:
    """Query id -> document id -> probability, from ``probabilities/<method>.jsonl``."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out[str(row["qid"])] = dict(zip(map(str, row["docs"]), map(float, row["probabilities"])))
    return out


def _load(
    paths: Sequence[Path], candidates: Mapping[str, Sequence[str]], *, top_n: int
) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, dict[str, float]]]]:
    """Method -> query id -> document ids best first, and method -> query id -> document id
    -> probability, from ``evaluate --out`` folders (``runs/*.trec``,
    ``probabilities/*.jsonl``) and checkpoints (their rows' indices into ``candidates``,
    completed to a ranking as ``evaluate`` does with ``top_n``);
    a later path wins for a question two of them hold."""
    rankings: dict[str, dict[str, list[str]]] = {}
    probabilities: dict[str, dict[str, dict[str, float]]] = {}
    for path in paths:
        if path.is_dir():
            for f in sorted((path / "runs").glob("*.trec")):
                found = read_run(f, depth=top_n).candidates
                rankings.setdefault(f.stem, {}).update({q: list(d) for q, d in found.items()})
            for f in sorted((path / "probabilities").glob("*.jsonl")):
                probabilities.setdefault(f.stem, {}).update(_probabilities(f))
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("type") != "row" or row["qid"] not in candidates:
                continue
            docs = list(candidates[row["qid"]])
            # as evaluate scores it: what the method returned, then the first stage's order
            # (all of it after an exception)
            order = complete_ranking(row["ranking"] or [], len(docs), top_n=top_n)
            rankings.setdefault(row["method"], {})[row["qid"]] = [docs[i] for i in order]
            if row.get("scores"):
                probabilities.setdefault(row["method"], {})[row["qid"]] = dict(zip(docs, row["scores"]))
    return rankings, probabilities


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.nq_strata", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "out", nargs="+", type=Path, help="gold-panning evaluate --out folders (or --checkpoint files)"
    )
    ap.add_argument("--run", type=Path, required=True, help="the first stage's run file over the whole split")
    ap.add_argument("--qrels", type=Path, required=True, help="the split's qrels (BEIR or TREC)")
    ap.add_argument("--depth", type=int, default=10, help="candidates per question (default 10)")
    ap.add_argument("--method", default="gp-defaults", help="the method compared (default gp-defaults)")
    ap.add_argument("--baseline", default="base", help="the first stage's row in the folders (default base)")
    ap.add_argument("--peers", default="", help="comma-separated methods for the per-stratum table")
    ap.add_argument(
        "--stratum", choices=STRATA, default="slice", help="the stratum of that table (default slice)"
    )
    ap.add_argument(
        "--against",
        nargs="+",
        type=Path,
        default=None,
        help="folders or checkpoints of another run of --method: compare with it instead of --baseline",
    )
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = ap.parse_args(argv)

    qrels, _ = read_qrels(args.qrels)
    run = read_run(args.run, depth=args.depth, queries=set(qrels))
    split = {q: stratum(c, qrels.get(q, {})) for q, c in run.candidates.items()}
    shares = {s: sum(v == s for v in split.values()) / len(split) for s in STRATA}

    rankings, probabilities = _load(args.out, run.candidates, top_n=args.depth)
    method, base = rankings.get(args.method, {}), rankings.get(args.baseline, {})
    against = f"{args.baseline}"
    if args.against:
        base = _load(args.against, run.candidates, top_n=args.depth)[0].get(args.method, {})
        against = f"{args.method} of {', '.join(str(p) for p in args.against)}"
    probs = probabilities.get(args.method, {})
    run_q = sorted(q for q in method if q in base and q in split)
    judged = {q: qrels.get(q, {}) for q in run_q}
    m = per_query_metrics(judged, {q: method[q] for q in run_q})
    b = per_query_metrics(judged, {q: base[q] for q in run_q})

    rng = np.random.default_rng(args.seed)
    print(f"{len(split)} questions in the split; {len(run_q)} run ({args.method} against {against})\n")
    print(
        "| stratum | share of the split | run | nDCG@10 difference [95% CI] | wins / losses / ties | MRR@10 difference |"
    )
    print("|---|---|---|---|---|---|")
    total, draws, missing = 0.0, np.zeros(4000), []
    for s in STRATA:
        qs = [q for q in run_q if split[q] == s]
        d = np.array([m[q]["ndcg@10"] - b[q]["ndcg@10"] for q in qs])
        r = np.array([m[q]["mrr@10"] - b[q]["mrr@10"] for q in qs])
        if not qs:
            print(f"| {s} | {shares[s]:.3f} | 0 | - | - | - |")
            if s != "none" and shares[s] > 0:  # "none" scores 0 whatever the order
                missing.append(s)
            continue
        lo, hi = bootstrap_interval(d, rng=rng)
        wlt = f"{(d > 1e-9).sum()} / {(d < -1e-9).sum()} / {(np.abs(d) <= 1e-9).sum()}"
        print(
            f"| {s} | {shares[s]:.3f} | {len(qs)} | {d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] | {wlt} | {r.mean():+.3f} |"
        )
        total += shares[s] * d.mean()
        draws += shares[s] * d[rng.integers(0, d.size, size=(draws.size, d.size))].mean(axis=1)
    if missing:
        print(f"\nthe split: not estimated (no question run in the {' or '.join(missing)} stratum)\n")
    else:
        lo, hi = np.quantile(draws, [0.025, 0.975])
        print(f"\nthe split, share-weighted: nDCG@10 difference {total:+.4f} [{lo:+.4f}, {hi:+.4f}]\n")

    print("| question | stratum | outcome | probability of the new first | the first stage's first |")
    print("|---|---|---|---|---|")
    for q in run_q:
        top, old = method[q][0], base[q][0]
        if top == old:
            continue
        rel = judged[q]
        outcome = "win" if rel.get(top, 0) > 0 else ("loss" if rel.get(old, 0) > 0 else "other")
        p = probs.get(q, {})
        shown = [f"{p[d]:.2f}" if d in p else "-" for d in (top, old)]
        print(f"| {q} | {split[q]} | {outcome} | {shown[0]} | {shown[1]} |")
    if args.peers:
        _peer_table(args, split, rankings, judged_all=qrels, rng=rng)
    return 0


def _peer_table(
    args: argparse.Namespace,
    split: Mapping[str, str],
    rankings: Mapping[str, Mapping[str, list[str]]],
    *,
    judged_all: Mapping[str, Mapping[str, int]],
    rng: np.random.Generator,
) -> None:
    """Every method on the questions of ``args.stratum`` that all of them ran."""
    names = [args.baseline, args.method, *[p for p in args.peers.split(",") if p]]
    rankings = {n: rankings.get(n, {}) for n in names}
    qs = sorted(q for q in split if split[q] == args.stratum and all(q in rankings[n] for n in names))
    judged = {q: judged_all.get(q, {}) for q in qs}
    scores = {n: per_query_metrics(judged, {q: rankings[n][q] for q in qs}) for n in names}
    print(f"\n{len(qs)} questions of the {args.stratum!r} stratum ran by every method\n")
    if not qs:
        return
    print(
        f"| method | nDCG@10 | MRR@10 [95% CI] | {args.method} minus it, MRR@10 [95% CI] (wins / losses / ties) |"
    )
    print("|---|---|---|---|")
    ours = [scores[args.method][q]["mrr@10"] for q in qs]
    for n in names:
        mrr = [scores[n][q]["mrr@10"] for q in qs]
        lo, hi = bootstrap_interval(mrr, rng=rng)
        ndcg = np.mean([scores[n][q]["ndcg@10"] for q in qs])
        cell = "-"
        if n != args.method:
            d = paired_difference(ours, mrr, rng=rng)
            cell = f"{d['mean_diff']:+.3f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}] ({d['wins']} / {d['losses']} / {d['ties']})"
        print(f"| {n} | {ndcg:.3f} | {np.mean(mrr):.3f} [{lo:.2f}, {hi:.2f}] | {cell} |")


if __name__ == "__main__":
    raise SystemExit(main())
