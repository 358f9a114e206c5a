"""A limit on model calls in flight, shared by threads and event loops.

One :class:`CallLimit` belongs to one reader, so every query that goes through that
reader (``retriever.batch`` over hundreds of questions, ``asyncio.gather`` of many
``ainvoke`` calls, the parallel prompts of one round) shares it: at most ``limit``
requests are open at once, whatever mix of threads and event loops sends them. Waiters
are served first come, first served. A slot is held for one attempt only: a reader
waiting out a Retry-After holds none.

A cancelled async waiter leaves the queue (or hands back a slot it was granted while
being cancelled), so cancellation never leaks a slot.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

__all__ = ["CallLimit", "check_max_concurrency"]


def check_max_concurrency(value: object) -> int | None:
    """Validate a ``max_concurrency`` option: None (no limit) or an int >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"max_concurrency must be an int >= 1 (calls in flight through this reader) or None "
            f"(no limit), got {value!r}"
        )
    return value


class _Waiter:
    """One caller waiting for a slot: a thread (an Event) or a task (a future on its loop)."""

    __slots__ = ("event", "future", "gone", "granted", "loop")

    def __init__(
        self,
        *,
        event: threading.Event | None = None,
        future: asyncio.Future[None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.event = event
        self.future = future
        self.loop = loop
        self.granted = False
        self.gone = False

    def grant(self) -> bool:
        """Hand this waiter a slot (called with the limit's lock held); False when it
        can no longer take one (cancelled, or its event loop is closed)."""
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
    """At most ``limit`` calls in flight (None: no limit), for threads and tasks alike.

    Use ``with limit.slot(): ...`` around a blocking call and ``async with
    limit.aslot(): ...`` around an awaited one.

    Attributes:
        limit: The most calls in flight, or None.
        in_flight: Calls holding a slot now.
        peak: The most calls that held a slot at once since creation.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = check_max_concurrency(limit)
        self.in_flight = 0
        self.peak = 0
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

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for the body (blocks this thread while none is free)."""
        with self._lock:
            waiter = None if self._take() else _Waiter(event=threading.Event())
            if waiter is not None:
                self._waiters.append(waiter)
        if waiter is not None:
            assert waiter.event is not None
            try:
                waiter.event.wait()
            except BaseException:  # interrupted (Ctrl-C) while queued
                self._abandon(waiter)
                raise
        try:
            yield
        finally:
            self.release()

    @asynccontextmanager
    async def aslot(self) -> AsyncIterator[None]:
        """Hold a slot for the body (awaits while none is free; cancellation-safe)."""
        with self._lock:
            waiter = None
            if not self._take():
                loop = asyncio.get_running_loop()
                waiter = _Waiter(future=loop.create_future(), loop=loop)
                self._waiters.append(waiter)
        if waiter is not None:
            assert waiter.future is not None
            try:
                await waiter.future
            except BaseException:  # cancelled while queued
                self._abandon(waiter)
                raise
        try:
            yield
        finally:
            self.release()
