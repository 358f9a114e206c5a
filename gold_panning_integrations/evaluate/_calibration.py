"""``gold-panning evaluate``'s calibration: are a method's per-document probabilities probabilities?

A method that gives every candidate a probability of relevance in [0, 1] (the panning
methods: their posteriors) keeps them in its rows (``"scores"``, in the input order), so
this is recomputed from a checkpoint or ``--out``'s ``probabilities/*.jsonl`` with no
model call. Over every (query, candidate) pair, a candidate being relevant when it is one
of the query's gold documents (the judgements scored; an unjudged candidate counts as
not relevant, as in the ranking metrics): the ECE with 10 equal-width bins, the ECE with
10 equal-count bins, the Brier score, the top pick's mean probability against how often
it is right, and the AUROC of ``p_none = prod(1 - p)`` for "no candidate relevant"
(:mod:`gold_panning_integrations.calibration.metrics`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration.metrics import summarize as summarize_pairs
from ..errors import MissingExtraError
from ..ir.runfile import write_text_atomic
from ._instances import CompareInstance

__all__ = ["calibration", "calibration_table", "plot_reliability", "row_pairs", "write_probabilities"]


def row_pairs(
    rows: Sequence[Mapping[str, Any]], instances: Sequence[CompareInstance], method: str
) -> list[tuple[list[float], list[bool]]]:
    """``(probabilities, relevant)`` per query for ``method``'s rows that kept scores (one
    per candidate, the instance's order)."""
    by_index = {inst.index: inst for inst in instances}
    out = []
    for r in rows:
        scores = r.get("scores")
        inst = by_index.get(int(r["instance"]))
        if r["method"] != method or not scores or inst is None or len(scores) != len(inst.documents):
            continue
        gold = set(inst.gold)
        out.append(([float(s) for s in scores], [i in gold for i in range(len(scores))]))
    return out


def calibration(
    rows: Sequence[Mapping[str, Any]], instances: Sequence[CompareInstance], method: str
) -> dict[str, Any] | None:
    """The calibration of ``method``'s probabilities (see the module doc), or None when
    its rows keep none: ``{"queries", "pairs", "ece", "adaptive_ece", "brier",
    "top_mean", "top_accuracy", "top_gap", "p_none_auroc", "rows", "bins", "p_none_mean",
    "none_share", "threshold", "precision_at_threshold", "returned_at_threshold"}``
    (the precision of what ``min_relevance=0.5`` returns)."""
    pairs = row_pairs(rows, instances, method)
    if not pairs:
        return None
    d = summarize_pairs(pairs).to_dict()
    for key in (
        "ece",
        "adaptive_ece",
        "brier",
        "top_mean",
        "top_accuracy",
        "top_gap",
        "p_none_auroc",
        "p_none_mean",
        "none_share",
        "precision_at_threshold",
    ):
        if d[key] is not None:
            d[key] = round(float(d[key]), 4)
    return d


def calibration_table(summary: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str]) -> list[str]:
    """Markdown lines: one row per method with a calibration (none: no lines)."""
    cal = {m: d["calibration"] for m, d in summary.items() if d.get("calibration")}
    if not cal:
        return []
    head = [
        "method",
        "pairs",
        "ECE (10 equal-width bins)",
        "ECE (10 equal-count)",
        "Brier",
        "top pick: mean p / right",
        "p_none AUROC",
        "mean p_none / share with none",
        "at p >= 0.5: pairs, precision",
    ]
    lines = [
        "Calibration of the per-document probabilities over every (query, candidate) pair:",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for m, c in cal.items():
        auroc = "-" if c["p_none_auroc"] is None else f"{c['p_none_auroc']:.2f}"
        prec = "-" if c["precision_at_threshold"] is None else f"{c['precision_at_threshold']:.2f}"
        lines.append(
            f"| {labels.get(m, m)} | {c['pairs']} | {c['ece']:.3f} | {c['adaptive_ece']:.3f} | {c['brier']:.3f} "
            f"| {c['top_mean']:.2f} / {c['top_accuracy']:.2f} | {auroc} | {c['p_none_mean']:.2f} / "
            f"{c['none_share']:.2f} | {c['returned_at_threshold']}, {prec} |"
        )
    return lines


def write_probabilities(
    out: str | Path,
    rows: Sequence[Mapping[str, Any]],
    instances: Sequence[CompareInstance],
    methods: Sequence[str],
) -> list[Path]:
    """``probabilities/<method>.jsonl`` under ``out`` for each method whose rows kept
    scores: one line per query, ``{"qid", "docs" (ids, the first stage's order),
    "probabilities", "relevant" (ids)}``, atomically. Returns the paths written."""
    by_index = {inst.index: inst for inst in instances}
    written = []
    for m in methods:
        lines = []
        for r in rows:
            inst = by_index.get(int(r["instance"]))
            if r["method"] != m or not r.get("scores") or inst is None:
                continue
            ids = inst.document_ids
            record = {
                "qid": inst.query_id,
                "docs": ids,
                "probabilities": r["scores"],
                "relevant": [ids[i] for i in inst.gold],
            }
            lines.append(json.dumps(record) + "\n")
        if lines:
            written.append(write_text_atomic(Path(out) / "probabilities" / f"{m}.jsonl", "".join(lines)))
    return written


def plot_reliability(
    summary: Mapping[str, Mapping[str, Any]], path: str | Path, *, labels: Mapping[str, str], title: str = ""
) -> Path | None:
    """A reliability diagram (share relevant against mean probability per equal-width
    bin, marker area by pairs) of every method with a calibration; None when none has."""
    cal = {m: d["calibration"] for m, d in summary.items() if d.get("calibration")}
    if not cal:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise MissingExtraError("matplotlib", "plot", "Plotting the reliability diagram") from err
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="calibrated")
    for m, c in cal.items():
        rows = c["rows"]
        x = [r["mean_prob"] for r in rows]
        y = [r["frac_pos"] for r in rows]
        size = 8 + 120 * np.sqrt(np.asarray([r["count"] for r in rows], dtype=float) / max(c["pairs"], 1))
        line = ax.plot(x, y, "-", alpha=0.6, label=f"{labels.get(m, m)} (ECE {c['ece']:.3f})")
        ax.scatter(x, y, s=size, color=line[0].get_color(), alpha=0.8)
    ax.set_xlabel("mean probability in bin (10 equal-width bins)")
    ax.set_ylabel("share relevant")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
