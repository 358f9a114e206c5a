"""What a reader returns for one prompt (:class:`Reading`), the reader protocol the
panner calls, and the query a reading belongs to (:func:`query_scope`). Readers do all
I/O; the engine never does."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import FatalReaderError

__all__ = ["Query", "Reader", "Reading", "current_query", "query_scope", "reader_failure"]

T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """The outcome of asking the model about one prompt.

    Attributes:
        cited: 0-based positions (indices into the documents as shown) that the model
            cited: in range, unique, sorted.
        failed: True when no usable answer was obtained (after retries); beliefs are
            left unchanged.
        error: Why the reading failed (or a warning).
        answer: The model's free-text answer, if any.
        raw: The raw model output (possibly truncated).
        invalid_labels: Labels dropped as unknown (counted, never mapped to another document).
        duplicate_labels: Labels dropped because they repeated an earlier one.
        attempts: Model calls made for this reading, retries included.
        prompt_tokens, completion_tokens: Tokens the provider reported (None: not reported).
        extra: Free-form reader-specific diagnostics.
        documents_cut: Documents of the prompt cut to fit the model's context.
        chars_cut: Characters those cuts removed from the documents' text, summed.
        labels: The labels the documents were shown under, shape ``(m,)``, when not the
            panner's (a reader that takes no labels shows ``1..m``); None: the panner's.
        cached: True: a reply-cache hit (no model call, ``attempts`` 0); False: a miss
            (the reply was stored); None: the reader has no cache.
        abstain_p: The probability the model gave, at its first token, to starting the way
            out ("unknown", answer mode) when the endpoint returns it; None otherwise. The
            engine reads it through the profile's ``abstention_map``.
    """

    cited: tuple[int, ...] = ()
    failed: bool = False
    error: str | None = None
    answer: str | None = None
    raw: str | None = None
    invalid_labels: int = 0
    duplicate_labels: int = 0
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    labels: tuple[int, ...] | None = None
    cached: bool | None = None
    documents_cut: int = 0
    chars_cut: int = 0
    abstain_p: float | None = None

    @classmethod
    def failure(cls, error: str, *, attempts: int = 1, raw: str | None = None) -> Reading:
        """A failed reading: no citations, beliefs will be left unchanged."""
        return cls(cited=(), failed=True, error=error, attempts=attempts, raw=raw)


@runtime_checkable
class Reader(Protocol):
    """The one reader protocol the panner calls.

    * ``read(question, documents, *, labels) -> Reading`` (for ``GoldPanner.run``) and/or
      ``async aread(...)`` (for ``arun``): ``documents`` in prompt order, ``labels[i]``
      (distinct positive ints, drawn at random: :func:`~.labels.label_range`) names
      ``documents[i]``; ``Reading.cited`` holds 0-based *positions*. Return
      ``Reading.failure(...)`` for model-side problems; any other exception becomes a
      failed reading, except :class:`~gold_panning_integrations.errors.FatalReaderError`,
      which ends the run.
    * ``model_name``: the model's name, as recorded in profiles and traces.
    * ``recommended_profile``: the profile measured for this model (a bundled name, a path
      or a ``DetectorProfile``) or None, used when the user names none.
    * ``max_concurrency``: the most calls in flight (None: no limit; 1: one at a time).

    :func:`gold_panning_integrations.readers.as_reader` adapts a user's reader: the
    attributes default to the class name, None and 1, and a ``read``/``aread`` without
    ``labels`` is wrapped to show ``1..m``.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def recommended_profile(self) -> Any: ...

    @property
    def max_concurrency(self) -> int | None: ...

    def read(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt and return the validated citations."""
        ...

    async def aread(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt asynchronously and return the validated citations."""
        ...


def reader_failure(
    err: Exception, log: logging.Logger, what: str = "", *, level: int = logging.WARNING
) -> Reading:
    """The failed :class:`Reading` for an exception a reader raised (logged on ``log`` at
    ``level`` with its traceback, prefixed ``what``); a
    :class:`~gold_panning_integrations.errors.FatalReaderError` is raised again instead."""
    if isinstance(err, FatalReaderError):
        raise err
    log.log(level, "%sreader raised %s: %s", what, type(err).__name__, err, exc_info=err)
    return Reading.failure(f"{type(err).__name__}: {err}")


# ------------------------------------------------------------------------------ the query
@dataclass(eq=False)
class Query:
    """One query's run through the panner (every round and prompt of it), where a reader
    keeps what it holds per query, e.g. its deadline (:meth:`state`)."""

    _state: dict[Any, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def state(self, key: Any, make: Callable[[], T]) -> T:
        """The value kept under ``key`` for this query, made by ``make()`` on first use
        (threads and tasks of the query share it)."""
        with self._lock:
            if key not in self._state:
                self._state[key] = make()
            return self._state[key]  # type: ignore[no-any-return]


_QUERY: contextvars.ContextVar[Query | None] = contextvars.ContextVar("gp_query", default=None)


@contextlib.contextmanager
def query_scope() -> Iterator[Query]:
    """The panner runs one query inside this block; readings made in it (in this thread,
    the threads the panner starts with the context copied, and the tasks of an event
    loop) see the same :class:`Query` through :func:`current_query`."""
    query = Query()
    token = _QUERY.set(query)
    try:
        yield query
    finally:
        _QUERY.reset(token)


def current_query() -> Query | None:
    """The query being run (:func:`query_scope`), or None outside one (a reader called
    directly: each reading is then its own query)."""
    return _QUERY.get()
