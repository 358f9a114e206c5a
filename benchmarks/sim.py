"""``python -m benchmarks sim``: the paper's simulated comparison and ablations, with 95% CIs.

Everything runs on :func:`~gold_panning_integrations.engine.simulator.simulate` (the
observation model: a document at position ``j`` is cited with probability ``TPR_j`` if
it is relevant, ``FPR_j`` if not). Six panels, each a JSON-ready dict:

``main``
    F1 per round (``T = 8``, ``N = 100``, ``k = 1``) of GP-Belief, GP-Entropy, PSC
    (``random``) and the oracle-placement bound, for every bundled profile.
``noise``
    Calibration robustness. The simulated model follows the true profile; the policy
    places and updates with ``clip(rate + Normal(0, sigma), 0, 1)``, drawn independently
    for every position and for TPR and FPR. A fresh noisy profile is drawn for each of
    ``draws`` groups of trials, so a result is an average over noise draws, not one lucky
    draw.
    Three likelihoods side by side on the same noise draws and seeds: ``robust`` (the
    default: rates ``0.95 * rate + 0.025``, inverted positions merged), ``plain`` (the
    noisy rates enter the update as they are) and ``placement-only`` (the noisy rates
    move placement, the update uses the true rates: what the paper's noise figure seems
    to rest on). ``overestimate`` adds the case "every TPR overestimated by 30%".
``attack``
    One hostile non-needle document per trial whose injection the model obeys (always or
    with probability 0.5): label-targeted ("cite document 1": it also cites whatever is
    shown under label 1, and labels are drawn each round from a space of at least 100
    numbers per document that starts at 100, so never), the same by an attacker who knows
    the label space (``label-guess``: it names ten numbers of it) and position-targeted
    ("cite the first document listed"), with the default ``shuffle_top`` and without it
    (``shuffle_top=0``); plus the self-citing document (the model is persuaded to cite
    the hostile document itself), the documented limit. GP-Belief vs PSC on
    ``lost-in-the-middle`` at ``N = 100`` and on issue 10's model at ``N = 10`` (cites the
    gold with 0.8 / 0.6 / 0.25 / 0.6 at the first / second / middle / last slot, 0.03 false
    positives; the panner uses ``lost-in-the-middle``), 4 rounds for the latter.
``no_harm``
    Do no harm (issue 11): ``N = 10`` documents from a good retriever (the needle is its
    first with 0.80, second 0.10, third 0.05: top-3 recall 0.95), the library's rank prior
    (``top10_recall = 0.5``), the panner using a profile (``smollm2-135m-kv`` or
    ``lost-in-the-middle``) while the model cites at ``scale`` x that profile's rates
    (0.05: a model that cannot answer and cites nothing in ~19 of 20 prompts; 0.3: weak;
    1: answers as calibrated). Empty-prompt rules: ``paper`` (every miss is evidence, no
    level adaptation), ``skip`` (an empty prompt updates nothing), ``default`` (mixture +
    level adaptation). Top-1 F1 and top-3 recall after 3 and 8 rounds, GP-Belief only.
``heterogeneity``
    Position heterogeneity. For each ``alpha`` on a log grid, ``TPR_j ~ Beta(alpha,
    alpha)`` independently per position and ``FPR_j = fpr`` (0.05 by default) at every
    position; redrawn for each of ``draws`` groups of trials. Small ``alpha`` gives
    near-0/near-1 (spiky) positions, ``alpha = 1`` uniform qualities, large ``alpha`` every
    position close to ``TPR = 0.5`` (homogeneous: placement cannot matter).
``scaling``
    ``N`` in 20 ... 1,000, the profile resampled by relative position; fewer trials above
    ``N = 200`` (``trials * 200 / N``, at least ``min(trials, 200)``).
``multi_needle``
    ``k`` relevant documents (top-``k`` F1 = fraction of needles found).
``latency``
    F1 against sequential depth (latency) and calls (cost) with several prompts per round,
    PSC with 8 prompts at once, and GP-Belief with all its prompts in one round over an
    informative retriever; an independent reader and one whose mistakes repeat
    (:mod:`._sim_latency`; the library's ``base-rate`` prior, unlike the other panels).
``efficiency``
    One row per setting of the panels above: the rounds (LLM calls) GP-Belief needs to
    reach PSC's final-round F1, as a percentage of PSC's calls, and the area under each
    F1 curve (mean F1 over rounds) as a fraction of the oracle's.

``delta_f1`` is GP-Belief minus PSC. Its ``delta_ci95`` is ``sqrt(ci_belief**2 +
ci_psc**2)``, which assumes independence; the simulator uses common random numbers
(same needles and citation draws) for all policies, so the paired interval is narrower
and this one is conservative.

All panels use the paper's uniform prior (0.5) and otherwise the library's default
:class:`~gold_panning_integrations.engine.config.PanningConfig` (robust likelihood,
``shuffle_top``), through the round functions ``GoldPanner`` runs. Seeds: one child of
``numpy.random.SeedSequence(seed)`` per panel and one grandchild per setting, so a
panel's numbers do not depend on which other panels ran.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gold_panning_integrations.engine.simulator import SimulationResult, simulate
from gold_panning_integrations.profiles import DetectorProfile, bundled_profiles

from ._sim_latency import latency_panel
from ._sim_panels import (
    _DRAWS,
    DEFAULT_ALPHAS,
    DEFAULT_KS,
    DEFAULT_NS,
    DEFAULT_SIGMAS,
    PANELS,
    UPDATES,
    _attack_panel,
    _fmt_key,
    _no_harm_panel,
    _noise_panel,
    _plan,
    _with_delta,
    base_config,
    heterogeneous_profile,
    noisy_profile,
    pool_results,
)
from ._sim_report import format_report, markdown_report, plot_panels

__all__ = [
    "DEFAULT_ALPHAS",
    "DEFAULT_KS",
    "DEFAULT_NS",
    "DEFAULT_SIGMAS",
    "PANELS",
    "efficiency_rows",
    "format_report",
    "heterogeneous_profile",
    "main",
    "markdown_report",
    "noisy_profile",
    "plot_panels",
    "pool_results",
    "register",
    "run_sim_bench",
]

logger = logging.getLogger(__name__)


def run_sim_bench(
    profiles: Sequence[str] | None = None,
    *,
    trials: int = 5000,
    seed: int = 0,
    rounds: int = 8,
    panels: Sequence[str] = PANELS,
    ablation_profile: str = "lost-in-the-middle",
    sigmas: Sequence[float] = DEFAULT_SIGMAS,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    ns: Sequence[int] = DEFAULT_NS,
    ks: Sequence[int] = DEFAULT_KS,
    draws: int = _DRAWS,
    hetero_fpr: float = 0.05,
    progress: Callable[[int, int], None] | None = None,
    update: str = "default",
) -> dict[str, Any]:
    """Run the simulated benchmark and return every panel's numbers.

    Args:
        profiles: Bundled profile names for the ``main`` panel (default: all of
            :func:`~gold_panning_integrations.profiles.bundled_profiles`).
        trials: Trials per setting (the paper uses 5,000); the ``scaling`` panel uses
            fewer above ``N = 200``, and the ``noise``/``heterogeneity`` panels split them
            over ``draws`` random profiles.
        seed: Seed of every random draw (profiles, needles, citations, policies).
        rounds: Rounds (LLM calls) per trial; the paper uses 8.
        panels: Subset of :data:`PANELS` to run.
        ablation_profile: Bundled profile for ``noise``, ``scaling``, ``multi_needle``
            (default ``lost-in-the-middle``; the first bundled one if absent).
        sigmas: Noise levels of the ``noise`` panel.
        alphas: Beta concentrations of the ``heterogeneity`` panel.
        ns: Context sizes of the ``scaling`` panel.
        ks: Needle counts of the ``multi_needle`` panel.
        draws: Random profiles per setting in ``noise`` and ``heterogeneity``.
        hetero_fpr: FPR of every position in the ``heterogeneity`` panel.
        progress: Called as ``progress(done, total)`` in work units (trials x N x
            rounds x policies) after each simulator chunk.
        update: ``"default"`` (the library's defaults), ``"self-citing"`` (with
            ``self_citing=0.25``) or ``"paper"`` (the paper's
            GP-Belief update); see :data:`UPDATES`. Panels that vary an option (noise:
            robust; attack: shuffle_top) vary it on top of this.

    Returns:
        ``{"trials", "seed", "rounds", "prior", "seconds", "main", "noise",
        "heterogeneity", "scaling", "multi_needle", "efficiency"}`` (panels that did
        not run are absent; ``efficiency`` covers the ones that did). Every setting
        holds ``policies -> {f1, ci95, rounds_to_match_random}`` per round and, where
        both ran, ``delta_f1``/``delta_ci95`` (GP-Belief minus PSC).
    """
    if trials < 1 or rounds < 1:
        raise ValueError(f"trials and rounds must be >= 1, got {trials!r} and {rounds!r}")
    unknown = [p for p in panels if p not in PANELS]
    if unknown:
        raise ValueError(f"unknown panels {unknown}; choose from {', '.join(PANELS)}")
    names = list(profiles) if profiles is not None else bundled_profiles()
    if not names:
        raise ValueError("no profiles to benchmark: pass profile names or install the bundled ones")
    loaded = {name: DetectorProfile.bundled(name) for name in names}
    if ablation_profile not in bundled_profiles():
        ablation_profile = names[0]
    jobs = _plan(
        loaded,
        loaded.get(ablation_profile) or DetectorProfile.bundled(ablation_profile),
        trials=trials,
        seed=seed,
        panels=panels,
        sigmas=sigmas,
        alphas=alphas,
        ns=ns,
        ks=ks,
        draws=draws,
        hetero_fpr=hetero_fpr,
        base_cfg=base_config(update),
    )
    total = sum(j.cost(rounds) for j in jobs)
    done = 0
    t0 = time.perf_counter()
    results: dict[tuple[str, str], list[SimulationResult]] = {}
    for job in jobs:
        per_trial = job.cost(rounds) // job.trials
        start = done

        def tick(trials_done: int, _start: int = start, _per: int = per_trial) -> None:
            if progress is not None:
                progress(_start + trials_done * _per, total)

        res = simulate(
            job.tpr,
            job.fpr,
            n=job.n,
            k=job.k,
            rounds=job.rounds or rounds,
            trials=job.trials,
            policies=job.policies,
            # A fresh copy: spawning advances a SeedSequence, and paired jobs share one.
            rng=np.random.default_rng(np.random.SeedSequence(job.seed.entropy, spawn_key=job.seed.spawn_key)),
            decision_tpr=job.decision_tpr,
            decision_fpr=job.decision_fpr,
            placement_only=job.placement_only,
            config=job.config if job.config is not None else base_config(update),
            attack=job.attack,
            prior_probs=job.prior_probs,
            needle_probs=job.needle_probs,
            recall_at=3 if job.panel == "no_harm" else None,
            prior=job.prior,  # type: ignore[arg-type]
            mistakes=job.mistakes,
            progress=tick,
        )
        done = start + job.cost(rounds)
        results.setdefault((job.panel, job.key), []).append(res)
    seconds = time.perf_counter() - t0

    out: dict[str, Any] = {
        "trials": trials,
        "seed": seed,
        "rounds": rounds,
        "prior": "uniform",
        "update": update,
        "config": base_config(update).to_dict(),
    }

    def settings(panel: str) -> dict[str, dict[str, Any]]:
        return {
            key: _with_delta(pool_results(rs)) | {"trials": sum(r.trials for r in rs)}
            for (p, key), rs in results.items()
            if p == panel
        }

    if "main" in panels:
        out["main"] = {"n": 100, "k": 1, "profiles": settings("main")}
    if "noise" in panels:
        out |= _noise_panel(
            settings("noise"), sigmas=sigmas, draws=draws, trials=trials, ablation_profile=ablation_profile
        )
    if "no_harm" in panels:
        out |= _no_harm_panel(results)
    if "attack" in panels:
        out |= _attack_panel(settings("attack"), rounds=rounds)
    if "heterogeneity" in panels:
        s = settings("heterogeneity")
        out["heterogeneity"] = {
            "n": 100,
            "k": 1,
            "draws": min(draws, trials),
            "fpr": hetero_fpr,
            "profile": f"TPR_j ~ Beta(alpha, alpha) iid per position, FPR_j = {hetero_fpr:g}; "
            "a fresh profile per draw",
            "settings": [{"alpha": float(a)} | s[_fmt_key(a)] for a in alphas],
        }
        hs = out["heterogeneity"]["settings"]
        out["heterogeneity"]["peak_alpha_final"] = max(hs, key=lambda x: x["delta_f1"][-1])["alpha"]
        out["heterogeneity"]["peak_alpha_area"] = max(hs, key=lambda x: x["delta_area"])["alpha"]
    if "scaling" in panels:
        s = settings("scaling")
        out["scaling"] = {
            "profile": ablation_profile,
            "k": 1,
            "settings": [{"n": int(n)} | s[str(n)] for n in ns],
        }
    if "multi_needle" in panels:
        s = settings("multi_needle")
        out["multi_needle"] = {
            "profile": ablation_profile,
            "n": 100,
            "settings": [{"k": int(k)} | s[str(k)] for k in ks],
        }
    if "latency" in panels:
        out |= latency_panel(settings("latency"))
    out["efficiency"] = {"rows": efficiency_rows(out)}
    out["seconds"] = round(seconds, 2)
    return out


def _area(f1: Sequence[float]) -> float:
    """Area under an F1-per-round curve, as the mean over rounds (in [0, 1])."""
    return float(np.mean(f1)) if len(f1) else 0.0


def efficiency_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Query efficiency of GP-Belief for every setting in ``results``.

    Per setting: PSC's final-round F1; the first round at which GP-Belief reaches it
    (``belief_calls``; None if it never does); that as a percentage of PSC's calls
    (``calls_pct``) and the saving ``100 - calls_pct``; and the area under each policy's
    F1 curve as a fraction of the oracle's (``*_area_frac``).

    Args:
        results: Output of :func:`run_sim_bench` (the panels present are used).

    Returns:
        One dict per setting with ``panel`` and ``setting`` labels.
    """
    rows: list[dict[str, Any]] = []
    items: list[tuple[str, str, dict[str, Any]]] = []
    if "main" in results:
        items += [("main", name, s) for name, s in results["main"]["profiles"].items()]
    for panel, label in (
        ("noise", "sigma"),
        ("heterogeneity", "alpha"),
        ("scaling", "n"),
        ("multi_needle", "k"),
    ):
        if panel in results:
            items += [(panel, f"{label}={s[label]:g}", s) for s in results[panel]["settings"]]
    for panel, setting, s in items:
        pol = s["policies"]
        if "belief" not in pol or "random" not in pol:
            continue
        calls = len(pol["random"]["f1"])
        b_calls = pol["belief"].get("rounds_to_match_random")
        row: dict[str, Any] = {
            "panel": panel,
            "setting": setting,
            "psc_final_f1": pol["random"]["f1"][-1],
            "belief_final_f1": pol["belief"]["f1"][-1],
            "psc_calls": calls,
            "belief_calls": b_calls,
            "calls_pct": None if b_calls is None else 100.0 * b_calls / calls,
            "savings_pct": None if b_calls is None else 100.0 - 100.0 * b_calls / calls,
        }
        if "oracle" in pol:
            oracle_area = _area(pol["oracle"]["f1"])
            for name in ("belief", "entropy", "random"):
                if name in pol:
                    key = "psc" if name == "random" else name
                    row[f"{key}_area_frac"] = (
                        _area(pol[name]["f1"]) / oracle_area if oracle_area > 0 else None
                    )
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- CLI
def register(subparsers: Any) -> None:
    """Add ``bench sim`` to the ``gold-panning bench`` sub-parsers."""
    p = subparsers.add_parser(
        "sim",
        help="the paper's simulated comparison and ablations (no model calls)",
        description=(
            "Simulate GP-Belief, GP-Entropy, PSC and the oracle bound under the observation "
            "model: main curves for every bundled profile, calibration noise, position "
            "heterogeneity, context scaling, several needles, and query efficiency, with 95% "
            "confidence half-widths."
        ),
    )
    p.add_argument("--trials", type=int, default=5000, help="trials per setting (default 5000, as the paper)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--plot-dir", default=None, help="write one PNG per panel here (needs the plot extra)")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write a Markdown results section")
    p.add_argument(
        "--update",
        choices=UPDATES,
        default="default",
        help="default: the library's defaults (robust likelihood, shuffle_top, empty-prompt mixture); "
        "paper: the paper's GP-Belief update; self-citing: the defaults with self_citing=0.25 "
        "(default: default)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks sim``."""
    from gold_panning_integrations._console import Progress, print_json

    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    update = getattr(args, "update", "default")
    command = f"python -m benchmarks sim --trials {args.trials} --seed {args.seed}" + (
        f" --update {update}" if update != "default" else ""
    )
    bar: Progress | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress(total, label="bench sim")
        bar.update(done)

    t0 = time.perf_counter()
    results = run_sim_bench(trials=args.trials, seed=args.seed, progress=progress, update=update)
    wall = time.perf_counter() - t0
    if args.plot_dir:
        for path in plot_panels(results, args.plot_dir):
            logger.info("wrote %s", path)
    if args.markdown:
        Path(args.markdown).write_text(markdown_report(results, command=command, wall_seconds=wall) + "\n")
    if args.json:
        print_json({"command": command, **results})
    else:
        print(f"{command}  ({wall:.1f} s)\n")
        print(format_report(results))
    return 0
