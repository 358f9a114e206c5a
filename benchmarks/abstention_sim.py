"""What the way out's first-token probability (``Reading.abstain_p``) adds, on a simulated
reader that carries soft evidence (issue 42: "measure what each adds, on the simulator
with a soft-evidence reader").

The reader is a weak one, as the 0.5B model is: it follows the generic ``lost-in-the-middle``
rates for the relevant documents it recognises, but a relevant document is a blind spot
(cited like an irrelevant one) with probability ``--blind`` (default 0.4). Each reply's
first token gives the way out a probability whose log-odds are drawn from a normal
distribution: mean ``--seen`` (default -1.0) when the prompt shows a relevant document
the reader recognises, ``--unseen`` (default +0.5) otherwise, standard deviation 1.5.
Questions have 0, 1 or 2 relevant documents among 20 (probabilities 0.25 / 0.5 / 0.25).

1. Training: ``--traces`` labelled traces of the library's panner (defaults, flat prior),
   the profile learned from them by :func:`learn_profile` (the code of ``gold-panning
   calibrate --from-traces``), its ``abstention_map`` included.
2. Evaluation: ``--queries`` other questions (another seed), panned with the learned
   profile with and without its ``abstention_map`` (the same replies: each question's
   reader is seeded the same in both arms, so the first round is read alike). Printed per
   arm: per-document ECE, ``p_none`` AUROC for "no relevant candidate", nDCG-free top-1
   accuracy on questions with a relevant document, and mean ``p_none`` by truth.

    python -m benchmarks.abstention_sim --traces 200 --queries 1000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.calibration.metrics import auroc, ece
from gold_panning_integrations.calibration.traces import learn_profile, trace_record
from gold_panning_integrations.engine.positions import resample_curve

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
N = 20
COUNTS = (0.25, 0.5, 0.25)
SPREAD = 1.5


class SoftReader:
    """Cites at the profile's rates the relevant documents it recognises (the others like
    irrelevant ones) and gives the way out a drawn first-token probability."""

    def __init__(self, blind: set[str], *, seen: float, unseen: float, rng: np.random.Generator) -> None:
        self.blind, self.seen, self.unseen, self.rng = blind, seen, unseen, rng

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        m = len(documents)
        tpr, fpr = resample_curve(PROFILE.tpr_array, m), resample_curve(PROFILE.fpr_array, m)
        known = np.array([d.startswith("GOLD") and d not in self.blind for d in documents])
        cited = self.rng.random(m) < np.where(known, tpr, fpr)
        z = self.rng.normal(self.seen if known.any() else self.unseen, SPREAD)
        return Reading(cited=tuple(np.flatnonzero(cited).tolist()), abstain_p=float(1.0 / (1.0 + np.exp(-z))))


def _question(rng: np.random.Generator, blind_rate: float) -> tuple[list[str], list[int], set[str]]:
    count = int(rng.choice(len(COUNTS), p=COUNTS))
    gold = sorted(int(g) for g in rng.choice(N, size=count, replace=False))
    docs = [f"GOLD{i}" if i in gold else f"d{i}" for i in range(N)]
    blind = {docs[g] for g in gold if rng.random() < blind_rate}
    return docs, gold, blind


def _pan(
    profile: DetectorProfile, args: argparse.Namespace, *, queries: int, seed: int
) -> list[tuple[Any, list[int]]]:
    out = []
    for q in range(queries):
        rng = np.random.default_rng([seed, q])
        docs, gold, blind = _question(rng, args.blind)
        reader = SoftReader(blind, seen=args.seen, unseen=args.unseen, rng=rng)
        out.append((GoldPanner(reader, profile, retriever_prior="none", rng=q).run("q", docs), gold))
    return out


def _summary(runs: list[tuple[Any, list[int]]]) -> dict[str, float]:
    p = np.array([r.posteriors for r, _ in runs])
    y = np.zeros_like(p, dtype=bool)
    for i, (_, gold) in enumerate(runs):
        y[i, gold] = True
    none = ~y.any(axis=1)
    p_none = np.array([r.p_none for r, _ in runs])
    some = ~none
    top1 = float(np.mean(y[some, np.argmax(p[some], axis=1)]))
    return {
        "ece": ece(p.ravel(), y.ravel()),
        "p_none_auroc": float("nan") if (a := auroc(p_none, none)) is None else a,
        "top1": top1,
        "p_none|none": float(p_none[none].mean()),
        "p_none|some": float(p_none[some].mean()),
    }


def measure(args: argparse.Namespace) -> tuple[DetectorProfile, dict[str, dict[str, float]]]:
    """The profile learned from ``args.traces`` labelled traces and, per arm (``citations
    only``, ``citations + abstain_p``), :func:`_summary` of ``args.queries`` other questions."""
    train = [trace_record(r, relevant=g) for r, g in _pan(PROFILE, args, queries=args.traces, seed=args.seed)]
    learned = learn_profile(train, PROFILE).profile
    arms = {
        "citations only": learned.model_copy(update={"abstention_map": None}),
        "citations + abstain_p": learned,
    }
    return learned, {
        name: _summary(_pan(prof, args, queries=args.queries, seed=args.seed + 1))
        for name, prof in arms.items()
    }


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--blind", type=float, default=0.4)
    ap.add_argument("--seen", type=float, default=-1.0)
    ap.add_argument("--unseen", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    learned, rows = measure(args)
    print(
        f"learned from {args.traces} labelled traces: abstention_map {learned.abstention_map}, "
        f"expected_relevant {learned.expected_relevant}, blind_rate {learned.blind_rate}, "
        f"silent_rate {learned.silent_rate}"
    )
    print("| reading | ECE | p_none AUROC | top-1 (some relevant) | mean p_none: none / some |")
    print("|---|---|---|---|---|")
    for name, s in rows.items():
        print(
            f"| {name} | {s['ece']:.4f} | {s['p_none_auroc']:.3f} | {s['top1']:.3f} | "
            f"{s['p_none|none']:.3f} / {s['p_none|some']:.3f} |"
        )
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
