"""Concurrency helpers of the panner: a round's prompts in daemon threads (sync path) or
gathered tasks (async path), never leaving a call behind the run that made it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future, wait
from typing import Any, TypeVar

__all__ = ["gather_all", "in_daemon_thread", "settle"]

T = TypeVar("T")


def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` in a new daemon thread; its future. Not a ThreadPoolExecutor:
    Python joins those workers at exit, so after Ctrl-C or SIGTERM one model call still
    running would hold the process for its whole deadline. Each reader bounds its own
    calls in flight (``max_concurrency``), so a thread per prompt is all that is needed."""
    future: Future[Any] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(err)

    threading.Thread(target=work, daemon=True, name="gold-panning-prompt").start()
    return future


def settle(futures: Sequence[Future[Any]], err: BaseException) -> None:
    """Cancel the futures not started yet and wait for the running ones (each reader call
    has its own deadline), so no call outlives the run that made it; but an interrupt
    (Ctrl-C, SIGTERM) is not held up by a slow model: running calls end on their own."""
    for f in futures:
        f.cancel()
    if not isinstance(err, KeyboardInterrupt):
        wait(futures)


async def gather_all(coros: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that leaves no task behind: when one prompt raises (a fatal
    reader error) or the caller is cancelled, the others are cancelled and awaited
    before the error propagates."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
