"""Would the score map gain from the question's length? BM25 sums one term per query
word, so its level grows with the question. A per-document map with and without the
feature ``log(words in the question)``, fitted on the 200 calibration-split questions
(logistic regression, ridge 1), and the AUROC of its ``p_none`` for "no relevant passage
in the top 10" on both splits. No model call.

    python docs/runs/qwen-nq-probe-2026-11-28/query_length.py nq-heldout
"""

import re
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from gold_panning_integrations.calibration.metrics import auroc
from gold_panning_integrations.ir.collection import load_beir

nq = Path(sys.argv[1])


def rows(split: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per candidate ``[score, log(1 + rank), log(words), relevant]``, and each question's row indices."""
    c = load_beir(nq, split=split, run=nq / f"run-{split}-bm25-quarter-none.trec", depth=10)
    assert c.candidates is not None and c.candidate_scores is not None
    out, groups = [], []
    for q, docs in c.candidates.items():
        words = len(re.findall(r"\w+", c.queries[q].lower()))
        groups.append(np.arange(len(out), len(out) + len(docs)))
        for rank, (d, s) in enumerate(zip(docs, c.candidate_scores[q])):
            out.append([s, np.log1p(rank), np.log(words), c.qrels.get(q, {}).get(d, 0) > 0])
    return np.array(out, dtype=float), groups


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = np.c_[np.ones(len(x)), x]
    return minimize(
        lambda w: np.sum(np.logaddexp(0, z @ w)) - y @ (z @ w) + np.sum(w[1:] ** 2), np.zeros(z.shape[1])
    ).x


def p_none_auroc(w: np.ndarray, cols: list[int], data: tuple[np.ndarray, list[np.ndarray]]) -> float:
    x, groups = data
    p = 1.0 / (1.0 + np.exp(-(np.c_[np.ones(len(x)), x[:, cols]] @ w)))
    p_none = np.array([np.prod(1.0 - p[g]) for g in groups])
    return float(auroc(p_none, np.array([not x[g, 3].any() for g in groups])))


cal, test = rows("calibration"), rows("test")
for name, cols in (
    ("score, log rank (the bundled map's form)", [0, 1]),
    ("+ log(words in the question)", [0, 1, 2]),
):
    w = fit(cal[0][:, cols], cal[0][:, 3])
    print(
        f"{name}: weights {np.round(w, 3).tolist()}, p_none AUROC calibration {p_none_auroc(w, cols, cal):.3f}, test {p_none_auroc(w, cols, test):.3f}"
    )
