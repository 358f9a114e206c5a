"""The panels of ``python -m benchmarks sim``: their settings (:data:`PANELS`, the sweeps'
defaults, the attacks and no-harm rules), the detector profiles they perturb
(:func:`noisy_profile`, :func:`heterogeneous_profile`), the simulation jobs each panel
plans, and how a panel's pooled curves (:func:`pool_results`) are summarised.

Every job is one call of :func:`~gold_panning_integrations.engine.simulator.simulate`
with its own child seed, so a panel's numbers do not depend on which other panels ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.positions import resample_curve
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.records import label_range
from gold_panning_integrations.engine.simulator import Attack, Mistakes, SimulationResult
from gold_panning_integrations.profiles import DetectorProfile, bundled_profiles

from ._sim_latency import latency_jobs

__all__ = [
    "ALL_POLICIES",
    "ATTACKS",
    "DEFAULT_ALPHAS",
    "DEFAULT_KS",
    "DEFAULT_NS",
    "DEFAULT_SIGMAS",
    "LIKELIHOODS",
    "NO_HARM_RULES",
    "PANELS",
    "UPDATES",
    "base_config",
    "heterogeneous_profile",
    "noisy_profile",
    "pool_results",
]


PANELS: tuple[str, ...] = (
    "main",
    "noise",
    "heterogeneity",
    "scaling",
    "multi_needle",
    "attack",
    "no_harm",
    "latency",
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
    ("self", 0.5),
)
"""Attack-panel settings: (kind, probability the model obeys). ``self`` is a passage that
asks to be cited (issue 29); obeyed in half the prompts, it is cited at one rate near the
middle of the profile's curve, the case the self-citing hypothesis tells apart slowest."""
GUESSES = 10
"""Numbers the ``label-guess`` attacker names: the first ten of the label space of the
scenario's prompt size (any ten distinct numbers of it are equally likely to be shown)."""
UPDATES: tuple[str, ...] = ("default", "paper", "self-citing")
"""``default``: the library's :class:`PanningConfig` defaults (robust likelihood,
``shuffle_top``, the empty-prompt mixture with level adaptation); ``paper``: the paper's
GP-Belief (plain likelihood, no shuffle, every miss is evidence, independent rounds);
``self-citing``: the defaults with ``self_citing=SELF_CITING`` (a passage that asks to be
cited, docs/security.md)."""
SELF_CITING = 0.25
"""``self_citing`` of the ``self-citing`` update."""


def base_config(update: str) -> PanningConfig:
    """The :class:`PanningConfig` of ``update`` (one of :data:`UPDATES`), with one prompt per
    round: the panels count rounds as calls (the latency panel sets its own)."""
    if update == "default":
        return PanningConfig(prompts_per_round=1)
    if update == "paper":
        return PanningConfig.paper(prompts_per_round=1)
    if update == "self-citing":
        return PanningConfig(prompts_per_round=1, self_citing=SELF_CITING)
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
                    _Job(
                        "noise",
                        f"{_fmt_key(sigma)}|{name}",
                        t100,
                        f100,
                        100,
                        1,
                        share,
                        ABLATION_POLICIES,
                        sim_ss,
                        dt,
                        df,
                        config=cfg,
                        placement_only=only,
                    )
                )
    over = np.minimum(1.3 * t100, 1.0)
    for name, ss in zip(("robust", "plain"), ss_panel.spawn(len(sigmas) + 2)[-2:]):
        jobs.append(
            _Job(
                "noise",
                f"tpr+30%|{name}",
                t100,
                f100,
                100,
                1,
                trials,
                ABLATION_POLICIES,
                ss,
                over,
                f100,
                config=robust if name == "robust" else plain,
            )
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
                _Job(
                    "no_harm",
                    f"{nm}|{scale:g}|{r}|{rule}",
                    scale * t,
                    scale * f,
                    10,
                    1,
                    trials,
                    ("belief",),
                    ss,
                    t,
                    f,
                    config=replace(base_cfg or PanningConfig(), **opts),
                    rounds=r,
                    prior_probs=prior,
                    needle_probs=needle,
                )
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
                    _Job(
                        "attack",
                        f"{scen}|{kind}|{obey:g}|{top}",
                        np.asarray(t),
                        np.asarray(f),
                        n,
                        1,
                        trials,
                        ("belief", "random"),
                        ss,
                        dt,
                        df,
                        config=cfg,
                        attack=attack,
                        rounds=r,
                    )
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
                jobs.append(
                    _Job("heterogeneity", _fmt_key(alpha), t, f, 100, 1, share, ABLATION_POLICIES, sim_ss)
                )
    if "scaling" in panels:
        for n, ss in zip(ns, panel_seeds["scaling"].spawn(len(ns))):
            jobs.append(
                _Job("scaling", str(n), bt, bf, int(n), 1, _scaled_trials(trials, n), ALL_POLICIES, ss)
            )
    if "multi_needle" in panels:
        for k, ss in zip(ks, panel_seeds["multi_needle"].spawn(len(ks))):
            jobs.append(_Job("multi_needle", str(k), bt, bf, 100, int(k), trials, ALL_POLICIES, ss))
    if "latency" in panels:
        jobs += latency_jobs(
            panel_seeds["latency"], profiles, trials=trials, base_cfg=base_cfg, make_job=_Job
        )
    return jobs


# ------------------------------------------------------------------ running
def _noise_panel(
    s_all: dict[str, dict[str, Any]],
    *,
    sigmas: Sequence[float],
    draws: int,
    trials: int,
    ablation_profile: str,
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
        "settings": [
            {"sigma": float(x), "likelihood": "robust"} | s[f"{_fmt_key(x)}|robust"] for x in sigmas
        ],
        "variants": {
            name: [{"sigma": float(x), "likelihood": name} | s[f"{_fmt_key(x)}|{name}"] for x in sigmas]
            for name in LIKELIHOODS[1:]
        },
        "overestimate": {
            name: {"tpr_scale": 1.3, "likelihood": name} | s[f"tpr+30%|{name}"]
            for name in ("robust", "plain")
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
        rows.append(
            {
                "profile": nm,
                "scale": float(scale),
                "rounds": int(r),
                "rule": rule,
                "trials": rs[0].trials,
                "top1": float(c.f1[-1]),
                "top1_ci95": float(c.ci95[-1]),
                "top3": float(c.recall[-1]),
            }
        )
    out["no_harm"] = {
        "n": 10,
        "retriever": {
            "needle_rank_probs": list(NO_HARM_NEEDLE),
            "top1": NO_HARM_NEEDLE[0],
            "top3": float(sum(NO_HARM_NEEDLE[:3])),
        },
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
            "issue-10": {
                "n": 10,
                "rounds": 4,
                "model": "TPR by slot "
                + str(list(ISSUE10_TPR))
                + ", FPR 0.03; the panner uses lost-in-the-middle",
            },
        },
        "settings": rows,
    }
    return out
