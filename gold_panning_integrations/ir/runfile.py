"""Writing evaluation outputs atomically (a temporary file in the destination folder,
flushed and renamed over it): TREC run and qrels files, JSON, Markdown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._io import atomic_text_file
from .ranking_metrics import run_scores

__all__ = ["qrels_text", "run_text", "write_qrels", "write_run", "write_text_atomic"]

_TAG = re.compile(r"^\S+$")


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: a reader sees the complete file or
    the previous state; the parent folder is created. Returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_text_file(p) as fh:
        fh.write(text)
    return p


def run_text(rankings: Mapping[str, Sequence[str]], *, tag: str) -> str:
    """TREC run lines ``qid Q0 docid rank score tag`` for each query's ranking (queries
    in the mapping's order, ranks from 1, scores ``len - rank + 1`` so the order survives
    any tool's sort by score); a query with an empty ranking has no line."""
    if not _TAG.match(tag):
        raise ValueError(f"a run tag is one word without spaces, got {tag!r}")
    lines = []
    for qid, ranking in rankings.items():
        for rank, (docid, score) in enumerate(run_scores(ranking).items(), start=1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:g} {tag}\n")
    return "".join(lines)


def _check_ids(ids: Mapping[str, Iterable[str]], what: str) -> None:
    """Raise ValueError naming the first query or document id a TREC ``what`` cannot hold."""
    bad = next((x for q, docs in ids.items() for x in (q, *docs) if not _TAG.match(str(x))), None)
    if bad is not None:
        raise ValueError(f"a TREC {what} cannot hold the id {bad!r} (empty or with white space)")


def write_run(path: str | Path, rankings: Mapping[str, Sequence[str]], *, tag: str) -> Path:
    """Write a TREC run file atomically (see :func:`run_text`). Returns the path."""
    _check_ids(rankings, "run")
    return write_text_atomic(path, run_text(rankings, tag=tag))


def qrels_text(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels lines ``qid 0 docid grade`` (queries and documents in mapping order)."""
    return "".join(f"{q} 0 {d} {int(g)}\n" for q, judged in qrels.items() for d, g in judged.items())


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """Write the judgements as a TREC qrels file atomically, so ``trec_eval qrels run``
    and ir-measures read exactly what was scored. Returns the path."""
    _check_ids(qrels, "qrels file")
    return write_text_atomic(path, qrels_text(qrels))
