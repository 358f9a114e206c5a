"""The numbers and figures of docs/probabilities.md: is the posterior a probability?

Simulator (the batch simulator, the generic lost-in-the-middle profile's rates), 20
documents in random order (a flat prior), 0, 1 or 2 relevant per query with
probabilities 0.2 / 0.4 / 0.4, the library's defaults (2 rounds of 3 prompts). Prints, per
setting, the per-document ECE (10 equal-width bins, and 10 equal-count bins), the Brier
score, the top pick's mean probability against how often it is right, and the AUROC of
p_none for "no candidate relevant"; then the held-out (5-fold) calibration of the
identity, Platt and isotonic maps on a mis-specified profile at 50 to 500 labelled
queries. ``--plot DIR`` also writes the reliability diagrams.

    python -m benchmarks.probabilities_check --queries 4000 --plot docs/figures
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.calibration_sim import biased_profile, simulated_traces
from gold_panning_integrations import DetectorProfile
from gold_panning_integrations.calibration.metrics import CalibrationSummary, summarize
from gold_panning_integrations.calibration.recalibration import cross_validate, fit_map
from gold_panning_integrations.calibration.traces import learn_profile
from gold_panning_integrations.engine.beliefs import logit
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.simulator import Mistakes, simulate

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
COUNTS = (0.2, 0.4, 0.4)
WRONG = biased_profile(PROFILE, tpr_scale=0.5, fpr_scale=2.0)
"""A mis-specified profile: the panner believes TPR halved and FPR doubled."""


def run(
    config: PanningConfig,
    *,
    queries: int,
    seed: int,
    mistakes: Mistakes | None = None,
    wrong: bool = False,
    learned: DetectorProfile | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Final posteriors and truth, each shape ``(queries, 20)``; the panner's rates are
    the true ones, ``WRONG``'s, or ``learned``'s."""
    decision = WRONG if wrong else learned
    kw: dict[str, Any] = (
        {} if decision is None else {"decision_tpr": decision.tpr, "decision_fpr": decision.fpr}
    )
    res = simulate(
        PROFILE.tpr,
        PROFILE.fpr,
        n=20,
        k=1,
        rounds=config.rounds,
        trials=queries,
        policies=("belief",),
        rng=seed,
        config=config,
        prior=config.prior,
        keep_posteriors=True,
        relevant_counts=COUNTS,
        mistakes=mistakes,
        **kw,
    )
    assert res.posteriors is not None and res.truth is not None
    return res.posteriors["belief"], res.truth


def describe(label: str, s: CalibrationSummary, p: np.ndarray, y: np.ndarray) -> None:
    """One table row; the last column is the mean p_none against the share of queries
    with no relevant document (p_none's own calibration, on average)."""
    print(
        f"{label:58s} {s.ece:7.4f} {s.adaptive_ece:9.4f} {s.brier:7.4f}   {s.top_mean:.3f} / {s.top_accuracy:.3f}"
        f"   {s.p_none_auroc:.3f}   {np.prod(1 - p, axis=1).mean():.3f} / {(~y.any(axis=1)).mean():.3f}"
    )


def lo(p: np.ndarray) -> np.ndarray:
    return logit(np.clip(p, 1e-9, 1 - 1e-9))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=4000, help="simulated queries per setting (default 4000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--plot", default=None, metavar="DIR", help="write the reliability diagrams here (PNG)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    q, seed = args.queries, args.seed
    d = PanningConfig()
    true = PanningConfig(false_leads=0.0, blind_rate=0.0)
    settings: list[tuple[str, PanningConfig, Mistakes | None]] = [
        ("defaults; reader without repeated mistakes (0.5's check)", d, None),
        ("true profile (false_leads=0, blind_rate=0), defaults", true, None),
        ("defaults; reader with the mistakes they assume (.25, .3)", d, Mistakes(0.25, 0.3)),
        (
            "  ablation: true profile, adapt_level off",
            PanningConfig(false_leads=0, blind_rate=0, adapt_level=False),
            None,
        ),
        (
            "  ablation: true profile, robust off",
            PanningConfig(false_leads=0, blind_rate=0, robust=False),
            None,
        ),
        (
            "  ablation: true profile, empty_prompts='evidence'",
            PanningConfig(false_leads=0, blind_rate=0, empty_prompts="evidence"),
            None,
        ),
        ("  ablation: defaults, false_leads=0", PanningConfig(false_leads=0.0), None),
        ("  ablation: defaults, blind_rate=0", PanningConfig(blind_rate=0.0), None),
        ("  the paper's update (PanningConfig.paper())", PanningConfig.paper(), None),
    ]
    print(f"simulator: 20 documents, 0/1/2 relevant with p {COUNTS}, {q} queries, seed {seed}")
    print(
        f"{'setting':58s} {'ECE':>7s} {'ECE(eq-n)':>9s} {'Brier':>7s}   top pick p / right   p_none AUROC"
        "   mean p_none / share none"
    )
    kept: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for label, cfg, mistakes in settings:
        p, y = run(cfg, queries=q, seed=seed, mistakes=mistakes)
        kept[label] = (p, y)
        describe(label, summarize(list(zip(p, y))), p, y)
    learned = learn_profile(
        simulated_traces(PROFILE.resample(20), PROFILE, queries=200, n=20, rounds=2, seed=11, labelled=True),
        PROFILE,
    ).profile
    p, y = run(PanningConfig().with_profile(learned), queries=q, seed=seed, learned=learned)
    describe(
        f"profile learned from 200 labelled traces (fl {learned.false_leads:.3f}, br {learned.blind_rate:.3f})",
        summarize(list(zip(p, y))),
        p,
        y,
    )
    print()
    print(
        "mis-specified profile (the panner believes TPR x0.5, FPR x2), defaults, Platt map fitted on other queries"
    )
    p_w, y_w = run(d, queries=q, seed=seed, wrong=True)
    train_p, train_y = run(d, queries=q // 2, seed=seed + 1, wrong=True)
    platt = fit_map(lo(train_p).ravel(), train_y.ravel(), kind="platt")
    iso = fit_map(lo(train_p).ravel(), train_y.ravel(), kind="isotonic")
    describe("before the map", summarize(list(zip(p_w, y_w))), p_w, y_w)
    p_platt = platt.probabilities(lo(p_w))
    describe(
        f"after Platt (slope {platt.slope:.2f}, intercept {platt.intercept:+.2f})",
        summarize(list(zip(p_platt, y_w))),
        p_platt,
        y_w,
    )
    p_iso = iso.probabilities(lo(p_w))
    describe("after isotonic", summarize(list(zip(p_iso, y_w))), p_iso, y_w)
    print()
    print("choosing the map: held-out (5-fold) calibration on the mis-specified profile, mean of 5 draws")
    print(f"{'labelled queries':>16s}  {'map':9s} {'ECE':>7s} {'ECE(eq-n)':>9s} {'Brier':>7s}")
    for n_q in (50, 100, 200, 500):
        acc: dict[str, list[tuple[float, float, float]]] = {}
        for rep in range(5):
            p, y = run(d, queries=n_q, seed=1000 + rep, wrong=True)
            for kind, m in cross_validate(list(zip(lo(p), y)), seed=rep).items():
                acc.setdefault(kind, []).append((m["ece"], m["adaptive_ece"], m["brier"]))
        for kind, vals in acc.items():
            e, a, b = np.mean(vals, axis=0)
            print(f"{n_q:16d}  {kind:9s} {e:7.4f} {a:9.4f} {b:7.4f}")
    if args.plot:
        out = Path(args.plot)
        out.mkdir(parents=True, exist_ok=True)
        engine = {
            "defaults (mixture for a reader with repeated mistakes)": kept[settings[0][0]],
            "true profile (the reader's own mistake rates: none)": kept[settings[1][0]],
        }
        print(
            "wrote", plot(engine, out / "probabilities-simulator.png", "simulator: the engine's posteriors")
        )
        recal = {
            "mis-specified profile, no map": (p_w, y_w),
            "after a Platt map from other queries": (p_platt, y_w),
        }
        print("wrote", plot(recal, out / "probabilities-recalibration.png", "simulator: recalibration"))
    print(f"({time.perf_counter() - t0:.0f} s)")


def plot(series: dict[str, tuple[np.ndarray, np.ndarray]], path: Path, title: str) -> Path:
    """A reliability diagram (10 equal-width bins) of each ``(posteriors, truth)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="calibrated")
    for label, (p, y) in series.items():
        s = summarize(list(zip(p, y)))
        x = [r["mean_prob"] for r in s.rows]
        f = [r["frac_pos"] for r in s.rows]
        ax.plot(x, f, "o-", ms=4, label=f"{label}: ECE {s.ece:.3f}")
    ax.set_xlabel("mean probability in bin (10 equal-width bins)")
    ax.set_ylabel("share relevant")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6.5, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
