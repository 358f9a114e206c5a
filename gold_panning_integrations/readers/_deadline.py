"""One deadline per query: how long a reader's endpoint may keep a query waiting.

A reader with a ``timeout`` (:class:`~.openai.OpenAIReader`) gives each query one
:class:`Deadline` of ``timeout`` seconds, shared by every round, prompt and attempt of
the query (:func:`~gold_panning_integrations.engine.reading.current_query`; a reader
called outside the panner makes each reading its own query). Each attempt gets what is
left of it (at most ``timeout``); no retry starts, and no retry wait is slept, once it has
passed; a prompt of a later round is then not sent at all. A reply from the endpoint moves
the deadline to ``timeout`` after it, so a slow endpoint that answers within ``timeout``
keeps a long query going; time spent queued behind the reader's own limits (calls in
flight, requests per minute) is not the endpoint's and does not count. An endpoint that
never answers thus costs a query about ``timeout`` seconds, not rounds x attempts x
``timeout``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator

from ..errors import ReaderError

__all__ = ["Deadline", "QueryDeadlineError", "attempting", "current_deadline"]


class QueryDeadlineError(ReaderError):
    """The query's deadline passed before this prompt was sent (not retried)."""


class Deadline:
    """``seconds`` without a reply that one query may spend on a reader's endpoint.

    The clock starts at the first :meth:`left` (the query's first request, once the client
    is ready: building it, e.g. importing the SDK, is not the endpoint's time); :meth:`replied`
    moves the end to ``seconds`` after now, :meth:`queued` past the time a caller spent
    in the reader's own queue. ``clock`` (monotonic seconds) is injectable. Thread-safe.
    """

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < seconds < float("inf"):
            raise ValueError(f"a deadline needs seconds > 0, got {seconds!r}")
        self.seconds = float(seconds)
        self.clock = clock
        self._end: float | None = None
        self._lock = threading.Lock()

    def left(self) -> float:
        """Seconds left before the deadline (<= 0: passed); the first call starts it."""
        with self._lock:
            now = self.clock()
            if self._end is None:
                self._end = now + self.seconds
            return self._end - now

    def remaining(self) -> float | None:
        """Seconds left, or None before the clock started (this does not start it)."""
        with self._lock:
            return None if self._end is None else self._end - self.clock()

    @property
    def passed(self) -> bool:
        """True once the deadline has passed (False before it started)."""
        with self._lock:
            return self._end is not None and self._end <= self.clock()

    def replied(self) -> None:
        """The endpoint answered now: the query may wait ``seconds`` more."""
        with self._lock:
            end = self.clock() + self.seconds
            self._end = end if self._end is None else max(self._end, end)

    def queued(self, left_before: float) -> None:
        """A caller that had ``left_before`` seconds when it queued behind the reader's
        own limits got through now: the wait was not the endpoint's, so it has them still."""
        with self._lock:
            end = self.clock() + left_before
            self._end = end if self._end is None else max(self._end, end)


_READING: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "gp_reading_deadline", default=None
)


def current_deadline() -> Deadline | None:
    """The deadline of the reading being attempted in this context (None: none)."""
    return _READING.get()


@contextlib.contextmanager
def attempting(deadline: Deadline | None) -> Iterator[None]:
    """Inside this block (a function's, or a coroutine's across its awaits)
    :func:`current_deadline` is ``deadline``: the calls of one reading's attempt."""
    token = _READING.set(deadline)
    try:
        yield
    finally:
        _READING.reset(token)
