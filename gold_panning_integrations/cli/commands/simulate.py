"""``gold-panning simulate``: F1 per round per policy under the observation model."""

from __future__ import annotations

import argparse
from typing import Any

from ._config_args import add_config_arguments

__all__ = ["main", "register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate panning with a detector profile (no model calls)",
        description=(
            "Simulate GP-Belief, GP-Entropy, PSC (random) and the oracle placement bound under "
            "the paper's observation model. F1 per round is printed with 95% confidence "
            "half-widths; 'rounds to match' is the first round reaching PSC's final-round F1."
        ),
    )
    p.add_argument("--profile", default="lost-in-the-middle", help="bundled profile name or JSON path")
    p.add_argument("--n", type=int, default=100, help="documents per trial (default 100)")
    p.add_argument("--trials", type=int, default=5000, help="trials (default 5000)")
    p.add_argument("--policies", default="belief,entropy,random,oracle", help="comma-separated policies")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    # k is also the number of needles per trial; uniform is the paper's start (GP-Entropy depends on it).
    add_config_arguments(p, only=("k", "rounds", "prior"), defaults={"k": 1, "rounds": 8, "prior": "uniform"})
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..._console import Progress, format_table, print_json
    from ...engine.config import PanningConfig
    from ...engine.simulator import simulate
    from ...profiles import load_profile

    profile = load_profile(args.profile)
    policies = [s.strip() for s in args.policies.split(",") if s.strip()]
    bar = Progress(args.trials, label="simulate")
    # one prompt per round: rounds are calls
    config = PanningConfig(rounds=args.rounds, prompts_per_round=1, k=args.k, prior=args.prior)
    res = simulate(
        profile.tpr,
        profile.fpr,
        n=args.n,
        k=args.k,
        rounds=args.rounds,
        trials=args.trials,
        policies=policies,
        rng=args.seed,
        prior=args.prior,
        config=config,
        progress=bar.update,
    )
    if args.json:
        print_json(res.to_json())
        return 0
    headers = ["round"] + policies
    rows = [
        [t + 1] + [f"{res.policies[p].f1[t]:.3f} ±{res.policies[p].ci95[t]:.3f}" for p in policies]
        for t in range(args.rounds)
    ]
    print(f"profile {args.profile}: n={args.n} k={args.k} trials={args.trials} prior={args.prior}")
    print(format_table(headers, rows))
    if "random" in res.policies:
        target = res.policies["random"].f1[-1]
        print(f"\nfirst round reaching PSC's round-{args.rounds} F1 ({target:.3f}):")
        for p in policies:
            r = res.policies[p].rounds_to_match_random
            print(f"  {p:8s} {r if r is not None else 'never'}")
    return 0
