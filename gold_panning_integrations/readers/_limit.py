"""The limits a reader holds, shared by every query through it (threads and event loops
alike): :class:`CallLimit`, calls in flight, first come first served, a slot held for one
attempt only (a reader waiting out a Retry-After holds none; a cancelled waiter never
leaks one); :class:`RateLimit`, requests and tokens per minute over a sliding window,
held where the provider counts them (a request occupies the window until it completes).
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from .._steps import Steps, arun_steps, run_steps
from ._prompt import check_optional_int

__all__ = ["CallLimit", "RateLimit", "check_max_concurrency", "check_per_minute"]


def check_max_concurrency(value: object) -> int | None:
    """Validate a ``max_concurrency`` option: None (no limit) or an int >= 1."""
    return check_optional_int(
        value,
        1,
        "max_concurrency must be an int >= 1 (calls in flight through this reader) or None (no limit)",
    )


@dataclass(eq=False, slots=True)
class _Waiter:
    """One caller waiting for a slot: a thread (an Event) or a task (a future on its loop)."""

    event: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    granted: bool = False
    gone: bool = False

    def wait(self) -> Any:
        """Block until granted (a thread), or the future to await (a task)."""
        if self.future is not None:
            return self.future
        assert self.event is not None
        return self.event.wait()

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


class CallLimit:
    """At most ``limit`` calls in flight (None: no limit), for threads and tasks alike:
    ``with limit.slot():`` around a blocking call, ``async with limit.aslot():`` around
    an awaited one. ``in_flight`` counts the calls holding a slot now, ``peak`` the most
    that held one at once."""

    def __init__(self, limit: int | None) -> None:
        self.limit = check_max_concurrency(limit)
        self.in_flight = self.peak = 0
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    def _take(self) -> bool:
        """Take a free slot if there is one and nobody is queued (lock held)."""
        if self.limit is None or (self.in_flight < self.limit and not self._waiters):
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return True
        return False

    def release(self) -> None:
        """Give a slot back: to the first waiter that can take it, else free it."""
        with self._lock:
            while self._waiters:
                if self._waiters.popleft().grant():
                    return  # the slot passes on; in_flight is unchanged
            self.in_flight -= 1

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter gives up: it leaves the queue, or passes on a slot granted meanwhile."""
        with self._lock:
            waiter.gone = True
            granted = waiter.granted
        if granted:
            self.release()

    def acquiring(self, asynchronous: bool) -> Steps[None]:
        """Take a slot, or queue and wait for one (:mod:`.._steps`: an event on the sync
        path, a future on the async one); an interrupted or cancelled waiter leaves the
        queue (or passes on a slot granted meanwhile)."""
        with self._lock:
            waiter = None
            if not self._take():
                if asynchronous:
                    loop = asyncio.get_running_loop()
                    waiter = _Waiter(future=loop.create_future(), loop=loop)
                else:
                    waiter = _Waiter(event=threading.Event())
                self._waiters.append(waiter)
        if waiter is None:
            return
        try:
            yield waiter.wait
        except BaseException:  # interrupted (Ctrl-C) or cancelled while queued
            self._abandon(waiter)
            raise

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for the body (blocks this thread while none is free)."""
        run_steps(self.acquiring(asynchronous=False))
        try:
            yield
        finally:
            self.release()

    @asynccontextmanager
    async def aslot(self) -> AsyncIterator[None]:
        """Hold a slot for the body (awaits while none is free; cancellation-safe)."""
        await arun_steps(self.acquiring(asynchronous=True))
        try:
            yield
        finally:
            self.release()


# ------------------------------------------------------------------------- rate limits
def check_per_minute(name: str, value: object) -> int | None:
    """Validate a ``requests_per_minute``/``tokens_per_minute`` option: None (no
    limit) or an int >= 1."""
    return check_optional_int(
        value, 1, f"{name} must be an int >= 1 (per minute, shared by every query) or None"
    )


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
    and ``asleep`` (for :meth:`aacquire`) are injectable, so tests never wait.
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
        self.waited = 0.0
        """Seconds callers spent waiting for this limit, summed (threads and tasks)."""
        self._lock = threading.Lock()
        self._sent: list[_Sent] = []

    @property
    def active(self) -> bool:
        """True when a limit is set (otherwise :meth:`acquire` returns at once)."""
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

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
        """Block until a request of ``tokens`` (estimated) may be sent; the returned
        entry goes to :meth:`settle` once the request completes (None when no limit is set)."""
        return run_steps(self._acquiring(tokens, asynchronous=False))

    async def aacquire(self, tokens: int = 0) -> _Sent | None:
        """Asynchronous :meth:`acquire` (awaits instead of blocking the event loop)."""
        return await arun_steps(self._acquiring(tokens, asynchronous=True))

    def _acquiring(self, tokens: int, asynchronous: bool) -> Steps[_Sent | None]:
        """Admit the request, sleeping (``sleep``, or awaiting ``asleep``) until it may go."""
        while True:
            wait, entry = self.try_acquire(tokens)
            if wait <= 0:
                return entry
            yield functools.partial(self.asleep if asynchronous else self.sleep, wait)

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
