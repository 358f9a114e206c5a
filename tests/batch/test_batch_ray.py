"""The Ray path of ``gold-panning rerank`` (:mod:`gold_panning_integrations.batch.ray`): its
worker gives the local command's records for the same questions and seed; the calls in
flight are shared across workers; the default batch size spreads the questions over every
worker. On a local Ray instance (``ray.init(num_cpus=2)``), in the default suite: 12
questions, 2 of them failing at the endpoint, finish with those 2 recorded as fallbacks in
the checkpoint; the same call again asks only them, and the output equals the local
command's (whose checkpoint folder accepts the Ray job's). Slow: 50 questions equal the local
command's without a checkpoint."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAIServer, dynamic, status
from rerank_fakes import model, question_of, write_questions

from gold_panning_integrations.batch import JsonlQuestions, Question, question_record
from gold_panning_integrations.cli import main

pa = pytest.importorskip("pyarrow")

from gold_panning_integrations.batch import ray as R

ROOT = Path(__file__).resolve().parents[2]


def _local(base_url: str, questions: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    args = ["rerank", "--input", str(questions), "--out", str(out), "--base-url", base_url, "--model", "m"]
    assert main([*args, "--profile", "lost-in-the-middle", *extra]) == 0
    return [json.loads(line) for line in (out / "rerank.jsonl").read_text(encoding="utf-8").splitlines()]


def test_record_fields_are_the_records_keys() -> None:
    import numpy as np

    from gold_panning_integrations.engine.records import PanningResult

    result = PanningResult(
        posteriors=np.array([0.2, 0.7]),
        log_odds=np.zeros(2),
        ranking=np.array([1, 0]),
        selected=np.array([1]),
        citation_counts=np.zeros(2, dtype=np.int64),
        rounds=(),
        calls=0,
        stop_reason="rounds",
        panned=True,
        policy="belief",
        k=1,
    )
    rec = question_record(Question(0, "a", "q", ("x", "y"), ("X", "Y")), result)
    assert tuple(rec) == R.RECORD_FIELDS == tuple(R.record_schema().names)
    assert rec["candidates"] == [
        {"id": "y", "index": 1, "probability": 0.7},
        {"id": "x", "index": 0, "probability": 0.2},
    ]
    assert rec["p_none"] == pytest.approx(0.8 * 0.3)


@pytest.mark.parametrize(("total", "workers", "share"), [(32, 2, 16), (33, 2, 16), (3, 4, 1), (64, 1, 64)])
def test_each_worker_takes_its_share_of_the_calls_in_flight(total: int, workers: int, share: int) -> None:
    assert R.worker_concurrency(total, workers) == share


@pytest.mark.parametrize(
    ("questions", "workers", "size"), [(50, 2, 25), (51, 2, 26), (200, 4, 50), (1, 8, 1), (10**6, 2, 1024)]
)
def test_the_default_batch_spreads_the_questions_over_every_worker(
    questions: int, workers: int, size: int
) -> None:
    """One batch per worker (each takes one at a time), at most MAX_BATCH_SIZE questions:
    50 questions on 2 workers are 2 batches of 25, not one batch of 256 on one actor."""
    assert R.default_batch_size(questions, workers) == size
    assert R.MAX_BATCH_SIZE == 1024


def test_the_reader_options_may_not_set_their_own_limit() -> None:
    with pytest.raises(ValueError, match="over all workers as max_concurrency"):
        R.rerank_dataset(object(), reader={"model": "m", "max_concurrency": 4})
    with pytest.raises(ValueError, match="max_concurrency must be an int >= 1"):
        R.worker_concurrency(0, 2)


@pytest.mark.parametrize("seed", [None, 5])
def test_a_worker_gives_the_local_commands_records(tmp_path: Path, seed: int | None) -> None:
    questions = write_questions(tmp_path / "q.jsonl", 9)
    rows = [q.as_row() for q in JsonlQuestions(questions)]
    seeded = () if seed is None else ("--seed", str(seed))
    with FakeOpenAIServer(default=model()) as srv:
        local = _local(srv.base_url, questions, tmp_path / "local", *seeded)
        worker = R._Reranker(
            reader={"model": "m", "base_url": srv.base_url},
            max_concurrency=3,
            profile="lost-in-the-middle",
            config={},
            seed=seed,
            in_flight=None,
        )
        assert worker.panner.reader.max_concurrency == 3
        # two batches, the second in the JSONL form with its index
        first = worker(pa.Table.from_pylist(rows[:5])).to_pylist()
        raw = [json.loads(line) for line in questions.read_text().splitlines()[5:]]
        second = worker(pa.Table.from_pylist([{**r, "index": 5 + i} for i, r in enumerate(raw)])).to_pylist()
    assert first + second == local


def test_a_seeded_row_without_its_index_is_refused() -> None:
    with pytest.raises(ValueError, match="has no 'index'"):
        R._question({"id": "a", "question": "q", "passages": ["x"]}, 0, seeded=True)
    assert R._question({"id": "a", "question": "q", "passages": ["x"]}, 0, seeded=False).index == -1


@pytest.mark.slow
def test_fifty_questions_on_a_local_ray_instance_equal_the_local_command(tmp_path: Path) -> None:
    """Measured: about 30 s on the 2-core machine (Ray's start-up is 5-9 s of it)."""
    ray = pytest.importorskip("ray")
    questions = write_questions(tmp_path / "q.jsonl", 50)
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    with FakeOpenAIServer(default=model()) as srv:
        local = _local(srv.base_url, questions, tmp_path / "local", "--seed", "3")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
        try:
            out = R.rerank_dataset(
                R.questions_dataset(questions),
                reader={"model": "m", "base_url": srv.base_url},
                profile="lost-in-the-middle",
                seed=3,
                workers=2,
                max_concurrency=8,
                batch_size=16,
                num_cpus=0.5,
            )
            got = R.records(out)
        finally:
            ray.shutdown()
    assert got == local
    from gold_panning_integrations.batch import write_outputs

    write_outputs(got, tmp_path / "ray", tag="gold-panning")
    assert (tmp_path / "ray" / "run.trec").read_bytes() == (tmp_path / "local" / "run.trec").read_bytes()


def _fails_on(bad: set[int]) -> Any:
    """The model, but HTTP 500 for every prompt about the questions in ``bad``."""
    good = model()
    return dynamic(lambda req: status(500, message="down for this one") if question_of(req) in bad else good)


def test_ray_keeps_what_finished_records_failures_and_a_rerun_asks_only_them(tmp_path: Path) -> None:
    """Default suite: a local Ray instance, 12 questions, questions 3 and 7 answered HTTP 500.
    Measured: about 25-35 s on the 2-core machine (Ray's start-up is 5-9 s of it)."""
    ray = pytest.importorskip("ray")
    n, bad = 12, {3, 7}
    questions = write_questions(tmp_path / "q.jsonl", n)
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    folder = tmp_path / "ray"
    with FakeOpenAIServer(default=_fails_on(bad)) as srv:
        reader = {"model": "m", "base_url": srv.base_url, "max_attempts": 1}
        options: dict[str, Any] = {
            "reader": reader,
            "profile": "lost-in-the-middle",
            "seed": 3,
            "workers": 2,
            "max_concurrency": 4,
            "num_cpus": 0.5,
            "checkpoint": folder,
            "question_attempts": 2,
            "backoff": 0,
        }
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
        try:
            first = R.records(R.rerank_dataset(R.questions_dataset(questions), **options))
            asked_first = [question_of(r) for r in srv.requests]
            srv.default = model()
            srv.clear()
            again = R.records(R.rerank_dataset(R.questions_dataset(questions), **options))
            asked_again = [question_of(r) for r in srv.requests]
        finally:
            ray.shutdown()
        srv.clear()
        local = _local(srv.base_url, questions, tmp_path / "local", "--seed", "3", "--max-attempts", "1")
        # the local command accepts the Ray job's folder (same ledger) and finds nothing to ask
        srv.clear()
        _local(srv.base_url, questions, folder, "--seed", "3", "--max-attempts", "1")
        assert srv.requests == []
    failed = {r["index"] for r in first if not r["panned"]}
    assert failed == bad
    assert {r["stop_reason"] for r in first if r["index"] in bad} == {"all-rounds-failed"}
    assert [r["candidates"][0]["index"] for r in first if r["index"] in bad] == [0, 0]  # first stage's order
    # each failing question asked twice (question_attempts), each other once: 6 calls per ask
    assert sorted(asked_first) == sorted([i for i in range(n) for _ in range(6 * (2 if i in bad else 1))])
    assert sorted(asked_again) == sorted([i for i in bad for _ in range(6)])  # only the failed ones
    assert again == local
    lines = (folder / "checkpoint.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["type"] == "meta" and len(lines) == 1 + n + len(bad)
    assert [r["qid"] for r in again] == [f"q{i}" for i in range(n)]


def _settled(srv: FakeOpenAIServer, quiet: float = 0.5, timeout: float = 10.0) -> list[Any]:
    """The server's requests once none has arrived for ``quiet`` seconds (at most ``timeout``)."""
    deadline = time.monotonic() + timeout
    seen = srv.requests
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = srv.requests
        if len(now) == len(seen):
            return now
        seen = now
    return seen


def test_a_batch_run_again_asks_only_what_it_had_not_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes Ray's own retries safe (a task run again after its batch raised, an actor
    restarted after a crash): the worker reads the checkpoint before it asks anything. The
    checkpoint's storage fails once, after 4 questions of a batch of 9 were written: the
    batch raises; run again (as Ray runs it) by the same worker and by a new one, it asks
    only the 5 others, and its output is the uninterrupted run's."""
    from gold_panning_integrations.batch import _shared_log
    from gold_panning_integrations.batch._job import CHECKPOINT_NAME, RerankCheckpoint
    from gold_panning_integrations.batch.ray import _open_checkpoint, _panner

    questions = write_questions(tmp_path / "q.jsonl", 9)
    rows = [q.as_row() for q in JsonlQuestions(questions)]
    folder = tmp_path / "ck"
    real_append = _shared_log.SharedCheckpoint.append
    written: list[int] = []

    def flaky(self: Any, question: Question, record: Any) -> None:
        if len(written) == 4:
            written.append(-1)
            raise OSError("the shared storage went away")
        real_append(self, question, record)
        written.append(question.index)

    with FakeOpenAIServer(default=model()) as srv:
        options: dict[str, Any] = {
            "reader": {"model": "m", "base_url": srv.base_url},
            "profile": "lost-in-the-middle",
        }
        local = _local(srv.base_url, questions, tmp_path / "local", "--seed", "2")

        class Rows:  # the driver's view of the dataset: its rows, once
            def iter_batches(self, **_: Any) -> Any:
                yield pa.Table.from_pylist(rows)

        _open_checkpoint(
            Rows(),
            folder,
            _panner(options["reader"], 3, "lost-in-the-middle", {}),
            seed=2,
            restart=False,
            keep_fallbacks=False,
        )
        path = str(folder / CHECKPOINT_NAME)
        worker = R._Reranker(
            **options, max_concurrency=3, config={}, seed=2, in_flight=2, checkpoint=path, backoff=0
        )
        monkeypatch.setattr(_shared_log.SharedCheckpoint, "append", flaky)
        srv.clear()
        with pytest.raises(OSError, match="went away"):
            worker(pa.Table.from_pylist(rows))
        # a request the raising batch sent just before it raised is recorded by the server's
        # thread, on a loaded machine sometimes after clear(): wait until none arrives
        first = Counter(question_of(r) for r in _settled(srv))
        finished = set(written) - {-1}
        assert len(finished) == 4
        srv.clear()
        again = worker(pa.Table.from_pylist(rows)).to_pylist()  # Ray runs the batch again
        # (a request the raising batch had in flight is cut when its task is cancelled: no question)
        asked = Counter(q for q in (question_of(r) for r in srv.requests) if q is not None)
        srv.clear()
        fresh = R._Reranker(
            **options, max_concurrency=3, config={}, seed=2, in_flight=2, checkpoint=path, backoff=0
        )
        restarted = fresh(pa.Table.from_pylist(rows)).to_pylist()  # an actor restarted after a crash
        assert srv.requests == []
    assert not set(asked) & finished and set(asked) == set(range(9)) - finished
    assert all(n == 6 for n in asked.values()) and set(first) >= finished, (asked, first)
    assert again == restarted == local
    ck = RerankCheckpoint(
        folder / CHECKPOINT_NAME, json.loads((folder / CHECKPOINT_NAME).read_text().splitlines()[0])
    )
    try:
        assert len(ck) == 9
    finally:
        ck.close()


def test_an_endpoint_that_refuses_the_request_stops_the_worker_instead_of_faking_fallbacks() -> None:
    """A wrong key (HTTP 401) is the same for every question: asking again or recording
    fallbacks would hide it, so the batch raises with the endpoint's message at once; a
    refused connection (no HTTP status: the endpoint is down) is asked again."""
    from gold_panning_integrations.errors import FatalReaderError

    assert R.endpoint_refused(FatalReaderError("authentication failed", status_code=401))
    assert not R.endpoint_refused(FatalReaderError("connection refused: nothing is listening there"))
    rows = [Question(0, "q0", "what is question 0?", ("a", "b"), ("x", "y")).as_row()]
    with FakeOpenAIServer(default=status(401, message="bad key")) as srv:
        worker = R._Reranker(
            reader={"model": "m", "base_url": srv.base_url, "max_attempts": 1},
            max_concurrency=2,
            profile="lost-in-the-middle",
            config={},
            seed=None,
            in_flight=None,
            question_attempts=3,
            backoff=0,
        )
        with pytest.raises(FatalReaderError, match="authentication failed"):
            worker(pa.Table.from_pylist(rows))
        # asked once (its first round's 3 prompts at most go out together), not 3 times
        assert 1 <= len(srv.requests) <= 3
