"""Reranking many questions through one panner: each question's random stream
(:func:`question_rng`), its output record (:func:`question_record`), and the scheduler that
keeps a number of questions in flight (:func:`arerank_stream`). The local job
(:mod:`._job`) and the Ray path (:mod:`.ray`) both go through :func:`arerank_question`, so
the same question with the same seed gives the same record wherever it runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._streams import method_rng, query_k
from ..engine.records import PanningResult, Reading
from ._inputs import Question

__all__ = [
    "EVALUATE_METHOD",
    "afallback_record",
    "arerank_question",
    "arerank_stream",
    "default_in_flight",
    "question_k",
    "question_record",
    "question_rng",
]

logger = logging.getLogger(__name__)

EVALUATE_METHOD = "gp-defaults"
"""The ``gold-panning evaluate`` method whose random streams a seeded rerank shares: with
the same seed, the same questions in the same order and the same options, the rankings
and probabilities equal that method's."""


def question_rng(question: Question, seed: int | None) -> np.random.Generator | None:
    """The random stream of ``question``: with ``seed``, the one ``evaluate`` gives its
    instance at the same position for :data:`EVALUATE_METHOD` (``[seed, index, method]``);
    None: the panner derives it from the question's text and candidates (the same input
    gives the same output wherever and in whatever order it runs)."""
    return None if seed is None else method_rng(seed, question.index, EVALUATE_METHOD)


def question_k(k: int | None, n: int) -> int | None:
    """The engine's ``k`` for a question of ``n`` candidates: ``k`` at most ``n - 1`` and
    at least 1, as ``evaluate`` pans (None stays None: no count limit)."""
    return None if k is None else query_k(k, n)


def question_record(question: Question, result: PanningResult) -> dict[str, Any]:
    """The output record of one question (a line of ``rerank.jsonl``).

    Returns:
        ``{"qid", "index" (the question's position in the input), "candidates" (best
        first: ``{"id", "index" (first-stage position, from 0), "probability"}``),
        "p_none", "calls", "attempts", "prompt_tokens", "completion_tokens", "cache_hits",
        "failed_rounds", "panned", "stop_reason"}``.
    """
    post = result.posteriors
    return {
        "qid": question.qid,
        "index": question.index,
        "candidates": [
            {"id": question.doc_ids[i], "index": i, "probability": float(post[i])}
            for i in result.ranking.tolist()
        ],
        "p_none": float(result.p_none),
        "calls": int(result.calls),
        "attempts": int(result.attempts),
        "prompt_tokens": int(result.prompt_tokens),
        "completion_tokens": int(result.completion_tokens),
        "cache_hits": int(result.cache_hits),
        "failed_rounds": int(result.failed_rounds),
        "panned": bool(result.panned),
        "stop_reason": str(result.stop_reason),
    }


async def arerank_question(panner: Any, question: Question, *, seed: int | None) -> dict[str, Any]:
    """Pan one question with ``panner`` (a ``GoldPanner``; its ``aread``) and return its
    record (:func:`question_record`).

    Raises:
        AllRoundsFailedError: Every prompt failed and the panner's ``on_failure`` is
            ``"raise"``; FatalReaderError: a permanent reader error.
    """
    result = await panner.arun(
        question.question,
        list(question.documents),
        k=question_k(panner.config.k, len(question.documents)),
        scores=None if question.scores is None else list(question.scores),
        rng=question_rng(question, seed),
    )
    return question_record(question, result)


class _Unanswered:
    """A reader whose every reading failed with ``error``, no call made: what the engine's
    fallback is made of when the endpoint never answered (:func:`fallback_record`)."""

    max_concurrency = None
    recommended_profile = None

    def __init__(self, error: str) -> None:
        self.error = error
        self.model_name = "unanswered"

    def read(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        return Reading.failure(self.error, attempts=0)

    async def aread(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        return Reading.failure(self.error, attempts=0)


async def afallback_record(
    panner: Any, question: Question, *, seed: int | None, error: str
) -> dict[str, Any]:
    """The record of ``question`` when its endpoint failed for good: the engine's fallback
    (``on_failure="fallback"``: the prior's order and probabilities, ``panned`` false,
    ``stop_reason`` ``"all-rounds-failed"``) with ``panner``'s profile, options and the
    question's stream, no call counted (``calls`` and ``attempts`` 0). Provisional: a rerun
    asks it again (:func:`~._ledger.is_provisional`)."""
    from ..panning import GoldPanner

    failed = GoldPanner(_Unanswered(error), panner.profile, replace(panner.config, on_failure="fallback"))
    record = await arerank_question(failed, question, seed=seed)
    record.update(calls=0, attempts=0)
    return record


def default_in_flight(reader: Any) -> int:
    """Questions kept in flight by default: twice the reader's ``max_concurrency`` (64
    without a limit), so that its calls never wait for a question to plan its next round."""
    limit = getattr(reader, "max_concurrency", None)
    return 2 * limit if isinstance(limit, int) and limit >= 1 else 64


async def arerank_stream(
    panner: Any,
    questions: Iterable[Question],
    *,
    seed: int | None,
    in_flight: int,
    on_record: Callable[[Question, dict[str, Any]], None],
    skip: Callable[[Question], bool] | None = None,
    rerank: Callable[[Question], Awaitable[dict[str, Any]]] | None = None,
) -> int:
    """Rerank ``questions`` with at most ``in_flight`` of them at once (their calls share
    the reader's limits), handing each record to ``on_record`` as it finishes (in the
    order they finish). ``skip(question)`` True leaves a question out (already done);
    ``rerank(question)`` makes a question's record (default :func:`arerank_question`).

    The questions are read lazily: at most ``in_flight`` are held. When a question raises,
    no new one starts; the others in flight finish (their records are handed over), then
    the first error is raised.

    Returns:
        The number of questions reranked (not skipped).
    """
    if in_flight < 1:
        raise ValueError(f"questions in flight must be >= 1, got {in_flight!r}")
    source = iter(questions)
    pending: set[asyncio.Task[tuple[Question, dict[str, Any]]]] = set()
    error: BaseException | None = None
    exhausted = False
    done_count = 0

    async def one(q: Question) -> tuple[Question, dict[str, Any]]:
        if rerank is not None:
            return q, await rerank(q)
        return q, await arerank_question(panner, q, seed=seed)

    try:
        while True:
            while error is None and not exhausted and len(pending) < in_flight:
                q = next(source, None)
                if q is None:
                    exhausted = True
                elif skip is None or not skip(q):
                    pending.add(asyncio.ensure_future(one(q)))
            if not pending:
                break
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                exc = task.exception()
                if exc is not None:
                    if error is None:
                        logger.warning(
                            "a question failed (%s: %s); finishing the questions in flight",
                            type(exc).__name__,
                            exc,
                        )
                        error = exc
                    continue
                q, record = task.result()
                on_record(q, record)
                done_count += 1
    finally:
        for task in pending:
            task.cancel()
    if error is not None:
        raise error
    return done_count
