"""``gold-panning rerank``'s job on a Ray cluster: :func:`rerank_dataset` reranks a Ray
Dataset of questions with ``map_batches``, one panner per worker (an actor), each worker's
reader pointed at a shared endpoint (vLLM or any OpenAI-compatible server).

Needs the ``ray`` extra (``pip install "gold-panning-integrations[ray]"``). Each question
goes through :func:`~._run.arerank_question`, as in the local command, so the same
questions with the same seed give the same records wherever they run (a question's
stream comes from its position in the input or its content, never from a worker).

What survives what (docs/rerank.md has the measurements):

* an endpoint that fails: each question is asked again with exponential backoff
  (``question_attempts``, ``backoff``); one that still fails is recorded as a fallback
  (the first stage's order, ``panned`` false), and the job goes on;
* a stopped job: with ``checkpoint=`` (a folder every worker can write), each finished
  question is appended at once to ``<checkpoint>/checkpoint.jsonl``, the local command's
  format and ledger (:mod:`._ledger`), so the same call again asks only what is missing and
  the fallbacks, and the local command can finish (or read) the same folder;
* a worker that crashes, a batch that fails: Ray restarts the actor and runs the batch
  again (its defaults for actor pools; ``DataContext.retried_map_errors`` and
  ``max_map_retries`` for an exception the batch raises); the worker reads the checkpoint
  first, so a question it finished is not asked again.

Example::

    import ray
    from gold_panning_integrations.batch.ray import questions_dataset, records, rerank_dataset

    ds = questions_dataset("questions.jsonl")        # or a TREC run: questions_dataset(RunQuestions(...))
    out = rerank_dataset(
        ds,
        reader={"model": "Qwen/Qwen2.5-7B-Instruct", "base_url": "http://vllm:8000/v1"},
        profile="lost-in-the-middle",
        workers=4,
        max_concurrency=64,                           # in flight at the endpoint, over all workers
        checkpoint="/shared/reranked",                # finished questions kept there
    )
    write_outputs(records(out), "reranked/", tag="gold-panning")   # run.trec + rerank.jsonl
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import FatalReaderError, MissingExtraError, ReaderError
from ._inputs import DEFAULT_DEPTH, JsonlQuestions, Question, fingerprint_pairs, question_from_object
from ._job import CHECKPOINT_NAME, RerankCheckpoint
from ._ledger import job_ledger
from ._run import afallback_record, arerank_question, arerank_stream, default_in_flight

__all__ = [
    "MAX_BATCH_SIZE",
    "RECORD_FIELDS",
    "RETRIED",
    "default_batch_size",
    "endpoint_refused",
    "questions_dataset",
    "record_schema",
    "records",
    "rerank_dataset",
    "worker_concurrency",
]

logger = logging.getLogger(__name__)

RECORD_FIELDS: tuple[str, ...] = (
    "qid",
    "index",
    "candidates",
    "p_none",
    "calls",
    "attempts",
    "prompt_tokens",
    "completion_tokens",
    "cache_hits",
    "failed_rounds",
    "panned",
    "stop_reason",
)
"""The columns of the output rows: the keys of :func:`~._run.question_record`, in order."""

MAX_BATCH_SIZE = 1024
"""The most questions :func:`default_batch_size` puts in one batch (a worker's memory)."""

RETRIED = (ReaderError, OSError, asyncio.TimeoutError)
"""What a question is asked again for: the reader's failures (an endpoint down, every round
failed, a refused connection) and the network's; but not an endpoint that answered that the
request itself is wrong (:func:`endpoint_refused`)."""


def endpoint_refused(err: BaseException) -> bool:
    """Whether ``err`` is the endpoint saying no to every request alike (a permanent error
    with an HTTP status: authentication 401, permission 403, unknown model or path 404, a
    redirect): asking again cannot help, and recording every question as a fallback would only
    hide it, so the job stops with that message. A refused connection has no status: the
    endpoint is down, and the question is asked again."""
    return isinstance(err, FatalReaderError) and err.status_code is not None


def _retried(err: BaseException) -> bool:
    return isinstance(err, RETRIED) and not endpoint_refused(err)


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as err:
        raise MissingExtraError("ray[data]", "ray", "Reranking on a Ray cluster (batch.ray)") from err
    return ray


def record_schema() -> Any:
    """The ``pyarrow`` schema of the output rows (:data:`RECORD_FIELDS`)."""
    import pyarrow as pa

    candidate = pa.struct([("id", pa.string()), ("index", pa.int64()), ("probability", pa.float64())])
    kinds = {
        "qid": pa.string(),
        "index": pa.int64(),
        "candidates": pa.list_(candidate),
        "p_none": pa.float64(),
        "panned": pa.bool_(),
        "stop_reason": pa.string(),
    }
    return pa.schema([(name, kinds.get(name, pa.int64())) for name in RECORD_FIELDS])


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def worker_concurrency(max_concurrency: int, workers: int) -> int:
    """Each worker's share of the calls in flight: ``max_concurrency // workers`` (at
    least 1), so that all workers together never send more than ``max_concurrency``."""
    _positive("max_concurrency", max_concurrency)
    _positive("workers", workers)
    return max(1, max_concurrency // workers)


def default_batch_size(questions: int, workers: int) -> int:
    """Questions per batch when ``batch_size`` is not given: the questions to ask spread over
    every worker, one batch each (``ceil(questions / workers)``), at most
    :data:`MAX_BATCH_SIZE`: a worker keeps its calls going through a whole batch, and each
    worker takes one batch at a time, so every worker takes questions."""
    return max(1, min(MAX_BATCH_SIZE, math.ceil(questions / _positive("workers", workers))))


def questions_dataset(source: str | Path | Iterable[Question], *, depth: int | None = DEFAULT_DEPTH) -> Any:
    """Questions as a Ray Dataset, one row per question (:meth:`Question.as_row`, with its
    ``index``): a JSONL file of ``{"id", "question", "passages"}`` (read as the local command
    reads it, cut to ``depth``), or any questions (:class:`~._inputs.RunQuestions`, a list).
    The rows are built on the driver."""
    ray = _ray()
    questions = JsonlQuestions(source, depth=depth) if isinstance(source, (str, Path)) else source
    return ray.data.from_items([q.as_row() for q in questions])


def _question(row: Mapping[str, Any], position: int, *, seeded: bool) -> Question:
    """A dataset row as a question: :meth:`Question.as_row`'s form, or the JSONL form
    ``{"id", "question", "passages", "index"?}`` (``index`` needed with a seed)."""
    if "documents" in row:
        return Question.from_row(row)
    index = row.get("index")
    if index is None and seeded:
        raise ValueError(
            f"row {position} of the batch has no 'index' (the question's position in the input), which a "
            "seed and a checkpoint need; build the dataset with questions_dataset(), or pass seed=None"
        )
    where = f"dataset row {row.get('id', position)!r}"
    return question_from_object(
        row, index=-1 if index is None else int(index), where=where, default_id=f"row{position}", depth=None
    )


def _panner(
    reader: Mapping[str, Any] | Callable[[], Any], share: int, profile: Any, config: Mapping[str, Any]
) -> Any:
    """The panner a worker (and the driver, for the ledger) builds: ``reader``'s options as
    an ``OpenAIReader`` with ``share`` calls in flight, or the reader the function builds."""
    from ..engine.config import PanningConfig
    from ..panning import GoldPanner

    if callable(reader):
        made = reader()
    else:
        from ..readers.openai import OpenAIReader

        made = OpenAIReader(**{**reader, "max_concurrency": share})
    return GoldPanner(made, profile, PanningConfig.from_options(**config))


class _Reranker:
    """One Ray worker: a panner (with its reader and event loop) built once, reranking each
    batch's questions concurrently; with a checkpoint, it skips the questions done there
    and appends each one it finishes."""

    def __init__(
        self,
        *,
        reader: Mapping[str, Any] | Callable[[], Any],
        max_concurrency: int,
        profile: Any,
        config: Mapping[str, Any],
        seed: int | None,
        in_flight: int | None,
        checkpoint: str | None = None,
        keep_fallbacks: bool = False,
        question_attempts: int = 4,
        backoff: float = 1.0,
    ) -> None:
        self.panner = _panner(reader, max_concurrency, profile, {**config, "on_failure": "raise"})
        self.seed = seed
        self.in_flight = in_flight or default_in_flight(self.panner.reader)
        self.attempts, self.backoff = question_attempts, backoff
        self.loop = asyncio.new_event_loop()
        self.log = None
        if checkpoint is not None:
            from ._shared_log import SharedCheckpoint

            self.log = SharedCheckpoint(checkpoint, keep_fallbacks=keep_fallbacks)

    async def _rerank(self, question: Question) -> dict[str, Any]:
        """``question``'s record, asked again with backoff while its endpoint fails; a
        fallback record (:func:`~._run.afallback_record`) when it still does."""
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential_jitter,
        )

        wait = wait_exponential_jitter(multiplier=self.backoff, max=30.0, jitter=self.backoff)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait if self.backoff > 0 else (lambda _: 0.0),
            retry=retry_if_exception(_retried),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await arerank_question(self.panner, question, seed=self.seed)
        except RETRIED as err:
            if endpoint_refused(err):
                raise
            logger.warning(
                "question %r failed %d times (%s: %s); recorded as a fallback, asked again on the next run",
                question.qid,
                self.attempts,
                type(err).__name__,
                err,
            )
            return await afallback_record(
                self.panner, question, seed=self.seed, error=f"{type(err).__name__}: {err}"
            )
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        seeded = self.seed is not None or self.log is not None
        questions = [_question(r, i, seeded=seeded) for i, r in enumerate(batch.to_pylist())]
        done: dict[int, dict[str, Any]] = {}
        if self.log is not None:
            self.log.refresh()  # what others (or this batch's earlier run) finished
            for slot, q in enumerate(questions):
                record = self.log.record(q)
                if record is not None:
                    done[slot] = record
        slot_of = {id(q): i for i, q in enumerate(questions)}

        def finished(q: Question, record: dict[str, Any]) -> None:
            if self.log is not None:
                self.log.append(q, record)
            done[slot_of[id(q)]] = record

        self.loop.run_until_complete(
            arerank_stream(
                self.panner,
                [q for i, q in enumerate(questions) if i not in done],
                seed=self.seed,
                in_flight=self.in_flight,
                on_record=finished,
                rerank=self._rerank,
            )
        )
        return pa.Table.from_pylist([done[i] for i in range(len(questions))], schema=record_schema())


def _open_checkpoint(
    dataset: Any, folder: str | Path, panner: Any, *, seed: int | None, restart: bool, keep_fallbacks: bool
) -> tuple[str, frozenset[int], int]:
    """Check (or start) the checkpoint in ``folder`` on the driver: the ledger of this job
    (the input's fingerprint taken from the dataset's rows, streamed through the driver:
    only each row's index and fingerprint are kept), set aside with ``restart``.
    Returns the checkpoint file, the indices done there and the questions in the input."""
    pairs = (
        (q.index, q.fingerprint())
        for batch in dataset.iter_batches(batch_format="pyarrow", batch_size=MAX_BATCH_SIZE)
        for q in (_question(r, i, seeded=True) for i, r in enumerate(batch.to_pylist()))
    )
    count, fingerprint = fingerprint_pairs(pairs)
    meta = job_ledger(panner, seed=seed, questions=count, fingerprint=fingerprint)
    path = Path(folder) / CHECKPOINT_NAME
    ck = RerankCheckpoint(path, meta, restart=restart, keep_fallbacks=keep_fallbacks, hint="restart=True")
    try:
        done = frozenset(i for i, fp in pairs if ck.done_at(i, fp))
    finally:
        ck.close()
    return str(path), done, count


def rerank_dataset(
    dataset: Any,
    *,
    reader: Mapping[str, Any] | Callable[[], Any],
    profile: Any = None,
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
    workers: int = 2,
    max_concurrency: int = 32,
    in_flight: int | None = None,
    batch_size: int | None = None,
    num_cpus: float = 1.0,
    checkpoint: str | Path | None = None,
    restart: bool = False,
    keep_fallbacks: bool = False,
    question_attempts: int = 4,
    backoff: float = 1.0,
) -> Any:
    """Rerank a Ray Dataset of questions; returns the Dataset of output records (lazy, as
    Ray's are), one row per question, the columns :data:`RECORD_FIELDS` (the local
    command's ``rerank.jsonl`` lines), in no particular order (sort by ``index``:
    :func:`records`).

    Args:
        dataset: Rows made by :func:`questions_dataset` (:meth:`Question.as_row`), or in
            the JSONL form ``{"id", "question", "passages"}`` (with ``"index"`` for a seed or
            a checkpoint).
        reader: ``OpenAIReader`` options (``model``, ``base_url``, ``api_key``, ``mode``,
            ``timeout``, ``requests_per_minute``, ...; not ``max_concurrency``), built in each
            worker with its share of ``max_concurrency``; or a function (pickled to the
            workers) that builds a reader there, whose limits are then the function's.
        profile: A detector profile (a bundled name, a path, a ``DetectorProfile``); None:
            the reader's.
        config: ``PanningConfig`` options (``{"rounds": 3}``).
        seed: As the local command's ``--seed`` (None: each question's stream derived
            from its text and candidates).
        workers: Ray actors, each with one panner and reader (``ActorPoolStrategy(size=workers)``,
            one batch at a time each).
        max_concurrency: Calls in flight at the endpoint over all workers: each worker's
            reader takes :func:`worker_concurrency` of them.
        in_flight: Questions each worker reranks at once (default: twice its share).
        batch_size: Questions per batch (default :func:`default_batch_size` of the questions
            to ask: spread over every worker; without a checkpoint the rows are counted,
            ``Dataset.count``, to size them).
        num_cpus: CPUs Ray reserves for each worker (the work is mostly waiting).
        checkpoint: A folder every worker can write (shared storage with file locks): each
            finished question is appended to its ``checkpoint.jsonl`` at once, and a call on
            a folder with one asks only the questions missing there and its fallbacks. The
            ledger is checked here, before any call (the rows are read once for the input's
            fingerprint, and a ``reader`` function is called once here, for the reader's
            settings); the local command's ``--out`` folder is the same format. None: no
            checkpoint (a stopped job starts over).
        restart: Set the folder's checkpoint aside (renamed, kept) and start anew.
        keep_fallbacks: Keep the checkpoint's fallback records instead of asking them again.
        question_attempts: Times a question is asked while its endpoint fails (a reader
            error, every round failed, a refused connection), before it is recorded as a
            fallback. An endpoint that refuses the request itself (HTTP 401, 403, 404: a key,
            a model name) stops the job with its message instead (:func:`endpoint_refused`).
        backoff: Seconds before the second attempt, doubling (with as much jitter) up to 30 s;
            0: none (tests).

    Raises:
        MissingExtraError: Ray is not installed.
        ValueError: An option is out of range, ``reader`` sets ``max_concurrency``, or a row
            lacks the ``index`` a seed or a checkpoint needs.
        CheckpointError: The checkpoint was made with other settings (the message names
            each, old -> new) or is in use by a local job.
    """
    share = worker_concurrency(max_concurrency, workers)
    if not callable(reader):
        if "max_concurrency" in reader:
            raise ValueError(
                "give the calls in flight over all workers as max_concurrency=..., not in the reader's options"
            )
        if "model" not in reader:
            raise ValueError("reader needs at least {'model': ..., 'base_url': ...} (OpenAIReader's options)")
    if batch_size is not None:
        _positive("batch_size", batch_size)
    _positive("question_attempts", question_attempts)
    if not (isinstance(backoff, (int, float)) and 0 <= backoff < math.inf):
        raise ValueError(f"backoff must be a number of seconds >= 0, got {backoff!r}")
    from ..engine.config import PanningConfig

    PanningConfig.from_options(**dict(config or {}))  # checked on the driver, before any worker starts
    ray = _ray()
    path: str | None = None
    if checkpoint is not None:
        panner = _panner(reader, share, profile, dict(config or {}))
        path, done, count = _open_checkpoint(
            dataset, checkpoint, panner, seed=seed, restart=restart, keep_fallbacks=keep_fallbacks
        )
        todo = count - len(done)
        if done:
            logger.info("checkpoint %s: %d of %d questions done, %d to ask", path, len(done), count, todo)
    else:
        todo = count = dataset.count()
    # the questions to ask spread over the workers; a batch of questions done already costs
    # little (read from the checkpoint), so not fewer than count / 64 a batch
    size = batch_size or default_batch_size(max(todo, count // 64, 1), workers)
    return dataset.map_batches(
        _Reranker,
        fn_constructor_kwargs={
            "reader": reader if callable(reader) else dict(reader),
            "max_concurrency": share,
            "profile": profile,
            "config": dict(config or {}),
            "seed": seed,
            "in_flight": in_flight,
            "checkpoint": path,
            "keep_fallbacks": keep_fallbacks,
            "question_attempts": question_attempts,
            "backoff": float(backoff),
        },
        batch_size=size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=1),
        num_cpus=num_cpus,
        udf_modifying_row_count=False,
    )


def records(dataset: Any) -> list[dict[str, Any]]:
    """Every output row of :func:`rerank_dataset` as a plain dict, in input order (by ``index``)."""
    rows = dataset.take_all()
    return sorted((dict(r) for r in rows), key=lambda r: r["index"])
