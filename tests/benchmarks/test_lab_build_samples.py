"""``python -m benchmarks.build_samples``: the builder of the NQ and key-value samples and of
the BEIR fixture that ship in the package's ``_data/`` (it runs from a clone)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from benchmarks.build_samples import (
    answer_in_text,
    build_kv_sample,
    build_nq_beir,
    build_nq_sample,
    write_json_gz,
)
from benchmarks.build_samples import main as build_main
from gold_panning_integrations.tasks import load_sample

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = ROOT / "gold_panning_integrations" / "_data"
SOURCE = ROOT.parent / "shared" / "data"


def test_the_default_output_is_the_packages_data_folder() -> None:
    from benchmarks import build_samples

    assert build_samples._DEFAULT_OUT == DATA_DIR


@pytest.mark.parametrize(
    ("answer", "text", "expected"),
    [
        ("Röntgen", "awarded to Wilhelm Conrad Rontgen in 1901", True),
        ("the United Kingdom", "filmed in United Kingdom.", True),
        ("1979", "released in 19790", False),
        ("", "anything", False),
    ],
)
def test_answer_in_text(answer: str, text: str, expected: bool) -> None:
    assert answer_in_text(answer, text) is expected


def _rows() -> list[dict[str, object]]:
    def row(q: str, a: str, title: str, text: str) -> dict[str, object]:
        return {"question": q, "answers": [a], "ctxs": [{"title": title, "text": text, "isgold": True}]}

    return [
        row("who wrote hamlet", "Shakespeare", "Hamlet", "Hamlet is a tragedy written by Shakespeare."),
        row("capital of peru", "Lima", "Peru", "Lima is the capital of Peru."),
        row("hamlet film cast", "Olivier", "Hamlet (1948 film)", "Hamlet film starring Olivier."),
        row("author of macbeth", "Shakespeare", "Macbeth", "Macbeth, a play by Shakespeare."),
        row("largest planet", "Jupiter", "Jupiter", "Jupiter is the largest planet."),
        row("no answer in gold", "Mars", "Venus", "Venus is hot."),
    ]


def test_build_nq_filters_answers_and_ranks_by_bm25() -> None:
    out = build_nq_sample(_rows(), questions=4, distractors=2, rng=np.random.default_rng(0))
    titles = [t for t, _ in out["passages"]]
    by_q = {q["question"]: q for q in out["questions"]}
    # "no answer in gold" is never drawn: its gold passage lacks its answer
    assert "no answer in gold" not in by_q
    hamlet = by_q["who wrote hamlet"]
    # the Macbeth passage names Shakespeare, so it is skipped; the Hamlet film ranks first
    assert titles[hamlet["distractors"][0]] == "Hamlet (1948 film)"
    assert "Macbeth" not in [titles[p] for p in hamlet["distractors"]]


def test_build_nq_splits_halves() -> None:
    out = build_nq_sample(_rows(), questions=4, distractors=2, rng=np.random.default_rng(0))
    assert [q["split"] for q in out["questions"]] == ["calibration", "calibration", "test", "test"]


def test_build_is_deterministic(tmp_path: Path) -> None:
    a = build_nq_sample(_rows(), questions=4, distractors=2, rng=np.random.default_rng(3))
    b = build_nq_sample(_rows(), questions=4, distractors=2, rng=np.random.default_rng(3))
    write_json_gz(a, tmp_path / "a.json.gz")
    write_json_gz(b, tmp_path / "b.json.gz")
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()


def test_build_kv_keeps_records_unchanged() -> None:
    rows = [{"ordered_kv_records": [["k1", "v1"], ["k2", "v2"]], "key": "k2", "value": "v2"}] * 3
    out = build_kv_sample(rows, examples=2, rng=np.random.default_rng(0))
    assert out["examples"][0]["records"] == [["k1", "v1"], ["k2", "v2"]]


def test_build_rejects_too_many_questions() -> None:
    with pytest.raises(ValueError, match="only 5 usable questions, asked for 9"):
        build_nq_sample(_rows(), questions=9, distractors=2, rng=np.random.default_rng(0))


def test_build_missing_source_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pass --source"):
        build_main(["--source", str(tmp_path), "--out", str(tmp_path / "out")])


def test_shipped_files_are_what_the_build_script_makes(tmp_path: Path) -> None:
    if not (SOURCE / "nq-open-oracle.jsonl.gz").is_file():
        pytest.skip(f"source data not found at {SOURCE} (only needed to check the build)")
    assert build_main(["--source", str(SOURCE), "--out", str(tmp_path)]) == 0
    for name in ("nq_sample.json.gz", "kv_sample.json.gz", *FIXTURE_FILES):
        shipped = hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest()
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == shipped, name


FIXTURE_FILES = [
    f"nq-test-beir/{n}" for n in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "NOTICE.md")
]


def test_fixture_is_what_its_builder_makes_from_the_shipped_sample() -> None:
    files = build_nq_beir(load_sample("nq"))
    assert {f"nq-test-beir/{k}": v.encode() for k, v in files.items()} == {
        f: (DATA_DIR / f).read_bytes() for f in FIXTURE_FILES
    }
