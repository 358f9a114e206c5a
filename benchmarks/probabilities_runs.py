"""First-stage run files for the held-out NQ collection of docs/probabilities.md.

For each split of the collection ``benchmarks.probabilities_nq_collection`` writes, BM25
(the package's, bm25s, no stemming: what ``gold-panning evaluate`` uses without ``--run``)
ranks the corpus for every query and two TREC run files are written:

- ``run-<split>-bm25.trec``: BM25's top 10;
- ``run-<split>-bm25-quarter-none.trec``: the same, except that for a seeded quarter of
  the queries (listed in ``quarter-none-<split>.txt``) every passage judged relevant
  (level >= 1: the gold and every passage holding an answer) is removed first, so those
  queries have no relevant candidate: what a RAG chain meets when the corpus lacks the
  answer, and enough such queries to measure ``p_none``.

    python -m benchmarks.probabilities_runs nq-heldout
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gold_panning_integrations.ir.bm25 import BM25
from gold_panning_integrations.ir.collection import load_beir

SEEDS = {"calibration": 11, "test": 12}
"""The seed that chooses each split's emptied quarter."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the BEIR folder of probabilities_nq_collection")
    ap.add_argument("--depth", type=int, default=10, help="candidates per query (default 10)")
    args = ap.parse_args()
    for split, seed in SEEDS.items():
        c = load_beir(args.folder, split=split)
        ids = list(c.documents)
        bm25 = BM25([c.documents[d] for d in ids])
        qids = list(c.queries)
        emptied = set(np.random.default_rng(seed).choice(qids, size=len(qids) // 4, replace=False).tolist())
        natural: list[str] = []
        quarter: list[str] = []
        missing = 0
        for q in qids:
            hits = [(ids[i], s) for i, s in bm25.top_k(c.queries[q], 6 * args.depth) if s > 0.0]
            top = hits[: args.depth]
            missing += not any(c.qrels[q].get(d, 0) >= 1 for d, _ in top)
            natural += [f"{q} Q0 {d} {r + 1} {s:.4f} bm25\n" for r, (d, s) in enumerate(top)]
            if q in emptied:
                top = [(d, s) for d, s in hits if c.qrels[q].get(d, 0) < 1][: args.depth]
            quarter += [f"{q} Q0 {d} {r + 1} {s:.4f} bm25\n" for r, (d, s) in enumerate(top)]
        (args.folder / f"run-{split}-bm25.trec").write_text("".join(natural), encoding="utf-8")
        (args.folder / f"run-{split}-bm25-quarter-none.trec").write_text("".join(quarter), encoding="utf-8")
        (args.folder / f"quarter-none-{split}.txt").write_text(
            "\n".join(sorted(emptied)) + "\n", encoding="utf-8"
        )
        print(
            f"{split}: {len(qids)} queries, {missing} with no relevant passage in BM25's top {args.depth}, "
            f"{len(emptied)} emptied"
        )


if __name__ == "__main__":
    main()
