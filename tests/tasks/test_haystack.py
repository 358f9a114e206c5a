"""Calibrating on the user's own passages: --task haystack --docs FILE (issue 14 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.profiles import DetectorProfile
from gold_panning_integrations.readers.answer import token_matcher
from gold_panning_integrations.tasks.haystack import HaystackTask, load_passages

PASSAGES = [
    "The river rises in the hills. It flows north for 40 km.",
    "A bakery opened on the square in 1921. Its bread was famous.",
    "The committee met twice a year. Minutes were kept in Latin.",
    "Copper was mined here until 1880. The shafts are now flooded.",
    "The lighthouse has 212 steps. Its lamp was electrified in 1930.",
]


def test_instance_inserts_one_fact_into_one_real_passage() -> None:
    task = HaystackTask(passages=PASSAGES)
    inst = task.make(4, gold_position=1, rng=np.random.default_rng(0))
    code = inst.answers[0]
    person = inst.metadata["person"]
    assert inst.question == f"What is {person}'s access code?"
    assert f"{person}'s access code is {code}." in inst.documents[1]
    assert [token_matcher(code, d) for d in inst.documents] == [False, True, False, False]
    others = [d for i, d in enumerate(inst.documents) if i != 1]
    assert all(d in PASSAGES for d in others)  # distractors as they are
    assert (
        inst.documents[1].replace(f"{person}'s access code is {code}.", "").split()
        == PASSAGES[inst.metadata["passage_index"]].split()
    )


def test_instances_are_reproducible() -> None:
    task = HaystackTask(passages=PASSAGES)
    a = task.make(3, gold_position=0, rng=np.random.default_rng(5))
    b = task.make(3, gold_position=0, rng=np.random.default_rng(5))
    assert a == b


def test_n_above_the_passages_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 5 documents per instance, got n=6"):
        HaystackTask(passages=PASSAGES).make(6, gold_position=0, rng=np.random.default_rng(0))


def test_load_jsonl_strings_and_objects(tmp_path: Path) -> None:
    p = tmp_path / "docs.jsonl"
    p.write_text('"first passage"\n{"title": "T", "text": "second  passage"}\n\n"first passage"\n')
    assert load_passages(p) == ["first passage", "T: second passage"]


def test_load_plain_text_split_on_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "docs.txt"
    p.write_text("one\nstill one\n\n\ntwo\n")
    assert load_passages(p) == ["one still one", "two"]


@pytest.mark.parametrize(
    ("content", "name", "pattern"),
    [
        (b'{"text": 3}\n', "d.jsonl", r"line 1 must be a JSON string or an object"),
        (b'"a"\n{oops\n', "d.jsonl", r"line 2 is not JSON"),
        (b"caf\xe9\n\nbar", "d.txt", r"line 1 is not UTF-8 \(invalid byte at column 4\)"),
        (b"only one passage", "d.txt", r"holds 1 distinct passage\(s\); at least 2"),
        (b"\x00\x01\x02\n\nabc", "d.bin", r"line 1 holds a NUL byte"),
    ],
)
def test_bad_docs_files_are_one_clear_error(tmp_path: Path, content: bytes, name: str, pattern: str) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(ValueError, match=pattern):
        load_passages(p)


def test_docs_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a folder; pass one file"):
        load_passages(tmp_path)


def _docs(tmp_path: Path) -> Path:
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in PASSAGES))
    return p


def test_cli_haystack_with_a_budget(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    argv = ["calibrate", "--reader", "simulated", "--task", "haystack", "--docs", str(_docs(tmp_path))]
    argv += ["--n", "4", "--grid", "4", "--budget", "12", "--out", str(out)]
    assert cli_main(argv) == 0
    prof = DetectorProfile.load(out)
    assert prof.task == "haystack"
    assert prof.counts is not None
    assert sum(prof.counts.gold_shown) == 12


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        ([], "pass --docs FILE"),
        (["--docs", "FOLDER"], "is a folder; pass one file"),
        (["--docs", "DOCS", "--n", "9"], "holds 5 distinct passages but --n 9"),
    ],
)
def test_cli_haystack_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], pattern: str
) -> None:
    extra = [str(tmp_path) if x == "FOLDER" else str(_docs(tmp_path)) if x == "DOCS" else x for x in extra]
    argv = [
        "calibrate",
        "--reader",
        "simulated",
        "--task",
        "haystack",
        *extra,
        "--out",
        str(tmp_path / "p.json"),
    ]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert pattern in err
