"""Limits and deadlines: how long and how often a reader may keep its endpoint busy.

* **The retry policy**: ``max_attempts`` attempts and the ``wait`` between them
  (:func:`make_wait`; by default :class:`wait_retry_after`: the server's Retry-After, else
  backoff), run by the reader base on tenacity's ``Retrying``/``AsyncRetrying``, with
  :class:`stop_at_deadline` ending the retries at the query's deadline.
* **The query's deadline** (:class:`Deadline`, :func:`query_deadline`): ``timeout``
  seconds without a reply for a whole query, shared by its rounds, prompts and attempts;
  a reply moves it, time queued behind the reader's own limits does not count (the
  ``timeout`` option's doc in :mod:`._options` says what a user sees).
* **The rate limit** (:class:`RateLimit`): requests and tokens per minute over a sliding
  window, held where the provider counts them, shared by every query, threads and event
  loops alike.
* **Waiting for a slot** (:class:`Waiter`) of the reader's limit on calls in flight
  (:class:`~._reader_base.CallLimit`, which every reading takes, beside the reading).

Every wait is injectable (a retry's ``sleep``, the rate limit's), so tests never sleep.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import RetryCallState, wait_exponential_jitter, wait_fixed
from tenacity.stop import stop_base

from ..engine.records import current_query
from ..errors import ReaderError

__all__ = [
    "MAX_RETRY_AFTER",
    "Deadline",
    "QueryDeadlineError",
    "RateLimit",
    "Wait",
    "Waiter",
    "check_max_attempts",
    "check_max_concurrency",
    "check_optional_int",
    "check_per_minute",
    "make_wait",
    "query_deadline",
    "retry_after",
    "stop_at_deadline",
    "wait_retry_after",
]


# ------------------------------------------------------------------------------ checks
def check_optional_int(value: Any, minimum: int, rule: str) -> int | None:
    """``value`` when it is None or an int >= ``minimum``, else ``ValueError(f"{rule}, got
    {value!r}")``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        raise ValueError(f"{rule}, got {value!r}")
    return value


def check_max_attempts(max_attempts: int) -> int:
    """Validate ``max_attempts`` (an integer >= 1)."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    return max_attempts


def check_max_concurrency(value: object) -> int | None:
    """Validate a ``max_concurrency`` option: None (no limit) or an int >= 1."""
    return check_optional_int(
        value,
        1,
        "max_concurrency must be an int >= 1 (calls in flight through this reader) or None (no limit)",
    )


def check_per_minute(name: str, value: object) -> int | None:
    """Validate a ``requests_per_minute``/``tokens_per_minute`` option: None (no
    limit) or an int >= 1."""
    return check_optional_int(
        value, 1, f"{name} must be an int >= 1 (per minute, shared by every query) or None"
    )


# ---------------------------------------------------------------------- the retry policy
MAX_RETRY_AFTER = 120.0
"""Longest Retry-After (seconds) the default wait honours; longer values are capped."""

Wait = Callable[[RetryCallState], float]
"""A tenacity wait strategy, or any callable ``(retry_state) -> seconds``."""


def retry_after(retry_state: RetryCallState) -> float | None:
    """The Retry-After (seconds) of the exception that ended the last attempt, if any."""
    outcome = retry_state.outcome
    if outcome is None or not outcome.failed:
        return None
    value = getattr(outcome.exception(), "retry_after", None)
    return float(value) if value is not None else None


@dataclass(frozen=True)
class wait_retry_after:
    """Wait the server's Retry-After when it gave one, else ``fallback``.

    Args:
        fallback: Wait without a Retry-After; default exponential backoff with jitter
            (0.5 s, 1 s, 2 s, ... up to 20 s).
        max_wait: Cap on an honoured Retry-After, in seconds.
    """

    fallback: Wait = field(
        default_factory=lambda: wait_exponential_jitter(multiplier=0.5, max=20.0, jitter=0.5)
    )
    max_wait: float = MAX_RETRY_AFTER

    def __call__(self, retry_state: RetryCallState) -> float:
        ra = retry_after(retry_state)
        if ra is not None:
            return min(max(ra, 0.0), self.max_wait)
        return float(self.fallback(retry_state))


def make_wait(wait: Wait | float | None) -> Wait:
    """Normalise a ``wait=`` option: None -> :class:`wait_retry_after`, a number ->
    fixed seconds, a callable (tenacity strategy or ``(retry_state) -> seconds``) as is."""
    if wait is None:
        return wait_retry_after()
    if isinstance(wait, (int, float)) and not isinstance(wait, bool):
        if wait < 0 or not math.isfinite(wait):
            raise ValueError(f"wait must be a non-negative number of seconds, got {wait!r}")
        return wait_fixed(float(wait))
    if callable(wait):
        return wait
    raise TypeError(
        f"wait must be None, seconds, a tenacity wait strategy or a callable (retry_state) -> seconds; "
        f"got {type(wait).__name__}"
    )


class stop_at_deadline(stop_base):
    """A tenacity stop: True when the wait before the next attempt would reach ``deadline``."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.deadline.left() - (retry_state.upcoming_sleep or 0.0) <= 0


# ---------------------------------------------------------------------- the query's deadline
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

    def check(self) -> None:
        """Raise :class:`QueryDeadlineError` once the deadline has passed (before an
        attempt: no prompt is sent past it)."""
        if self.passed:
            raise QueryDeadlineError(
                f"the query's deadline passed (no reply within timeout={self.seconds:g} s), "
                "so this prompt was not sent; raise timeout= for a slower endpoint"
            )

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


def query_deadline(owner: object, seconds: float) -> Deadline:
    """``owner``'s (a reader's) :class:`Deadline` of ``seconds`` in the current query: one
    per query, made on first use and shared by its threads and tasks
    (:func:`~gold_panning_integrations.engine.records.current_query`); outside the panner a
    new one each time (each reading is its own query)."""
    query = current_query()
    if query is None:
        return Deadline(seconds)
    return query.state((owner, "deadline"), lambda: Deadline(seconds))


# ------------------------------------------------------------------------- waiting for a slot
@dataclass(eq=False, slots=True)
class Waiter:
    """One caller queued for a slot of a limit on calls in flight (:class:`~._reader_base.CallLimit`):
    a thread (an Event) or a task (a future on its loop)."""

    event: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    granted: bool = False
    gone: bool = False

    def grant(self) -> bool:
        """Hand this waiter a slot (lock held); False when it cannot take one (cancelled, loop closed)."""
        if self.gone:
            return False
        if self.event is not None:
            self.granted = True
            self.event.set()
            return True
        assert self.future is not None and self.loop is not None
        try:
            self.loop.call_soon_threadsafe(_resolve, self.future)
        except RuntimeError:  # the waiter's loop is closed
            return False
        self.granted = True
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# ------------------------------------------------------------------------- rate limits
@dataclass
class _Sent:
    """One admitted request: when it was admitted, the tokens it counts for, and when it
    completed (None: still in flight)."""

    at: float
    tokens: int
    done: float | None = None


class RateLimit:
    """At most ``requests_per_minute`` requests and ``tokens_per_minute`` tokens in any
    window of ``period`` seconds (60) *where the provider counts them*: at the server,
    which sees a request when it arrives, some time after it was admitted here. Shared by
    threads and event loops.

    The rule: a request occupies the window from its admission until it completes
    (response or failure, :meth:`settle`) and for ``period`` seconds after that. A
    request is admitted at ``t`` only while the requests in flight plus those completed
    after ``t - period``, and their tokens, leave room for it (a request whose estimate
    alone exceeds ``tokens_per_minute`` goes when nothing else occupies the window).
    Why that holds at the server, however late requests arrive: take any arrivals in a
    window ``(w, w + period]`` and ``m`` the last of them admitted, at ``t_m``. Every other
    one arrived after ``w >= arrival_m - period >= t_m - period`` and completed after it
    arrived, so it was in flight or completed after ``t_m - period`` when ``m`` was
    admitted: it was counted, and at most ``limit - 1`` were.

    Its tokens count as the caller's estimate until :meth:`settle` replaces them with the
    usage the server reported. Every admitted request must be settled (a reader does so
    in a ``finally``); one left in flight holds its place until it is.

    ``period`` (seconds), ``clock`` (monotonic seconds), ``sleep`` (for :meth:`acquire`)
    and ``asleep`` (for :meth:`aacquire`) are injectable, so tests never wait. ``active``
    (whether a limit is set) is fixed at construction.
    """

    def __init__(
        self,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        period: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        asleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests_per_minute = check_per_minute("requests_per_minute", requests_per_minute)
        self.tokens_per_minute = check_per_minute("tokens_per_minute", tokens_per_minute)
        if isinstance(period, bool) or not isinstance(period, (int, float)) or not 0 < period < math.inf:
            raise ValueError(f"period must be a number of seconds > 0, got {period!r}")
        self.period = float(period)
        self.clock, self.sleep, self.asleep = clock, sleep, asleep
        self.active = self.requests_per_minute is not None or self.tokens_per_minute is not None
        """True when a limit is set (otherwise :meth:`acquire` returns at once)."""
        self.waited = 0.0
        """Seconds callers spent waiting for this limit, summed (threads and tasks)."""
        self._lock = threading.Lock()
        self._sent: list[_Sent] = []

    @property
    def in_flight(self) -> int:
        """Admitted requests not yet settled."""
        with self._lock:
            return sum(e.done is None for e in self._sent)

    def _until(self, live: list[_Sent], enough: Callable[[int, int], bool], now: float) -> float:
        """Seconds until enough of ``live`` have left the window (``enough(count, tokens)``
        of those gone): completed ones leave ``period`` after completing, in that order;
        one in flight leaves no sooner than ``period`` from now, so that is the wait
        (a lower bound: the caller looks again then)."""
        leaving = sorted((math.inf if e.done is None else e.done + self.period, e.tokens) for e in live)
        count = tokens = 0
        for at, n in leaving:
            count, tokens = count + 1, tokens + n
            if enough(count, tokens):
                return (now + self.period if at == math.inf else at) - now
        return self.period  # pragma: no cover - every caller's ``enough`` holds once all left

    def try_acquire(self, tokens: int = 0) -> tuple[float, _Sent | None]:
        """``(0, entry)`` when a request of ``tokens`` may go now (it is admitted: settle
        ``entry`` once it completes), else ``(seconds to wait before asking again, None)``;
        ``(0, None)`` when no limit is set."""
        if not self.active:
            return 0.0, None
        with self._lock:
            now = self.clock()
            self._sent = live = [e for e in self._sent if e.done is None or e.done + self.period > now]
            wait = 0.0
            rpm = self.requests_per_minute
            if rpm is not None and len(live) >= rpm:
                need = len(live) - rpm + 1
                wait = self._until(live, lambda count, _: count >= need, now)
            tpm = self.tokens_per_minute
            own = max(int(tokens), 0)
            excess = sum(e.tokens for e in live) + own - tpm if tpm is not None else 0
            if live and excess > 0:
                # enough tokens leave, or all of them (a request larger than the budget goes alone)
                total = len(live)
                wait = max(wait, self._until(live, lambda count, n: n >= excess or count == total, now))
            if wait > 0:
                self.waited += wait
                return wait, None
            entry = _Sent(now, own)
            live.append(entry)
            return 0.0, entry

    def acquire(self, tokens: int = 0) -> _Sent | None:
        """Block (``sleep``) until a request of ``tokens`` (estimated) may be sent; the
        returned entry goes to :meth:`settle` once the request completes (None when no
        limit is set)."""
        while True:
            wait, entry = self.try_acquire(tokens)
            if wait <= 0:
                return entry
            self.sleep(wait)

    async def aacquire(self, tokens: int = 0) -> _Sent | None:
        """Asynchronous :meth:`acquire`: awaits ``asleep`` instead of blocking the event loop."""
        while True:
            wait, entry = self.try_acquire(tokens)
            if wait <= 0:
                return entry
            await self.asleep(wait)

    def settle(self, entry: _Sent | None, tokens: int | None) -> None:
        """The admitted request completed (a response or a failure) now: it occupies the
        window for ``period`` more seconds, counting ``tokens`` (reported by the server)
        instead of its estimate; None (nothing reported) keeps the estimate."""
        if entry is None:
            return
        with self._lock:
            if entry.done is None:
                entry.done = self.clock()
            if tokens is not None:
                entry.tokens = max(int(tokens), 0)
