"""nDCG@10 of the retriever's order and of a profile's replayed posteriors, from labelled
traces (``gold-panning evaluate --traces``): each query's prompts and replies read again
through ``profile`` (:func:`~gold_panning_integrations.calibration.recalibration.replay_log_odds`),
ranked, and scored on the questions that have a relevant candidate. A counterfactual: the
profile's own placements would have differed from round 2 on. No model call.

    python -m benchmarks.replay_ndcg test70-traces.jsonl qwen2.5-coder-0.5b-nq
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gold_panning_integrations.calibration.recalibration import replay_log_odds
from gold_panning_integrations.profiles import load_profile


def ndcg10(order: Sequence[int], relevant: set[int]) -> float:
    """Binary nDCG@10 of ``order`` (document indices, best first) against ``relevant``
    (non-empty). Example: relevant {1}, order [0, 1, ...]: 1/log2(3) = 0.631."""
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(order[:10]) if d in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return dcg / ideal


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", type=Path, help="labelled traces (JSONL), candidates in the retriever's order")
    ap.add_argument("profile", help="profile to replay through (bundled name or JSON path)")
    args = ap.parse_args(argv)
    prof = load_profile(args.profile)
    base, replay, stored = [], [], []
    for line in args.traces.read_text().splitlines():
        t = json.loads(line)
        rel = set(t.get("relevant") or [])
        if not rel:
            continue
        base.append(ndcg10(list(range(int(t["n"]))), rel))
        lo = np.asarray(replay_log_odds(t, prof))
        replay.append(ndcg10([int(i) for i in np.argsort(-lo, kind="stable")], rel))
        post = np.asarray(t["posteriors"])
        stored.append(ndcg10([int(i) for i in np.argsort(-post, kind="stable")], rel))
    b, r, s = (np.asarray(x) for x in (base, replay, stored))
    d = r - b
    rng = np.random.default_rng(0)
    boot = [float(rng.choice(d, d.size).mean()) for _ in range(2000)]
    lo_ci, hi_ci = np.percentile(boot, [2.5, 97.5])
    print(f"questions with a relevant candidate: {d.size}")
    print(
        f"nDCG@10: retriever {b.mean():.3f}; as stored {s.mean():.3f}; replayed {r.mean():.3f}; "
        f"replayed - retriever {d.mean():+.3f} [{lo_ci:+.3f}, {hi_ci:+.3f}]; "
        f"wins {int((d > 1e-9).sum())}, losses {int((d < -1e-9).sum())}"
    )


if __name__ == "__main__":
    main()
