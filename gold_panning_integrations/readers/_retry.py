"""The retry policy every reader shares: attempt, retry with tenacity, finish.

One reading is one or more *attempts*; an attempt returns a :class:`Reading` or raises,
and :func:`~._errors.classify_error` says what the exception is: retried (transient,
malformed output), a failed reading (any other ``ReaderError``), or raised (fatal, a
missing extra). The wait and the sleep are injectable, so tests never sleep; the
default wait, :class:`wait_retry_after`, honours Retry-After, else backs off. With a
:class:`~._deadline.Deadline`, no attempt starts and no wait is slept past it. Each retry
is logged at DEBUG: a query's failures are summed up once, by the panner.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tenacity import (
    DoAttempt,
    DoSleep,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
    wait_fixed,
)
from tenacity.stop import stop_base

from .._steps import Steps, arun_steps, run_steps
from ..engine.reading import Reading
from ..errors import FatalReaderError, MissingExtraError, ReaderError
from ._deadline import Deadline, QueryDeadlineError
from ._errors import Usage, classify_error, is_retryable

__all__ = [
    "MAX_RETRY_AFTER",
    "RetryPolicy",
    "Wait",
    "call_with_retries",
    "check_max_attempts",
    "make_wait",
    "retry_after",
    "retry_steps",
    "wait_retry_after",
    "with_retries",
]

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER = 120.0
"""Longest Retry-After (seconds) the default wait honours; longer values are capped."""

Wait = Callable[[RetryCallState], float]
"""A tenacity wait strategy, or any callable ``(retry_state) -> seconds``."""


# ----------------------------------------------------------------------------- waiting
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


def check_max_attempts(max_attempts: int) -> int:
    """Validate ``max_attempts`` (an integer >= 1)."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    return max_attempts


# ----------------------------------------------------------------------------- running
@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, how long to wait between them, how to sleep.

    ``max_attempts`` and ``wait`` are the reader options of those names; ``sleep`` (sync
    or awaitable; None: ``time.sleep`` / ``asyncio.sleep``) is injected by tests.
    """

    max_attempts: int = 3
    wait: Wait | float | None = None
    sleep: Callable[[float], Any] | None = None

    def __post_init__(self) -> None:
        check_max_attempts(self.max_attempts)
        make_wait(self.wait)


class stop_at_deadline(stop_base):
    """A tenacity stop: when the wait before the next attempt would reach ``deadline``."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.deadline.left() - (retry_state.upcoming_sleep or 0.0) <= 0


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.debug("%s: attempt %d failed (%s); retrying in %.2f s", what, state.attempt_number, exc, wait)

    return before_sleep


class _Run:
    """The bookkeeping of one reading: attempts, tokens, classification, the result."""

    def __init__(self, policy: RetryPolicy, what: str, deadline: Deadline | None = None) -> None:
        self.policy = policy
        self.what = what
        self.deadline = deadline
        self.usage = Usage()
        self.count = 0

    def check_deadline(self) -> None:
        """Raise QueryDeadlineError, before an attempt, when the deadline has passed."""
        if self.deadline is not None and self.deadline.passed:
            raise QueryDeadlineError(
                f"the query's deadline passed (no reply within timeout={self.deadline.seconds:g} s), "
                "so this prompt was not sent; raise timeout= for a slower endpoint"
            )

    def options(self, default_sleep: Callable[[float], Any]) -> dict[str, Any]:
        stop = stop_after_attempt(self.policy.max_attempts)
        return {
            "stop": stop if self.deadline is None else stop | stop_at_deadline(self.deadline),
            "wait": make_wait(self.policy.wait),
            "retry": retry_if_exception(is_retryable),
            "sleep": self.policy.sleep or default_sleep,
            "reraise": True,
            "before_sleep": _log_retry(self.what),
        }

    def classified(self, err: Exception) -> BaseException:
        """What to raise instead of ``err`` (carrying its raw output)."""
        if isinstance(err, (ReaderError, MissingExtraError)):
            return err
        new = classify_error(err)
        raw = getattr(err, "raw", None)
        if raw is not None:
            new.raw = raw  # type: ignore[attr-defined]
        return new

    def finish(self, reading: Reading) -> Reading:
        u = self.usage
        prompt = reading.prompt_tokens if u.prompt_tokens is None else u.prompt_tokens
        completion = reading.completion_tokens if u.completion_tokens is None else u.completion_tokens
        return replace(
            reading, attempts=max(self.count, u.calls), prompt_tokens=prompt, completion_tokens=completion
        )

    def failed(self, err: ReaderError) -> Reading:
        retryable = is_retryable(err)
        n = max(self.count, self.usage.calls)
        gave_up = f"gave up after {n} attempt{'s' if n != 1 else ''}: " if retryable else ""
        late = ""
        if retryable and self.deadline is not None and self.deadline.passed:
            late = (
                f" (no reply within timeout={self.deadline.seconds:g} s, the query's deadline: "
                "no retry, and the query's later prompts are not sent)"
            )
        return Reading(
            cited=(),
            failed=True,
            error=f"{self.what}: {gave_up}{err}{late}",
            raw=getattr(err, "raw", None),
            attempts=n,
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            extra={"error_type": type(err).__name__, "retryable": retryable},
        )

    def fatal(self, err: FatalReaderError) -> FatalReaderError:
        return FatalReaderError(f"{self.what}: {err}", status_code=err.status_code)


def retry_steps(
    attempt: Callable[[Usage], Steps[Reading]],
    *,
    policy: RetryPolicy,
    what: str = "reader",
    deadline: Deadline | None = None,
    asynchronous: bool = False,
) -> Steps[Reading]:
    """Attempts under the retry policy, as a core of :mod:`.._steps`: each attempt's own
    steps run inline (``attempt(usage)``, one model call plus parsing, adding calls and
    tokens to ``usage`` and raising on failure) and each wait between attempts is a
    yielded sleep, so one driver runs the whole reading (tenacity decides: stop, wait,
    retry). ``what`` names the reader in messages; ``deadline`` (None: none) is the
    query's: no attempt starts, and no retry wait is slept, past it. Returns the reading
    with ``attempts`` and the summed tokens filled in, or a failed reading; a
    FatalReaderError (prefixed with ``what``) or MissingExtraError is raised."""
    run = _Run(policy, what, deadline)
    retrying = Retrying(**run.options(time.sleep))
    sleep = policy.sleep or (asyncio.sleep if asynchronous else time.sleep)
    retrying.begin()
    state = RetryCallState(retry_object=retrying, fn=None, args=(), kwargs={})
    try:
        while True:
            do = retrying.iter(retry_state=state)
            if isinstance(do, DoAttempt):
                try:
                    run.check_deadline()
                    run.count += 1
                    try:
                        reading = yield from attempt(run.usage)
                    except Exception as err:  # classify everything a model call may raise
                        raise run.classified(err) from err
                except Exception:  # noqa: BLE001 - tenacity decides: retry, or raise it below
                    state.set_exception(sys.exc_info())  # type: ignore[arg-type]
                else:
                    state.set_result(reading)
            elif isinstance(do, DoSleep):
                state.prepare_for_next_attempt()
                yield functools.partial(sleep, float(do))
            else:
                return run.finish(do)
    except FatalReaderError as err:
        raise run.fatal(err) from err
    except ReaderError as err:
        return run.failed(err)


def _called(attempt: Callable[[Usage], Any], usage: Usage) -> Steps[Reading]:
    """One attempt made by calling ``attempt(usage)`` (awaited on the async path)."""
    reading: Reading = yield functools.partial(attempt, usage)
    return reading


def with_retries(
    attempt: Callable[[Usage], Reading] | Callable[[Usage], Awaitable[Reading]],
    *,
    policy: RetryPolicy,
    what: str = "reader",
    deadline: Deadline | None = None,
) -> Any:
    """:func:`retry_steps` for an ``attempt`` callable, ``(usage) -> Reading``: a
    coroutine function ``attempt`` gives an awaitable, a plain one the reading."""
    asynchronous = inspect.iscoroutinefunction(attempt)
    steps = retry_steps(
        functools.partial(_called, attempt),
        policy=policy,
        what=what,
        deadline=deadline,
        asynchronous=asynchronous,
    )
    return arun_steps(steps) if asynchronous else run_steps(steps)


def call_with_retries(
    attempt: Callable[[Usage], Reading],
    *,
    max_attempts: int = 3,
    wait: Wait | float | None = None,
    sleep: Callable[[float], None] | None = None,
    what: str = "reader",
) -> Reading:
    """:func:`with_retries` for a synchronous ``attempt`` with the policy spelled out."""
    return with_retries(attempt, policy=RetryPolicy(max_attempts, wait, sleep), what=what)  # type: ignore[no-any-return]
