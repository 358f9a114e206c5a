"""``gold-panning bench engine``: speed and memory of the engine and the batch simulator.

Measured in one process, each figure next to a plain :func:`numpy.argsort` of the same
size timed in the same run, so the ratios carry over between machines:

* **engine round** at ``N`` documents: placement scores (GP-Belief), the greedy
  assignment of documents to positions, and the Bayesian update, on arrays of size
  ``N``; and a full :class:`~gold_panning_integrations.engine.panner.GoldPanner` round
  (planning, prompt order, the call of a trivial in-memory reader, validation, update,
  trace) per round of an 8-round run.
* **simulator throughput**: wall time of ``simulate`` for 5,000 trials x ``N = 100`` x
  8 rounds x 3 policies (GP-Belief, GP-Entropy, PSC), and trials x rounds per second.
* **simulator memory**: peak traced allocation (:mod:`tracemalloc`, which sees numpy's
  buffers) of 5,000 trials at ``N = 1,000``, and the process's peak resident set size.

Targets (from the project's issue): engine round <= 1 ms at ``N = 1,000``, <= 50 ms at
``N = 100,000`` (checked on the full GoldPanner round), simulator <= 5 s, memory < 2 GB.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.assignment import assign, position_order
from ..engine.beliefs import log_likelihood_ratios, update_log_odds
from ..engine.curves import resample_curve
from ..panning import GoldPanner  # resolves the profile (None: the generic one)
from ..engine.policies import score_documents
from ..engine.reading import Reading
from ..engine.simulate import simulate
from ..profiles import DetectorProfile

__all__ = [
    "TARGETS",
    "time_call",
    "engine_round",
    "panner_round",
    "simulator_throughput",
    "simulator_memory",
    "profile_panner",
    "run_engine_bench",
    "format_engine_report",
    "register",
    "main",
]

TARGETS: dict[str, float] = {
    "panner_round_ms_at_1000": 1.0,
    "panner_round_ms_at_100000": 50.0,
    "simulator_seconds": 5.0,
    "simulator_peak_gb": 2.0,
}


def time_call(fn: Callable[[], Any], *, repeat: int = 7, min_batch_seconds: float = 0.02) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` batches.

    The batch size is chosen so one batch takes at least ``min_batch_seconds`` (so
    microsecond-scale calls are not dominated by the timer).
    """
    fn()  # warm-up
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_batch_seconds or number >= 1 << 16:
            break
        number *= 2
    runs = [dt / number]
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return float(np.median(runs))


def _profile_arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    p = DetectorProfile.bundled("lost-in-the-middle")
    return resample_curve(p.tpr, n), resample_curve(p.fpr, n)


class _FixedReader:
    """Trivial in-memory reader: cites the first shown document every round."""

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        return Reading(cited=(0,) if documents else ())


def engine_round(n: int, *, rng: np.random.Generator, repeat: int = 7) -> dict[str, float]:
    """Seconds of one engine round's array work at ``n`` documents (median).

    Returns:
        ``{"score", "assign", "update", "round", "argsort"}`` in seconds; ``round`` is
        score + assign + update timed together, ``argsort`` a plain ``np.argsort`` of
        ``n`` random floats.
    """
    tpr, fpr = _profile_arrays(n)
    order = position_order(tpr, fpr)
    llr_c, llr_m = log_likelihood_ratios(tpr, fpr)
    lo = rng.normal(size=n)
    cited = rng.random(n) < 0.02
    scores = score_documents("belief", lo, rng=rng)
    pos = assign(scores, order)
    x = rng.random(n)

    def full() -> None:
        s = score_documents("belief", lo, rng=rng)
        p = assign(s, order)
        update_log_odds(lo, p, cited, llr_c, llr_m)

    return {
        "score": time_call(lambda: score_documents("belief", lo, rng=rng), repeat=repeat),
        "assign": time_call(lambda: assign(scores, order), repeat=repeat),
        "update": time_call(lambda: update_log_odds(lo, pos, cited, llr_c, llr_m), repeat=repeat),
        "round": time_call(full, repeat=repeat),
        "argsort": time_call(lambda: np.argsort(x), repeat=repeat),
    }


def panner_round(n: int, *, rounds: int = 8, repeat: int = 5, seed: int = 0) -> dict[str, float]:
    """Seconds per round of a full :class:`GoldPanner` run with a trivial reader.

    Returns:
        ``{"round": seconds per round (whole run / rounds), "run": seconds per run}``
        (medians over ``repeat`` runs).
    """
    docs = [f"document {i}" for i in range(n)]
    panner = GoldPanner(_FixedReader(), rounds=rounds, prior="uniform", rng=seed)
    run = time_call(lambda: panner.run("question", docs), repeat=repeat, min_batch_seconds=0.0)
    return {"round": run / rounds, "run": run}


def profile_panner(n: int, *, rounds: int = 8, top: int = 12) -> list[dict[str, Any]]:
    """cProfile of one GoldPanner run at ``n`` documents: the ``top`` functions by own time.

    Returns:
        ``[{"function", "calls", "own_ms_per_round", "cum_ms_per_round"}]``.
    """
    docs = [f"document {i}" for i in range(n)]
    panner = GoldPanner(_FixedReader(), rounds=rounds, prior="uniform", rng=0)
    prof = cProfile.Profile()
    prof.enable()
    panner.run("question", docs)
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = file.split("gold_panning_integrations/")[-1] if "gold_panning_integrations" in file else file
        rows.append(
            {
                "function": f"{short}:{line}({func})",
                "calls": nc,
                "own_ms_per_round": 1000 * tt / rounds,
                "cum_ms_per_round": 1000 * ct / rounds,
            }
        )
    rows.sort(key=lambda r: -r["own_ms_per_round"])
    return rows[:top]


def simulator_throughput(
    *, trials: int = 5000, n: int = 100, rounds: int = 8, seed: int = 0
) -> dict[str, float]:
    """Wall time of :func:`simulate` for GP-Belief, GP-Entropy and PSC.

    Returns:
        ``{"seconds", "trial_rounds_per_second", "argsort_seconds", "ratio"}``;
        ``argsort_seconds`` is one row-wise ``np.argsort`` of a ``(trials, n)`` array.
    """
    p = DetectorProfile.bundled("lost-in-the-middle")
    policies = ("belief", "entropy", "random")
    t0 = time.perf_counter()
    simulate(p.tpr, p.fpr, n=n, rounds=rounds, trials=trials, policies=policies, rng=seed)
    seconds = time.perf_counter() - t0
    x = np.random.default_rng(seed).random((trials, n))
    base = time_call(lambda: np.argsort(x, axis=1), repeat=5)
    return {
        "trials": trials,
        "n": n,
        "rounds": rounds,
        "policies": len(policies),
        "seconds": seconds,
        "trial_rounds_per_second": trials * rounds / seconds,
        "argsort_seconds": base,
        "ratio": seconds / base,
    }


def simulator_memory(*, trials: int = 5000, n: int = 1000, rounds: int = 8, seed: int = 0) -> dict[str, float]:
    """Peak memory of :func:`simulate` for 5,000 trials at ``N = 1,000`` (3 policies).

    Returns:
        ``{"traced_peak_mb", "maxrss_mb", "seconds"}``: the peak of allocations traced by
        :mod:`tracemalloc` during the call (numpy buffers included) and the process's
        peak resident set size afterwards (``resource.getrusage``; includes the
        interpreter and everything measured before).
    """
    p = DetectorProfile.bundled("lost-in-the-middle")
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        simulate(p.tpr, p.fpr, n=n, rounds=rounds, trials=trials, policies=("belief", "entropy", "random"), rng=seed)
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_mb = rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux
    return {"trials": trials, "n": n, "traced_peak_mb": peak / 2**20, "maxrss_mb": rss_mb, "seconds": seconds}


def run_engine_bench(
    *,
    ns: Sequence[int] = (100, 1000, 100_000),
    seed: int = 0,
    sim_trials: int = 5000,
    memory: bool = True,
    profile: bool | None = None,
) -> dict[str, Any]:
    """Run every measurement and return a JSON-ready dict.

    Args:
        ns: Document counts for the per-round timings.
        seed: Seed of the random inputs.
        sim_trials: Trials of the throughput and memory runs.
        memory: Run the memory measurement (5,000 trials at N = 1,000: a few seconds).
        profile: Profile a GoldPanner run at the largest ``n``: True always, False
            never, None (default) only when its round misses the 50 ms target.

    Returns:
        ``{"engine": [{n, score_ms, assign_ms, update_ms, round_ms, panner_round_ms,
        argsort_ms, round_vs_argsort, panner_vs_argsort}], "simulator", "memory",
        "targets", "profile"}``.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for n in ns:
        e = engine_round(n, rng=rng)
        pr = panner_round(n, seed=seed, repeat=5 if n <= 10_000 else 3)
        rows.append(
            {
                "n": n,
                "score_ms": 1e3 * e["score"],
                "assign_ms": 1e3 * e["assign"],
                "update_ms": 1e3 * e["update"],
                "round_ms": 1e3 * e["round"],
                "panner_round_ms": 1e3 * pr["round"],
                "argsort_ms": 1e3 * e["argsort"],
                "round_vs_argsort": e["round"] / e["argsort"],
                "panner_vs_argsort": pr["round"] / e["argsort"],
            }
        )
    sim = simulator_throughput(trials=sim_trials, seed=seed)
    mem = simulator_memory(trials=sim_trials, seed=seed) if memory else None
    by_n = {r["n"]: r for r in rows}
    checks: dict[str, Any] = {}
    if 1000 in by_n:
        checks["panner_round_ms_at_1000"] = by_n[1000]["panner_round_ms"]
    if 100_000 in by_n:
        checks["panner_round_ms_at_100000"] = by_n[100_000]["panner_round_ms"]
    checks["simulator_seconds"] = sim["seconds"]
    if mem is not None:
        checks["simulator_peak_gb"] = max(mem["traced_peak_mb"], mem["maxrss_mb"]) / 1024
    targets = {
        key: {"value": value, "target": TARGETS[key], "met": bool(value <= TARGETS[key])}
        for key, value in checks.items()
    }
    big = max(ns)
    slow = by_n[big]["panner_round_ms"] > TARGETS["panner_round_ms_at_100000"]
    prof = profile_panner(big) if (profile or (profile is None and slow and big >= 100_000)) else None
    return {"engine": rows, "simulator": sim, "memory": mem, "targets": targets, "profile": prof}


def format_engine_report(res: dict[str, Any]) -> str:
    """Plain-text tables of :func:`run_engine_bench`'s output."""
    from ..commands._util import format_table

    out = [
        "Engine round (ms; median): score + assign + update on arrays, and a full GoldPanner "
        "round with a trivial reader; ratios against np.argsort of the same size",
        format_table(
            ["N", "score", "assign", "update", "engine", "GoldPanner", "argsort", "engine/argsort", "panner/argsort"],
            [
                [
                    r["n"],
                    f"{r['score_ms']:.4f}",
                    f"{r['assign_ms']:.4f}",
                    f"{r['update_ms']:.4f}",
                    f"{r['round_ms']:.4f}",
                    f"{r['panner_round_ms']:.4f}",
                    f"{r['argsort_ms']:.4f}",
                    f"{r['round_vs_argsort']:.1f}x",
                    f"{r['panner_vs_argsort']:.1f}x",
                ]
                for r in res["engine"]
            ],
        ),
    ]
    s = res["simulator"]
    out.append(
        f"\nSimulator: {s['trials']} trials x N={s['n']} x {s['rounds']} rounds x {s['policies']} policies "
        f"in {s['seconds']:.2f} s ({s['trial_rounds_per_second']:,.0f} trial-rounds/s; "
        f"{s['ratio']:.0f}x one row-wise argsort of ({s['trials']}, {s['n']}) = {1e3 * s['argsort_seconds']:.2f} ms)"
    )
    m = res.get("memory")
    if m:
        out.append(
            f"Memory: {m['trials']} trials at N={m['n']}: traced peak {m['traced_peak_mb']:.0f} MB, "
            f"process peak RSS {m['maxrss_mb']:.0f} MB ({m['seconds']:.1f} s)"
        )
    out.append("\nTargets:")
    for key, t in res["targets"].items():
        out.append(f"  {key:28s} {t['value']:10.3f}  <= {t['target']:<6g} {'met' if t['met'] else 'MISSED'}")
    if res.get("profile"):
        out.append("\nGoldPanner run profile at the largest N (own time per round, top functions):")
        out.append(
            format_table(
                ["function", "calls", "own ms/round", "cum ms/round"],
                [
                    [r["function"], r["calls"], f"{r['own_ms_per_round']:.2f}", f"{r['cum_ms_per_round']:.2f}"]
                    for r in res["profile"]
                ],
            )
        )
    return "\n".join(out)


def register(subparsers: Any) -> None:
    """Add ``bench engine`` to the ``gold-panning bench`` sub-parsers."""
    p = subparsers.add_parser(
        "engine",
        help="engine and simulator speed and memory",
        description=(
            "Time one engine round at N = 100, 1,000, 100,000 (array work and a full GoldPanner "
            "round with a trivial reader), simulator throughput and peak memory, each against "
            "np.argsort of the same size measured in the same run."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--no-memory", action="store_true", help="skip the 5,000 x N=1,000 memory run")
    p.add_argument(
        "--profile", action="store_true", help="always profile a GoldPanner run at the largest N"
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``gold-panning bench engine``."""
    from ..commands._util import print_json

    res = run_engine_bench(seed=args.seed, memory=not args.no_memory, profile=True if args.profile else None)
    if args.json:
        print_json({"command": "gold-panning bench engine", **res})
    else:
        print(format_engine_report(res))
    return 0
