"""``gold-panning evaluate``'s calibration: are a method's per-document probabilities probabilities?

A method that gives every candidate a probability of relevance (the panning methods'
posteriors) keeps them in its rows (``"scores"``, input order), so this is recomputed from a
checkpoint or ``--out``'s ``probabilities/*.jsonl`` with no model call. Over every (query,
candidate) pair, relevant meaning one of the query's gold documents (an unjudged candidate
counts as not relevant, as in the ranking metrics), the measures of
:func:`gold_panning_integrations.calibration.metrics.summarize`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..calibration.metrics import summarize as summarize_pairs
from ..ir.runfile import write_text_atomic
from ._instances import CompareInstance

__all__ = ["calibration", "row_pairs", "write_probabilities"]


def row_pairs(
    rows: Sequence[Mapping[str, Any]], instances: Sequence[CompareInstance], method: str
) -> list[tuple[list[float], list[bool]]]:
    """``(probabilities, relevant)`` per query for ``method``'s rows that kept scores (one
    per candidate, the instance's order)."""
    return [
        ([float(s) for s in r["scores"]], [i in inst.gold for i in range(len(inst.documents))])
        for r, inst in _scored(rows, instances, method)
        if len(r["scores"]) == len(inst.documents)
    ]


def _scored(
    rows: Sequence[Mapping[str, Any]], instances: Sequence[CompareInstance], method: str
) -> Iterator[tuple[Mapping[str, Any], CompareInstance]]:
    """``method``'s rows that kept scores, with their instances."""
    by_index = {inst.index: inst for inst in instances}
    for r in rows:
        inst = by_index.get(int(r["instance"]))
        if r["method"] == method and r.get("scores") and inst is not None:
            yield r, inst


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
    summary = summarize_pairs(pairs).to_dict().items()
    return {k: round(float(v), 4) if isinstance(v, float) else v for k, v in summary}


def write_probabilities(
    out: str | Path,
    rows: Sequence[Mapping[str, Any]],
    instances: Sequence[CompareInstance],
    methods: Sequence[str],
) -> list[Path]:
    """``probabilities/<method>.jsonl`` under ``out`` for each method whose rows kept
    scores: one line per query, ``{"qid", "docs" (ids, the first stage's order),
    "probabilities", "relevant" (ids)}``, atomically. Returns the paths written."""
    written = []
    for m in methods:
        lines = []
        for r, inst in _scored(rows, instances, m):
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
