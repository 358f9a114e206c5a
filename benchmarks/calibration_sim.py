"""Simulation studies of calibration in the field (issue 14): how much of GP-Belief's
calibrated advantage a cheap profile keeps.

Both studies run the code users run: :class:`~gold_panning_integrations.calibration.Calibrator`
with a profile-driven simulated reader (budgeted or fixed layout), and
:func:`~gold_panning_integrations.calibration.traces.learn_profile` on traces of
:class:`~gold_panning_integrations.GoldPanner` runs. Profiles are judged by
:func:`~gold_panning_integrations.engine.simulator.simulate`: the simulated model cites with
the *true* rates while GP-Belief places and updates with the *estimated* ones; every
comparison uses the same seed, so needles and citation draws are shared (paired).

* :func:`budget_study`: share of the calibrated advantage kept,
  ``(F1_belief(estimated) - F1_psc) / (F1_belief(true) - F1_psc)`` at round ``rounds``,
  for budgeted vs fixed-grid calibrations with the same number of calls.
* :func:`learning_study`: rate error and F1 of profiles learned from ``q`` unlabeled
  queries, starting from a wrong profile; gap closed
  ``(F1_learned - F1_start) / (F1_true - F1_start)``.

Run ``python -m benchmarks.calibration_sim --help``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gold_panning_integrations.calibration import Calibrator
from gold_panning_integrations.calibration.traces import learn_profile, trace_record
from gold_panning_integrations.engine.positions import resample_curve
from gold_panning_integrations.engine.simulator import SimulatedReader, simulate
from gold_panning_integrations.panning import GoldPanner
from gold_panning_integrations.profiles import DetectorProfile, load_profile
from gold_panning_integrations.tasks.base import TaskInstance

__all__ = [
    "MarkedTask",
    "belief_f1",
    "biased_profile",
    "budget_study",
    "calibrate_simulated",
    "learning_study",
    "simulated_traces",
]

logger = logging.getLogger(__name__)


class MarkedTask:
    """Synthetic calibration task: the gold document is ``"GOLD"``, distractors ``"d<i>"``."""

    name = "synthetic"

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        docs = [f"d{i}" for i in range(n)]
        docs[gold_position] = "GOLD"
        return TaskInstance("q", docs, (gold_position,), ("GOLD",), task=self.name)


def belief_f1(
    true: DetectorProfile, decision: DetectorProfile | None, *, n: int, rounds: int, trials: int, seed: int
) -> tuple[float, float]:
    """``(F1 of GP-Belief, F1 of PSC)`` at round ``rounds`` when the model follows ``true``
    and GP-Belief uses ``decision`` (``None``: the true rates). Same seed, same draws."""
    res = simulate(
        true.tpr,
        true.fpr,
        n=n,
        rounds=rounds,
        trials=trials,
        policies=("belief", "random"),
        rng=seed,
        decision_tpr=None if decision is None else decision.tpr,
        decision_fpr=None if decision is None else decision.fpr,
    )
    return float(res.policies["belief"].f1[-1]), float(res.policies["random"].f1[-1])


def calibrate_simulated(
    true: DetectorProfile, *, n: int, calls: int, layout: str, grid: int = 11, seed: int = 0
) -> DetectorProfile:
    """A profile measured with ``calls`` simulated calls, ``layout`` ``"budget"`` (sequential,
    least-certain position first) or ``"fixed"`` (trial-major over the grid)."""
    reader = SimulatedReader(true, relevant=lambda d: d == "GOLD", rng=np.random.default_rng(seed + 1))
    if layout == "budget":
        cal = Calibrator(reader, MarkedTask(), n=n, grid=grid, budget=calls, seed=seed)
        return cal.run().profile
    trials = math.ceil(calls / len(np.unique(np.rint(np.linspace(0, n - 1, min(grid, n))))))
    cal = Calibrator(reader, MarkedTask(), n=n, grid=grid, trials=trials, seed=seed)
    return cal.run(limit=calls).profile


def budget_study(
    true: DetectorProfile,
    *,
    n: int = 100,
    budgets: Sequence[int] = (50, 100, 200),
    repetitions: int = 40,
    trials: int = 2000,
    rounds: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """Share of the calibrated advantage kept by budgeted and fixed-grid calibrations.

    Returns:
        ``{"n", "rounds", "repetitions", "trials", "f1_true", "f1_psc", "rows": [{"budget",
        "layout", "share_mean", "share_ci95", "share_min", "lost_to_psc", "f1_mean"}]}``.
    """
    rows = []
    true_n = true.resample(n)
    ref = {}
    for r in range(repetitions):
        ref[r] = belief_f1(true_n, None, n=n, rounds=rounds, trials=trials, seed=seed + 1000 + r)
    f1_true = float(np.mean([v[0] for v in ref.values()]))
    f1_psc = float(np.mean([v[1] for v in ref.values()]))
    for b in budgets:
        for layout in ("budget", "fixed"):
            shares, f1s, lost = [], [], 0
            for r in range(repetitions):
                est = calibrate_simulated(true_n, n=n, calls=b, layout=layout, seed=seed + 7919 * r + b)
                f1_est, f1_psc_r = belief_f1(
                    true_n, est, n=n, rounds=rounds, trials=trials, seed=seed + 1000 + r
                )
                f1_t, _ = ref[r]
                shares.append((f1_est - f1_psc_r) / (f1_t - f1_psc_r))
                f1s.append(f1_est)
                lost += f1_est < f1_psc_r
            sh = np.asarray(shares)
            rows.append(
                {
                    "budget": b,
                    "layout": layout,
                    "share_mean": float(sh.mean()),
                    "share_ci95": float(1.96 * sh.std(ddof=1) / math.sqrt(sh.size)) if sh.size > 1 else 0.0,
                    "share_min": float(sh.min()),
                    "lost_to_psc": int(lost),
                    "f1_mean": float(np.mean(f1s)),
                }
            )
            logger.info("budget %d %s: share %.3f", b, layout, sh.mean())
    return {
        "n": n,
        "rounds": rounds,
        "repetitions": repetitions,
        "trials": trials,
        "f1_true": f1_true,
        "f1_psc": f1_psc,
        "rows": rows,
    }


def biased_profile(
    profile: DetectorProfile, *, tpr_scale: float = 1.3, fpr_scale: float = 3.0
) -> DetectorProfile:
    """A systematically wrong copy: TPR times ``tpr_scale`` and FPR times ``fpr_scale``
    (clipped into [0.001, 0.999])."""
    return profile.model_copy(
        update={
            "tpr": np.clip(profile.tpr_array * tpr_scale, 1e-3, 0.999).tolist(),
            "fpr": np.clip(profile.fpr_array * fpr_scale, 1e-3, 0.999).tolist(),
            "counts": None,
            "notes": f"biased copy (TPR x{tpr_scale}, FPR x{fpr_scale})",
        }
    )


def simulated_traces(
    true: DetectorProfile,
    start: DetectorProfile,
    *,
    queries: int,
    n: int,
    rounds: int,
    seed: int,
    labelled: bool = False,
) -> list[dict[str, Any]]:
    """Trace records of ``queries`` GoldPanner runs (one gold among ``n``) panned with
    ``start`` while the simulated model cites with ``true``; ``labelled`` records the gold
    (``relevant``)."""
    rng = np.random.default_rng(seed)
    out = []
    reader = SimulatedReader(true, relevant=lambda d: d == "GOLD", rng=rng)
    panner = GoldPanner(
        reader, profile=start, rounds=rounds, prompts_per_round=1, retriever_prior="none", rng=rng
    )
    for _ in range(queries):
        docs = [f"d{i}" for i in range(n)]
        gold = int(rng.integers(n))
        docs[gold] = "GOLD"
        out.append(trace_record(panner.run("q", docs), relevant=[gold] if labelled else None))
    return out


def learning_study(
    true: DetectorProfile,
    start: DetectorProfile,
    *,
    n: int = 20,
    query_counts: Sequence[int] = (50, 200, 1000),
    repetitions: int = 10,
    trials: int = 4000,
    rounds: int = 8,
    relevance: str = "independent",
    prior_strength: float = 3.0,
    seed: int = 0,
    labelled: bool = False,
) -> dict[str, Any]:
    """Rate error and F1 of profiles learned from traces (unlabelled, or ``labelled`` with
    each query's gold), from a wrong start.

    Rate error: mean absolute difference to the true TPR (and FPR) over the ``n``
    positions of the resampled profiles. F1: GP-Belief at round ``rounds`` with the
    profile's rates while the model follows ``true``.
    """
    true_n, start_n = true.resample(n), start.resample(n)
    f1_true, f1_psc = belief_f1(true_n, None, n=n, rounds=rounds, trials=trials, seed=seed)
    f1_start, _ = belief_f1(true_n, start_n, n=n, rounds=rounds, trials=trials, seed=seed)

    def err(p: DetectorProfile) -> tuple[float, float]:
        pt, pf = resample_curve(p.tpr, n), resample_curve(p.fpr, n)
        return float(np.mean(np.abs(pt - true_n.tpr_array))), float(np.mean(np.abs(pf - true_n.fpr_array)))

    rows = []
    e0 = err(start_n)
    rows.append(
        {
            "queries": 0,
            "tpr_err": e0[0],
            "fpr_err": e0[1],
            "f1": f1_start,
            "gap_closed": 0.0,
            "gap_closed_min": 0.0,
        }
    )
    for q in query_counts:
        f1s, gaps, te, fe = [], [], [], []
        for r in range(repetitions):
            traces = simulated_traces(
                true_n, start, queries=q, n=n, rounds=rounds, seed=seed + 104729 * r + q, labelled=labelled
            )
            learned = learn_profile(traces, start, relevance=relevance, prior_strength=prior_strength).profile  # type: ignore[arg-type]
            f1, _ = belief_f1(true_n, learned.resample(n), n=n, rounds=rounds, trials=trials, seed=seed)
            f1s.append(f1)
            gaps.append((f1 - f1_start) / (f1_true - f1_start) if f1_true != f1_start else float("nan"))
            a, b = err(learned)
            te.append(a)
            fe.append(b)
        rows.append(
            {
                "queries": q,
                "tpr_err": float(np.mean(te)),
                "fpr_err": float(np.mean(fe)),
                "f1": float(np.mean(f1s)),
                "gap_closed": float(np.mean(gaps)),
                "gap_closed_min": float(np.min(gaps)),
            }
        )
        logger.info("learn %d queries: gap closed %.3f (min %.3f)", q, np.mean(gaps), np.min(gaps))
    return {
        "n": n,
        "rounds": rounds,
        "repetitions": repetitions,
        "trials": trials,
        "relevance": relevance,
        "labelled": labelled,
        "f1_true": f1_true,
        "f1_start": f1_start,
        "f1_psc": f1_psc,
        "true_tpr_err_of_start": e0[0],
        "rows": rows,
    }


def real_comparison(
    reader: Any,
    profiles: dict[str, DetectorProfile],
    *,
    data: str,
    exclude_checkpoint: str | None = None,
    instances: int = 20,
    n: int = 10,
    rounds: int = 8,
    seed: int = 11,
    out: str | None = None,
) -> dict[str, Any]:
    """GoldPanner with each profile on the same held-out NQ instances, one real reader.

    Questions used by the calibration whose checkpoint is ``exclude_checkpoint`` are left
    out (its trial instances are rebuilt from their seeds). Identical prompts are answered
    once (greedy decoding). Each finished instance is appended to ``out`` (JSONL), and an
    existing ``out`` is resumed.

    Returns:
        ``{"instances_done", "n", "rounds", "profiles": {name: {"top1_by_round", "ci95"}},
        "model_calls", "cache_hits"}``.
    """
    from benchmarks._readers import CachedReader
    from gold_panning_integrations.evaluate._scoring import per_round_hits
    from gold_panning_integrations.tasks.nq import NQTask

    task = NQTask(data)
    used: set[int] = set()
    if exclude_checkpoint is not None:
        with open(exclude_checkpoint, encoding="utf-8") as fh:
            for line in fh:
                trial = json.loads(line)
                if trial.get("type") == "trial":
                    inst = task.make(
                        int(trial["n"]),
                        gold_position=int(trial["position"]),
                        rng=np.random.default_rng(int(trial["seed"])),
                    )
                    used.add(int(inst.metadata["question_index"]))
    held = NQTask(items=[it for i, it in enumerate(task.items) if i not in used])
    cached = CachedReader(reader)
    done: dict[int, dict[str, Any]] = {}
    if out is not None and Path(out).exists():
        with open(out, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    done[int(row["instance"])] = row
    rng = np.random.default_rng(seed)
    specs = [(int(rng.integers(n)), int(rng.integers(2**62))) for _ in range(instances)]
    for i, (gold_pos, inst_seed) in enumerate(specs):
        if i in done:
            continue
        inst = held.make(n, gold_position=gold_pos, rng=np.random.default_rng(inst_seed))
        rec: dict[str, Any] = {"instance": i, "gold": gold_pos, "question": inst.question, "hits": {}}
        for name, prof in profiles.items():
            panner = GoldPanner(
                cached,
                profile=prof,
                rounds=rounds,
                prompts_per_round=1,
                retriever_prior="none",
                rng=np.random.default_rng(inst_seed),
            )
            res = panner.run(inst.question, inst.documents)
            rec["hits"][name] = per_round_hits(
                res, inst.gold, rng=np.random.default_rng(0), rounds=rounds
            ).tolist()
        done[i] = rec
        logger.info("instance %d: %s", i, {k: v[-1] for k, v in rec["hits"].items()})
        if out is not None:
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")
    result: dict[str, Any] = {
        "instances_done": len(done),
        "n": n,
        "rounds": rounds,
        "held_out_questions": len(held.items),
        "excluded_questions": len(used),
        "profiles": {},
        "model_calls": cached.misses,
        "cache_hits": cached.hits,
    }
    for name in profiles:
        h = np.asarray([done[i]["hits"][name] for i in sorted(done)])
        mean = h.mean(axis=0)
        ci = 1.96 * h.std(axis=0, ddof=1) / math.sqrt(len(h)) if len(h) > 1 else np.zeros(rounds)
        result["profiles"][name] = {
            "top1_by_round": [round(float(x), 3) for x in mean],
            "ci95": [round(float(x), 3) for x in ci],
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.calibration_sim budget|learn [options]``."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.calibration_sim")
    p.add_argument("study", choices=("budget", "learn", "real"))
    p.add_argument("--profiles", default=None, help="real: NAME=PROFILE,NAME=PROFILE to compare")
    p.add_argument("--data", default=None, help="real: NQ JSONL(.gz)")
    p.add_argument(
        "--exclude-checkpoint", default=None, help="real: calibration checkpoint whose questions are held out"
    )
    p.add_argument("--instances", type=int, default=20)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="real: per-instance JSONL (resumable)")
    p.add_argument("--true", default="lost-in-the-middle", help="true profile (bundled name or path)")
    p.add_argument("--start", default="lost-in-the-middle", help="learn: starting profile, or 'biased'")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--repetitions", type=int, default=None)
    p.add_argument("--trials", type=int, default=None)
    p.add_argument("--relevance", default="independent", choices=("independent", "one"))
    p.add_argument("--prior-strength", type=float, default=3.0)
    p.add_argument("--labelled", action="store_true", help="learn: traces carry each query's gold")
    p.add_argument("--queries", default="50,200,1000")
    p.add_argument("--budgets", default="50,100,200")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    t0 = time.perf_counter()
    true = load_profile(args.true)
    if args.study == "real":
        from gold_panning_integrations.readers.local import LocalReader

        profiles = {k: load_profile(v) for k, v in (x.split("=", 1) for x in args.profiles.split(","))}
        out = real_comparison(
            LocalReader(mode="answer", n_threads=args.threads),
            profiles,
            data=args.data,
            exclude_checkpoint=args.exclude_checkpoint,
            instances=args.instances,
            n=args.n or 10,
            rounds=args.rounds,
            out=args.out,
        )
    elif args.study == "budget":
        out = budget_study(
            true,
            n=args.n or 100,
            budgets=[int(x) for x in args.budgets.split(",")],
            repetitions=args.repetitions or 40,
            trials=args.trials or 2000,
            seed=args.seed,
        )
    else:
        start = biased_profile(true) if args.start == "biased" else load_profile(args.start)
        out = learning_study(
            true,
            start,
            n=args.n or 20,
            query_counts=[int(x) for x in args.queries.split(",")],
            repetitions=args.repetitions or 10,
            trials=args.trials or 4000,
            relevance=args.relevance,
            prior_strength=args.prior_strength,
            seed=args.seed,
            labelled=args.labelled,
        )
    out["true"] = args.true
    out["start"] = args.start if args.study == "learn" else None
    out["seconds"] = round(time.perf_counter() - t0, 1)
    sys.stdout.write(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
