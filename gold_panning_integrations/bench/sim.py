"""``gold-panning bench sim``: the paper's simulated comparison and ablations, with 95% CIs.

Everything runs on :func:`~gold_panning_integrations.engine.simulate.simulate` (the
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
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine.config import PanningConfig
from ..engine.curves import resample_curve
from ..engine.priors import rank_prior_probs
from ..engine.rounds import label_range
from ..engine.simulate import Attack, Mistakes, SimulationResult, simulate
from ._sim_latency import latency_jobs, latency_panel, latency_tables, plot_latency
from ..profiles import DetectorProfile, bundled_profiles

__all__ = [
    "PANELS",
    "DEFAULT_SIGMAS",
    "DEFAULT_ALPHAS",
    "DEFAULT_NS",
    "DEFAULT_KS",
    "noisy_profile",
    "heterogeneous_profile",
    "pool_results",
    "efficiency_rows",
    "run_sim_bench",
    "format_report",
    "markdown_report",
    "plot_panels",
    "register",
    "main",
]

logger = logging.getLogger(__name__)

PANELS: tuple[str, ...] = (
    "main", "noise", "heterogeneity", "scaling", "multi_needle", "attack", "no_harm", "latency"
)
"""Panels that run simulations; ``efficiency`` is derived from them."""
DEFAULT_SIGMAS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
DEFAULT_ALPHAS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
DEFAULT_NS: tuple[int, ...] = (20, 50, 100, 200, 500, 1000)
DEFAULT_KS: tuple[int, ...] = (1, 3, 5)
ALL_POLICIES: tuple[str, ...] = ("belief", "entropy", "random", "oracle")
ABLATION_POLICIES: tuple[str, ...] = ("belief", "random", "oracle")
_DRAWS = 10
_Z95 = 1.96
LIKELIHOODS: tuple[str, ...] = ("robust", "plain", "placement-only")
"""Noise-panel variants: robust likelihood (default), plain, noise in placement only."""
ATTACKS: tuple[tuple[str, float], ...] = (
    ("none", 1.0),
    ("label", 1.0),
    ("label", 0.5),
    ("label-guess", 1.0),
    ("position", 1.0),
    ("position", 0.5),
    ("self", 1.0),
)
"""Attack-panel settings: (kind, probability the model obeys)."""
GUESSES = 10
"""Numbers the ``label-guess`` attacker names: the first ten of the label space of the
scenario's prompt size (any ten distinct numbers of it are equally likely to be shown)."""
UPDATES: tuple[str, ...] = ("default", "paper")
"""``default``: the library's :class:`PanningConfig` defaults (robust likelihood,
``shuffle_top``, the empty-prompt mixture with level adaptation); ``paper``: the paper's
GP-Belief (plain likelihood, no shuffle, every miss is evidence, independent rounds)."""


def base_config(update: str) -> PanningConfig:
    """The :class:`PanningConfig` of ``update`` (one of :data:`UPDATES`)."""
    if update == "default":
        return PanningConfig()
    if update == "paper":
        return PanningConfig.paper()
    raise ValueError(f"update must be one of {', '.join(UPDATES)}, got {update!r}")


NO_HARM_NEEDLE: tuple[float, ...] = (0.80, 0.10, 0.05) + (0.05 / 7,) * 7
"""``no_harm`` panel: probability that the needle is the retriever's r-th document."""
NO_HARM_SCALES: tuple[float, ...] = (0.05, 0.3, 1.0)
NO_HARM_RULES: dict[str, dict[str, Any]] = {
    "paper": {"empty_prompts": "evidence", "adapt_level": False},
    "skip": {"empty_prompts": "skip", "adapt_level": False},
    "default": {},
}
ISSUE10_TPR: tuple[float, ...] = (0.8, 0.6, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.6)
"""Issue 10's model at 10 documents: TPR by prompt slot (FPR 0.03 everywhere)."""


# ----------------------------------------------------------------- profiles
def noisy_profile(
    tpr: ArrayLike,
    fpr: ArrayLike,
    sigma: float,
    *,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A miscalibrated copy of a profile: ``clip(rate + Normal(0, sigma), 0, 1)``.

    Args:
        tpr: True TPR per position, shape ``(m,)``.
        fpr: True FPR per position, shape ``(m,)``.
        sigma: Standard deviation of the additive noise, ``>= 0`` (0 returns copies).
        rng: Source of the noise; TPR and FPR get independent draws per position.

    Returns:
        ``(tpr, fpr)``, each shape ``(m,)``, in [0, 1].
    """
    if not sigma >= 0.0:
        raise ValueError(f"sigma must be >= 0, got {sigma!r}")
    t = np.asarray(tpr, dtype=np.float64)
    f = np.asarray(fpr, dtype=np.float64)
    if sigma == 0.0:
        return t.copy(), f.copy()
    return (
        np.clip(t + rng.normal(0.0, sigma, t.shape), 0.0, 1.0),
        np.clip(f + rng.normal(0.0, sigma, f.shape), 0.0, 1.0),
    )


def heterogeneous_profile(
    alpha: float,
    n: int,
    *,
    fpr: float = 0.05,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A random profile whose position qualities are ``Beta(alpha, alpha)``.

    ``TPR_j ~ Beta(alpha, alpha)`` independently for each position and ``FPR_j = fpr``
    everywhere, so diagnosticity ``|TPR_j - fpr|`` varies only through the TPR.

    Args:
        alpha: Beta concentration, ``> 0``; large values make positions alike.
        n: Number of positions.
        fpr: False positive rate of every position, in [0, 1].
        rng: Source of the draws.

    Returns:
        ``(tpr, fpr)``, each shape ``(n,)``.
    """
    if not alpha > 0.0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr!r}")
    return rng.beta(alpha, alpha, size=n), np.full(n, float(fpr))


# ------------------------------------------------------------------ pooling
def pool_results(results: Sequence[SimulationResult]) -> dict[str, dict[str, list[float]]]:
    """Pool simulations of the same setting (e.g. one per noise draw) into one curve.

    The per-trial first and second moments of each run are recovered from its mean and
    CI half-width, summed with weights equal to the trial counts, and turned back into a
    mean and a 95% half-width over all trials; the spread between runs (noise draws)
    is thereby part of the interval.

    Args:
        results: Runs with the same policies and rounds.

    Returns:
        ``{policy: {"f1": [...], "ci95": [...]}}``, lists of length ``rounds``.
    """
    if not results:
        raise ValueError("pool_results needs at least one SimulationResult")
    total = sum(r.trials for r in results)
    out: dict[str, dict[str, list[float]]] = {}
    for pol in results[0].policies:
        s1 = np.zeros(results[0].rounds)
        s2 = np.zeros(results[0].rounds)
        for r in results:
            c = r.policies[pol]
            nt = r.trials
            var = np.square(c.ci95 / _Z95) * nt  # sample variance with the n/(n-1) factor
            second = var * max(nt - 1, 1) / nt + np.square(c.f1) if nt > 1 else np.square(c.f1)
            s1 += nt * c.f1
            s2 += nt * second
        mean = s1 / total
        var = np.maximum(s2 / total - np.square(mean), 0.0) * total / max(total - 1, 1)
        ci = _Z95 * np.sqrt(var / total)
        out[pol] = {"f1": [float(x) for x in mean], "ci95": [float(x) for x in ci]}
    return out


def _with_delta(policies: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """Add ``delta_f1``/``delta_ci95`` (belief - random) and ``rounds_to_match_random``."""
    out: dict[str, Any] = {"policies": policies}
    if "belief" in policies and "random" in policies:
        b, r = policies["belief"], policies["random"]
        out["delta_f1"] = [x - y for x, y in zip(b["f1"], r["f1"])]
        out["delta_ci95"] = [math.hypot(x, y) for x, y in zip(b["ci95"], r["ci95"])]
        out["delta_area"] = float(np.mean(out["delta_f1"]))  # mean dF1 over rounds
    if "random" in policies:
        target = policies["random"]["f1"][-1]
        for curve in policies.values():
            hit = [i for i, v in enumerate(curve["f1"]) if v >= target - 1e-12]
            curve["rounds_to_match_random"] = hit[0] + 1 if hit else None  # type: ignore[assignment]
    return out


# --------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class _Job:
    """One call of :func:`simulate`; several jobs with the same key are pooled."""

    panel: str
    key: str
    tpr: NDArray[np.float64]
    fpr: NDArray[np.float64]
    n: int
    k: int
    trials: int
    policies: tuple[str, ...]
    seed: np.random.SeedSequence
    decision_tpr: NDArray[np.float64] | None = None
    decision_fpr: NDArray[np.float64] | None = None
    config: PanningConfig | None = None
    attack: Attack | None = None
    placement_only: bool = False
    rounds: int | None = None
    prior_probs: NDArray[np.float64] | None = None
    needle_probs: NDArray[np.float64] | None = None
    mistakes: Mistakes | None = None
    prior: str = "uniform"

    def cost(self, rounds: int) -> int:
        prompts = self.config.prompts_per_round if self.config is not None else 1
        return self.trials * self.n * (self.rounds or rounds) * len(self.policies) * prompts


def _split(trials: int, parts: int) -> list[int]:
    """``trials`` split into ``min(parts, trials)`` near-equal positive shares."""
    parts = max(1, min(parts, trials))
    base, extra = divmod(trials, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _scaled_trials(trials: int, n: int) -> int:
    """Fewer trials for large N (cost grows with trials x N); never below min(trials, 200)."""
    if n <= 200:
        return trials
    return max(trials * 200 // n, min(trials, 200))


def _fmt_key(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class _PanelArgs:
    """What every ablation panel's job builder is given (besides its seed).

    Attributes:
        bt: TPR of the ablation profile by position, shape ``(P,)``.
        bf: FPR of the ablation profile by position, shape ``(P,)``.
        trials: Trials per setting.
        draws: Independent noise/profile draws the trials are split over.
        sigmas: Calibration-noise levels of the noise panel.
        base_cfg: Panning options every job starts from (``None``: the defaults).
    """

    bt: NDArray[np.float64]
    bf: NDArray[np.float64]
    trials: int
    draws: int
    sigmas: Sequence[float]
    base_cfg: PanningConfig | None


def _noise_jobs(ss_panel: np.random.SeedSequence, a: _PanelArgs) -> list[_Job]:
    """Noise panel: every likelihood on the same noise draws and seeds."""
    bt, bf, trials, draws, sigmas, base_cfg = a.bt, a.bf, a.trials, a.draws, a.sigmas, a.base_cfg
    jobs: list[_Job] = []
    t100, f100 = resample_curve(bt, 100), resample_curve(bf, 100)
    plain = replace(base_cfg or PanningConfig(), robust=False)
    robust = replace(base_cfg or PanningConfig(), robust=True)
    variants = {"robust": (robust, False), "plain": (plain, False), "placement-only": (plain, True)}
    for sigma, ss in zip(sigmas, ss_panel.spawn(len(sigmas))):
        shares = _split(trials, draws)
        for share, child in zip(shares, ss.spawn(len(shares))):
            noise_ss, sim_ss = child.spawn(2)
            dt, df = noisy_profile(t100, f100, sigma, rng=np.random.default_rng(noise_ss))
            for name, (cfg, only) in variants.items():  # paired: same draws and seeds
                jobs.append(
                    _Job("noise", f"{_fmt_key(sigma)}|{name}", t100, f100, 100, 1, share, ABLATION_POLICIES,
                         sim_ss, dt, df, config=cfg, placement_only=only)
                )
    over = np.minimum(1.3 * t100, 1.0)
    for name, ss in zip(("robust", "plain"), ss_panel.spawn(len(sigmas) + 2)[-2:]):
        jobs.append(
            _Job("noise", f"tpr+30%|{name}", t100, f100, 100, 1, trials, ABLATION_POLICIES, ss, over, f100,
                 config=robust if name == "robust" else plain)
        )
    return jobs


def _no_harm_jobs(ss_panel: np.random.SeedSequence, a: _PanelArgs) -> list[_Job]:
    """Do-no-harm panel: good retriever, rank prior, a model at a fraction of its profile."""
    trials, base_cfg = a.trials, a.base_cfg
    jobs: list[_Job] = []
    prior = rank_prior_probs(10, k=1, top10_recall=0.5)
    needle = np.asarray(NO_HARM_NEEDLE)
    names = [x for x in ("smollm2-135m-kv", "lost-in-the-middle") if x in bundled_profiles()]
    seeds = ss_panel.spawn(len(names) * len(NO_HARM_SCALES) * 2)
    grid = [(nm, sc, r) for nm in names for sc in NO_HARM_SCALES for r in (3, 8)]
    for (nm, scale, r), ss in zip(grid, seeds):
        prof = DetectorProfile.bundled(nm)
        t, f = prof.tpr_array, prof.fpr_array
        for rule, opts in NO_HARM_RULES.items():
            jobs.append(
                _Job("no_harm", f"{nm}|{scale:g}|{r}|{rule}", scale * t, scale * f, 10, 1, trials, ("belief",),
                     ss, t, f, config=replace(base_cfg or PanningConfig(), **opts), rounds=r,
                     prior_probs=prior, needle_probs=needle)
            )
    return jobs


def _attack(kind: str, obey: float, n: int) -> Attack | None:
    """The attack of one panel setting; ``label-guess`` names :data:`GUESSES` numbers of
    the label space of a prompt of ``n`` documents (every document is shown each round)."""
    if kind == "none":
        return None
    if kind == "label-guess":
        low, _ = label_range(n)
        return Attack("label", obey, labels=tuple(range(low, low + GUESSES)))
    return Attack(kind, obey)  # type: ignore[arg-type]


def _attack_jobs(ss_panel: np.random.SeedSequence, a: _PanelArgs) -> list[_Job]:
    """Attack panel: one hostile document, with and without shuffle_top."""
    bt, bf, trials, base_cfg = a.bt, a.bf, a.trials, a.base_cfg
    jobs: list[_Job] = []
    issue = (np.asarray(ISSUE10_TPR), np.full(len(ISSUE10_TPR), 0.03))
    scenarios = {"lost-in-the-middle": (bt, bf, None, None, 100, None), "issue-10": (*issue, bt, bf, 10, 4)}
    seeds = ss_panel.spawn(len(scenarios))
    for (scen, (t, f, dt, df, n, r)), ss in zip(scenarios.items(), seeds):
        # One seed for every attack of a scenario: the same needles and citation draws,
        # so a row differs from "none" only where its attack was obeyed.
        for kind, obey in ATTACKS:
            attack = _attack(kind, obey, n)
            for top in (PanningConfig().shuffle_top, 0):
                cfg = replace(base_cfg or PanningConfig(), shuffle_top=top)
                jobs.append(
                    _Job("attack", f"{scen}|{kind}|{obey:g}|{top}", np.asarray(t), np.asarray(f), n, 1, trials,
                         ("belief", "random"), ss, dt, df, config=cfg, attack=attack, rounds=r)
                )
    return jobs


def _plan(
    profiles: dict[str, DetectorProfile],
    base: DetectorProfile,
    *,
    trials: int,
    seed: int,
    panels: Sequence[str],
    sigmas: Sequence[float],
    alphas: Sequence[float],
    ns: Sequence[int],
    ks: Sequence[int],
    draws: int,
    hetero_fpr: float,
    base_cfg: PanningConfig | None = None,
) -> list[_Job]:
    panel_seeds = dict(zip(PANELS, np.random.SeedSequence(seed).spawn(len(PANELS))))
    jobs: list[_Job] = []
    bt, bf = base.tpr_array, base.fpr_array
    if "main" in panels:
        for name, ss in zip(profiles, panel_seeds["main"].spawn(len(profiles))):
            p = profiles[name]
            jobs.append(_Job("main", name, p.tpr_array, p.fpr_array, 100, 1, trials, ALL_POLICIES, ss))
    args = _PanelArgs(bt, bf, trials=trials, draws=draws, sigmas=sigmas, base_cfg=base_cfg)
    for panel, make in (("noise", _noise_jobs), ("no_harm", _no_harm_jobs), ("attack", _attack_jobs)):
        if panel in panels:
            jobs += make(panel_seeds[panel], args)
    if "heterogeneity" in panels:
        for alpha, ss in zip(alphas, panel_seeds["heterogeneity"].spawn(len(alphas))):
            shares = _split(trials, draws)
            for share, child in zip(shares, ss.spawn(len(shares))):
                prof_ss, sim_ss = child.spawn(2)
                t, f = heterogeneous_profile(alpha, 100, fpr=hetero_fpr, rng=np.random.default_rng(prof_ss))
                jobs.append(_Job("heterogeneity", _fmt_key(alpha), t, f, 100, 1, share, ABLATION_POLICIES, sim_ss))
    if "scaling" in panels:
        for n, ss in zip(ns, panel_seeds["scaling"].spawn(len(ns))):
            jobs.append(_Job("scaling", str(n), bt, bf, int(n), 1, _scaled_trials(trials, n), ALL_POLICIES, ss))
    if "multi_needle" in panels:
        for k, ss in zip(ks, panel_seeds["multi_needle"].spawn(len(ks))):
            jobs.append(_Job("multi_needle", str(k), bt, bf, 100, int(k), trials, ALL_POLICIES, ss))
    if "latency" in panels:
        jobs += latency_jobs(panel_seeds["latency"], profiles, trials=trials, base_cfg=base_cfg, make_job=_Job)
    return jobs


# ------------------------------------------------------------------ running
def _noise_panel(
    s_all: dict[str, dict[str, Any]], *, sigmas: Sequence[float], draws: int, trials: int, ablation_profile: str
) -> dict[str, Any]:
    """The ``noise`` panel of :func:`run_sim_bench` from its pooled settings."""
    out: dict[str, Any] = {}
    s = s_all
    out["noise"] = {
        "profile": ablation_profile,
        "n": 100,
        "k": 1,
        "draws": min(draws, trials),
        "noise": "decision rates = clip(rate + Normal(0, sigma), 0, 1) per position, "
        "TPR and FPR independently; the simulated model uses the true rates",
        "likelihood": "settings: robust (default); variants: plain, placement-only (noise moves "
        "placement, the update uses the true rates)",
        "settings": [{"sigma": float(x), "likelihood": "robust"} | s[f"{_fmt_key(x)}|robust"] for x in sigmas],
        "variants": {
            name: [{"sigma": float(x), "likelihood": name} | s[f"{_fmt_key(x)}|{name}"] for x in sigmas]
            for name in LIKELIHOODS[1:]
        },
        "overestimate": {
            name: {"tpr_scale": 1.3, "likelihood": name} | s[f"tpr+30%|{name}"] for name in ("robust", "plain")
        },
    }
    return out


def _no_harm_panel(results: dict[tuple[str, str], list[SimulationResult]]) -> dict[str, Any]:
    """The ``no_harm`` panel of :func:`run_sim_bench` from its runs."""
    out: dict[str, Any] = {}
    rows = []
    for (panel, key), rs in results.items():
        if panel != "no_harm":
            continue
        nm, scale, r, rule = key.split("|")
        c = rs[0].policies["belief"]
        assert c.recall is not None
        rows.append({
            "profile": nm, "scale": float(scale), "rounds": int(r), "rule": rule, "trials": rs[0].trials,
            "top1": float(c.f1[-1]), "top1_ci95": float(c.ci95[-1]), "top3": float(c.recall[-1]),
        })
    out["no_harm"] = {
        "n": 10,
        "retriever": {"needle_rank_probs": list(NO_HARM_NEEDLE), "top1": NO_HARM_NEEDLE[0],
                      "top3": float(sum(NO_HARM_NEEDLE[:3]))},
        "prior": "rank_prior_probs(10, k=1, top10_recall=0.5)",
        "settings": rows,
    }
    return out


def _attack_panel(s_all: dict[str, dict[str, Any]], *, rounds: int) -> dict[str, Any]:
    """The ``attack`` panel of :func:`run_sim_bench` from its pooled settings."""
    out: dict[str, Any] = {}
    s = s_all
    rows = []
    for key, v in s.items():
        scen, kind, obey, top = key.split("|")
        rows.append({"scenario": scen, "attack": kind, "obey": float(obey), "shuffle_top": int(top)} | v)
    out["attack"] = {
        "k": 1,
        "scenarios": {
            "lost-in-the-middle": {"n": 100, "rounds": rounds, "model": "the profile itself"},
            "issue-10": {"n": 10, "rounds": 4, "model": "TPR by slot " + str(list(ISSUE10_TPR))
                         + ", FPR 0.03; the panner uses lost-in-the-middle"},
        },
        "settings": rows,
    }
    return out


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
        update: ``"default"`` (the library's defaults) or ``"paper"`` (the paper's
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
        "trials": trials, "seed": seed, "rounds": rounds, "prior": "uniform", "update": update,
        "config": base_config(update).to_dict(),
    }

    def settings(panel: str) -> dict[str, dict[str, Any]]:
        return {key: _with_delta(pool_results(rs)) | {"trials": sum(r.trials for r in rs)}
                for (p, key), rs in results.items() if p == panel}

    if "main" in panels:
        out["main"] = {"n": 100, "k": 1, "profiles": settings("main")}
    if "noise" in panels:
        out |= _noise_panel(settings("noise"), sigmas=sigmas, draws=draws, trials=trials,
                            ablation_profile=ablation_profile)
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
    for panel, label in (("noise", "sigma"), ("heterogeneity", "alpha"), ("scaling", "n"), ("multi_needle", "k")):
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
                    row[f"{key}_area_frac"] = _area(pol[name]["f1"]) / oracle_area if oracle_area > 0 else None
        rows.append(row)
    return rows


# ----------------------------------------------------------------- reports
_LABELS = {"belief": "GP-Belief", "entropy": "GP-Entropy", "random": "PSC", "oracle": "oracle"}


def _pm(curve: dict[str, Any], t: int) -> str:
    """``f1 ±ci`` of ``curve`` at round index ``t`` (negative counts from the end)."""
    return f"{curve['f1'][t]:.3f} ±{curve['ci95'][t]:.3f}"


def _delta(s: dict[str, Any]) -> str:
    return f"{s['delta_f1'][-1]:+.3f} ±{s['delta_ci95'][-1]:.3f}"


def _noise_likelihood_table(results: dict[str, Any], rounds: int) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The noise panel by likelihood (when its variants ran)."""
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    nz = results["noise"]
    by = {"robust": nz["settings"], **nz["variants"]}
    rows = [
        [f"{s['sigma']:g}"] + [_delta(by[name][i]) for name in LIKELIHOODS if name in by]
        for i, s in enumerate(nz["settings"])
    ]
    rows += [
        ["TPR x1.3"] + [_delta(nz["overestimate"][name]) if name in nz["overestimate"] else "-" for name in LIKELIHOODS]
    ]
    out.append(
        (
            f"Calibration noise by likelihood: dF1 (GP-Belief - PSC) at round {rounds}",
            ["sigma", "robust", "plain", "noise in placement only"],
            rows,
        )
    )
    return out


def _no_harm_table(results: dict[str, Any], rounds: int) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The do-no-harm panel."""
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    nh = results["no_harm"]
    table: dict[tuple[str, float, int], dict[str, Any]] = {}
    for x in nh["settings"]:
        table.setdefault((x["profile"], x["scale"], x["rounds"]), {})[x["rule"]] = x
    rows = [
        [nm, f"x{sc:g}", r] + [f"{v[rule]['top1']:.3f} / {v[rule]['top3']:.3f}" for rule in NO_HARM_RULES if rule in v]
        for (nm, sc, r), v in table.items()
    ]
    ret = nh["retriever"]
    out.append(
        (
            f"Do no harm (N=10, rank prior; retriever alone: top-1 {ret['top1']:.2f} / top-3 {ret['top3']:.2f}): "
            "GP-Belief top-1 F1 / top-3 recall",
            ["profile", "model rates", "rounds"] + [f"{r}" for r in NO_HARM_RULES],
            rows,
        )
    )
    return out


def _attack_table(results: dict[str, Any], rounds: int) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The attack panel."""
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    rows = []
    for s in results["attack"]["settings"]:
        pol = s["policies"]
        rows.append(
            [s["scenario"], s["attack"], f"{s['obey']:g}", s["shuffle_top"],
             _pm(pol["belief"], -1), _pm(pol["random"], -1),
             " ".join(f"{x:.2f}" for x in pol["belief"]["f1"])]
        )
    out.append(
        (
            "Attack: one hostile document (F1 at the last round; GP-Belief F1 per round)",
            ["scenario", "attack", "obeys", "shuffle_top", "GP-Belief", "PSC", "GP-Belief per round"],
            rows,
        )
    )
    return out


def _tables(results: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, headers, rows) for every panel present."""
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    rounds = results["rounds"]
    if "main" in results:
        for name, s in results["main"]["profiles"].items():
            pols = list(s["policies"])
            rows = [[t + 1] + [_pm(s["policies"][p], t) for p in pols] for t in range(rounds)]
            rows.append(["match"] + [s["policies"][p].get("rounds_to_match_random") for p in pols])
            out.append(
                (
                    f"Main: F1 per round, profile {name} (N=100, k=1, {s['trials']} trials; "
                    f"'match' = first round reaching PSC's round-{rounds} F1)",
                    ["round"] + [_LABELS.get(p, p) for p in pols],
                    rows,
                )
            )
    for panel, label, title in (
        ("noise", "sigma", "Calibration noise (decision rates + N(0, sigma))"),
        ("heterogeneity", "alpha", "Heterogeneity (TPR_j ~ Beta(alpha, alpha))"),
        ("scaling", "n", "Context scaling (N documents)"),
        ("multi_needle", "k", "Several needles (k relevant of N=100)"),
    ):
        if panel not in results:
            continue
        settings = results[panel]["settings"]
        pols = [p for p in ALL_POLICIES if p in settings[0]["policies"]]
        rows = [
            [f"{s[label]:g}", s["trials"]]
            + [_pm(s["policies"][p], rounds - 1) for p in pols]
            + [_delta(s), s["delta_area"], s["policies"]["belief"].get("rounds_to_match_random")]
            for s in settings
        ]
        out.append(
            (
                f"{title}: F1 at round {rounds}",
                [label, "trials"] + [_LABELS[p] for p in pols] + ["dF1 (Belief-PSC)", f"mean dF1 r1-{rounds}", "Belief match"],
                rows,
            )
        )
    if "noise" in results and "variants" in results["noise"]:
        out += _noise_likelihood_table(results, rounds)
    if "no_harm" in results:
        out += _no_harm_table(results, rounds)
    if "attack" in results:
        out += _attack_table(results, rounds)
    if "latency" in results:
        out += latency_tables(results)
    if "efficiency" in results:
        rows = [
            [
                r["panel"],
                r["setting"],
                r["psc_final_f1"],
                r["belief_calls"] if r["belief_calls"] is not None else "never",
                None if r["calls_pct"] is None else f"{r['calls_pct']:.1f}%",
                r.get("belief_area_frac"),
                r.get("psc_area_frac"),
            ]
            for r in results["efficiency"]["rows"]
        ]
        out.append(
            (
                f"Query efficiency: GP-Belief calls to reach PSC's round-{rounds} F1; "
                "F1 area over rounds / oracle's",
                ["panel", "setting", "PSC F1", "Belief calls", "% of PSC calls", "Belief area", "PSC area"],
                rows,
            )
        )
    return out


def format_report(results: dict[str, Any]) -> str:
    """Plain-text tables of every panel in ``results`` (for the terminal)."""
    from .._console import format_table

    parts = [f"{title}\n{format_table(headers, rows)}" for title, headers, rows in _tables(results)]
    return "\n\n".join(parts)


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(c: Any) -> str:
        if isinstance(c, float):
            return f"{c:.3f}"
        return "-" if c is None else str(c).replace("±", "± ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def markdown_report(results: dict[str, Any], *, command: str, wall_seconds: float | None = None) -> str:
    """A Markdown results section (tables of every panel) naming the command line."""
    head = [
        "### Simulated benchmark",
        "",
        f"Generated by `{command}`"
        + (f" in {wall_seconds:.0f} s" if wall_seconds is not None else "")
        + f" (seed {results['seed']}, {results['trials']} trials per setting, uniform prior, "
        "95% confidence half-widths after ±).",
        "",
    ]
    body = [f"**{title}**\n\n{_md_table(h, r)}\n" for title, h, r in _tables(results)]
    return "\n".join(head + body)


# -------------------------------------------------------------------- plots
def _plot_attack(results: dict[str, Any], plt: Any, save: Callable[[Any, str], None]) -> None:
    """attack.png: GP-Belief F1 per round under each attack, with and without shuffle_top."""
    sets = [x for x in results["attack"]["settings"] if x["scenario"] == "lost-in-the-middle"]
    kinds = [k for k, _ in ATTACKS]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, top in zip(axes, sorted({x["shuffle_top"] for x in sets}, reverse=True)):
        for x in sets:
            if x["shuffle_top"] != top:
                continue
            f1 = x["policies"]["belief"]["f1"]
            ax.plot(np.arange(1, len(f1) + 1), f1, marker="o", ms=3,
                    color=f"C{kinds.index(x['attack'])}", ls="-" if x["obey"] >= 1 else "--",
                    label=f"{x['attack']} (obeys {x['obey']:g})")
        ax.set_title(f"GP-Belief under attack, shuffle_top={top} (N=100)")
        ax.set_xlabel("round (LLM calls)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("F1")
    axes[0].legend(fontsize=7)
    save(fig, "attack")


def _plot_no_harm(results: dict[str, Any], plt: Any, save: Callable[[Any, str], None]) -> None:
    """no_harm.png: top-3 recall after 3 rounds per empty-prompt rule."""
    nh = [x for x in results["no_harm"]["settings"] if x["rounds"] == 3]
    labels = sorted({(x["profile"], x["scale"]) for x in nh})
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.8 / len(NO_HARM_RULES)
    for i, rule in enumerate(NO_HARM_RULES):
        vals = [next((x["top3"] for x in nh if (x["profile"], x["scale"]) == lab and x["rule"] == rule), np.nan)
                for lab in labels]
        ax.bar(np.arange(len(labels)) + i * w, vals, w, label=rule)
    ax.axhline(results["no_harm"]["retriever"]["top3"], color="k", lw=0.8, ls="--", label="retriever alone")
    ax.set_xticks(np.arange(len(labels)) + 0.4 - w / 2, [f"{p}\nrates x{s:g}" for p, s in labels], fontsize=7)
    ax.set_ylabel("top-3 recall after 3 rounds")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    save(fig, "no_harm")


def _curves(ax: Any, pols: dict[str, Any], title: str, *, rounds: int) -> None:
    """F1 by round (1..``rounds``) with its 95% band, one line per policy in ``pols``."""
    x = np.arange(1, rounds + 1)
    for name, c in pols.items():
        f1, ci = np.asarray(c["f1"]), np.asarray(c["ci95"])
        ax.plot(x, f1, marker="o", ms=3, label=_LABELS.get(name, name), ls="--" if name == "oracle" else "-")
        ax.fill_between(x, f1 - ci, f1 + ci, alpha=0.2)
    ax.set_title(title)
    ax.set_xlabel("round (LLM calls)")
    ax.set_ylabel("F1")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _plot_main(results: dict[str, Any], plt: Any, save: Callable[[Any, str], None]) -> None:
    """main.png: F1 by round, one panel per profile."""
    profs = results["main"]["profiles"]
    fig, axes = plt.subplots(1, len(profs), figsize=(5 * len(profs), 4), squeeze=False)
    for ax, (name, s) in zip(axes[0], profs.items()):
        _curves(ax, s["policies"], f"{name} (N=100, k=1)", rounds=results["rounds"])
    save(fig, "main")


# (panel, setting field, x-axis label, log x-axis) of the sweeps plotted by _plot_sweep
_SWEEPS = (
    ("noise", "sigma", "calibration noise sigma", False),
    ("heterogeneity", "alpha", "Beta concentration alpha", True),
    ("scaling", "n", "documents N", True),
)


def _plot_sweep(
    results: dict[str, Any],
    plt: Any,
    save: Callable[[Any, str], None],
    *,
    panel: str,
    label: str,
    xlabel: str,
    logx: bool,
) -> None:
    """``{panel}.png``: final-round F1 per policy and GP-Belief - PSC across the sweep's settings."""
    rounds = results["rounds"]
    settings = results[panel]["settings"]
    xs = np.array([s[label] for s in settings], dtype=float)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for name in ("belief", "random", "oracle", "entropy"):
        if name not in settings[0]["policies"]:
            continue
        f1 = np.array([s["policies"][name]["f1"][-1] for s in settings])
        ci = np.array([s["policies"][name]["ci95"][-1] for s in settings])
        a1.errorbar(xs, f1, yerr=ci, marker="o", ms=3, capsize=2, label=_LABELS[name])
    d = np.array([s["delta_f1"][-1] for s in settings])
    dci = np.array([s["delta_ci95"][-1] for s in settings])
    a2.errorbar(xs, d, yerr=dci, marker="o", ms=3, capsize=2, color="C3")
    a2.axhline(0, color="k", lw=0.8)
    for ax, yl in ((a1, f"F1 at round {rounds}"), (a2, f"dF1 = GP-Belief - PSC (round {rounds})")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3)
        if logx:
            ax.set_xscale("log")
    a1.legend(fontsize=8)
    save(fig, panel)


def _plot_multi_needle(results: dict[str, Any], plt: Any, save: Callable[[Any, str], None]) -> None:
    """multi_needle.png: F1 by round, one panel per number of needles k."""
    settings = results["multi_needle"]["settings"]
    fig, axes = plt.subplots(1, len(settings), figsize=(5 * len(settings), 4), squeeze=False)
    for ax, s in zip(axes[0], settings):
        _curves(ax, s["policies"], f"k={s['k']} needles (N=100)", rounds=results["rounds"])
    save(fig, "multi_needle")


def _plot_efficiency(
    results: dict[str, Any], rows: list[dict[str, Any]], plt: Any, save: Callable[[Any, str], None]
) -> None:
    """efficiency.png: GP-Belief's calls to reach PSC's final F1, and F1 areas, per setting (``rows``)."""
    labels = [f"{r['panel']}:{r['setting']}" for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * len(rows)), 7), sharex=True)
    pct = [r["calls_pct"] if r["calls_pct"] is not None else np.nan for r in rows]
    a1.bar(range(len(rows)), pct, color="C0")
    a1.axhline(100, color="k", lw=0.8)
    a1.set_ylabel("GP-Belief calls, % of PSC's")
    a1.set_title(f"Calls for GP-Belief to reach PSC's round-{results['rounds']} F1 (missing bar: never)")
    w = 0.4
    idx = np.arange(len(rows))
    a2.bar(idx - w / 2, [r.get("belief_area_frac") or np.nan for r in rows], w, label="GP-Belief")
    a2.bar(idx + w / 2, [r.get("psc_area_frac") or np.nan for r in rows], w, label="PSC")
    a2.set_ylabel("F1 area / oracle's")
    a2.legend(fontsize=8)
    a2.set_xticks(idx, labels, rotation=75, fontsize=7)
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="y")
    save(fig, "efficiency")


def plot_panels(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write one PNG per panel present in ``results`` into ``out_dir``.

    Raises:
        MissingExtraError: matplotlib is not installed (the ``plot`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError as err:
        from ..errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot", "plotting the benchmark (--plot-dir)") from err
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        path = out / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)

    if "main" in results:
        _plot_main(results, plt, save)
    for panel, label, xlabel, logx in _SWEEPS:
        if panel in results:
            _plot_sweep(results, plt, save, panel=panel, label=label, xlabel=xlabel, logx=logx)
    if "multi_needle" in results:
        _plot_multi_needle(results, plt, save)
    if "attack" in results:
        _plot_attack(results, plt, save)
    if "no_harm" in results:
        _plot_no_harm(results, plt, save)
    if "latency" in results:
        plot_latency(results, plt, save)
    rows = results.get("efficiency", {}).get("rows", [])
    if rows:
        _plot_efficiency(results, rows, plt, save)
    return written


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
        "paper: the paper's GP-Belief update (default: default)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``gold-panning bench sim``."""
    from .._console import Progress, print_json

    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    update = getattr(args, "update", "default")
    command = f"gold-panning bench sim --trials {args.trials} --seed {args.seed}" + (
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
