"""Task builders: gold placement, unambiguous answers, determinism, data loading."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from gold_panning_integrations.readers.answer import token_matcher
from gold_panning_integrations.tasks import (
    KVRetrievalTask,
    KVTask,
    MonoRelTask,
    NQTask,
    PIRTask,
    TaskBuilder,
    load_sample,
    make_task,
)


@pytest.mark.parametrize(
    "task",
    [
        KVTask(),
        KVTask(value_format="color"),
        KVTask(value_format="code"),
        MonoRelTask(),
        PIRTask(),
        PIRTask(prop="floor"),
    ],
)
@pytest.mark.parametrize("pos", [0, 7, 19])
def test_gold_at_position_and_answer_only_in_gold(task: TaskBuilder, pos: int) -> None:
    for seed in range(5):
        inst = task.make(20, gold_position=pos, rng=np.random.default_rng(seed))
        assert inst.n == 20
        assert inst.gold == (pos,)
        supporting = [
            i for i, d in enumerate(inst.documents) if any(token_matcher(a, d) for a in inst.answers)
        ]
        assert supporting == [pos], (inst.question, inst.answers)
        assert len(set(inst.documents)) == 20


def test_kv_text_and_question() -> None:
    inst = KVTask().make(3, gold_position=1, rng=np.random.default_rng(0))
    name = inst.metadata["name"]
    assert inst.question == f"What is {name}'s access code?"
    assert inst.documents[1] == f"{name}'s access code is {inst.answers[0]}."
    assert len(inst.answers[0]) == 5
    assert inst.answers[0].isdigit()
    # distractors are other people's facts of the same attribute
    assert all("access code is" in d and name not in d for i, d in enumerate(inst.documents) if i != 1)


def test_same_rng_same_instance_and_truth() -> None:
    a = KVTask().make(10, gold_position=4, rng=np.random.default_rng(3))
    b = KVTask().make(10, gold_position=4, rng=np.random.default_rng(3))
    assert a == b
    assert a.truth.tolist() == [i == 4 for i in range(10)]


def test_monorel_answer_is_head_of_chain() -> None:
    inst = MonoRelTask().make(4, gold_position=2, rng=np.random.default_rng(1))
    assert inst.question.endswith("of the three?")
    a, b, c = inst.metadata["chain"]
    assert inst.answers == (a,)
    assert inst.documents[2].startswith(f"{a} is ")
    assert inst.documents[2].endswith(f"{c}.")
    assert b in inst.question
    assert a not in inst.question
    assert c not in inst.question


@pytest.mark.parametrize("bad", [-1, 5])
def test_bad_gold_position_names_value(bad: int) -> None:
    with pytest.raises(ValueError, match=f"gold_position must be in 0..4 for n=5, got {bad}"):
        KVTask().make(5, gold_position=bad, rng=np.random.default_rng(0))


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown value_format 'emoji'"):
        KVTask(value_format="emoji")
    with pytest.raises(ValueError, match="unknown task 'x'"):
        make_task("x")
    with pytest.raises(ValueError, match="--data applies to the nq task only, not 'kv'"):
        make_task("kv", data="x.jsonl")


def _write_nq(path: Path) -> None:
    rows = [
        (
            "who wrote hamlet",
            ["William Shakespeare"],
            "Hamlet",
            "Hamlet is a tragedy by William Shakespeare.",
        ),
        ("capital of peru", ["Lima"], "Peru", "Lima is the capital of Peru."),
        ("largest planet", ["Jupiter"], "Jupiter", "Jupiter is the largest planet."),
        ("shakespeare birthplace", ["Stratford"], "Stratford", "William Shakespeare was born in Stratford."),
    ]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for q, a, t, x in rows:
            fh.write(
                json.dumps({"question": q, "answers": a, "ctxs": [{"title": t, "text": x, "isgold": True}]})
                + "\n"
            )


def test_nq_skips_distractors_containing_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl.gz"
    _write_nq(path)
    task = NQTask(path)
    assert task.max_n == 4
    seen_hamlet = False
    for seed in range(30):
        inst = task.make(3, gold_position=0, rng=np.random.default_rng(seed))
        assert inst.gold == (0,)
        assert [
            i for i, d in enumerate(inst.documents) if any(token_matcher(a, d) for a in inst.answers)
        ] == [0]
        if inst.question == "who wrote hamlet":
            seen_hamlet = True
            # the Stratford passage names Shakespeare: it can never be a distractor here
            assert inst.documents[0] == "Hamlet: Hamlet is a tragedy by William Shakespeare."
            assert not any("Stratford" in d for d in inst.documents)
    assert seen_hamlet


def test_nq_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--data"):
        NQTask(tmp_path / "nope.jsonl.gz")


def test_nq_bad_line_is_named(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "a", "isgold": true}]}\n{"oops": 1}\n'
    )
    with pytest.raises(ValueError, match="line 2"):
        NQTask(p)


# ------------------------------------------------------------- shipped samples
def test_make_task_nq_uses_the_shipped_calibration_split() -> None:
    task = make_task("nq")
    assert isinstance(task, NQTask)
    cal = {q.question for q in load_sample("nq").split("calibration")}
    assert {it.question for it in task.items} == cal


def test_nq_sample_task_shows_the_top_retrieved_distractors_in_order() -> None:
    sample = load_sample("nq")
    task = NQTask(split="test")
    inst = task.make(4, gold_position=1, rng=np.random.default_rng(0))
    q = sample.split("test")[inst.metadata["question_index"]]
    expected = [p.content for p in sample.distractor_passages(q, 3)]
    assert inst.documents[:1] + inst.documents[2:] == expected
    assert inst.documents[1] == sample.gold_passage(q).content


@pytest.mark.parametrize("pos", [0, 10, 20])
def test_nq_sample_answer_only_in_gold(pos: int) -> None:
    task = NQTask()
    for seed in range(5):
        inst = task.make(21, gold_position=pos, rng=np.random.default_rng(seed))
        supporting = [
            i for i, d in enumerate(inst.documents) if any(token_matcher(a, d) for a in inst.answers)
        ]
        assert supporting == [pos], inst.question


def test_nq_sample_max_n_is_21() -> None:
    with pytest.raises(ValueError, match="at most 21 documents per instance, got n=22"):
        NQTask().make(22, gold_position=0, rng=np.random.default_rng(0))


def test_nq_sample_random_distractors_exceed_21() -> None:
    inst = NQTask(distractors="random").make(40, gold_position=39, rng=np.random.default_rng(0))
    supporting = [i for i, d in enumerate(inst.documents) if any(token_matcher(a, d) for a in inst.answers)]
    assert supporting == [39]


def test_nq_retrieved_needs_the_sample(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl.gz"
    _write_nq(path)
    with pytest.raises(ValueError, match="distractors='retrieved' needs a sample"):
        NQTask(path, distractors="retrieved")


def test_nq_split_does_not_combine_with_path(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl.gz"
    _write_nq(path)
    with pytest.raises(ValueError, match="do not combine them with path/items"):
        NQTask(path, split="test")


def test_nq_unknown_distractor_mode() -> None:
    with pytest.raises(ValueError, match="unknown distractors mode 'bm25'"):
        NQTask(distractors="bm25")


def test_kv_retrieval_instance_from_the_shipped_sample() -> None:
    inst = KVRetrievalTask().make(5, gold_position=2, rng=np.random.default_rng(0))
    ex = next(e for e in load_sample("kv").examples if e.id == inst.metadata["example"])
    assert inst.documents[2] == f'Key: "{ex.key}" Value: "{ex.value}"'
    assert inst.question == f'What is the value of key "{ex.key}"?'
    assert inst.answers == (ex.value,)


@pytest.mark.parametrize("pos", [0, 37, 74])
def test_kv_retrieval_answer_only_in_gold(pos: int) -> None:
    inst = make_task("kv-retrieval").make(75, gold_position=pos, rng=np.random.default_rng(pos))
    supporting = [i for i, d in enumerate(inst.documents) if any(token_matcher(a, d) for a in inst.answers)]
    assert supporting == [pos]
    assert len(set(inst.documents)) == 75


def test_kv_retrieval_max_n_is_75() -> None:
    with pytest.raises(ValueError, match="at most 75 documents per instance, got n=76"):
        KVRetrievalTask().make(76, gold_position=0, rng=np.random.default_rng(0))
