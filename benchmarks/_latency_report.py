"""The report of ``python -m benchmarks latency``: the acceptance checks
(:func:`acceptance`) and the Markdown tables (:func:`format_latency_markdown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._latency_methods import PATHS

__all__ = ["acceptance", "format_latency_markdown"]


def acceptance(
    summary: Sequence[Mapping[str, Any]], flood: Sequence[Mapping[str, Any]], *, latency: float
) -> list[dict[str, Any]]:
    """The issue's acceptance checks on this run, each ``{"check", "path", "value", "met"}``:
    the defaults' p50 (two rounds of prompts sent together) at most 2.3x the per-call latency, its top-1 at least
    PSC-8's, and a flood with no failed query and at most ``max_concurrency`` requests open."""
    by = {(d["method"], d["path"]): d for d in summary}
    out = []
    for path in PATHS:
        lat, psc = by.get(("gp-defaults", path)), by.get(("psc-8", path))
        if lat is not None and latency > 0:
            out.append(
                {
                    "check": "gp-defaults p50 <= 2.3 x call latency",
                    "path": path,
                    "value": lat["p50_x_latency"],
                    "met": lat["p50"] <= 2.3 * latency,
                }
            )
        if lat is not None and psc is not None:
            out.append(
                {
                    "check": "gp-defaults top-1 >= psc-8 top-1",
                    "path": path,
                    "value": [lat["top1"], psc["top1"]],
                    "met": lat["top1"] >= psc["top1"],
                }
            )
    for f in flood:
        out.append(
            {
                "check": f"flood of {f['queries']}: no failed query, open <= {f['max_concurrency']}",
                "path": f["path"],
                "value": [f["failed"], f["max_open"]],
                "met": f["failed"] == 0 and f["max_open"] <= f["max_concurrency"],
            }
        )
    return out


# ============================================================================== reporting
def _ci(d: Mapping[str, Any], key: str) -> str:
    lo, hi = d[f"{key}_ci95"]
    return f"{d[key]:.2f} [{lo:.2f}, {hi:.2f}]"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def format_latency_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: settings, the per-method table, formats asked, the flood,
    the engine's time and the acceptance checks."""
    s = report["settings"]
    lat = s["latency"]
    ms = s["method_settings"]
    cl = report["call_latency"]
    measured = "-" if cl["measured_p50"] is None else f"{cl['measured_p50']:.3f} s"
    lines = [
        (
            f"Loopback model: profile `{s['profile']}`, {lat:g} s per call, {s['capacity']} calls at once "
            f"(above: {s['overflow']}); task `{s['task']}`, {s['n']} documents, {s['queries']} queries, seed {s['seed']}; "
            f"our reader limited to {s['max_concurrency']} calls in flight. One call through our reader: {measured} (p50)."
        ),
        "",
        (
            "| method | setting | path | p50 s/q | p50 / call | p95 s/q | top-1 [95% CI] | top-3 [95% CI] "
            "| calls/q | prompt tok/q | 429s | errors |"
        ),
        "|" + "---|" * 12,
    ]
    for d in report["methods"]:
        meta = ms.get(d["method"], {"label": d["method"], "setting": "-"})
        err = d["exceptions"] + d["errors"]
        lines.append(
            f"| {meta['label']} | {meta['setting']} | {d['path']} | {d['p50']:.2f} | {_x(d['p50_x_latency'])} "
            f"| {d['p95']:.2f} | {_ci(d, 'top1')} | {_ci(d, 'top3')} | {d['calls_per_query']:.2f} "
            f"| {d['prompt_tokens_per_query']:,.0f} | {d['rejected']} | {err} |"
        )
    for m, why in report.get("skipped", {}).items():
        lines.append(f"| {ms.get(m, {}).get('label', m)} | skipped: {why} |" + " |" * 10)
    asked = {}
    for d in report["methods"]:
        if d["asked"] and d["path"] == "sync":
            asked[d["method"]] = "; ".join(
                f"{k}: " + ", ".join(f"{f} x{c}" for f, c in v.items()) for k, v in d["asked"].items()
            )
    if asked:
        lines += [
            "",
            "What each method asked the server (format: how the answer was asked for x calls, sync path):",
            "",
        ]
        lines += [f"- {ms.get(m, {}).get('label', m)}: {a}" for m, a in asked.items()]
    if report.get("flood"):
        lines += [
            "",
            "Flood: all queries at once through one reader, the server answering 429 above its capacity:",
            "",
            (
                "| path | queries | max in flight | capacity | failed | most open at once | 429s | calls "
                "| wall s | top-1 |"
            ),
            "|" + "---|" * 10,
        ]
        for f in report["flood"]:
            lines.append(
                f"| {f['path']} | {f['queries']} | {f['max_concurrency']} | {f['capacity']} | {f['failed']} "
                f"| {f['max_open']} | {f['rejected']} | {f['calls']} | {f['wall_seconds']:.1f} "
                f"| {f['top1']:.2f} |"
            )
    if report.get("engine"):
        lines += [
            "",
            "The engine's own time per query (a reader that answers at once; median of batches):",
            "",
            "| documents | rounds | ms per query | ms per query, panner built for it |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {e['n']} | {e['rounds']} | {e['ms_per_query']:.2f} | {e['ms_with_construction']:.2f} |"
            for e in report["engine"]
        ]
    if report.get("checks"):
        lines += ["", "Acceptance checks:", ""]
        lines += [
            f"- {'met' if c['met'] else 'NOT met'}: {c['check']} ({c['path']}: {c['value']})"
            for c in report["checks"]
        ]
    return "\n".join(lines)
