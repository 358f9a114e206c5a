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
    """Run ``fn(*args)`` in a new daemon thread; its future. Not a ThreadPoolExecutor,
    whose workers Python joins at exit: after Ctrl-C a running call would hold the
    process for its whole deadline. Readers bound their own calls in flight."""
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
    """Cancel the futures not started and wait for the running ones, so no call outlives
    its run; after an interrupt, running calls are left to end on their own."""
    for f in futures:
        f.cancel()
    if not isinstance(err, KeyboardInterrupt):
        wait(futures)


async def gather_all(coros: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that, when one raises or the caller is cancelled, cancels and
    awaits the others before the error propagates."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
