"""``gold-panning rerank``'s job on a Ray cluster: :func:`rerank_dataset` reranks a Ray
Dataset of questions with ``map_batches``, one panner per worker (an actor), each worker's
reader pointed at a shared endpoint (vLLM or any OpenAI-compatible server).

Needs the ``ray`` extra (``pip install "gold-panning-integrations[ray]"``). Each question
goes through :func:`~._run.arerank_question`, as in the local command, so the same
questions with the same seed give the same records wherever they run (a question's
stream comes from its position in the input or its content, never from a worker).

Example::

    import ray
    from gold_panning_integrations.batch.ray import questions_dataset, rerank_dataset

    ds = questions_dataset("questions.jsonl")        # or a TREC run: questions_dataset(RunQuestions(...))
    out = rerank_dataset(
        ds,
        reader={"model": "Qwen/Qwen2.5-7B-Instruct", "base_url": "http://vllm:8000/v1"},
        profile="lost-in-the-middle",
        workers=4,
        max_concurrency=64,                           # in flight at the endpoint, over all workers
    )
    out.write_json("reranked/")                       # or write_outputs(...) for run.trec
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError
from ._inputs import DEFAULT_DEPTH, JsonlQuestions, Question, question_from_object
from ._run import arerank_stream, default_in_flight

__all__ = [
    "RECORD_FIELDS",
    "questions_dataset",
    "record_schema",
    "records",
    "rerank_dataset",
    "worker_concurrency",
]

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


def worker_concurrency(max_concurrency: int, workers: int) -> int:
    """Each worker's share of the calls in flight: ``max_concurrency // workers`` (at
    least 1), so that all workers together never send more than ``max_concurrency``."""
    for name, value in (("max_concurrency", max_concurrency), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return max(1, max_concurrency // workers)


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
            "seed needs; build the dataset with questions_dataset(), or pass seed=None"
        )
    where = f"dataset row {row.get('id', position)!r}"
    return question_from_object(
        row, index=-1 if index is None else int(index), where=where, default_id=f"row{position}", depth=None
    )


class _Reranker:
    """One Ray worker: a panner (with its reader and event loop) built once, reranking
    each batch's questions concurrently."""

    def __init__(
        self,
        *,
        reader: Mapping[str, Any] | Callable[[], Any],
        max_concurrency: int,
        profile: Any,
        config: Mapping[str, Any],
        seed: int | None,
        in_flight: int | None,
    ) -> None:
        from ..engine.config import PanningConfig
        from ..panning import GoldPanner

        if callable(reader):
            made = reader()
        else:
            from ..readers.openai import OpenAIReader

            made = OpenAIReader(**{**reader, "max_concurrency": max_concurrency})
        self.panner = GoldPanner(made, profile, PanningConfig.from_options(**config))
        self.seed = seed
        self.in_flight = in_flight or default_in_flight(self.panner.reader)
        self.loop = asyncio.new_event_loop()

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        questions = [_question(r, i, seeded=self.seed is not None) for i, r in enumerate(batch.to_pylist())]
        done: dict[int, dict[str, Any]] = {}
        slot = {id(q): i for i, q in enumerate(questions)}
        self.loop.run_until_complete(
            arerank_stream(
                self.panner,
                questions,
                seed=self.seed,
                in_flight=self.in_flight,
                on_record=lambda q, rec: done.__setitem__(slot[id(q)], rec),
            )
        )
        return pa.Table.from_pylist([done[i] for i in range(len(questions))], schema=record_schema())


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
    batch_size: int = 256,
    num_cpus: float = 1.0,
) -> Any:
    """Rerank a Ray Dataset of questions; returns the Dataset of output records (lazy, as
    Ray's are), one row per question, the columns :data:`RECORD_FIELDS` (the local
    command's ``rerank.jsonl`` lines), in no particular order (sort by ``index``).

    Args:
        dataset: Rows made by :func:`questions_dataset` (:meth:`Question.as_row`), or in
            the JSONL form ``{"id", "question", "passages"}`` (with ``"index"`` for a seed).
        reader: ``OpenAIReader`` options (``model``, ``base_url``, ``api_key``, ``mode``,
            ``timeout``, ``requests_per_minute``, ...; not ``max_concurrency``), built in each
            worker with its share of ``max_concurrency``; or a function (pickled to the
            workers) that builds a reader there, whose limits are then the function's.
        profile: A detector profile (a bundled name, a path, a ``DetectorProfile``); None:
            the reader's.
        config: ``PanningConfig`` options (``{"rounds": 3}``).
        seed: As the local command's ``--seed`` (None: each question's stream derived
            from its text and candidates).
        workers: Ray actors, each with one panner and reader (``ActorPoolStrategy(size=workers)``).
        max_concurrency: Calls in flight at the endpoint over all workers: each worker's
            reader takes :func:`worker_concurrency` of them.
        in_flight: Questions each worker reranks at once (default: twice its share).
        batch_size: Questions per batch handed to a worker (a worker finishes a batch
            before it takes the next: larger batches keep its calls busier).
        num_cpus: CPUs Ray reserves for each worker (the work is mostly waiting).

    Raises:
        MissingExtraError: Ray is not installed.
        ValueError: An option is out of range, or ``reader`` sets ``max_concurrency``.
    """
    share = worker_concurrency(max_concurrency, workers)
    if not callable(reader):
        if "max_concurrency" in reader:
            raise ValueError(
                "give the calls in flight over all workers as max_concurrency=..., not in the reader's options"
            )
        if "model" not in reader:
            raise ValueError("reader needs at least {'model': ..., 'base_url': ...} (OpenAIReader's options)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    from ..engine.config import PanningConfig

    PanningConfig.from_options(**dict(config or {}))  # checked on the driver, before any worker starts
    ray = _ray()
    return dataset.map_batches(
        _Reranker,
        fn_constructor_kwargs={
            "reader": reader if callable(reader) else dict(reader),
            "max_concurrency": share,
            "profile": profile,
            "config": dict(config or {}),
            "seed": seed,
            "in_flight": in_flight,
        },
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=num_cpus,
        udf_modifying_row_count=False,
    )


def records(dataset: Any) -> list[dict[str, Any]]:
    """Every output row of :func:`rerank_dataset` as a plain dict, in input order (by ``index``)."""
    rows = dataset.take_all()
    return sorted((dict(r) for r in rows), key=lambda r: r["index"])
