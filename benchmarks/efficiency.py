"""``python -m benchmarks efficiency``: calls, prompt tokens and sequential rounds to match
PSC, for PSC, the paper's GP-Belief, and GP-Belief with each of our features.

Runs the real :class:`~gold_panning_integrations.GoldPanner` (not the
batch simulator) so every feature is measured through the code users run (the library's
defaults: robust likelihood, ``shuffle_top``, the empty-prompt mixture with level
adaptation; "gp-belief (paper)" switches them off), against a
:class:`~benchmarks._readers.TokenCountingReader` that follows the detector profile and reports prompt
tokens as ``overhead + tokens_per_doc x documents shown``.

A simulated base retriever orders the documents: with probability ``top10`` the needle's
rank is uniform in the top 10, otherwise uniform in the rest.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks._readers import PROMPT_OVERHEAD, TOKENS_PER_DOC, TokenCountingReader
from gold_panning_integrations.engine.config import PAPER_UPDATE
from gold_panning_integrations.engine.priors import DEFAULT_HEAD_DECAY, rank_prior_probs
from gold_panning_integrations.evaluate._scoring import per_round_hits
from gold_panning_integrations.panning import GoldPanner

__all__ = ["VARIANTS", "Variant", "expected_calibration_error", "register", "run_efficiency"]


@dataclass(frozen=True)
class Variant:
    """One configuration of the panner, and whether it uses the retriever prior."""

    name: str
    policy: str
    options: dict[str, Any]
    retriever_prior: bool = False
    prior: str = "base-rate"
    shuffle: bool = False
    """Hide the retriever's order (random input order), as in the paper's setting."""
    head_decay: float = 1.0
    """Shape of the rank prior inside the top 10; 1.0 fits the simulated retriever
    (uniform inside its top 10), the library default (0.6 with a flat share of 0.2) is
    shown for robustness."""


VARIANTS: tuple[Variant, ...] = (
    Variant("psc", "random", {}, shuffle=True),
    Variant(
        "gp-belief (paper)",
        "belief",
        dict(PAPER_UPDATE),
        prior="uniform",
        shuffle=True,
    ),
    Variant("gp-belief, retriever order", "belief", {}),
    Variant("+ rank prior", "belief", {}, retriever_prior=True),
    Variant(
        "+ rank prior (default shape)", "belief", {}, retriever_prior=True, head_decay=DEFAULT_HEAD_DECAY
    ),
    Variant("+ prior + stop@0.8", "belief", {"stop_at": 0.8}, retriever_prior=True),
    Variant("+ prior + stop@0.6", "belief", {"stop_at": 0.6}, retriever_prior=True),
    Variant("+ prior + stop@0.97", "belief", {"stop_at": 0.97}, retriever_prior=True),
    Variant("+ prior + min-gain", "belief", {"min_gain": 0.002}, retriever_prior=True),
    Variant("+ prior + prune", "belief", {"prune_below": 0.05}, retriever_prior=True),
    Variant("+ prior + budget 20", "belief", {"max_docs_per_prompt": 20}, retriever_prior=True),
    Variant(
        "+ prior + windows of 20",
        "belief",
        {"max_docs_per_prompt": 20, "windows": True},
        retriever_prior=True,
    ),
    Variant(
        "ours: prior + stop@0.9 + prune",
        "belief",
        {"stop_at": 0.9, "prune_below": 0.05},
        retriever_prior=True,
    ),
    # Threshold chosen on seed 0 as the cheapest reaching PSC's F1, confirmed on seed 1.
    Variant(
        "ours: prior + prune + 2 looks + stop@0.3",
        "belief",
        {"stop_at": 0.3, "min_rounds": 2, "prune_below": 0.05},
        retriever_prior=True,
    ),
) + tuple(
    # The stopping threshold is the dial between calls and F1: sweep it to show the
    # frontier (and the cheapest setting that still reaches PSC's round-8 F1).
    Variant(
        f"sweep: prior + prune + stop@{t}",
        "belief",
        {"stop_at": t, "prune_below": 0.05},
        retriever_prior=True,
    )
    for t in (0.5, 0.6, 0.7, 0.8, 0.95, 0.99)
)


def _needle_rank(n: int, top10: float, rng: np.random.Generator) -> int:
    head = min(10, n)
    if rng.random() < top10 or head == n:
        return int(rng.integers(0, head))
    return int(rng.integers(head, n))


def expected_calibration_error(
    probs: NDArray[np.float64], labels: NDArray[np.bool_], *, bins: int = 10
) -> tuple[float, list[dict[str, float]]]:
    """ECE with equal-width bins, and the reliability diagram's rows.

    Args:
        probs: Predicted probabilities, shape ``(m,)``.
        labels: Outcomes, shape ``(m,)``.
        bins: Number of equal-width bins on [0, 1].

    Returns:
        ``(ece, rows)``; each row has ``lo``, ``hi``, ``count``, ``mean_prob``, ``frac_pos``.
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    ece = 0.0
    rows = []
    for b in range(bins):
        m = idx == b
        c = int(m.sum())
        if c:
            mp, fp = float(p[m].mean()), float(y[m].mean())
            ece += c / p.size * abs(mp - fp)
            rows.append(
                {
                    "lo": float(edges[b]),
                    "hi": float(edges[b + 1]),
                    "count": c,
                    "mean_prob": mp,
                    "frac_pos": fp,
                }
            )
    return ece, rows


def run_efficiency(
    profile: Any,
    *,
    n: int = 100,
    rounds: int = 8,
    trials: int = 400,
    top10_rates: Sequence[float] = (0.3, 0.7, 0.9),
    variants: Sequence[Variant] = VARIANTS,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Measure every variant at every retriever quality; see the module docstring.

    Returns:
        ``{"settings": [{"top10": q, "psc_round8_f1": f, "variants": {name: {...}}}], ...}``
        where each variant has ``f1`` per round, ``f1_final``, ``calls_mean``,
        ``prompt_tokens_mean``, ``sequential_rounds_mean``, and ``to_match_psc``:
        calls / tokens / rounds needed to reach PSC's round-8 F1 (None if never) and
        those as a fraction of PSC's.
    """
    docs = [f"d{i}" for i in range(n)]
    settings = []
    done = 0
    for q in top10_rates:
        rng = np.random.default_rng([seed, int(q * 1000)])
        needles = [_needle_rank(n, q, rng) for _ in range(trials)]
        per: dict[str, Any] = {}
        for v in variants:
            prior = rank_prior_probs(n, k=1, top10_recall=q, head_decay=v.head_decay)
            f1 = np.zeros((trials, rounds))
            calls = np.zeros(trials)
            tokens = np.zeros(trials)
            seq = np.zeros(trials)
            cum_calls = np.zeros((trials, rounds))
            cum_tokens = np.zeros((trials, rounds))
            final = np.zeros(trials)
            post_all: list[NDArray[np.float64]] = []
            lab_all: list[NDArray[np.bool_]] = []
            for i, needle in enumerate(needles):
                trng = np.random.default_rng([seed, int(q * 1000), i])
                order = trng.permutation(n) if v.shuffle else np.arange(n)
                shown_docs = [docs[j] for j in order]
                reader = TokenCountingReader(profile, {docs[needle]}, rng=trng)
                panner = GoldPanner(
                    reader,
                    profile=profile,
                    rounds=rounds,
                    prompts_per_round=1,
                    k=1,
                    policy=v.policy,
                    prior=v.prior,  # type: ignore[arg-type]
                    retriever_prior="none",
                    rng=trng,
                    **v.options,
                )
                res = panner.run("q", shown_docs, prior_probs=prior if v.retriever_prior else None)
                pos_needle = int(np.flatnonzero(order == needle)[0])
                f1[i] = per_round_hits(res, [pos_needle], rng=trng, rounds=rounds)
                final[i] = float(res.selected[0] == pos_needle)
                calls[i] = res.calls
                tokens[i] = res.prompt_tokens
                seq[i] = len(res.rounds)
                c = np.cumsum([r.calls for r in res.rounds] + [0] * (rounds - len(res.rounds)))
                tk = np.cumsum([r.prompt_tokens for r in res.rounds] + [0] * (rounds - len(res.rounds)))
                cum_calls[i], cum_tokens[i] = c[:rounds], tk[:rounds]
                truth = np.zeros(n, dtype=bool)
                truth[pos_needle] = True
                post_all.append(res.posteriors)
                lab_all.append(truth)
                done += 1
                if progress is not None:
                    progress(done)
            ece, diagram = expected_calibration_error(np.concatenate(post_all), np.concatenate(lab_all))
            per[v.name] = {
                "f1": f1.mean(axis=0).tolist(),
                "f1_final": float(final.mean()),
                "f1_final_ci95": float(1.96 * final.std(ddof=1) / np.sqrt(trials)) if trials > 1 else 0.0,
                "calls_mean": float(calls.mean()),
                "prompt_tokens_mean": float(tokens.mean()),
                "sequential_rounds_mean": float(seq.mean()),
                "calls_per_round": cum_calls.mean(axis=0).tolist(),
                "tokens_per_round": cum_tokens.mean(axis=0).tolist(),
                "ece_final": ece,
                "reliability": diagram,
            }
        target = per["psc"]["f1"][-1] if "psc" in per else None
        psc = per.get("psc")
        for d in per.values():
            d["to_match_psc"] = _to_match(d, target, psc)
        reached = [
            (d["to_match_psc"]["calls"], name)
            for name, d in per.items()
            if name != "psc" and (d["to_match_psc"] or {}).get("reached")
        ]
        best = min(reached)[1] if reached else None
        settings.append({"top10": q, "psc_round8_f1": target, "variants": per, "cheapest_to_match": best})
    return {
        "n": n,
        "k": 1,
        "rounds": rounds,
        "trials": trials,
        "tokens_per_doc": TOKENS_PER_DOC,
        "prompt_overhead": PROMPT_OVERHEAD,
        "settings": settings,
    }


def _to_match(d: dict[str, Any], target: float | None, psc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Calls, tokens and rounds at the first round whose mean F1 reaches ``target``.

    For a variant with adaptive stopping the per-round curve is not comparable, so its
    totals are reported when its final F1 reaches the target.
    """
    if target is None or psc is None:
        return None
    stops = d["sequential_rounds_mean"] < len(d["f1"]) - 1e-9
    if stops:
        if d["f1_final"] + 1e-12 < target:
            return {"reached": False}
        calls, tokens, rounds = d["calls_mean"], d["prompt_tokens_mean"], d["sequential_rounds_mean"]
    else:
        hit = [t for t, f in enumerate(d["f1"]) if f + 1e-12 >= target]
        if not hit:
            return {"reached": False}
        t = hit[0]
        calls, tokens, rounds = d["calls_per_round"][t], d["tokens_per_round"][t], float(t + 1)
    return {
        "reached": True,
        "calls": calls,
        "prompt_tokens": tokens,
        "rounds": rounds,
        "calls_vs_psc": calls / psc["calls_per_round"][-1],
        "tokens_vs_psc": tokens / psc["tokens_per_round"][-1],
        "rounds_vs_psc": rounds / len(psc["f1"]),
    }


def format_report(rep: dict[str, Any]) -> str:
    """Human-readable tables of :func:`run_efficiency`'s output."""
    from gold_panning_integrations._console import format_table

    out = []
    for s in rep["settings"]:
        out.append(
            f"\nretriever top-10 recall {s['top10']:.1f}: PSC round-{rep['rounds']} F1 = {s['psc_round8_f1']:.3f}"
        )
        rows = []
        for name, d in s["variants"].items():
            m = d["to_match_psc"] or {}
            rows.append(
                [
                    name,
                    d["f1"][0],
                    d["f1"][1],
                    d["f1"][-1] if len(d["f1"]) > 2 else None,
                    d["calls_mean"],
                    d["prompt_tokens_mean"],
                    d["ece_final"],
                    f"{100 * m['calls_vs_psc']:.0f}%" if m.get("reached") else "never",
                    f"{100 * m['tokens_vs_psc']:.0f}%" if m.get("reached") else "never",
                    f"{m['rounds']:.1f}" if m.get("reached") else "-",
                ]
            )
        best = s.get("cheapest_to_match")
        if best:
            m = s["variants"][best]["to_match_psc"]
            out.append(
                f"cheapest variant reaching it: {best}: {100 * m['calls_vs_psc']:.0f}% of PSC's calls, "
                f"{100 * m['tokens_vs_psc']:.0f}% of its prompt tokens, {m['rounds']:.1f} sequential rounds"
            )
        out.append(
            format_table(
                [
                    "variant",
                    "F1 r1",
                    "F1 r2",
                    f"F1 r{rep['rounds']}",
                    "calls",
                    "prompt tok",
                    "ECE",
                    "calls to match",
                    "tokens to match",
                    "rounds to match",
                ],
                rows,
            )
        )
    return "\n".join(out)


def register(sub: Any) -> None:
    """Add ``bench efficiency`` to the ``bench`` command's sub-parsers."""
    p = sub.add_parser(
        "efficiency",
        help="calls/tokens/rounds to reach PSC's round-8 F1, per feature (simulated retriever + model)",
    )
    p.add_argument(
        "--profile", default="lost-in-the-middle", help="detector profile: bundled name or JSON path"
    )
    p.add_argument("--n", type=int, default=100, help="documents per trial (default 100)")
    p.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    p.add_argument("--trials", type=int, default=400, help="trials per setting (default 400)")
    p.add_argument("--top10", default="0.3,0.7,0.9", help="retriever top-10 recall values")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from gold_panning_integrations._console import Progress, print_json
    from gold_panning_integrations.profiles import load_profile

    profile = load_profile(args.profile)
    rates = [float(x) for x in args.top10.split(",") if x.strip()]
    bar = Progress(args.trials * len(rates) * len(VARIANTS), label="efficiency")
    rep = run_efficiency(
        profile,
        n=args.n,
        rounds=args.rounds,
        trials=args.trials,
        top10_rates=rates,
        seed=args.seed,
        progress=bar.update,
    )
    rep["command"] = (
        f"python -m benchmarks efficiency --profile {args.profile} --n {args.n} --rounds {args.rounds} "
        f"--trials {args.trials} --top10 {args.top10} --seed {args.seed}"
    )
    if args.json:
        print_json(rep)
    else:
        print(rep["command"])
        print(format_report(rep))
    return 0
