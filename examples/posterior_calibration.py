"""How far can you read Gold Panning's posteriors as probabilities on your model?

Pans held-out one-sentence key-value instances (20 documents, the gold at a random
position; seed 1, while the bundled SmolLM2 profile was calibrated on seed 0) with the
paper's update and with the library's defaults, on the same instances and panner seeds,
and prints top-1 accuracy, the mean posterior of the pick, and how many wrong picks had a
posterior above 0.9. By default the embedded model; any OpenAI-compatible server with
``--base-url URL --model M``.

    python examples/posterior_calibration.py --instances 30
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from gold_panning_integrations import GoldPanner, PanningConfig
from gold_panning_integrations.tasks.kv import KVTask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=30)
    ap.add_argument("--n", type=int, default=20, help="documents per instance")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument(
        "--profile", default=None, help="default: the reader's own (smollm2-135m-kv for the embedded model)"
    )
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    if args.base_url:
        from gold_panning_integrations.readers import OpenAIReader

        reader = OpenAIReader(model=args.model or "default", base_url=args.base_url, mode="answer")
    else:
        from gold_panning_integrations.readers import LocalReader

        reader = LocalReader()
    rng = np.random.default_rng(1)
    task = KVTask()
    instances = [
        task.make(args.n, gold_position=int(rng.integers(args.n)), rng=rng) for _ in range(args.instances)
    ]
    report = {}
    for name, config in (("paper update", PanningConfig.paper()), ("library defaults", PanningConfig())):
        t0 = time.perf_counter()
        picks = []
        for i, inst in enumerate(instances):
            # the key-value documents come in no retriever order: the flat prior
            panner = GoldPanner(
                reader,
                profile=args.profile,
                task="kv",  # key-value facts: the reader's profile measured on them
                config=config,
                rounds=args.rounds,
                k=1,
                retriever_prior="none",
                rng=np.random.default_rng([5, i]),
            )
            res = panner.run(inst.question, list(inst.documents))
            top = int(res.selected[0])
            picks.append((top in inst.gold, float(res.posteriors[top])))
        report[name] = {
            "instances": len(picks),
            "accuracy": round(float(np.mean([c for c, _ in picks])), 3),
            "mean_top_posterior": round(float(np.mean([p for _, p in picks])), 3),
            "wrong_picks_above_0.9": sum(1 for c, p in picks if not c and p > 0.9),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
