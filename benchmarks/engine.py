"""``python -m benchmarks engine``: speed and memory of the engine and the batch simulator.

Measured in one process, each figure next to a plain :func:`numpy.argsort` of the same
size timed in the same run, their batches interleaved (:func:`time_pair`) so that both
see the same load on a shared machine; the ratios carry over between machines better
than the milliseconds do:

* **engine round** at ``N`` documents: placement scores (GP-Belief), the greedy
  assignment of documents to positions, and the Bayesian update, on arrays of size
  ``N``; and a full :class:`~gold_panning_integrations.GoldPanner` round
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
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks._readers import FirstCitingReader
from gold_panning_integrations.engine.beliefs import log_likelihood_ratios, score_documents, update_log_odds
from gold_panning_integrations.engine.positions import assign, position_order, resample_curve
from gold_panning_integrations.engine.simulator import simulate
from gold_panning_integrations.panning import GoldPanner
from gold_panning_integrations.profiles import DetectorProfile, load_profile

__all__ = [
    "TARGETS",
    "engine_round",
    "format_engine_report",
    "main",
    "panner_round",
    "peak_rss_mb",
    "profile_panner",
    "register",
    "run_engine_bench",
    "simulator_memory",
    "simulator_throughput",
    "time_call",
    "time_pair",
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


def time_pair(
    fn: Callable[[], Any],
    ref: Callable[[], Any],
    *,
    repeat: int = 7,
    min_batch_seconds: float = 0.02,
    ref_min_batch_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds per call of ``fn`` and of a reference ``ref``, their batches interleaved.

    Each of the ``repeat`` pairs times one batch of ``fn`` and right after one batch of
    ``ref`` (batch sizes chosen as in :func:`time_call`), so both see the same load on
    a shared machine; the ratio is the median of the per-pair ratios, which is steadier
    than a ratio of medians taken at different moments. ``ref_min_batch_seconds``
    (default ``min_batch_seconds``) sizes ``ref``'s batches separately, e.g. one slow
    ``fn`` call against many fast ``ref`` calls. ``clock`` is injectable for tests.

    Returns:
        ``{"fn": median seconds per fn call, "ref": median seconds per ref call,
        "ratio": median of (fn / ref) over the pairs}``.
    """
    fn()
    ref()
    n_fn = _batch_size(fn, min_batch_seconds, clock)
    n_ref = _batch_size(
        ref, min_batch_seconds if ref_min_batch_seconds is None else ref_min_batch_seconds, clock
    )
    a, b = [], []
    for _ in range(repeat):
        a.append(_batch(fn, n_fn, clock))
        b.append(_batch(ref, n_ref, clock))
    ta, tb = np.asarray(a), np.asarray(b)
    return {"fn": float(np.median(ta)), "ref": float(np.median(tb)), "ratio": float(np.median(ta / tb))}


def _batch(fn: Callable[[], Any], number: int, clock: Callable[[], float]) -> float:
    t0 = clock()
    for _ in range(number):
        fn()
    return (clock() - t0) / number


def _batch_size(fn: Callable[[], Any], min_batch_seconds: float, clock: Callable[[], float]) -> int:
    """Calls per batch: doubled until a batch takes ``min_batch_seconds`` (1, uncalled, for 0)."""
    if min_batch_seconds <= 0:
        return 1
    number = 1
    while number < 1 << 16 and _batch(fn, number, clock) * number < min_batch_seconds:
        number *= 2
    return number


_PROFILE = "lost-in-the-middle"
"""The profile every measurement uses (named explicitly: no default-profile warning)."""


def _profile_arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    p = DetectorProfile.bundled(_PROFILE)
    return resample_curve(p.tpr, n), resample_curve(p.fpr, n)


def engine_round(n: int, *, rng: np.random.Generator, repeat: int = 7) -> dict[str, float]:
    """Seconds of one engine round's array work at ``n`` documents (median).

    Returns:
        ``{"score", "assign", "update", "round", "argsort", "round_vs_argsort"}``;
        ``round`` is score + assign + update timed together, ``argsort`` a plain
        ``np.argsort`` of ``n`` random floats timed in batches interleaved with
        ``round``'s (:func:`time_pair`), ``round_vs_argsort`` their paired ratio.
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

    pair = time_pair(full, lambda: np.argsort(x), repeat=repeat)
    return {
        "score": time_call(lambda: score_documents("belief", lo, rng=rng), repeat=repeat),
        "assign": time_call(lambda: assign(scores, order), repeat=repeat),
        "update": time_call(lambda: update_log_odds(lo, pos, cited, llr_c, llr_m), repeat=repeat),
        "round": pair["fn"],
        "argsort": pair["ref"],
        "round_vs_argsort": pair["ratio"],
    }


def panner_round(n: int, *, rounds: int = 8, repeat: int = 5, seed: int = 0) -> dict[str, float]:
    """Seconds per round of a full :class:`GoldPanner` run with a trivial reader.

    Returns:
        ``{"round": seconds per round (whole run / rounds), "run": seconds per run,
        "vs_argsort": seconds per round / seconds of one np.argsort of n floats}``
        (medians over ``repeat`` runs; the argsort batches interleaved with the runs,
        see :func:`time_pair`).
    """
    docs = [f"document {i}" for i in range(n)]
    panner = GoldPanner(
        FirstCitingReader(),
        profile=load_profile(_PROFILE),
        rounds=rounds,
        prompts_per_round=1,
        prior="uniform",
        retriever_prior="none",
        rng=seed,
    )
    x = np.random.default_rng(seed).random(n)
    pair = time_pair(
        lambda: panner.run("question", docs),
        lambda: np.argsort(x),
        repeat=repeat,
        min_batch_seconds=0.0,
        ref_min_batch_seconds=0.02,
    )
    return {"round": pair["fn"] / rounds, "run": pair["fn"], "vs_argsort": pair["ratio"] / rounds}


def profile_panner(n: int, *, rounds: int = 8, top: int = 12) -> list[dict[str, Any]]:
    """cProfile of one GoldPanner run at ``n`` documents: the ``top`` functions by own time.

    Returns:
        ``[{"function", "calls", "own_ms_per_round", "cum_ms_per_round"}]``.
    """
    docs = [f"document {i}" for i in range(n)]
    panner = GoldPanner(
        FirstCitingReader(),
        profile=load_profile(_PROFILE),
        rounds=rounds,
        prompts_per_round=1,
        prior="uniform",
        retriever_prior="none",
        rng=0,
    )
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
    *, trials: int = 5000, n: int = 100, rounds: int = 8, seed: int = 0, repeat: int = 3
) -> dict[str, float]:
    """Wall time of :func:`simulate` for GP-Belief, GP-Entropy and PSC (median of
    ``repeat`` runs after one warm-up, each followed by a batch of the reference).

    Returns:
        ``{"seconds", "trial_rounds_per_second", "argsort_seconds", "ratio"}``;
        ``argsort_seconds`` is one row-wise ``np.argsort`` of a ``(trials, n)`` array,
        ``ratio`` the median of the paired ratios (:func:`time_pair`).
    """
    p = DetectorProfile.bundled(_PROFILE)
    policies = ("belief", "entropy", "random")
    x = np.random.default_rng(seed).random((trials, n))
    pair = time_pair(
        lambda: simulate(p.tpr, p.fpr, n=n, rounds=rounds, trials=trials, policies=policies, rng=seed),
        lambda: np.argsort(x, axis=1),
        repeat=repeat,
        min_batch_seconds=0.0,
        ref_min_batch_seconds=0.02,
    )
    seconds, base = pair["fn"], pair["ref"]
    return {
        "trials": trials,
        "n": n,
        "rounds": rounds,
        "policies": len(policies),
        "repeat": repeat,
        "seconds": seconds,
        "trial_rounds_per_second": trials * rounds / seconds,
        "argsort_seconds": base,
        "ratio": pair["ratio"],
    }


def simulator_memory(
    *, trials: int = 5000, n: int = 1000, rounds: int = 8, seed: int = 0
) -> dict[str, float | None]:
    """Peak memory of :func:`simulate` for 5,000 trials at ``N = 1,000`` (3 policies).

    Returns:
        ``{"traced_peak_mb", "maxrss_mb", "seconds"}``: the peak of allocations traced by
        :mod:`tracemalloc` during the call (numpy buffers included) and the process's
        peak resident set size afterwards (``resource.getrusage``; includes the
        interpreter and everything measured before; None on Windows).
    """
    p = DetectorProfile.bundled("lost-in-the-middle")
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        simulate(
            p.tpr,
            p.fpr,
            n=n,
            rounds=rounds,
            trials=trials,
            policies=("belief", "entropy", "random"),
            rng=seed,
        )
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "trials": trials,
        "n": n,
        "traced_peak_mb": peak / 2**20,
        "maxrss_mb": peak_rss_mb(),
        "seconds": seconds,
    }


def peak_rss_mb() -> float | None:
    """The process's peak resident set size in MiB, or None where :mod:`resource` does
    not exist (Windows). Imported here, not at module level, so the CLI builds and the
    other measurements run on every platform."""
    try:
        import resource
    except ImportError:
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def run_engine_bench(
    *,
    ns: Sequence[int] = (100, 1000, 100_000),
    seed: int = 0,
    sim_trials: int = 5000,
    memory: bool = True,
    cprofile: bool | None = None,
) -> dict[str, Any]:
    """Run every measurement and return a JSON-ready dict.

    Args:
        ns: Document counts for the per-round timings.
        seed: Seed of the random inputs.
        sim_trials: Trials of the throughput and memory runs.
        memory: Run the memory measurement (5,000 trials at N = 1,000: a few seconds).
        cprofile: Run cProfile on a GoldPanner run at the largest ``n``: True always,
            False never, None (default) only when its round misses the 50 ms target.

    Returns:
        ``{"engine": [{n, score_ms, assign_ms, update_ms, round_ms, panner_round_ms,
        argsort_ms, round_vs_argsort, panner_vs_argsort}], "simulator", "memory",
        "targets", "cprofile"}``.
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
                "round_vs_argsort": e["round_vs_argsort"],
                "panner_vs_argsort": pr["vs_argsort"],
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
        checks["simulator_peak_gb"] = max(mem["traced_peak_mb"] or 0.0, mem["maxrss_mb"] or 0.0) / 1024
    targets = {
        key: {"value": value, "target": TARGETS[key], "met": bool(value <= TARGETS[key])}
        for key, value in checks.items()
    }
    big = max(ns)
    slow = by_n[big]["panner_round_ms"] > TARGETS["panner_round_ms_at_100000"]
    prof = profile_panner(big) if (cprofile or (cprofile is None and slow and big >= 100_000)) else None
    return {"engine": rows, "simulator": sim, "memory": mem, "targets": targets, "cprofile": prof}


def format_engine_report(res: dict[str, Any]) -> str:
    """Plain-text tables of :func:`run_engine_bench`'s output."""
    from gold_panning_integrations._console import format_table

    out = [
        (
            "Engine round (ms; median): score + assign + update on arrays, and a full GoldPanner "
            "round with a trivial reader; ratios against np.argsort of the same size (paired batches)"
        ),
        format_table(
            [
                "N",
                "score",
                "assign",
                "update",
                "engine",
                "GoldPanner",
                "argsort",
                "engine/argsort",
                "panner/argsort",
            ],
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
        f"in {s['seconds']:.2f} s (median of {s.get('repeat', 1)} runs; {s['trial_rounds_per_second']:,.0f} trial-rounds/s; "
        f"{s['ratio']:.0f}x one row-wise argsort of ({s['trials']}, {s['n']}) = {1e3 * s['argsort_seconds']:.2f} ms)"
    )
    m = res.get("memory")
    if m:
        out.append(
            f"Memory: {m['trials']} trials at N={m['n']}: traced peak {m['traced_peak_mb']:.0f} MB, "
            + (
                f"process peak RSS {m['maxrss_mb']:.0f} MB"
                if m["maxrss_mb"] is not None
                else "process peak RSS n/a"
            )
            + f" ({m['seconds']:.1f} s)"
        )
    out.append("\nTargets:")
    for key, t in res["targets"].items():
        out.append(f"  {key:28s} {t['value']:10.3f}  <= {t['target']:<6g} {'met' if t['met'] else 'MISSED'}")
    if res.get("cprofile"):
        out.append("\nGoldPanner run cProfile at the largest N (own time per round, top functions):")
        out.append(
            format_table(
                ["function", "calls", "own ms/round", "cum ms/round"],
                [
                    [
                        r["function"],
                        r["calls"],
                        f"{r['own_ms_per_round']:.2f}",
                        f"{r['cum_ms_per_round']:.2f}",
                    ]
                    for r in res["cprofile"]
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
            "np.argsort of the same size measured in the same run (batches interleaved, so the "
            "ratios hold on a loaded machine)."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--ns",
        type=int,
        nargs="+",
        default=[100, 1000, 100_000],
        metavar="N",
        help="document counts of the per-round timings (default 100 1000 100000; e.g. 20 for a query's overhead)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the 5,000 x N=1,000 memory run")
    p.add_argument(
        "--cprofile",
        action="store_true",
        help="always run cProfile on a GoldPanner run at the largest N (default: only when it misses its target)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks engine``."""
    from gold_panning_integrations._console import print_json

    res = run_engine_bench(
        ns=args.ns, seed=args.seed, memory=not args.no_memory, cprofile=True if args.cprofile else None
    )
    if args.json:
        print_json({"command": "python -m benchmarks engine", **res})
    else:
        print(format_engine_report(res))
    return 0
