"""What the probe's signals say about "no relevant passage in the top 10", alone and beside
the bundled score map's prior (``p_none`` of the map's probabilities): AUROC of each, and
the leave-one-out AUROC of a logistic regression (ridge 1, standardised) on the prior's
``logit(p_none)`` with and without each signal.

    python docs/runs/qwen-nq-probe-2026-11-28/analyse.py docs/runs/qwen-nq-probe-2026-11-28/probe-calibration.jsonl
"""

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from gold_panning_integrations.calibration.metrics import auroc
from gold_panning_integrations.engine.priors import ScoreMap
from gold_panning_integrations.profiles import load_profile

rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
none = np.array([not r["relevant"] for r in rows])
smap = load_profile("qwen2.5-coder-0.5b-nq").score_map
assert smap is not None
score_map = ScoreMap(**smap)


def prior_logit(scores: list[float]) -> float:
    p_none = float(np.prod(1.0 - score_map.probabilities(np.asarray(scores))))
    return float(np.log(p_none / (1.0 - p_none)))


signals = {  # each oriented so that a higher value says "nothing relevant"
    "prior p_none (score map)": [prior_logit(r["scores"]) for r in rows],
    "answer: mean token surprisal": [-np.mean([lp for _, lp in r["tokens"]]) for r in rows],
    "answer: first token surprisal": [-r["tokens"][0][1] for r in rows],
    "answer: no passage credited": [float(not r["cited"]) for r in rows],
    "answer: says unknown": [float("unknown" in r["answer"].lower()) for r in rows],
    "yes/no: -log max P(yes), top 3": [-np.log(max(y for y in r["yes"] if y is not None)) for r in rows],
    "yes/no: -log P(yes), top 1": [-np.log(r["yes"][0]) for r in rows],
}


def fit(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ridge (1) logistic regression weights on the columns of ``z`` (the first: ones)."""
    return minimize(
        lambda w: np.sum(np.logaddexp(0, z @ w)) - y @ (z @ w) + np.sum(w[1:] ** 2), np.zeros(z.shape[1])
    ).x


def loo(x: np.ndarray) -> float:
    """Leave-one-out AUROC of a ridge logistic regression on the columns of ``x``."""
    out = np.zeros(len(none))
    for i in range(len(none)):
        keep = np.arange(len(none)) != i
        mu, sd = x[keep].mean(0), x[keep].std(0) + 1e-9
        z = np.c_[np.ones(keep.sum()), (x[keep] - mu) / sd]
        w = fit(z, none[keep].astype(float))
        out[i] = np.r_[1.0, (x[i] - mu) / sd] @ w
    return float(auroc(out, none))


prior = np.array(signals["prior p_none (score map)"])
print(f"{len(rows)} calibration questions, {int(none.sum())} with no relevant passage in the top 10")
print("| signal | AUROC alone | leave-one-out AUROC with the prior |")
print("|---|---|---|")
for name, values in signals.items():
    v = np.array(values, dtype=float)
    both = loo(prior[:, None]) if name.startswith("prior") else loo(np.c_[prior, v])
    print(f"| {name} | {auroc(v, none):.3f} | {both:.3f} |")
