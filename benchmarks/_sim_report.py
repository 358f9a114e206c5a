"""The report of ``python -m benchmarks sim``: its tables as plain text
(:func:`format_report`) or Markdown (:func:`markdown_report`), and its figures
(:func:`plot_panels`, one PNG per panel; needs the ``plot`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._sim_latency import latency_tables, plot_latency
from ._sim_panels import ALL_POLICIES, ATTACKS, LIKELIHOODS, NO_HARM_RULES

__all__ = ["format_report", "markdown_report", "plot_panels"]


# ----------------------------------------------------------------- reports
_LABELS = {"belief": "GP-Belief", "entropy": "GP-Entropy", "random": "PSC", "oracle": "oracle"}


def _pm(curve: dict[str, Any], t: int) -> str:
    """``f1 ±ci`` of ``curve`` at round index ``t`` (negative counts from the end)."""
    return f"{curve['f1'][t]:.3f} ±{curve['ci95'][t]:.3f}"


def _delta(s: dict[str, Any]) -> str:
    return f"{s['delta_f1'][-1]:+.3f} ±{s['delta_ci95'][-1]:.3f}"


def _noise_likelihood_table(
    results: dict[str, Any], rounds: int
) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The noise panel by likelihood (when its variants ran)."""
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    nz = results["noise"]
    by = {"robust": nz["settings"], **nz["variants"]}
    rows = [
        [f"{s['sigma']:g}"] + [_delta(by[name][i]) for name in LIKELIHOODS if name in by]
        for i, s in enumerate(nz["settings"])
    ]
    rows += [
        ["TPR x1.3"]
        + [_delta(nz["overestimate"][name]) if name in nz["overestimate"] else "-" for name in LIKELIHOODS]
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
        [nm, f"x{sc:g}", r]
        + [f"{v[rule]['top1']:.3f} / {v[rule]['top3']:.3f}" for rule in NO_HARM_RULES if rule in v]
        for (nm, sc, r), v in table.items()
    ]
    ret = nh["retriever"]
    out.append(
        (
            (
                f"Do no harm (N=10, rank prior; retriever alone: top-1 {ret['top1']:.2f} / top-3 {ret['top3']:.2f}): "
                "GP-Belief top-1 F1 / top-3 recall"
            ),
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
            [
                s["scenario"],
                s["attack"],
                f"{s['obey']:g}",
                s["shuffle_top"],
                _pm(pol["belief"], -1),
                _pm(pol["random"], -1),
                " ".join(f"{x:.2f}" for x in pol["belief"]["f1"]),
            ]
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
            rows: list[list[Any]] = [
                [t + 1] + [_pm(s["policies"][p], t) for p in pols] for t in range(rounds)
            ]
            rows.append(["match"] + [s["policies"][p].get("rounds_to_match_random") for p in pols])
            out.append(
                (
                    (
                        f"Main: F1 per round, profile {name} (N=100, k=1, {s['trials']} trials; "
                        f"'match' = first round reaching PSC's round-{rounds} F1)"
                    ),
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
                [label, "trials"]
                + [_LABELS[p] for p in pols]
                + ["dF1 (Belief-PSC)", f"mean dF1 r1-{rounds}", "Belief match"],
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
                (
                    f"Query efficiency: GP-Belief calls to reach PSC's round-{rounds} F1; "
                    "F1 area over rounds / oracle's"
                ),
                ["panel", "setting", "PSC F1", "Belief calls", "% of PSC calls", "Belief area", "PSC area"],
                rows,
            )
        )
    return out


def format_report(results: dict[str, Any]) -> str:
    """Plain-text tables of every panel in ``results`` (for the terminal)."""
    from gold_panning_integrations._console import format_table

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
            ax.plot(
                np.arange(1, len(f1) + 1),
                f1,
                marker="o",
                ms=3,
                color=f"C{kinds.index(x['attack'])}",
                ls="-" if x["obey"] >= 1 else "--",
                label=f"{x['attack']} (obeys {x['obey']:g})",
            )
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
        vals = [
            next((x["top3"] for x in nh if (x["profile"], x["scale"]) == lab and x["rule"] == rule), np.nan)
            for lab in labels
        ]
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
        from gold_panning_integrations.errors import MissingExtraError

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
