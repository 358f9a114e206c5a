"""``python -m benchmarks real-efficiency``: the efficiency report and posterior
calibration on a real model (default: the embedded SmolLM2).

For each held-out key-value instance a simulated base retriever orders the documents
(the needle is in its top 10 with probability ``top10``). Variants:

* ``psc``: random shuffles + majority vote, documents in random order, ``rounds`` rounds;
* ``gp-belief (paper)``: flat 0.5 prior, documents in random order;
* ``ours``: retriever order + rank prior, all rounds (gives the per-round curve);
* ``ours + stop@0.9 + prune``: the same with adaptive stopping and pruning.

A greedy reader is a deterministic function of the prompt, so the prompts that ``ours``
and ``ours + stop`` share are read once (:class:`~benchmarks._readers.CachedReader`).

Calibration: the expected calibration error (ECE) of ``ours``' final posteriors, before
and after an evidence temperature ``T`` (posterior = sigmoid(prior + evidence / T)),
with ``T`` fitted by log loss on the first half of the instances and the ECE measured
on the second half.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks._readers import CachedReader
from gold_panning_integrations.engine.beliefs import sigmoid
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.evaluate._scoring import per_round_hits
from gold_panning_integrations.panning import GoldPanner

from .efficiency import expected_calibration_error

__all__ = [
    "fit_evidence_temperature",
    "format_report",
    "main",
    "register",
    "report_rounds",
    "run_real_efficiency",
]

TEMPERATURES = np.round(np.exp(np.linspace(np.log(0.25), np.log(8.0), 61)), 4)


def fit_evidence_temperature(
    prior_lo: NDArray[np.float64], evidence: NDArray[np.float64], labels: NDArray[np.bool_]
) -> float:
    """Temperature ``T`` minimising the log loss of ``sigmoid(prior_lo + evidence / T)``
    over a log grid from 0.25 to 8. Shapes: all ``(m,)``."""
    y = labels.astype(np.float64)
    best, best_t = np.inf, 1.0
    for t in TEMPERATURES:
        p = np.clip(sigmoid(prior_lo + evidence / t), 1e-9, 1 - 1e-9)
        loss = -float(np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))
        if loss < best:
            best, best_t = loss, float(t)
    return best_t


def _retriever_order(n: int, gold: int, top10: float, rng: np.random.Generator) -> NDArray[np.intp]:
    """Document indices in simulated retriever order, the gold at a drawn rank."""
    others = rng.permutation([i for i in range(n) if i != gold])
    head = min(10, n)
    rank = int(rng.integers(0, head)) if (rng.random() < top10 or head == n) else int(rng.integers(head, n))
    return np.insert(others, rank, gold).astype(np.intp)


def run_real_efficiency(
    reader: Any,
    *,
    profile: Any,
    n: int = 20,
    instances: int = 12,
    rounds: int = 8,
    top10: float = 0.7,
    seed: int = 2,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run the variants on ``instances`` key-value instances; JSON-ready results."""
    from gold_panning_integrations.tasks.kv import KVTask

    task = KVTask()
    cached = CachedReader(reader)
    rng = np.random.default_rng(seed)
    variants = ("psc", "gp-belief (paper)", "ours", "ours + stop@0.9 + prune")
    hits = {v: np.zeros((instances, rounds)) for v in variants}
    calls = {v: np.zeros(instances) for v in variants}
    tokens = {v: np.zeros(instances) for v in variants}
    cal_rows: list[tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]] = []
    t0 = time.perf_counter()
    done = 0
    for i in range(instances):
        inst = task.make(n, gold_position=int(rng.integers(n)), rng=rng)
        gold = inst.gold[0]
        order_ret = _retriever_order(n, gold, top10, rng)
        order_rand = rng.permutation(n).astype(np.intp)
        prior = rank_prior_probs(n, k=1, top10_recall=top10)
        for vi, v in enumerate(variants):
            order = order_rand if v in ("psc", "gp-belief (paper)") else order_ret
            docs = [inst.documents[j] for j in order]
            g = int(np.flatnonzero(order == gold)[0])
            opts: dict[str, Any] = {}
            if v == "psc":
                opts = {"policy": "random"}
            elif v == "gp-belief (paper)":
                opts = {"prior": "uniform"}
            elif v == "ours + stop@0.9 + prune":
                opts = {"stop_at": 0.9, "prune_below": 0.05}
            prng = np.random.default_rng([seed, i, vi])
            panner = GoldPanner(
                cached,
                profile=profile,
                rounds=rounds,
                prompts_per_round=1,
                k=1,
                on_failure="fallback",
                retriever_prior="none",
                rng=prng,
                **opts,
            )
            res = panner.run(inst.question, docs, prior_probs=prior if v.startswith("ours") else None)
            hits[v][i] = per_round_hits(res, [g], rng=prng, rounds=rounds)
            calls[v][i] = res.calls
            tokens[v][i] = res.prompt_tokens
            if v == "ours":
                lo0 = np.log(prior) - np.log1p(-prior)
                truth = np.zeros(n, dtype=bool)
                truth[g] = True
                cal_rows.append((lo0, res.log_odds - lo0, truth))
            done += 1
            if progress is not None:
                progress(done)
    out: dict[str, Any] = {
        "n": n,
        "instances": instances,
        "rounds": rounds,
        "top10": top10,
        "seed": seed,
        "model_calls": cached.misses,
        "cache_hits": cached.hits,
        "seconds": round(time.perf_counter() - t0, 1),
        "variants": {},
    }
    for v in variants:
        h = hits[v]
        out["variants"][v] = {
            "f1": h.mean(axis=0).round(4).tolist(),
            "ci95": (1.96 * h.std(axis=0, ddof=1) / np.sqrt(instances)).round(4).tolist()
            if instances > 1
            else [0.0] * rounds,
            "calls_mean": float(calls[v].mean()),
            "prompt_tokens_mean": float(tokens[v].mean()),
        }
    target = out["variants"]["psc"]["f1"][-1]
    psc_tokens = out["variants"]["psc"]["prompt_tokens_mean"] or 1.0
    for v in ("gp-belief (paper)", "ours"):
        f1 = out["variants"][v]["f1"]
        hit = next((t + 1 for t, x in enumerate(f1) if x >= target), None)
        out["variants"][v]["rounds_to_match_psc"] = hit
        out["variants"][v]["calls_vs_psc"] = None if hit is None else hit / rounds
    stop = out["variants"]["ours + stop@0.9 + prune"]
    stop["calls_vs_psc"] = stop["calls_mean"] / rounds
    stop["tokens_vs_psc"] = stop["prompt_tokens_mean"] / psc_tokens
    stop["reaches_psc_f1"] = bool(stop["f1"][-1] >= target)
    # Calibration of "ours" final posteriors: fit T on the first half, test on the rest.
    half = max(1, instances // 2)
    fit = [np.concatenate(x) for x in zip(*cal_rows[:half])]
    test = [np.concatenate(x) for x in zip(*cal_rows[half:])] if instances > half else fit
    temp = fit_evidence_temperature(*fit)
    ece_before, diag_before = expected_calibration_error(sigmoid(test[0] + test[1]), test[2])
    ece_after, diag_after = expected_calibration_error(sigmoid(test[0] + test[1] / temp), test[2])
    out["calibration"] = {
        "evidence_temperature": temp,
        "fit_instances": half,
        "test_instances": instances - half,
        "ece_before": ece_before,
        "ece_after": ece_after,
        "reliability_before": diag_before,
        "reliability_after": diag_after,
    }
    return out


def report_rounds(rounds: int) -> list[int]:
    """0-based rounds shown in the report table: the first four and the last (all of
    them when there are four or fewer)."""
    return list(range(min(rounds, 4))) + ([rounds - 1] if rounds > 4 else [])


def format_report(res: dict[str, Any]) -> str:
    """Plain-text report of :func:`run_real_efficiency`'s output (any number of rounds)."""
    from gold_panning_integrations._console import format_table

    shown = report_rounds(res["rounds"])
    rows = []
    for v, d in res["variants"].items():
        rows.append([v, *(d["f1"][t] for t in shown), d["calls_mean"], d["prompt_tokens_mean"]])
    headers = ["variant", *(f"F1 r{t + 1}" if i == 0 else f"r{t + 1}" for i, t in enumerate(shown))]
    lines = [
        (
            f"n={res['n']} instances={res['instances']} rounds={res['rounds']} "
            f"retriever top-10 recall={res['top10']} "
            f"({res['model_calls']} model calls, {res['cache_hits']} cached, {res['seconds']} s)"
        ),
        format_table([*headers, "calls", "prompt tok"], rows),
    ]
    for v in ("gp-belief (paper)", "ours"):
        d = res["variants"][v]
        lines.append(
            f"{v}: first round reaching PSC's round-{res['rounds']} F1: {d['rounds_to_match_psc'] or 'never'}"
        )
    s = res["variants"]["ours + stop@0.9 + prune"]
    lines.append(
        f"ours + stop@0.9 + prune: {s['calls_mean']:.2f} calls ({100 * s['calls_vs_psc']:.0f}% of PSC's), "
        f"{100 * s['tokens_vs_psc']:.0f}% of its prompt tokens, F1 {s['f1'][-1]:.3f} "
        f"({'reaches' if s['reaches_psc_f1'] else 'below'} PSC's {res['variants']['psc']['f1'][-1]:.3f})"
    )
    c = res["calibration"]
    lines.append(
        f"calibration of 'ours' posteriors: ECE {c['ece_before']:.3f} -> {c['ece_after']:.3f} with evidence "
        f"temperature T={c['evidence_temperature']} (fitted on {c['fit_instances']} instances, "
        f"tested on {c['test_instances']})"
    )
    return "\n".join(lines)


def register(sub: Any) -> None:
    """Add ``bench real-efficiency`` to the ``bench`` command's sub-parsers."""
    from gold_panning_integrations.readers._cli_args import add_reader_arguments

    p = sub.add_parser(
        "real-efficiency",
        help="efficiency report and posterior calibration on a real model (slow: minutes)",
        description=(
            "On held-out key-value instances with a real model (default: the embedded SmolLM2), a "
            "simulated retriever orders the documents and four variants run: PSC, GP-Belief as in the "
            "paper, ours (retriever order + rank prior) and ours with stop@0.9 and pruning. Reports F1 "
            "per round, calls and prompt tokens against PSC, and the expected calibration error of the "
            "posteriors before and after an evidence temperature fitted on half of the instances. "
            "Slow: about instances x 4 x rounds model calls per --n value (shared prompts are read once)."
        ),
    )
    add_reader_arguments(p)
    p.add_argument("--n", default="20,40", help="documents per instance, comma-separated (default 20,40)")
    p.add_argument("--instances", type=int, default=12, help="held-out instances per --n value (default 12)")
    p.add_argument("--rounds", type=int, default=8, help="rounds per variant (default 8)")
    p.add_argument(
        "--top10",
        type=float,
        default=0.7,
        help="probability that the retriever ranks the needle in its top 10 (default 0.7)",
    )
    p.add_argument(
        "--seed", type=int, default=2, help="instance seed (default 2; calibration used 0, bench real 1)"
    )
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile: bundled name or JSON path (default: the reader's own, else generic)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks real-efficiency``."""
    import json

    from gold_panning_integrations._console import Progress
    from gold_panning_integrations.profiles import resolve_profile
    from gold_panning_integrations.readers._cli_args import make_reader

    try:
        ns = [int(x) for x in args.n.split(",") if x.strip()]
    except ValueError as err:
        raise ValueError(f"--n must list document counts >= 2, comma-separated, got {args.n!r}") from err
    if not ns or min(ns) < 2:
        raise ValueError(f"--n must list document counts >= 2, got {args.n!r}")
    if args.instances < 1:
        raise ValueError(f"--instances must be >= 1, got {args.instances}")
    if args.rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {args.rounds}")
    reader = make_reader(args, seed=args.seed)
    profile = resolve_profile(args.profile, reader=reader, task="kv")  # key-value facts
    results = []
    for n in ns:
        with Progress(args.instances * 4, label=f"real-efficiency n={n}") as bar:
            res = run_real_efficiency(
                reader,
                profile=profile,
                n=n,
                instances=args.instances,
                rounds=args.rounds,
                top10=args.top10,
                seed=args.seed,
                progress=bar.update,
            )
        results.append(res)
        if not args.json:
            print(format_report(res), flush=True)
    if args.json:
        print(json.dumps({"profile": profile.model, "results": results}))
    return 0
