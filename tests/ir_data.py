"""Tiny synthetic test collections written to a folder: a BEIR folder with graded qrels
and several relevant documents per query, the same collection as TREC files with a
first-stage run file, and a RAG JSONL file. Shared by the collection and bench tests."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CORPUS", "QRELS", "QUERIES", "relevant_texts", "write_beir", "write_rag", "write_trec"]

CORPUS: dict[str, tuple[str, str]] = {
    "d1": ("Apple pie", "An apple pie recipe bakes sliced apples under a butter crust."),
    "d2": ("Apple", "The apple is a fruit; apple pie is a classic dessert."),
    "d3": ("Orchard", "Orchards grow apples, pears and cherries."),
    "d4": ("Banana bread", "Banana bread is a sweet loaf baked from mashed ripe bananas."),
    "d5": ("Banana", "A banana is an elongated fruit; ripe bananas suit bread."),
    "d6": ("Quick bread", "Banana bread and other quick breads rise with baking soda."),
    "d7": ("Cherry tart", "A cherry tart holds cherries in a short pastry shell."),
    "d8": ("Pastry", "Short pastry is made of flour, butter and water."),
    "d9": ("Dessert", "Desserts include pies, tarts and breads."),
}
QUERIES: dict[str, str] = {
    "q1": "apple pie recipe",
    "q2": "how is banana bread made",
    "q3": "cherry tart pastry",
    "q4": "pastry flour",
}
QRELS: dict[str, dict[str, int]] = {
    "q1": {"d1": 2, "d2": 1, "d3": 0},
    "q2": {"d4": 2, "d5": 1, "d6": 1, "d9": 0},
    "q3": {"d7": 2, "d8": 0},
    "q4": {"d8": 0},  # judged, nothing relevant: left out
}


def relevant_texts(level: int = 1) -> set[str]:
    """The shown texts (``"title: text"``) of documents of grade >= ``level`` for any query."""
    ids = {d for j in QRELS.values() for d, g in j.items() if g >= level}
    return {f"{CORPUS[d][0]}: {CORPUS[d][1]}" for d in ids}


def write_beir(root: Path) -> Path:
    """The collection as a BEIR folder (``qrels/test.tsv`` with a header)."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for d, (title, text) in CORPUS.items():
            fh.write(json.dumps({"_id": d, "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for q, text in QUERIES.items():
            fh.write(json.dumps({"_id": q, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{g}" for q, j in QRELS.items() for d, g in j.items()
    ]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


RUN: dict[str, list[str]] = {
    "q1": ["d3", "d2", "d9", "d1"],  # a weak first stage: the grade-2 document last
    "q2": ["d6", "d4", "d1", "d5", "d2"],
    "q3": ["d8", "d7"],
    "q4": ["d8"],
}


def write_trec(root: Path) -> dict[str, Path]:
    """The collection as TREC files: ``topics.tsv``, ``qrels.txt`` (4 fields),
    ``collection.tsv`` (``docid<TAB>title<TAB>text``) and ``run.txt`` (:data:`RUN`, scores
    decreasing down each list, lines shuffled across queries)."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {
        k: root / n
        for k, n in (
            ("topics", "topics.tsv"),
            ("qrels", "qrels.txt"),
            ("corpus", "collection.tsv"),
            ("run", "run.txt"),
        )
    }
    paths["topics"].write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()), encoding="utf-8")
    paths["qrels"].write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, j in QRELS.items() for d, g in j.items()), encoding="utf-8"
    )
    paths["corpus"].write_text("".join(f"{d}\t{t}\t{x}\n" for d, (t, x) in CORPUS.items()), encoding="utf-8")
    lines = [f"{q} Q0 {d} {r + 1} {10.0 - r:.1f} bm25" for q, ds in RUN.items() for r, d in enumerate(ds)]
    paths["run"].write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    return paths


def write_rag(path: Path) -> Path:
    """Two labelled questions in the RAG JSONL form (strings and objects, indices and ids, a grade)."""
    rows = [
        {
            "id": "r1",
            "question": "apple pie recipe",
            "passages": [CORPUS["d3"][1], CORPUS["d1"][1], CORPUS["d2"][1]],
            "relevant": [1, 2],
        },
        {
            "question": "how is banana bread made",
            "passages": [
                {"id": "x5", "text": CORPUS["d5"][1]},
                {"id": "x4", "title": "Banana bread", "text": CORPUS["d4"][1]},
            ],
            "relevant": {"x4": 2, "x5": 1},
        },
        {"question": "unlabelled", "passages": ["text"], "relevant": []},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
