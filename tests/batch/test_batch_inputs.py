"""``gold-panning rerank``'s inputs: a JSONL of questions with their passages, and a TREC run
file with the queries and the corpus; every bad line named before any model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ir_data import CORPUS, QUERIES, RUN, write_beir, write_trec

from gold_panning_integrations.batch import JsonlQuestions, Question, RunQuestions
from gold_panning_integrations.errors import CollectionError


def _jsonl(path: Path, *rows: object) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_jsonl_reads_texts_objects_titles_scores_and_default_ids(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "q.jsonl",
        {"id": "a", "question": "  who   wrote it? ", "passages": ["one  two", "three"]},
        "",
        {
            "question": "second",
            "passages": [
                {"id": "x", "title": "T", "text": "body", "score": 2.5},
                {"text": "other", "score": 1},
            ],
        },
    )
    src = JsonlQuestions(path)
    first, second = list(src)
    assert len(src) == 2
    assert first == Question(0, "a", "who wrote it?", ("a-p0", "a-p1"), ("one two", "three"), None)
    # no id: "q" + its line number (3), as evaluate --task rag names it
    assert second == Question(1, "q3", "second", ("x", "q3-p1"), ("T: body", "other"), (2.5, 1.0))


def test_jsonl_depth_cuts_candidates_and_scores(tmp_path: Path) -> None:
    rows = {
        "id": "a",
        "question": "q",
        "passages": [{"text": t, "score": 3 - i} for i, t in enumerate("xyz")],
    }
    [q] = JsonlQuestions(_jsonl(tmp_path / "q.jsonl", rows), depth=2)
    assert (q.documents, q.scores) == (("x", "y"), (3.0, 2.0))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "a", "passages": ["x"]}, 'needs "question"'),
        ({"id": "a", "question": "q", "passages": []}, "no candidate passages"),
        ({"id": "a b", "question": "q", "passages": ["x"]}, "without white space"),
        ({"id": "a", "question": "q", "passages": [{"text": "x", "score": 1}, "y"]}, "some passages have a"),
        ({"id": "a", "question": "q", "passages": [{"text": "x", "score": "high"}]}, "not a finite number"),
        ("{not json", "is not JSON"),
    ],
)
def test_jsonl_bad_lines_are_named(tmp_path: Path, row: object, message: str) -> None:
    path = _jsonl(tmp_path / "q.jsonl", {"id": "ok", "question": "q", "passages": ["x"]}, row)
    with pytest.raises(CollectionError, match=message) as err:
        JsonlQuestions(path)
    assert "line 2" in str(err.value)


def test_jsonl_repeated_ids_and_empty_files_fail(tmp_path: Path) -> None:
    same = {"id": "a", "question": "q", "passages": ["x"]}
    with pytest.raises(CollectionError, match="repeats the question id 'a'"):
        JsonlQuestions(_jsonl(tmp_path / "q.jsonl", same, same))
    (tmp_path / "e.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(CollectionError, match="holds no question"):
        JsonlQuestions(tmp_path / "e.jsonl")


def test_run_file_with_beir_queries_and_corpus(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    paths = write_trec(tmp_path / "trec")
    src = RunQuestions(paths["run"], queries=root / "queries.jsonl", corpus=root / "corpus.jsonl", depth=3)
    qs = list(src)
    assert [q.qid for q in qs] == list(QUERIES)  # the queries file's order
    assert [q.index for q in qs] == [0, 1, 2, 3]
    assert qs[0].doc_ids == tuple(RUN["q1"][:3])
    assert qs[0].documents[0] == f"{CORPUS['d3'][0]}: {CORPUS['d3'][1]}"
    assert qs[0].scores == (10.0, 9.0, 8.0)  # write_trec's scores, 10 - rank + 1
    assert src.left_out == {}


def test_run_file_with_tsv_queries_and_corpus_leaves_out_unranked_queries(tmp_path: Path) -> None:
    paths = write_trec(tmp_path / "trec")
    run = tmp_path / "run2.txt"
    run.write_text(
        "".join(line for line in paths["run"].read_text().splitlines(True) if not line.startswith("q2 ")),
        encoding="utf-8",
    )
    src = RunQuestions(run, queries=paths["topics"], corpus=paths["corpus"])
    assert [q.qid for q in src] == ["q1", "q3", "q4"]
    assert [q.index for q in src] == [0, 1, 2]
    assert src.left_out == {"q2": "not ranked by the run file"}


def test_run_file_naming_unknown_queries_or_documents_fails(tmp_path: Path) -> None:
    paths = write_trec(tmp_path / "trec")
    bad = tmp_path / "bad.txt"
    bad.write_text("zz Q0 d1 1 1.0 x\n", encoding="utf-8")
    with pytest.raises(CollectionError, match="ranks query 'zz', which is not in queries file"):
        RunQuestions(bad, queries=paths["topics"], corpus=paths["corpus"])
    bad.write_text("q1 Q0 nope 1 1.0 x\n", encoding="utf-8")
    with pytest.raises(CollectionError, match="names document 'nope'"):
        RunQuestions(bad, queries=paths["topics"], corpus=paths["corpus"])


def test_fingerprint_and_row_round_trip() -> None:
    q = Question(3, "a", "q", ("x", "y"), ("X", "Y"), (1.0, 0.5))
    assert Question.from_row(q.as_row()) == q
    assert q.fingerprint() != Question(3, "a", "q", ("x", "y"), ("X", "Y"), (1.0, 0.25)).fingerprint()
    assert q.fingerprint() != Question(4, "a", "q", ("x", "y"), ("X", "Y"), (1.0, 0.5)).fingerprint()
