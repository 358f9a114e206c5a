"""Collections in the field's formats: BEIR folders, TREC files with a run file, RAG JSONL;
the BM25 first stage; and bad or hostile input, each one error naming the file and line."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from ir_data import CORPUS, RUN, write_beir, write_rag, write_trec

from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.errors import CollectionError
from gold_panning_integrations.ir import files as F
from gold_panning_integrations.ir.collection import (
    fixture_path,
    load_beir,
    load_rag_jsonl,
    load_trec,
    read_qrels,
    read_queries,
    read_run,
)
from gold_panning_integrations.ir.first_stage import first_stage


# ------------------------------------------------------------------ BEIR
def test_beir_keeps_graded_judgements_and_leaves_out_unjudged_queries(tmp_path: Path) -> None:
    c = load_beir(write_beir(tmp_path / "beir"))
    assert (list(c.queries), c.qrels["q2"], dict(c.left_out)) == (
        ["q1", "q2", "q3"],
        {"d4": 2, "d5": 1, "d6": 1, "d9": 0},
        {"q4": "no document of grade > 0 in the qrels"},
    )


def test_beir_documents_show_title_and_text(tmp_path: Path) -> None:
    c = load_beir(write_beir(tmp_path / "beir"))
    assert c.documents["d7"] == "Cherry tart: A cherry tart holds cherries in a short pastry shell."


def test_beir_without_a_run_file_has_the_bm25_first_stage(tmp_path: Path) -> None:
    c = load_beir(write_beir(tmp_path / "beir"))
    assert (c.candidates, c.first_stage) == (None, "bm25")


def test_bm25_first_stage_returns_only_matching_documents(tmp_path: Path) -> None:
    # "apple pie recipe": d1 holds all three terms (recipe only there), d2 apple and pie;
    # d3 says "apples" and d9 "pies", which an unstemmed tokenizer does not match.
    c = load_beir(write_beir(tmp_path / "beir"))
    cands, without, scores = first_stage(c, ["q1"], depth=5)
    assert (cands, without) == ({"q1": ("d1", "d2")}, {})
    # BM25's own scores come along, best first (the panning prior "auto" reads them)
    assert list(scores) == ["q1"] and len(scores["q1"]) == 2 and scores["q1"][0] > scores["q1"][1] > 0


def test_bm25_stemmer_also_matches_inflections(tmp_path: Path) -> None:
    c = load_beir(write_beir(tmp_path / "beir"))
    cands, _, _ = first_stage(c, ["q1"], depth=5, stemmer="english")
    assert set(cands["q1"]) == {"d1", "d2", "d3", "d9"}


def test_bm25_first_stage_reports_a_query_it_matches_nothing_for(tmp_path: Path) -> None:
    c = load_beir(write_beir(tmp_path / "beir"))
    c2 = type(c)(c.name, {"qx": "the of and"}, {"qx": {"d1": 1}}, c.documents)
    cands, without, scores = first_stage(c2, ["qx"], depth=5)
    assert (cands, list(without), scores) == ({}, ["qx"], {})


def test_beir_split_names_the_qrels_file(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with pytest.raises(CollectionError, match=r"has no qrels/dev.tsv; its splits: test \(--split\)"):
        load_beir(root, split="dev")


def test_beir_missing_folder_says_what_it_holds(tmp_path: Path) -> None:
    with pytest.raises(CollectionError, match="holding corpus.jsonl, queries.jsonl and qrels/<split>.tsv"):
        load_beir(tmp_path / "nope")


def test_qrels_judging_an_unknown_query_names_its_line(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with (root / "qrels" / "test.tsv").open("a") as fh:
        fh.write("q9\td1\t1\n")
    with pytest.raises(
        CollectionError, match=r"test.tsv' line 12 judges query 'q9', which is not in queries file"
    ):
        load_beir(root)


def test_the_shipped_fixture_loads_as_a_beir_folder() -> None:
    c = load_beir()
    assert (len(c.queries), len(c.documents), c.name) == (50, 284, "BEIR fixture nq-test-beir (test)")
    assert fixture_path().name == "nq-test-beir"


# ------------------------------------------------------------------ TREC
def test_trec_run_file_is_the_first_stage_in_score_order(tmp_path: Path) -> None:
    p = write_trec(tmp_path / "trec")  # run lines written in reverse: the order comes from the scores
    c = load_trec(topics=p["topics"], qrels=p["qrels"], corpus=p["corpus"], run=p["run"], depth=3)
    assert dict(c.candidates or {}) == {q: tuple(RUN[q][:3]) for q in ("q1", "q2", "q3")}


def test_trec_run_keeps_only_the_candidates_documents_in_memory(tmp_path: Path) -> None:
    p = write_trec(tmp_path / "trec")
    c = load_trec(topics=p["topics"], qrels=p["qrels"], corpus=p["corpus"], run=p["run"], depth=2)
    assert sorted(c.documents) == sorted({"d3", "d2", "d6", "d4", "d8", "d7"})


def test_run_file_ties_keep_the_rank_column(tmp_path: Path) -> None:
    run = tmp_path / "run.txt"
    run.write_text("q Q0 b 2 5.0 t\nq Q0 a 1 5.0 t\nq Q0 c 3 7.0 t\n")
    r = read_run(run, depth=3)
    assert r.candidates["q"] == ("c", "a", "b")
    assert r.scores["q"] == (7.0, 5.0, 5.0)  # aligned with the candidates


def test_a_run_files_scores_reach_the_first_stage(tmp_path: Path) -> None:
    p = write_trec(tmp_path / "trec")
    c = load_trec(topics=p["topics"], qrels=p["qrels"], corpus=p["corpus"], run=p["run"], depth=2)
    assert c.candidates is not None and c.candidate_scores is not None
    cands, _, scores = first_stage(c, list(c.candidates), depth=1)
    run = read_run(p["run"], depth=2)
    assert {q: s[0] for q, s in scores.items()} == {q: run.scores[q][0] for q in cands}
    assert all(len(scores[q]) == len(cands[q]) == 1 for q in cands)


def test_topics_in_trec_sgml(tmp_path: Path) -> None:
    topics = tmp_path / "topics.txt"
    topics.write_text(
        "<top>\n<num> Number: 401\n<title> foreign minorities,\n Germany\n<desc> Description:\nx\n</top>\n"
        "<top>\n<num> 402\n<title> Topic: behavioral genetics\n</top>\n"
    )
    assert read_queries(topics, what="topics file") == {
        "401": "foreign minorities, Germany",
        "402": "behavioral genetics",
    }


def test_topics_in_beir_jsonl(tmp_path: Path) -> None:
    topics = tmp_path / "queries.jsonl"
    topics.write_text(json.dumps({"_id": 7, "text": "a  question"}) + "\n")
    assert read_queries(topics) == {"7": "a question"}


def test_gzip_files_are_read(tmp_path: Path) -> None:
    q = tmp_path / "qrels.txt.gz"
    with gzip.open(q, "wt") as fh:
        fh.write("q1 0 d1 2\n")
    assert read_qrels(q)[0] == {"q1": {"d1": 2}}


# ------------------------------------------------------------------ RAG JSONL
def test_rag_jsonl_indices_ids_and_grades(tmp_path: Path) -> None:
    c = load_rag_jsonl(write_rag(tmp_path / "rag.jsonl"))
    assert dict(c.qrels) == {"r1": {"r1-p1": 1, "r1-p2": 1}, "q2": {"x4": 2, "x5": 1}}


def test_rag_jsonl_passages_in_their_order_are_the_first_stage(tmp_path: Path) -> None:
    c = load_rag_jsonl(write_rag(tmp_path / "rag.jsonl"), depth=2)
    assert (dict(c.candidates or {}), dict(c.left_out)) == (
        {"r1": ("r1-p0", "r1-p1"), "q2": ("x5", "x4")},
        {"q3": "no relevant passage"},
    )


def test_rag_jsonl_title_is_shown(tmp_path: Path) -> None:
    c = load_rag_jsonl(write_rag(tmp_path / "rag.jsonl"))
    assert c.documents["x4"] == f"Banana bread: {CORPUS['d4'][1]}"


# ------------------------------------------------------------------ bad input: one error, file and line
def _trec(tmp_path: Path) -> dict[str, Path]:
    return write_trec(tmp_path / "trec")


def _load(p: dict[str, Path], depth: int = 3) -> object:
    return load_trec(topics=p["topics"], qrels=p["qrels"], corpus=p["corpus"], run=p["run"], depth=depth)


def test_a_qrels_line_with_a_missing_field_names_the_line(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    lines = p["qrels"].read_text().splitlines()
    lines[1] = "q1 0 d2"
    p["qrels"].write_text("\n".join(lines) + "\n")
    with pytest.raises(
        CollectionError, match=r"qrels.txt' line 2 has 3 field\(s\) where the file's lines have 4"
    ):
        _load(p)


def test_a_qrels_grade_that_is_not_an_integer_names_the_line(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    p["qrels"].write_text("q1 0 d1 2\nq1 0 d2 high\n")
    with pytest.raises(CollectionError, match=r"line 2: relevance 'high' is not an integer"):
        _load(p)


def test_a_run_naming_a_document_not_in_the_corpus_names_the_run_line(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    with p["run"].open("a") as fh:
        fh.write("q2 Q0 d404 1 99.0 bm25\n")
    n = len(p["run"].read_text().splitlines())
    with pytest.raises(
        CollectionError,
        match=rf"run file '.*run.txt' line {n} names document 'd404', which is not in "
        r"corpus file",
    ):
        _load(p)


def test_a_query_without_candidates_in_the_run_is_named_with_its_qrels_line(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    p["run"].write_text(
        "".join(line + "\n" for line in p["run"].read_text().splitlines() if not line.startswith("q2 "))
    )
    with pytest.raises(
        CollectionError, match=r"query 'q2' \(qrels file '.*qrels.txt' line 4\) has no candidates in run"
    ):
        _load(p)


def test_a_run_line_with_five_fields_names_the_line(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    p["run"].write_text("q1 Q0 d1 1 9.0\n")
    with pytest.raises(
        CollectionError, match=r"run.txt' line 1 has 5 field\(s\); a run line is 'query-id Q0 doc-id"
    ):
        _load(p)


def test_a_run_listing_a_document_twice_names_both_lines(tmp_path: Path) -> None:
    p = _trec(tmp_path)
    p["run"].write_text("q1 Q0 d1 1 9.0 t\nq1 Q0 d1 2 8.0 t\n")
    with pytest.raises(
        CollectionError, match=r"line 2 lists document 'd1' for query 'q1' again \(first at line 1\)"
    ):
        _load(p)


def test_an_empty_corpus_is_named(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    (root / "corpus.jsonl").write_text("\n")
    with pytest.raises(CollectionError, match=r"corpus file '.*corpus.jsonl' holds no documents"):
        load_beir(root)


def test_a_corpus_line_without_text_names_the_line(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d10", "title": "x"}) + "\n")
    with pytest.raises(
        CollectionError,
        match=r"corpus.jsonl' line 10 needs a string or integer \"_id\", a string "
        r"\"text\"",
    ):
        load_beir(root)


def test_a_repeated_document_id_names_the_line(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d1", "text": "again"}) + "\n")
    with pytest.raises(CollectionError, match=r"corpus.jsonl' line 10 repeats the id 'd1'"):
        load_beir(root)


def test_an_id_with_white_space_cannot_reach_a_run_file(tmp_path: Path) -> None:
    topics = tmp_path / "q.jsonl"
    topics.write_text(json.dumps({"_id": "q 1", "text": "x"}) + "\n")
    with pytest.raises(CollectionError, match=r"line 1: the id 'q 1' is empty or holds white space"):
        read_queries(topics)


def test_a_rag_question_without_passages_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    path.write_text(
        json.dumps({"question": "a", "passages": ["x"], "relevant": [0]})
        + "\n"
        + json.dumps({"question": "b", "passages": [], "relevant": []})
        + "\n"
    )
    with pytest.raises(CollectionError, match=r"rag.jsonl' line 2: question 'q2' has no candidate passages"):
        load_rag_jsonl(path)


def test_a_rag_relevant_index_out_of_range_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    path.write_text(json.dumps({"question": "a", "passages": ["x", "y"], "relevant": [2]}) + "\n")
    with pytest.raises(CollectionError, match=r"line 1: relevant passage index 2 is outside 0..1"):
        load_rag_jsonl(path)


def test_a_rag_line_of_another_shape_shows_the_expected_one(tmp_path: Path) -> None:
    path = tmp_path / "rag.jsonl"
    path.write_text(json.dumps({"query": "a", "contexts": ["x"]}) + "\n")
    with pytest.raises(
        CollectionError, match=r'line 1 needs "question" \(text\), "passages" \(a list\) and "relevant"'
    ):
        load_rag_jsonl(path)


# ------------------------------------------------------------------ hostile files
def test_torn_json_names_the_line(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "d10", "text": "cut he')
    with pytest.raises(CollectionError, match=r"corpus.jsonl' line 10 is not JSON .*a torn or cut line"):
        load_beir(root)


def test_not_utf8_names_the_line_and_column(tmp_path: Path) -> None:
    q = tmp_path / "qrels.txt"
    q.write_bytes(b"q1 0 d1 1\nq1 0 d\xe92 1\n")
    with pytest.raises(CollectionError, match=r"qrels.txt' line 2 is not UTF-8 \(invalid byte at column 7\)"):
        read_qrels(q)


def test_a_nul_byte_is_refused_as_binary(tmp_path: Path) -> None:
    q = tmp_path / "qrels.txt"
    q.write_bytes(b"q1 0 d1 1\x00\n")
    with pytest.raises(CollectionError, match="line 1 holds a NUL byte: the file looks binary"):
        read_qrels(q)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "qrels.txt"
    os.mkfifo(fifo)
    with pytest.raises(
        CollectionError, match=r"qrels file '.*qrels.txt' is a FIFO \(named pipe\); pass a regular file"
    ):
        read_qrels(fifo)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CollectionError, match="is a directory; pass a regular file"):
        read_qrels(tmp_path)


def test_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "corpus.tsv"
    link.symlink_to("/dev/zero")
    with pytest.raises(CollectionError, match=r"is a device; pass a regular file"):
        list(F.text_lines(link, what="corpus file"))


def test_a_huge_file_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "run.txt"
    with big.open("wb") as fh:
        fh.truncate(F.MAX_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(
        CollectionError, match=rf"has {F.MAX_FILE_BYTES + 1} bytes, more than the {F.MAX_FILE_BYTES} read"
    ):
        read_run(big, depth=10)


def test_a_line_longer_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "MAX_LINE_BYTES", 64)
    q = tmp_path / "queries.tsv"
    q.write_text("q1\tshort\nq2\t" + "x" * 100 + "\n")
    with pytest.raises(CollectionError, match=r"queries.tsv' line 2 is longer than 64 bytes"):
        read_queries(q)


def test_a_gzip_bomb_stops_at_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "MAX_FILE_BYTES", 10_000)
    q = tmp_path / "qrels.txt.gz"
    with gzip.open(q, "wt") as fh:
        fh.write("q1 0 d1 1\n" * 5_000)  # 50 kB decompressed, a few hundred bytes on disk
    with pytest.raises(CollectionError, match="holds more than 10000 bytes"):
        read_qrels(q, what="qrels file")


def test_a_cut_gzip_file_is_named(tmp_path: Path) -> None:
    q = tmp_path / "qrels.txt.gz"
    q.write_bytes(gzip.compress(b"q1 0 d1 1\n" * 1000)[:60])
    with pytest.raises(
        CollectionError, match=r"qrels.txt.gz' cannot be read after line \d+ .*complete gzip file"
    ):
        read_qrels(q)


# ------------------------------------------------------------------ through the CLI: one line, exit 2
def test_cli_reports_a_bad_qrels_line_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _trec(tmp_path)
    p["qrels"].write_text("q1 0 d1 2\nq1 d2 1\n")
    code = cli_main(
        [
            "evaluate",
            "--reader",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--task",
            "trec",
            "--topics",
            str(p["topics"]),
            "--qrels",
            str(p["qrels"]),
            "--corpus",
            str(p["corpus"]),
            "--run",
            str(p["run"]),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("gold-panning evaluate: error: qrels file ")
    assert "qrels.txt' line 2 has 3 field(s)" in err[0]


def test_cli_refuses_trec_options_on_a_beir_task(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(
        [
            "evaluate",
            "--reader",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--task",
            "beir",
            "--topics",
            "t.tsv",
        ]
    )
    assert (code, capsys.readouterr().err.strip()) == (
        2,
        "gold-panning evaluate: error: --topics belong to --task trec; a BEIR folder is given with --data",
    )
