"""The data samples that ship in the package: contents, loader, build script, packaging."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from benchmarks.build_samples import answer_in_text, write_json_gz
from gold_panning_integrations.readers.answer import token_matcher
from gold_panning_integrations.tasks import BM25, KVSample, NQSample, load_sample
from gold_panning_integrations.tasks.samples import sample_path

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = ROOT / "gold_panning_integrations" / "_data"
SOURCE = ROOT.parent / "shared" / "data"


# ------------------------------------------------------------------ shipped NQ
def test_nq_sample_sizes() -> None:
    s = load_sample("nq")
    assert isinstance(s, NQSample)
    assert len(s.questions) == 400
    assert len(s.passages) == 2365
    assert [len(s.split("calibration")), len(s.split("test"))] == [200, 200]
    assert {len(q.distractors) for q in s.questions} == {20}


def test_nq_splits_are_disjoint_questions() -> None:
    s = load_sample("nq")
    cal = {q.id for q in s.split("calibration")}
    test = {q.id for q in s.split("test")}
    assert cal.isdisjoint(test)


def test_nq_first_question_pinned() -> None:
    q = load_sample("nq").questions[0]
    assert q.id == "nq-1421"
    assert q.question == "when does synapsis of homologous chromosomes occur in mitosis"
    assert q.answers == ("prophase I of meiosis", "during prophase I of meiosis")
    assert q.split == "calibration"


def test_nq_first_question_gold_and_best_distractor() -> None:
    s = load_sample("nq")
    q = s.questions[0]
    assert s.gold_passage(q).title == "Synapsis"
    assert s.distractor_passages(q, 1)[0].title == "Mitosis"


def test_nq_every_answer_in_gold_and_none_in_distractors() -> None:
    s = load_sample("nq")
    bad_gold = [
        q.id for q in s.questions if not any(token_matcher(a, s.gold_passage(q).content) for a in q.answers)
    ]
    bad_distractor = [
        (q.id, p.id)
        for q in s.questions
        for p in s.distractor_passages(q)
        if any(token_matcher(a, p.content) for a in q.answers)
    ]
    assert bad_gold == []
    assert bad_distractor == []


def test_nq_distractors_are_distinct() -> None:
    assert [q.id for q in load_sample("nq").questions if len(set(q.distractors)) != 20] == []


def test_nq_gold_is_never_a_distractor() -> None:
    assert [q.id for q in load_sample("nq").questions if q.gold in q.distractors] == []


def test_passage_content_is_title_colon_text() -> None:
    p = load_sample("nq").passages[0]
    assert p.content == f"{p.title}: {p.text}"


def test_unknown_split_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown split 'dev'; this sample has calibration, test"):
        load_sample("nq").split("dev")


# ------------------------------------------------------------------ shipped kv
def test_kv_sample_sizes_and_queried_pair_present() -> None:
    s = load_sample("kv")
    assert isinstance(s, KVSample)
    assert len(s.examples) == 100
    assert {len(e.records) for e in s.examples} == {75}
    assert all((e.key, e.value) in e.records for e in s.examples)


def test_kv_values_are_uuids() -> None:
    e = load_sample("kv").examples[0]
    assert [len(part) for part in e.value.split("-")] == [8, 4, 4, 4, 12]


# ------------------------------------------------------------------ loader
def test_load_sample_is_cached() -> None:
    assert load_sample("nq") is load_sample("nq")


def test_unknown_sample_name() -> None:
    with pytest.raises(ValueError, match="unknown sample 'squad'; choose one of nq, kv"):
        load_sample("squad")


def test_sample_metadata_is_read_only() -> None:
    with pytest.raises(TypeError):
        load_sample("nq").metadata["format"] = 2  # type: ignore[index]


def test_path_holding_the_other_sample_is_rejected() -> None:
    with pytest.raises(ValueError, match="holds the 'kv' sample, not 'nq'"):
        load_sample("nq", path=sample_path("kv"))


def test_missing_path_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"python -m benchmarks\.build_samples"):
        load_sample("nq", path=tmp_path / "nope.json.gz")


def test_not_gzip_is_named(tmp_path: Path) -> None:
    p = tmp_path / "plain.json.gz"
    p.write_text('{"format": 1}')
    with pytest.raises(ValueError, match="is not gzip-compressed JSON"):
        load_sample("nq", path=p)


def test_wrong_format_version_says_rebuild(tmp_path: Path) -> None:
    p = tmp_path / "old.json.gz"
    write_json_gz({"format": 0, "name": "nq"}, p)
    with pytest.raises(ValueError, match="has format 0, expected 1; rebuild"):
        load_sample("nq", path=p)


def test_out_of_range_passage_id_is_named(tmp_path: Path) -> None:
    p = tmp_path / "bad.json.gz"
    q = {"id": "nq-1", "question": "q", "answers": ["a"], "gold": 0, "distractors": [3], "split": "test"}
    write_json_gz({"format": 1, "name": "nq", "passages": [["t", "a"]], "questions": [q]}, p)
    with pytest.raises(ValueError, match="question nq-1 references passage 3, outside 0..0"):
        load_sample("nq", path=p)


# ------------------------------------------------------------------ build script
def test_bm25_score_by_hand() -> None:
    # N=3, lengths 2, 3, 2 (avg 7/3); "banana" only in doc 0 (tf 1, df 1):
    # idf = ln(1 + 2.5/1.5); norm = 1.5 * (0.25 + 0.75 * 2 / (7/3)); bm25s's Lucene weight
    # (no k1 + 1 factor): score = idf * 1 / (1 + norm)
    bm = BM25(["apple banana", "apple apple cherry", "cherry date"])
    idf = math.log(1 + 2.5 / 1.5)
    norm = 1.5 * (0.25 + 0.75 * 2 / (7 / 3))
    assert bm.scores("banana").tolist() == pytest.approx([idf / (1 + norm), 0.0, 0.0])
    assert idf / (1 + norm) == pytest.approx(0.41929, abs=1e-5)


def test_bm25_term_frequency_by_hand() -> None:
    # "apple" in doc 0 (tf 1, length 2) and doc 1 (tf 2, length 3), df 2: idf = ln(1 + 1.5/2.5);
    # doc 1: norm = 1.5 * (0.25 + 0.75 * 3 / (7/3)), score = idf * 2 / (2 + norm)
    bm = BM25(["apple banana", "apple apple cherry", "cherry date"])
    idf = math.log(1 + 1.5 / 2.5)
    n0, n1 = 1.5 * (0.25 + 0.75 * 2 / (7 / 3)), 1.5 * (0.25 + 0.75 * 3 / (7 / 3))
    assert bm.scores("apple apple").tolist() == pytest.approx([idf / (1 + n0), idf * 2 / (2 + n1), 0.0])


def test_bm25_strips_accents_and_case() -> None:
    bm = BM25(["Röntgen rays", "x rays"])
    assert bm.rank("RONTGEN") == [0, 1]


def test_bm25_stemmer_matches_inflections() -> None:
    plain = BM25(["running shoes", "a red car"])
    stemmed = BM25(["running shoes", "a red car"], stemmer="english")
    assert (plain.scores("runs")[0], stemmed.scores("runs")[0] > 0) == (0.0, True)


def test_bm25_unknown_stemmer_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown stemmer 'klingon'; choose one of .*english"):
        BM25(["a b"], stemmer="klingon")


def test_bm25_corpus_of_stop_words_scores_zero() -> None:
    assert BM25(["the a", "of the"]).scores("the apple").tolist() == [0.0, 0.0]


def test_bm25_rejects_an_empty_corpus() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        BM25([])


def test_bm25_rank_breaks_ties_by_id() -> None:
    bm = BM25(["cherry pie", "apple", "cherry tart"])
    assert bm.rank("cherry") == [0, 2, 1]


def test_bm25_top_k_pairs_ids_and_scores() -> None:
    bm = BM25(["apple banana", "apple apple cherry", "cherry date"])
    assert [i for i, _ in bm.top_k("cherry", 2)] == [2, 1]


def test_bm25_top_k_rejects_zero() -> None:
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        BM25(["a b"]).top_k("b", 0)


def test_bm25_ignores_stop_words() -> None:
    bm = BM25(["the apple", "the pear"])
    assert bm.scores("the").tolist() == [0.0, 0.0]


# ------------------------------------------------------------------ the BEIR fixture
# (the builder's own tests are in tests/benchmarks/test_lab_build_samples.py)
FIXTURE_FILES = [
    f"nq-test-beir/{n}" for n in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "NOTICE.md")
]


def test_fixture_questions_are_held_out_with_their_gold_passage() -> None:
    sample = load_sample("nq")
    by_id = {q.id: q for q in sample.questions}
    lines = (DATA_DIR / "nq-test-beir" / "qrels" / "test.tsv").read_text().splitlines()[1:]
    pairs = [line.split("\t") for line in lines]
    assert {by_id[q].split for q, _, _ in pairs} == {"test"}
    assert all(d == f"p{by_id[q].gold}" and g == "1" for q, d, g in pairs)


def test_fixture_answers_occur_only_in_their_gold_passage() -> None:
    corpus = [json.loads(x) for x in (DATA_DIR / "nq-test-beir" / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(x) for x in (DATA_DIR / "nq-test-beir" / "queries.jsonl").read_text().splitlines()]
    gold = dict(
        line.split("\t")[:2]
        for line in (DATA_DIR / "nq-test-beir" / "qrels" / "test.tsv").read_text().splitlines()[1:]
    )
    clashes = [
        (q["_id"], d["_id"])
        for q in queries
        for d in corpus
        if d["_id"] != gold[q["_id"]]
        and any(answer_in_text(a, f"{d['title']}: {d['text']}") for a in q["metadata"]["answers"])
    ]
    assert (len(queries), len(corpus), clashes) == (50, 284, [])


def test_fixture_notice_credits_wikipedia() -> None:
    text = (DATA_DIR / "nq-test-beir" / "NOTICE.md").read_text()
    assert ("CC BY-SA 3.0" in text, "Nelson Liu" in text, "50 questions" in text) == (True, True, True)


# ------------------------------------------------------------------ packaging
def _package_data_files() -> list[Path]:
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib  # Python >= 3.11

        globs = tomllib.loads(text)["tool"]["setuptools"]["package-data"]["gold_panning_integrations"]
    except ImportError:  # Python 3.10: the one line of that table
        line = re.search(r"^gold_panning_integrations = \[(.*)\]$", text, re.MULTILINE)
        assert line is not None
        globs = re.findall(r'"([^"]+)"', line.group(1))
    pkg = ROOT / "gold_panning_integrations"
    return sorted({p for g in globs for p in pkg.glob(g) if p.is_file()})


def test_package_data_includes_samples_and_notice() -> None:
    names = {p.name for p in _package_data_files()}
    assert {"nq_sample.json.gz", "kv_sample.json.gz", "NOTICE.md"} <= names


def test_package_data_includes_the_fixture() -> None:
    files = {str(p.relative_to(DATA_DIR)) for p in _package_data_files() if "nq-test-beir" in str(p)}
    assert files == set(FIXTURE_FILES)


def test_package_data_at_most_2_mb() -> None:
    assert sum(p.stat().st_size for p in _package_data_files()) <= 2 * 1024 * 1024


def test_notice_credits_wikipedia_and_mit() -> None:
    text = (DATA_DIR / "NOTICE.md").read_text()
    assert "CC BY-SA 3.0" in text
    assert "Wikipedia" in text
    assert "Copyright (c) 2023 Nelson Liu" in text


def test_samples_are_gzip_json_objects() -> None:
    with gzip.open(DATA_DIR / "nq_sample.json.gz", "rt", encoding="utf-8") as fh:
        assert json.load(fh)["name"] == "nq"


# ------------------------------------------------------------------ run --demo nq
def test_run_demo_nq_json(capsys: pytest.CaptureFixture[str]) -> None:
    import bm25s  # noqa: F401 - the demo needs it (the test extra installs it)

    from gold_panning_integrations.cli import main
    from gold_panning_integrations.tasks.demo import demo_nq_instances

    assert (
        main(
            [
                "run",
                "--demo",
                "nq",
                "--reader",
                "simulated",
                "--rounds",
                "2",
                "--json",
                "--profile",
                "lost-in-the-middle",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    instances = demo_nq_instances()
    assert [q["question"] for q in out["questions"]] == [i.question for i in instances]
    assert [q["gold"] for q in out["questions"]] == [i.gold[0] for i in instances]


def test_demo_nq_instance_is_a_real_test_split_question() -> None:
    from gold_panning_integrations.tasks.demo import demo_instance

    inst = demo_instance("nq")
    test_questions = {q.question for q in load_sample("nq").split("test")}
    assert inst.question in test_questions
    assert inst.n == 5
    assert inst.documents[inst.gold[0]].startswith("Roxette: ")


def test_demo_kv_unchanged() -> None:
    from gold_panning_integrations.tasks.demo import demo_instance

    inst = demo_instance("kv")
    assert inst.question == "What is Erin Vogel's access code?"
    assert inst.gold == (9,)
