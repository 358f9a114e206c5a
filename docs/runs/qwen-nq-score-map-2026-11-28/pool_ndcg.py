"""Pool ``gold-panning evaluate`` checkpoints of the same split: each question's nDCG@10
under GP defaults minus under the first stage (ir-measures, every judged document), their
mean and a 95% percentile bootstrap interval (2,000 draws, seed 0). A question in several
checkpoints counts once.

    python docs/runs/qwen-nq-score-map-2026-11-28/pool_ndcg.py nq-heldout/run-test-bm25-quarter-none.trec \\
        nq-heldout/qrels/test.tsv CHECKPOINT [CHECKPOINT ...]
"""

import json
import sys
from pathlib import Path

import numpy as np

from gold_panning_integrations.ir.collection import read_qrels, read_run
from gold_panning_integrations.ir.ranking_metrics import per_query_metrics

run = read_run(Path(sys.argv[1]), depth=10)
qrels, _ = read_qrels(Path(sys.argv[2]))
rows: dict[str, dict[str, list[int]]] = {}
for path in sys.argv[3:]:
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("type") == "row" and r["method"] in ("base", "gp-defaults") and not r.get("error"):
            rows.setdefault(r["qid"], {}).setdefault(r["method"], r["ranking"])
qids = [q for q, m in rows.items() if len(m) == 2]
ndcg = {
    method: per_query_metrics(
        {q: qrels.get(q, {}) for q in qids},
        {q: [run.candidates[q][i] for i in rows[q][method]] for q in qids},
    )
    for method in ("base", "gp-defaults")
}
key = next(k for k in ndcg["base"][qids[0]] if k.lower().startswith("ndcg"))
d = np.array([ndcg["gp-defaults"][q][key] - ndcg["base"][q][key] for q in qids])
rng = np.random.default_rng(0)
boots = [rng.choice(d, d.size).mean() for _ in range(2000)]
print(
    f"{len(qids)} questions; {key} difference {d.mean():+.4f} "
    f"[{np.quantile(boots, 0.025):+.4f}, {np.quantile(boots, 0.975):+.4f}]; "
    f"questions changed: {int((d != 0).sum())} (better {int((d > 0).sum())}, worse {int((d < 0).sum())})"
)
