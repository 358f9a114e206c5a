"""``python -m benchmarks real``: GP-Belief vs GP-Entropy vs PSC with a real model.

Held-out key-value instances (seed different from calibration's), the gold at a uniform
random position, ``T`` rounds per method: every method makes the same number of model
calls per instance. F1 per round (top-1 against the single gold document, so F1 is the
hit rate) with a 95% normal-approximation confidence half-width.

With greedy decoding (temperature 0) a reading is a deterministic function of the
prompt, so identical prompts are answered once and reused (e.g. round 1 of GP-Belief
and GP-Entropy, which both start from the same uniform beliefs); the cache hits are
reported. Sampling (temperature > 0) disables the cache.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._readers import CachedReader
from gold_panning_integrations.evaluate._scoring import per_round_hits
from gold_panning_integrations.panning import GoldPanner

__all__ = ["main", "register", "run_real"]

POLICIES = ("belief", "entropy", "random")
LABELS = {"belief": "GP-Belief", "entropy": "GP-Entropy", "random": "PSC"}


def run_real(
    reader: Any,
    *,
    profile: Any,
    instances: int = 50,
    n: int = 20,
    rounds: int = 8,
    seed: int = 1,
    policies: Sequence[str] = POLICIES,
    task: Any = None,
    cache: bool = True,
    checkpoint: str | Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run every policy on the same instances; returns the JSON-ready results.

    With ``checkpoint``, each finished (instance, policy) pair is appended to a JSONL file
    and skipped when the same command is run again, so a long run can be resumed.

    Returns:
        ``{"instances", "n", "rounds", "seed", "profile", "policies": {name: {"f1",
        "ci95", "failed_rounds"}}, "rounds_to_match_psc", "model_calls", "cache_hits",
        "seconds"}``; ``f1``/``ci95`` have length ``rounds``.
    """
    from gold_panning_integrations.tasks.kv import KVTask

    task = task or KVTask()
    cached = CachedReader(reader)
    cached.enabled = cache
    rng = np.random.default_rng(seed)
    hits = {p: np.zeros((instances, rounds)) for p in policies}
    failed = {p: 0 for p in policies}
    t0 = time.perf_counter()
    done = 0
    saved: dict[tuple[int, str], dict[str, Any]] = {}
    fh = None
    if checkpoint is not None:
        ck = Path(checkpoint)
        if ck.exists():
            for line in ck.read_text(encoding="utf-8").splitlines():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill: that pair reruns
                if (obj.get("n"), obj.get("rounds"), obj.get("seed")) == (n, rounds, seed):
                    saved[(int(obj["instance"]), str(obj["policy"]))] = obj
        fh = ck.open("a", encoding="utf-8")
    for i in range(instances):
        inst = task.make(n, gold_position=int(rng.integers(n)), rng=rng)
        for pi, policy in enumerate(policies):
            if (i, policy) in saved:
                hits[policy][i] = saved[(i, policy)]["hits"]
                failed[policy] += int(saved[(i, policy)].get("failed_rounds", 0))
                done += 1
                if progress:
                    progress(done)
                continue
            prng = np.random.default_rng([seed, i, pi])
            panner = GoldPanner(
                cached,
                profile=profile,
                rounds=rounds,
                prompts_per_round=1,
                k=1,
                policy=policy,
                prior="uniform",
                retriever_prior="none",
                on_failure="fallback",
                rng=prng,
            )
            res = panner.run(inst.question, inst.documents)
            hits[policy][i] = per_round_hits(res, inst.gold, rng=prng)
            failed[policy] += res.failed_rounds
            if fh is not None:
                row = {
                    "instance": i,
                    "policy": policy,
                    "n": n,
                    "rounds": rounds,
                    "seed": seed,
                    "hits": hits[policy][i].tolist(),
                    "failed_rounds": res.failed_rounds,
                }
                fh.write(json.dumps(row) + "\n")
                fh.flush()
            done += 1
            if progress:
                progress(done)
    if fh is not None:
        fh.close()
    out: dict[str, Any] = {
        "instances": instances,
        "n": n,
        "rounds": rounds,
        "seed": seed,
        "profile": getattr(profile, "model", None) or str(profile),
        "policies": {},
        "model_calls": cached.misses,
        "cache_hits": cached.hits,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    for p in policies:
        h = hits[p]
        f1 = h.mean(axis=0)
        ci = 1.96 * h.std(axis=0, ddof=1) / np.sqrt(instances) if instances > 1 else np.zeros(rounds)
        out["policies"][p] = {
            "f1": f1.round(4).tolist(),
            "ci95": ci.round(4).tolist(),
            "failed_rounds": failed[p],
        }
    if "random" in policies:
        target = out["policies"]["random"]["f1"][-1]
        out["rounds_to_match_psc"] = {
            p: next((t + 1 for t, v in enumerate(out["policies"][p]["f1"]) if v >= target), None)
            for p in policies
        }
    return out


def register(sub: Any) -> None:
    from gold_panning_integrations.readers._cli_args import add_reader_arguments

    p = sub.add_parser(
        "real",
        help="GP-Belief vs GP-Entropy vs PSC with a real model on held-out key-value instances",
        description=(
            "F1 per round of GP-Belief, GP-Entropy and PSC on held-out key-value instances with "
            "the embedded model (or another reader). Every method makes the same number of calls. "
            "Slow: instances x 3 x rounds model calls (about 1.3 s each for SmolLM2 at n=20 on 2 cores)."
        ),
    )
    add_reader_arguments(p)
    p.add_argument("--instances", type=int, default=50, help="held-out instances (default 50)")
    p.add_argument("--n", type=int, default=20, help="documents per instance (default 20)")
    p.add_argument("--rounds", type=int, default=8, help="rounds per method (default 8)")
    p.add_argument("--seed", type=int, default=1, help="instance seed (default 1; calibration used 0)")
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile: bundled name or JSON path (default: the reader's own, else generic)",
    )
    p.add_argument(
        "--checkpoint", default=None, help="JSONL of finished (instance, method) pairs, for resuming"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot-dir", default=None, help="write f1_by_round.png (and results.json) here")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks real``."""
    from gold_panning_integrations._console import Progress, format_table, print_json
    from gold_panning_integrations.profiles import resolved_profile
    from gold_panning_integrations.readers._cli_args import make_reader

    for opt, value, low in (
        ("--instances", args.instances, 1),
        ("--n", args.n, 2),
        ("--rounds", args.rounds, 1),
    ):
        if value < low:
            raise ValueError(f"{opt} must be >= {low}, got {value}")
    reader = make_reader(args, seed=0)
    profile, profile_name = resolved_profile(args.profile, reader=reader, task="kv")  # key-value facts
    with Progress(args.instances * len(POLICIES), label="bench real") as bar:
        res = run_real(
            reader,
            profile=profile,
            cache=args.temperature == 0,
            instances=args.instances,
            n=args.n,
            rounds=args.rounds,
            seed=args.seed,
            checkpoint=args.checkpoint,
            progress=bar.update,
        )
    res["profile"] = profile_name
    res["reader"] = {
        "kind": args.reader,
        "model": getattr(reader, "model_name", None) or args.model,
        "mode": getattr(reader, "mode", None),
    }
    if args.plot_dir:
        d = Path(args.plot_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "results.json").write_text(json.dumps(res, indent=2) + "\n")
        _plot(res, d / "f1_by_round.png")
    if args.json:
        print_json(res)
        return 0
    rows = [
        [t + 1]
        + [f"{res['policies'][p]['f1'][t]:.3f} ±{res['policies'][p]['ci95'][t]:.3f}" for p in POLICIES]
        for t in range(args.rounds)
    ]
    print(
        f"{res['instances']} held-out kv instances, n={args.n}, seed={args.seed}, profile {profile_name}, "
        f"{res['model_calls']} model calls ({res['cache_hits']} cached), {res['seconds']}s"
    )
    print(format_table(["round"] + [LABELS[p] for p in POLICIES], rows))
    if "rounds_to_match_psc" in res:
        print(f"\nfirst round reaching PSC's round-{args.rounds} F1:")
        for p in POLICIES:
            r = res["rounds_to_match_psc"][p]
            print(f"  {LABELS[p]:10s} {r if r is not None else 'never'}")
    return 0


def _plot(res: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        from gold_panning_integrations.errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot", "Plotting benchmark results") from err
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = np.arange(1, res["rounds"] + 1)
    for p, d in res["policies"].items():
        f1, ci = np.asarray(d["f1"]), np.asarray(d["ci95"])
        ax.plot(x, f1, marker="o", ms=3, label=LABELS.get(p, p))
        ax.fill_between(x, f1 - ci, f1 + ci, alpha=0.15)
    ax.set_xlabel("round (model calls)")
    ax.set_ylabel("top-1 F1")
    ax.set_ylim(0, 1)
    ax.set_title(f"{res['reader']['model']} on held-out kv, n={res['n']} ({res['instances']} instances)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
