"""One core, two drivers: an operation written once, for the sync and the async path.

The core is a generator that yields each call it needs as a zero-argument callable and
receives the call's result (or its exception, thrown in at the ``yield``, so ``with``
blocks and ``except`` clauses in the core see it); it returns the operation's result.
:func:`run_steps` makes each call in this thread; :func:`arun_steps` makes it too and
awaits the result when it is awaitable. The core picks the sync or async callee (e.g.
``reader.read`` or ``reader.aread``); what happens around the calls is written once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from typing import Any, TypeVar, cast

__all__ = ["Steps", "arun_steps", "run_steps"]

T = TypeVar("T")

Steps = Generator[Callable[[], Any], Any, T]
"""A core: yields calls, receives their results, returns the operation's result."""


def run_steps(steps: Steps[T]) -> T:
    """Drive ``steps`` synchronously: each yielded call is made here, in order (the
    driver below, which then never suspends, run to its end in one step)."""
    driver = _drive(steps, awaiting=False)
    try:
        driver.send(None)
    except StopIteration as stop:
        return cast(T, stop.value)
    driver.close()
    raise RuntimeError("the synchronous driver suspended")  # unreachable: it awaits nothing


async def arun_steps(steps: Steps[T]) -> T:
    """Drive ``steps`` on the running event loop: each yielded call is made and, when it
    returns an awaitable, awaited."""
    return await _drive(steps, awaiting=True)


async def _drive(steps: Steps[T], *, awaiting: bool) -> T:
    try:
        call = next(steps)
        while True:
            try:
                value = call()
                if awaiting and inspect.isawaitable(value):
                    value = await value
            except BaseException as err:  # noqa: BLE001 - handed to the core, which decides
                call = steps.throw(err)
            else:
                call = steps.send(value)
    except StopIteration as stop:
        return cast(T, stop.value)
