"""``gold-panning evaluate``'s report: the Markdown tables, the plots and the files of ``--out``.

Tables: quality (nDCG@10, MRR@10, Recall@k with 95% intervals, top-1/top-3 when every query
has one relevant document, the paired nDCG@10 wins/losses/ties against the first stage),
cost per query, top-1 after each round for the panning methods, and the calibration of the
per-document probabilities (:mod:`._calibration`). ``--out DIR`` receives
``runs/<method>.trec``, the judgements scored (``qrels.trec``: ``trec_eval`` or ir-measures
reproduce the numbers), ``summary.json``, ``table.md`` and ``probabilities/<method>.jsonl``,
each written atomically (:mod:`..ir.runfile`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..ir.runfile import write_qrels, write_run, write_text_atomic
from ..plots import save_figure
from ._calibration import write_probabilities
from ._instances import CompareInstance
from ._methods import LABELS
from ._scoring import method_rankings

__all__ = ["format_markdown", "plot_compare", "reliability_path", "write_outputs"]

_QUALITY = (("ndcg@10", "nDCG@10"), ("mrr@10", "MRR@10"))
_CALIBRATION_HEAD = [
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
_COST_HEAD = [
    "method",
    "LLM calls/q",
    "prompt tok/q",
    "completion tok/q",
    "s/q",
    "top-1 per 1k prompt tok",
    "exceptions",
    "unusable",
    "same top-3 as first stage",
]


def _table(head: Sequence[str], rows: Sequence[Sequence[str] | str]) -> list[str]:
    """A Markdown table's lines; a row is its cells or an already written line."""
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *(row if isinstance(row, str) else "| " + " | ".join(row) + " |" for row in rows),
    ]


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _with_ci(d: Mapping[str, Any], key: str) -> str:
    ci = d.get(f"{key}_ci95")
    if d.get(key) is None:
        return "-"
    return f"{d[key]:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _quality_columns(summary: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    ran = [d for d in summary.values() if d["status"] == "ran"]
    cols: list[tuple[str, str]] = [(k, name) for k, name in _QUALITY if any(k in d for d in ran)]
    recall = sorted({k for d in ran for k in d if k.startswith("recall@") and not k.endswith("_ci95")})
    cols += [(k, "R@" + k.split("@", 1)[1]) for k in recall]
    if any(d.get("top1") is not None for d in ran):
        cols += [("top1", "top-1"), ("top3", "top-3")]
    return cols


def _paired(d: Mapping[str, Any]) -> tuple[str, str]:
    p = (d.get("vs_first_stage") or {}).get("ndcg@10")
    if not p:
        return "-", "-"
    ci = p["ci95"]
    return f"{p['wins']} / {p['losses']} / {p['ties']}", f"{p['mean_diff']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _quality_table(summary: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str]) -> list[str]:
    cols = _quality_columns(summary)
    paired = any("vs_first_stage" in d for d in summary.values())
    head = ["method"] + [f"{name} [95% CI]" for _, name in cols]
    if paired:
        head += ["nDCG@10 vs first stage: wins / losses / ties", "mean Δ nDCG@10 [95% CI]"]
    rows: list[list[str] | str] = []
    for m, d in summary.items():
        if d["status"] != "ran":
            rows.append(f"| {labels.get(m, m)} | skipped: {d.get('reason', '')} |" + " |" * (len(head) - 2))
            continue
        rows.append(
            [labels.get(m, m)] + [_with_ci(d, k) for k, _ in cols] + (list(_paired(d)) if paired else [])
        )
    return _table(head, rows)


def _cost_row(m: str, d: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    exc = str(d["exceptions"])
    if d["exception_types"]:
        exc += " (" + ", ".join(f"{t} {c}" for t, c in sorted(d["exception_types"].items())) + ")"
    return [
        labels.get(m, m),
        f"{d['calls_per_query']:.2f}",
        f"{d['prompt_tokens_per_query']:,.0f}",
        f"{d['completion_tokens_per_query']:,.0f}",
        f"{d['seconds_per_query']:.2f}",
        _num(d.get("top1_per_1k_prompt_tokens")),
        exc,
        str(d["unusable"]),
        str(d["same_as_base"]) if m != "base" else "-",
    ]


def _calibration_row(m: str, c: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    return [
        labels.get(m, m),
        str(c["pairs"]),
        f"{c['ece']:.3f}",
        f"{c['adaptive_ece']:.3f}",
        f"{c['brier']:.3f}",
        f"{c['top_mean']:.2f} / {c['top_accuracy']:.2f}",
        _num(c["p_none_auroc"]),
        f"{c['p_none_mean']:.2f} / {c['none_share']:.2f}",
        f"{c['returned_at_threshold']}, {_num(c['precision_at_threshold'])}",
    ]


def _per_round_lines(summary: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str]) -> list[str]:
    """Top-1 after each round for the panning methods, as wide as the longest (a method
    that ran fewer rounds shows ``-`` after its last); no lines when none panned."""
    pan = {m: d["per_round"] for m, d in summary.items() if d.get("per_round")}
    if not pan:
        return []
    width = max(len(r) for r in pan.values())
    rows = [[labels.get(m, m), *(f"{x:.2f}" for x in r), *["-"] * (width - len(r))] for m, r in pan.items()]
    head = ["method", *(str(t) for t in range(1, width + 1))]
    return [
        "",
        "Top-1 accuracy after each round (an early stop carries its answer forward):",
        "",
        *_table(head, rows),
    ]


def format_markdown(
    summary: Mapping[str, Mapping[str, Any]],
    *,
    notes: Sequence[str] = (),
    base_label: str | None = None,
) -> str:
    """The quality and cost tables (one row per method; ``base_label`` names the first
    stage, e.g. ``"first stage: BM25"``), the exceptions, top-1 by round for the panning
    methods, the calibration table and ``notes`` (one bullet each: what was ranked, how
    GP's ``k`` was chosen, ...)."""
    labels = {**LABELS, "base": base_label} if base_label else LABELS
    ran = {m: d for m, d in summary.items() if d["status"] == "ran"}
    lines = _quality_table(summary, labels) + ["", "Cost per query (server-counted usage):", ""]
    lines += _table(_COST_HEAD, [_cost_row(m, d, labels) for m, d in ran.items()])
    errors = [
        f"- {labels.get(m, m)}: {d['exceptions']} exceptions; first: {' '.join(str(d['first_error']).split())}"
        for m, d in summary.items()
        if d.get("first_error")
    ]
    if errors:
        lines += [
            "",
            "Exceptions (the method returned nothing for that query, which keeps the first-stage order):",
            "",
            *errors,
        ]
    lines += _per_round_lines(summary, labels)
    cal = {m: d["calibration"] for m, d in summary.items() if d.get("calibration")}
    if cal:
        lines += ["", "Calibration of the per-document probabilities over every (query, candidate) pair:", ""]
        lines += _table(_CALIBRATION_HEAD, [_calibration_row(m, c, labels) for m, c in cal.items()])
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines)


def write_outputs(
    out: str | Path,
    *,
    rows: Sequence[Mapping[str, Any]],
    instances: Sequence[CompareInstance],
    qrels: Mapping[str, Mapping[str, int]],
    methods: Sequence[str],
    top_n: int,
    summary: Mapping[str, Any],
    markdown: str,
) -> list[Path]:
    """Write ``runs/<method>.trec`` for every method that ran (its full rankings,
    :func:`~._scoring.method_rankings`), ``qrels.trec``, ``table.md`` and last
    ``summary.json`` (with ``"files"``: this run's files, as a folder reused by another run
    may hold older ones) under ``out``, each atomically. Returns the paths written."""
    root = Path(out)
    written = []
    for m in methods:
        ranks = method_rankings(rows, instances, m, top_n=top_n)
        if ranks:
            written.append(write_run(root / "runs" / f"{m}.trec", ranks, tag=m))
    written += write_probabilities(root, rows, instances, methods)
    written.append(write_qrels(root / "qrels.trec", qrels))
    written.append(write_text_atomic(root / "table.md", markdown + "\n"))
    files = [str(p.relative_to(root)) for p in written] + ["summary.json"]
    text = json.dumps({**summary, "files": files}, indent=2, sort_keys=False) + "\n"
    written.append(write_text_atomic(root / "summary.json", text))
    return written


def _save(plt: Any, fig: Any, ax: Any, path: str | Path, *, title: str, legend: str) -> None:
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc=legend)
    save_figure(plt, fig, path)


def plot_compare(summary: Mapping[str, Mapping[str, Any]], path: str | Path, *, title: str = "") -> None:
    """Top-1 accuracy (nDCG@10 when queries have several relevant documents) against
    prompt tokens per query, one marker per method (95% CI bars); panning methods also as
    a curve through their top-1 by round. With a method that keeps per-document
    probabilities, also their reliability diagram at :func:`reliability_path`."""
    from ..plots import pyplot

    plt = pyplot("Plotting the comparison")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ran = [d for d in summary.values() if d["status"] == "ran"]
    key = "top1" if any(d.get("top1") is not None for d in ran) else "ndcg@10"
    for m, d in summary.items():
        if d["status"] != "ran" or d.get(key) is None:
            continue
        x, y = d["prompt_tokens_per_query"], d[key]
        lo, hi = d[f"{key}_ci95"]
        line = ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", capsize=3, label=LABELS.get(m, m))
        if key == "top1" and d.get("per_round") and d.get("per_round_prompt_tokens"):
            ax.plot(d["per_round_prompt_tokens"], d["per_round"], "-", alpha=0.5, color=line[0].get_color())
    ax.set_xlabel("prompt tokens per query (server usage)")
    ax.set_ylabel("top-1 accuracy" if key == "top1" else "nDCG@10")
    ax.set_ylim(-0.02, 1.02)
    _save(plt, fig, ax, path, title=title, legend="best")
    _plot_reliability(plt, summary, reliability_path(path), title=title)


def _plot_reliability(plt: Any, summary: Mapping[str, Mapping[str, Any]], path: Path, *, title: str) -> None:
    """The reliability diagram (share relevant against mean probability per equal-width
    bin, marker area by pairs) of every method with a calibration; nothing when none has."""
    cal = {m: d["calibration"] for m, d in summary.items() if d.get("calibration")}
    if not cal:
        return
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="calibrated")
    for m, c in cal.items():
        x = [r["mean_prob"] for r in c["rows"]]
        y = [r["frac_pos"] for r in c["rows"]]
        size = 8 + 120 * np.sqrt(
            np.asarray([r["count"] for r in c["rows"]], dtype=float) / max(c["pairs"], 1)
        )
        line = ax.plot(x, y, "-", alpha=0.6, label=f"{LABELS.get(m, m)} (ECE {c['ece']:.3f})")
        ax.scatter(x, y, s=size, color=line[0].get_color(), alpha=0.8)
    ax.set_xlabel("mean probability in bin (10 equal-width bins)")
    ax.set_ylabel("share relevant")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    _save(plt, fig, ax, path, title=title, legend="upper left")


def reliability_path(path: str | Path) -> Path:
    """Where ``--plot PATH`` puts the reliability diagram: ``<stem>-reliability<suffix>``."""
    p = Path(path)
    return p.with_name(f"{p.stem}-reliability{p.suffix or '.png'}")
