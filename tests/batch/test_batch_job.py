"""``gold-panning rerank`` end to end against the loopback server: its outputs, its
checkpoint (resume without asking a finished question again, a cut last line, another
job's settings, the lock), a question that fails, and the base install."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAIServer, dynamic, raw_body
from rerank_fakes import model, question_of, write_questions

from gold_panning_integrations.batch import Question, RerankCheckpoint, run_lines, run_scores
from gold_panning_integrations.cli import main
from gold_panning_integrations.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
N = 12  # questions
DOCS = 10


def _args(base_url: str, questions: Path, out: Path, *extra: str) -> list[str]:
    return [
        "rerank",
        "--input",
        str(questions),
        "--out",
        str(out),
        "--base-url",
        base_url,
        "--model",
        "m",
        "--profile",
        "lost-in-the-middle",
        "--max-concurrency",
        "4",
        *extra,
    ]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "rerank.jsonl").read_text(encoding="utf-8").splitlines()]


def _asked(srv: FakeOpenAIServer) -> Counter[int | None]:
    return Counter(question_of(r) for r in srv.requests)


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    return write_questions(tmp_path / "questions.jsonl", N, docs=DOCS)


@pytest.fixture
def srv() -> Iterator[FakeOpenAIServer]:
    """The endpoint of a test's runs (one URL: the checkpoint's ledger records it)."""
    with FakeOpenAIServer(default=model()) as server:
        yield server


@pytest.fixture
def full(tmp_path: Path, questions: Path, srv: FakeOpenAIServer) -> Path:
    """An uninterrupted run's folder."""
    out = tmp_path / "full"
    assert main(_args(srv.base_url, questions, out)) == 0
    assert _asked(srv) == dict.fromkeys(range(N), 6)  # 2 rounds x 3 prompts, no other request
    srv.clear()
    return out


def test_outputs_hold_every_question_in_input_order(full: Path) -> None:
    records = _records(full)
    assert [r["qid"] for r in records] == [f"q{i}" for i in range(N)]
    assert [r["index"] for r in records] == list(range(N))
    for i, r in enumerate(records):
        assert r["candidates"][0]["id"] == f"q{i}-p{i % DOCS}"  # the gold passage ranks first
        assert r["candidates"][0]["index"] == i % DOCS
        assert sorted(c["index"] for c in r["candidates"]) == list(range(DOCS))
        probs = [c["probability"] for c in r["candidates"]]
        assert probs == sorted(probs, reverse=True)
        assert (r["calls"], r["attempts"], r["failed_rounds"], r["panned"]) == (6, 6, 0, True)
        assert (r["prompt_tokens"], r["completion_tokens"], r["cache_hits"]) == (6 * 50, 6 * 5, 0)
        assert r["p_none"] == pytest.approx(math.prod(1 - p for p in probs))
        assert r["stop_reason"] == "rounds"
    summary = json.loads((full / "summary.json").read_text(encoding="utf-8"))
    assert (summary["questions"], summary["ran"], summary["resumed"], summary["calls"]) == (N, N, 0, 6 * N)


def test_the_run_file_lists_the_posteriors_best_first(full: Path) -> None:
    lines = (full / "run.trec").read_text(encoding="utf-8").splitlines()
    assert len(lines) == N * DOCS
    records = {r["qid"]: r for r in _records(full)}
    for qid, rec in records.items():
        rows = [line.split() for line in lines if line.startswith(f"{qid} ")]
        assert [r[2] for r in rows] == [c["id"] for c in rec["candidates"]]
        assert [int(r[3]) for r in rows] == list(range(1, DOCS + 1))
        assert {r[1] for r in rows} == {"Q0"} and {r[5] for r in rows} == {"gold-panning"}
        scores = [float(r[4]) for r in rows]
        assert all(a > b for a, b in itertools.pairwise(scores))
        assert scores[0] == rec["candidates"][0]["probability"]


def test_run_scores_lower_ties_by_one_float_only() -> None:
    below = math.nextafter
    assert run_scores([0.5, 0.5, 0.2, 0.2, 0.2]) == [
        0.5,
        below(0.5, 0),
        0.2,
        below(0.2, 0),
        below(below(0.2, 0), 0),
    ]
    assert run_scores([1.0, 0.3, 0.7]) == [1.0, 0.3, below(0.3, 0)]  # never above the one before
    record = {"qid": "q", "candidates": [{"id": "a", "probability": 0.5}, {"id": "b", "probability": 0.5}]}
    assert run_lines(record, tag="t") == f"q Q0 a 1 0.5 t\nq Q0 b 2 {below(0.5, 0)!r} t\n"


def _keep_first(checkpoint: Path, k: int) -> set[int]:
    """Cut the checkpoint to its meta line and first ``k`` questions; their indices."""
    lines = checkpoint.read_text(encoding="utf-8").splitlines(True)
    checkpoint.write_text("".join(lines[: 1 + k]), encoding="utf-8")
    return {json.loads(line)["index"] for line in lines[1 : 1 + k]}


def test_a_resumed_run_asks_no_finished_question_again(
    tmp_path: Path, questions: Path, full: Path, srv: FakeOpenAIServer
) -> None:
    out = tmp_path / "resumed"
    out.mkdir()
    (out / "checkpoint.jsonl").write_bytes((full / "checkpoint.jsonl").read_bytes())
    done = _keep_first(out / "checkpoint.jsonl", 5)
    assert main(_args(srv.base_url, questions, out)) == 0
    assert _asked(srv) == {i: 6 for i in range(N) if i not in done}
    assert (out / "rerank.jsonl").read_bytes() == (full / "rerank.jsonl").read_bytes()
    assert (out / "run.trec").read_bytes() == (full / "run.trec").read_bytes()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["resumed"], summary["ran"]) == (5, N - 5)


def test_a_cut_last_line_is_dropped_and_its_question_reruns(
    tmp_path: Path, questions: Path, full: Path, srv: FakeOpenAIServer
) -> None:
    out = tmp_path / "cut"
    out.mkdir()
    ck = out / "checkpoint.jsonl"
    ck.write_bytes((full / "checkpoint.jsonl").read_bytes())
    done = _keep_first(ck, 4)
    data = ck.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
    ck.write_bytes(data[: len(data) - len(last) // 2 - 1])  # the 4th question's line cut mid-way
    assert main(_args(srv.base_url, questions, out)) == 0
    cut = json.loads(last)["index"]
    assert _asked(srv) == {i: 6 for i in range(N) if i not in done or i == cut}
    assert (out / "rerank.jsonl").read_bytes() == (full / "rerank.jsonl").read_bytes()


def test_a_checkpoint_of_other_settings_is_refused(
    tmp_path: Path, questions: Path, full: Path, srv: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(srv.base_url, questions, full, "--rounds", "3")) == 2
    assert srv.requests == []
    assert "config.rounds (--rounds): 2 -> 3" in capsys.readouterr().err


def test_a_second_job_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    meta = {"format": 1, "seed": None}
    first = RerankCheckpoint(tmp_path / "checkpoint.jsonl", meta)
    try:
        with pytest.raises(CheckpointError, match="in use by another rerank job"):
            RerankCheckpoint(tmp_path / "checkpoint.jsonl", meta)
    finally:
        first.close()
    RerankCheckpoint(tmp_path / "checkpoint.jsonl", meta).close()  # released


def test_another_input_at_the_same_position_is_refused(tmp_path: Path) -> None:
    ck = RerankCheckpoint(tmp_path / "checkpoint.jsonl", {"format": 1})
    try:
        ck.write(Question(0, "a", "q", ("x",), ("X",)), {"qid": "a"})
        assert ck.done(Question(0, "a", "q", ("x",), ("X",)))
        with pytest.raises(CheckpointError, match="holds question #0 made on other input"):
            ck.done(Question(0, "a", "q", ("x",), ("Y",)))
    finally:
        ck.close()


def _fails_on(bad: int) -> Any:
    """The model, but unreadable output for every prompt about question ``bad``."""
    good = model()

    def answer(req: Any) -> Any:
        return raw_body("I cannot say.") if question_of(req) == bad else good

    return dynamic(answer)


def test_a_question_that_fails_stops_the_job_and_a_rerun_finishes_it(
    tmp_path: Path, questions: Path, full: Path, srv: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "failing"
    srv.default = _fails_on(7)
    once = ("--max-attempts", "1")  # no retry: the failing question fails at once
    code = main(_args(srv.base_url, questions, out, *once, "--questions-in-flight", "2"))
    first = _asked(srv)
    assert code == 2
    assert "every panning round failed" in capsys.readouterr().err
    assert not (out / "rerank.jsonl").exists()
    done = {json.loads(line)["index"] for line in (out / "checkpoint.jsonl").read_text().splitlines()[1:]}
    assert 7 not in done and set(range(7)) <= done  # in input order, two at a time: 0..6 finished first
    srv.default = model()
    srv.clear()
    assert main(_args(srv.base_url, questions, out, *once)) == 0
    assert set(_asked(srv)) == set(range(N)) - done
    assert 7 in first
    assert (out / "rerank.jsonl").read_bytes() == (full / "rerank.jsonl").read_bytes()


def test_on_failure_fallback_records_the_question_as_not_panned(tmp_path: Path, questions: Path) -> None:
    out = tmp_path / "fallback"
    with FakeOpenAIServer(default=_fails_on(3)) as srv:
        assert (
            main(_args(srv.base_url, questions, out, "--max-attempts", "1", "--on-failure", "fallback")) == 0
        )
    rec = _records(out)[3]
    assert (rec["panned"], rec["failed_rounds"], rec["stop_reason"]) == (False, 2, "all-rounds-failed")
    assert [c["index"] for c in rec["candidates"]] == list(range(DOCS))  # the first stage's order


def test_the_command_runs_on_the_base_install(tmp_path: Path, questions: Path) -> None:
    """No framework, no BM25, no metrics library is imported on the command's path."""
    blocked = ("bm25s", "ir_measures", "pytrec_eval", "langchain_core", "llama_index", "ray")
    code = (
        "import sys\n"
        f"for m in {blocked!r}: sys.modules[m] = None\n"
        "from gold_panning_integrations.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    with FakeOpenAIServer(default=model()) as srv:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = _args(srv.base_url, questions, tmp_path / "base")
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert [r["candidates"][0]["id"] for r in _records(tmp_path / "base")] == [
        f"q{i}-p{i}" for i in range(N - 2)
    ] + [
        "q10-p0",
        "q11-p1",
    ]
