"""The one reader base and the machinery of its calls: options, prompts and
``read``/``aread``, written once.

A reader built on :class:`BaseReader` supplies only its call (:meth:`BaseReader._call`,
:meth:`BaseReader._acall` when it has a native async path, :meth:`BaseReader._call_structured`
when the model has structured output) and its conversion (:meth:`BaseReader._messages`
and a :class:`Reply`). Everything else is here or in :mod:`._prompt`: option checks,
sanitising, labels, fitting the context (:func:`._prompt.fit_documents`), retries
(:func:`retry_steps`) within the query's deadline (:class:`Deadline`), the
structured-to-text fallback, replies read into a
:class:`~gold_panning_integrations.engine.records.Reading` in cite or answer mode, the
shared limits (:class:`CallLimit`, :class:`RateLimit`) and the reply cache (:mod:`._cache`).

**One core, two drivers**: an operation written once, for the sync and the async path.
The core is a generator that yields each call it needs as a zero-argument callable and
receives the call's result (or its exception, thrown in at the ``yield``, so ``with``
blocks and ``except`` clauses in the core see it); it returns the operation's result.
:func:`run_steps` makes each call in this thread; :func:`arun_steps` makes it too and
awaits the result when it is awaitable. The core picks the sync or async callee (e.g.
``reader.read`` or ``reader.aread``); what happens around the calls is written once.

**One deadline per query**: how long a reader's endpoint may keep a query waiting. A
reader with a ``timeout`` (:class:`~.openai.OpenAIReader`) gives each query one
:class:`Deadline` of ``timeout`` seconds, shared by every round, prompt and attempt of
the query (:func:`~gold_panning_integrations.engine.records.current_query`; a reader
called outside the panner makes each reading its own query). Each attempt gets what is
left of it (at most ``timeout``); no retry starts, and no retry wait is slept, once it has
passed; a prompt of a later round is then not sent at all. A reply from the endpoint moves
the deadline to ``timeout`` after it, so a slow endpoint that answers within ``timeout``
keeps a long query going; time spent queued behind the reader's own limits (calls in
flight, requests per minute) is not the endpoint's and does not count. An endpoint that
never answers thus costs a query about ``timeout`` seconds, not rounds x attempts x
``timeout``.

**The limits** a reader holds, shared by every query through it (threads and event loops
alike): :class:`CallLimit`, calls in flight, first come first served, a slot held for one
attempt only (a reader waiting out a Retry-After holds none; a cancelled waiter never
leaks one); :class:`RateLimit`, requests and tokens per minute over a sliding window,
held where the provider counts them (a request occupies the window until it completes).

**The retry policy** every reader shares: attempt, retry with tenacity, finish. One
reading is one or more *attempts*; an attempt returns a :class:`Reading` or raises, and
:func:`~._errors.classify_error` says what the exception is: retried (transient,
malformed output), a failed reading (any other ``ReaderError``), or raised (fatal, a
missing extra). The wait and the sleep are injectable, so tests never sleep; the
default wait, :class:`~._prompt.wait_retry_after`, honours Retry-After, else backs off.
With a :class:`Deadline`, no attempt starts and no wait is slept past it. Each retry
is logged at DEBUG: a query's failures are summed up once, by the panner.
:class:`Usage` is what one reading spent.

**A user's reader** not built on the base: the engine calls every reader as the
:class:`~gold_panning_integrations.engine.records.Reader` protocol declares and never looks
at a signature; a reader whose ``read``/``aread`` takes no ``labels`` becomes an
:class:`AdaptedReader` (one warning per class and method; its readings say they were shown
under ``1..m``), as a callable prompt template that takes none becomes a
:class:`~._prompt.NumberedTemplate` (both through :func:`~._prompt.takes_keyword`, the one
place that reads a signature; :func:`~.as_reader` adapts once, at the edge).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import math
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar, TypeVar, cast

from tenacity import (
    DoAttempt,
    DoSleep,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
)
from tenacity.stop import stop_base

from ..engine.records import Reading, current_query
from ..errors import CitationParseError, FatalReaderError, MissingExtraError, ReaderError
from ._cache import ReplyCache, cache_key
from ._errors import classify_error, is_retryable
from ._options import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_CONCURRENCY,
    READER_OPTIONS,
    Mode,
    declared_options,
    resolve_options,
)
from ._prompt import (
    SYSTEM_PROMPT,
    CharTokenizer,
    DocumentsDoNotFitError,
    PromptTemplate,
    Tokenizer,
    Wait,
    attach_raw,
    check_labels,
    check_max_attempts,
    check_optional_int,
    fit_documents,
    make_wait,
    reading_from_citations,
    render_prompt,
    sanitize_text,
    takes_keyword,
    template_labels,
    truncate,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "MODE_CHECK_READINGS",
    "AdaptedReader",
    "BaseReader",
    "CallLimit",
    "Deadline",
    "Mode",
    "Prompt",
    "QueryDeadlineError",
    "RateLimit",
    "Reply",
    "RetryPolicy",
    "Steps",
    "Usage",
    "accepts",
    "adapt_reader",
    "arun_steps",
    "attempting",
    "call_with_retries",
    "check_max_concurrency",
    "check_per_minute",
    "content_text",
    "current_deadline",
    "no_documents_reading",
    "retry_steps",
    "run_steps",
    "token_counts",
    "with_retries",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ one core, two drivers
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


# ------------------------------------------------------------------------------- usage
def _as_count(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


@dataclass
class Usage:
    """Model calls and tokens spent on one reading, across all its attempts (each attempt
    adds to it; :func:`with_retries` writes the totals into the reading)."""

    calls: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def add(self, prompt_tokens: Any, completion_tokens: Any) -> None:
        """Add the tokens one call reported (None or non-integers are ignored)."""
        pt, ct = _as_count(prompt_tokens), _as_count(completion_tokens)
        if pt is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + pt
        if ct is not None:
            self.completion_tokens = (self.completion_tokens or 0) + ct


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


@contextmanager
def attempting(deadline: Deadline | None) -> Iterator[None]:
    """Inside this block (a function's, or a coroutine's across its awaits)
    :func:`current_deadline` is ``deadline``: the calls of one reading's attempt."""
    token = _READING.set(deadline)
    try:
        yield
    finally:
        _READING.reset(token)


# ------------------------------------------------------------------------------ limits
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
        """Take a slot, or queue and wait for one (:func:`run_steps`: an event on the sync
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


# ---------------------------------------------------------------------------- retries
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
    """Attempts under the retry policy, as a core of :func:`run_steps`: each attempt's own
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


# ------------------------------------------------------------------------ the reader base
MODE_CHECK_READINGS = 5
"""Cite-mode readings after which a reader whose replies are mostly unreadable as
citations warns, naming answer mode (see :meth:`BaseReader._check_mode`)."""


MESSAGE_OVERHEAD_TOKENS = 16
"""Chat-template tokens per message (role markers, separators), counted when fitting."""


def token_counts(usage: dict[str, Any]) -> tuple[Any, Any]:
    """``(prompt, completion)`` tokens of a usage mapping (``prompt_tokens`` before
    ``input_tokens``, ``completion_tokens`` before ``output_tokens``); None where absent."""
    return (
        usage.get("prompt_tokens", usage.get("input_tokens")),
        usage.get("completion_tokens", usage.get("output_tokens")),
    )


def content_text(content: Any) -> str | None:
    """Message content as text: a string as is, the text parts of a list joined (strings,
    ``{"type": "text", "text": ...}`` dicts, objects with a ``text`` string), else ``str``."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts = [
        p.get("text") if isinstance(p, dict) and p.get("type") in (None, "text") else getattr(p, "text", p)
        for p in content
    ]
    return "".join(text for text in parts if isinstance(text, str))


def no_documents_reading() -> Reading:
    """The reading for a prompt with no documents: nothing cited, no model call."""
    return Reading(cited=(), attempts=0, extra={"skipped": "no documents"})


@dataclass(frozen=True)
class Prompt:
    """One round's prompt, rendered once and shared by every attempt: the question and
    ``documents`` (texts in prompt order, sanitised, as shown, shape ``(m,)``), the
    ``labels`` they are shown under (shape ``(m,)``: the panner's, or ``1..m`` for a
    callable template that numbers documents itself), the system and user messages."""

    question: str
    documents: tuple[str, ...]
    labels: tuple[int, ...]
    system: str
    user: str
    documents_cut: int = 0
    """Documents cut to fit the model's context (:func:`._prompt.fit_documents`); ``documents``
    holds them cut."""
    chars_cut: int = 0
    """Characters those cuts removed from the documents' text."""
    cut_at: tuple[int, ...] = ()
    """The positions (in ``documents``) of the documents cut."""

    def as_dicts(self) -> list[dict[str, str]]:
        """The two chat messages as OpenAI-style ``{"role", "content"}`` dicts."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass
class Reply:
    """What one model call gave back, before validation: its ``text``, or the decoded
    structured ``value`` (validated instead), the ``finish_reason`` (``"length"`` adds a
    hint to parse errors), ``extra`` diagnostics for ``Reading.extra`` and ``abstain_p``
    (:attr:`Reading.abstain_p`, from the first token's probabilities when the endpoint
    returned them)."""

    text: str | None = None
    value: Any = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    abstain_p: float | None = None


@declared_options
class BaseReader:
    """Options and ``read``/``aread`` shared by every model reader; the ``Args:`` below
    derive from the declarations in :mod:`._options`. Failures are failed readings
    except permanent ones (see :meth:`read`).

    Args:
    """

    recommended_profile: ClassVar[Any] = None
    """The detector profile measured for this reader's model (a bundled name, a path or a
    ``DetectorProfile``), used when the user names none."""

    option_defaults: ClassVar[Mapping[str, Any]] = {}
    """Defaults used instead of the declared ones (also for base options it does not take)."""

    option_notes: ClassVar[Mapping[str, str]] = {}
    """A sentence per option added to its declared doc in this reader's docstring."""

    # the base options' values (:mod:`._options`), set by ``__init__``
    mode: str
    template: PromptTemplate | None
    max_citations: int | None
    max_attempts: int
    wait: Any
    attribution: Any
    max_chars_per_doc: int | None
    structured: Any
    cache: ReplyCache | None
    context_tokens: int | None

    def __init__(self, **options: Any) -> None:
        values = resolve_options(type(self), options)
        for opt in READER_OPTIONS.values():
            if opt.name in values and opt.store:
                setattr(self, opt.name, values[opt.name])
        self.call_limit = CallLimit(values["max_concurrency"])
        self.rate_limit = RateLimit(values["requests_per_minute"], values["tokens_per_minute"])
        self._use_structured = False
        self._warned_template = False
        self.cite_readings = 0  # cite-mode readings made through this reader
        self.unreadable_replies = 0  # ... of which no reply could be read as citations
        self._warned_mode = False

    # ------------------------------------------------------------------ identity
    @property
    def model_name(self) -> str:
        """The model's name, as recorded in profiles and traces."""
        raise NotImplementedError

    @property
    def max_concurrency(self) -> int | None:
        """The most model calls in flight through this reader (None: no limit)."""
        return self.call_limit.limit

    @property
    def requests_per_minute(self) -> int | None:
        """The most requests per 60-second window through this reader (None: no limit)."""
        return self.rate_limit.requests_per_minute

    @property
    def tokens_per_minute(self) -> int | None:
        """The most tokens per 60-second window through this reader (None: no limit)."""
        return self.rate_limit.tokens_per_minute

    @property
    def uses_structured_output(self) -> bool:
        """True when cite-mode readings go through the model's structured output."""
        return self._use_structured

    def _repr_fields(self) -> str:
        """Extra ``, key=value`` text for :meth:`__repr__` (e.g. the base URL)."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_name!r}{self._repr_fields()}, mode={self.mode!r})"

    # ------------------------------------------------------------------ prompts
    def prompt(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Prompt:
        """The prompt for one round: texts converted and sanitised, labels checked (as in
        :meth:`read`; documents may be anything ``str`` takes)."""
        docs = tuple(sanitize_text(d) for d in documents)
        q = sanitize_text(question)
        labs = check_labels(labels, len(docs))
        fitted, cut, chars = self._fit(q, docs, labs)
        at = tuple(i for i, (a, b) in enumerate(zip(docs, fitted)) if " ".join(a.split()) != b) if cut else ()
        docs = fitted
        system, user = self._render(q, docs, labs)
        if self.mode == "answer":
            return Prompt(q, docs, labs, system, user, cut, chars, at)
        shown = template_labels(self.template, labs)
        if shown != labs and not self._warned_template:
            self._warned_template = True
            logger.warning(
                "%r: the callable template takes no labels= parameter, so documents are numbered 1..m "
                "instead of the panner's per-round labels; add a labels keyword to the template",
                self,
            )
        return Prompt(q, docs, shown, system, user, cut, chars, at)

    def _render(self, question: str, docs: Sequence[str], labels: tuple[int, ...]) -> tuple[str, str]:
        """The system and user messages of one prompt in this reader's mode."""
        if self.mode == "answer":
            from .answer import ANSWER_SYSTEM_PROMPT, render_answer_prompt

            tpl = self.template
            user = (
                tpl(question, list(docs))
                if callable(tpl)
                else render_answer_prompt(
                    question, docs, template=tpl, max_chars_per_doc=self.max_chars_per_doc
                )
            )
            return ANSWER_SYSTEM_PROMPT, user
        user = render_prompt(
            question, docs, labels=labels, template=self.template, max_chars_per_doc=self.max_chars_per_doc
        )
        return SYSTEM_PROMPT, user

    # ------------------------------------------------------------------ fitting the context
    def _max_tokens(self) -> int | None:
        """The reader's completion budget (``max_tokens``), when it has one."""
        value = getattr(self, "max_tokens", None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    @property
    def reply_tokens(self) -> int:
        """Tokens kept free for the reply when fitting documents: ``max_tokens``, else 256."""
        return self._max_tokens() or 256

    def _context_limit(self) -> int | None:
        """The context to fit prompts into (tokens), or None: no fitting. ``context_tokens``
        when given; by default the smaller of it and the context the model declares."""
        limit = self.context_tokens
        if limit is None or limit != DEFAULT_CONTEXT_TOKENS:
            return limit
        try:
            declared = self._declared_context()
        except Exception:  # noqa: BLE001 - metadata that fails to load says nothing
            declared = None
        if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 64:
            return min(limit, declared)
        return limit

    def _declared_context(self) -> int | None:
        """The context window (tokens) the model itself declares, when it does (None)."""
        return None

    def _tokenizer(self) -> Tokenizer | None:
        """The model's tokenizer, when the reader has one (None: the estimate)."""
        return None

    def _fit(
        self, question: str, docs: tuple[str, ...], labels: tuple[int, ...]
    ) -> tuple[tuple[str, ...], int, int]:
        """``docs`` cut evenly to fit :meth:`_context_limit` (:func:`._prompt.fit_documents`), how
        many were cut and the characters removed (none with no context known or a callable
        template)."""
        context = None if not docs or callable(self.template) else self._context_limit()
        if context is None:
            return docs, 0, 0
        tokenizer = self._tokenizer() or CharTokenizer()
        fixed = sum(tokenizer.count(m) for m in self._render(question, ("",) * len(docs), labels))
        # One token per document of slack: a cut re-tokenised in the prompt may shift.
        budget = context - fixed - MESSAGE_OVERHEAD_TOKENS * 2 - self.reply_tokens - len(docs)
        fitted = fit_documents(docs, budget, tokenizer=tokenizer, context=context)
        if not fitted.cut:
            return docs, 0, 0
        # DEBUG: the panner warns once per query with the totals (PanningResult.chars_cut)
        logger.debug(
            "%r: cut %d of %d documents to %d tokens each (%d characters removed) to fit a %d-token context",
            self,
            fitted.cut,
            len(docs),
            fitted.share,
            fitted.removed,
            context,
        )
        return fitted.texts, fitted.cut, fitted.removed

    def messages(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Any:
        """The chat messages (system + user) for one prompt, in the model's own type."""
        return self._messages(self.prompt(question, documents, labels=labels))

    def _messages(self, prompt: Prompt) -> Any:
        """The prompt in the framework's message type (default: OpenAI-style dicts)."""
        return prompt.as_dicts()

    # ------------------------------------------------------------------ the call (per reader)
    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """One plain-text model call; adds tokens (and extra calls) to ``usage``."""
        raise NotImplementedError

    async def _acall(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """Asynchronous :meth:`_call`; default: the sync call in a worker thread."""
        return await asyncio.to_thread(self._call, prompt, usage, **options)

    def _call_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """One structured-output call (``Reply.value`` set); NotImplementedError when
        the model has none (the reader then falls back to text)."""
        raise NotImplementedError

    async def _acall_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """Asynchronous :meth:`_call_structured`; default: in a worker thread."""
        return await asyncio.to_thread(self._call_structured, prompt, usage, **options)

    def _fall_back_to_text(self) -> None:
        if self.structured is True:
            raise NotImplementedError(
                f"{self!r}: structured output failed at call time; use structured='auto'"
            )
        logger.info("%r: structured output not implemented at call time; switching to plain text", self)
        self._use_structured = False

    # ------------------------------------------------------------------ reply -> reading
    def _reading(self, reply: Reply, prompt: Prompt) -> Reading:
        """Validate one reply into a :class:`Reading` (raises CitationParseError when
        it is malformed, so the attempt is retried)."""
        extra: dict[str, Any] = {"model": self.model_name, **reply.extra}
        if prompt.labels != tuple(range(1, len(prompt.documents) + 1)):
            extra["labels"] = list(prompt.labels)
        if self.mode == "answer":
            from .answer import reading_from_answer

            if reply.text is None or not reply.text.strip():
                raise CitationParseError("the model returned no text")
            r = reading_from_answer(
                reply.text,
                prompt.documents,
                question=prompt.question,
                attribution=self.attribution,
                extra=extra,
            )
            return _with_cut(replace(r, abstain_p=reply.abstain_p), prompt)
        value: Any = reply.value if reply.value is not None else reply.text
        if value is None or (isinstance(value, str) and not value.strip()):
            hint = f" (finish_reason={reply.finish_reason!r})" if reply.finish_reason else ""
            raise CitationParseError(f"the model returned no text{hint}")
        try:
            r = reading_from_citations(
                value,
                prompt.documents,
                labels=prompt.labels,
                max_citations=self.max_citations,
                raw=value,
                extra=extra,
            )
            return _with_cut(r, prompt)
        except CitationParseError as err:
            if reply.finish_reason == "length":
                new = CitationParseError(f"{err} (output cut at the token limit; raise max_tokens)")
                raise attach_raw(new, value) from err
            raise

    # ------------------------------------------------------------------ limits
    def _token_estimate(self, prompt: Prompt) -> int:
        """Tokens ``prompt`` counts against ``tokens_per_minute`` until the server reports
        usage: a token per 4 characters of the messages (rounded up), plus ``max_tokens``."""
        return math.ceil((len(prompt.system) + len(prompt.user)) / 4) + (self._max_tokens() or 0)

    @staticmethod
    def _spent(before: tuple[int | None, int | None], usage: Usage) -> int | None:
        """Tokens reported between ``before`` and now (None when none were reported)."""
        if usage.prompt_tokens == before[0] and usage.completion_tokens == before[1]:
            return None
        return (
            (usage.prompt_tokens or 0) - (before[0] or 0) + (usage.completion_tokens or 0) - (before[1] or 0)
        )

    def _prepare(self, *, asynchronous: bool) -> None:
        """Set up what a call needs (a client, a model) before the rate limit admits the
        request, so the time it is counted at is the time it leaves; default: nothing."""

    def _reply_steps(
        self,
        prompt: Prompt,
        usage: Usage,
        options: dict[str, Any],
        asynchronous: bool,
        queued: tuple[Deadline, float] | None = None,
    ) -> Steps[Reply]:
        """One model call within the rate limit (the caller holds a concurrency slot), for
        both paths (:func:`run_steps`): structured output in cite mode when the reader uses
        it, else (or once the model turns out to have none) plain text. ``queued``: the
        query's deadline and the time it had left when the caller queued for its slot
        (the queue's wait, this reader's own, is given back once the request is admitted)."""
        if self.rate_limit.active:
            self._prepare(asynchronous=asynchronous)
        entry = yield from self.rate_limit._acquiring(self._token_estimate(prompt), asynchronous)
        if queued is not None:
            queued[0].queued(queued[1])
        before = (usage.prompt_tokens, usage.completion_tokens)
        try:
            if self._use_structured and self.mode == "cite":
                structured = self._acall_structured if asynchronous else self._call_structured
                try:
                    return (yield functools.partial(structured, prompt, usage, **options))
                except NotImplementedError:
                    self._fall_back_to_text()
            call = self._acall if asynchronous else self._call
            return (yield functools.partial(call, prompt, usage, **options))
        finally:
            self.rate_limit.settle(entry, self._spent(before, usage))

    # ------------------------------------------------------------------ the query's deadline
    def _deadline_seconds(self) -> float | None:
        """Seconds the endpoint may keep a query waiting without a reply (:class:`Deadline`);
        None (default): no deadline beyond what each call has of its own."""
        return None

    def _deadline(self) -> Deadline | None:
        """This reader's deadline in the current query (one per query, made on first use;
        outside the panner a new one per reading), or None."""
        seconds = self._deadline_seconds()
        if seconds is None:
            return None
        query = current_query()
        if query is None:
            return Deadline(seconds)
        return query.state((self, "deadline"), lambda: Deadline(seconds))

    # ------------------------------------------------------------------ cache
    def _cache_identity(self) -> dict[str, Any]:
        """Everything besides the messages that changes a reply (reader kind, model,
        mode, structured output); readers add their endpoint and sampling options."""
        return {
            "reader": f"{type(self).__module__}.{type(self).__qualname__}",
            "model": self.model_name,
            "mode": self.mode,
            "structured": self._use_structured and self.mode == "cite",
        }

    def _cache_key(self, prompt: Prompt) -> str | None:
        return None if self.cache is None else cache_key(self._cache_identity(), prompt.as_dicts())

    def _from_cache(self, key: str | None, prompt: Prompt) -> Reading | None:
        """The reading of a cached reply (counted as a hit), or None (a miss)."""
        if key is None or self.cache is None:
            return None
        stored = self.cache.get(key) or {}
        reply = Reply(
            stored.get("text"),
            stored.get("value"),
            stored.get("finish_reason"),
            stored.get("extra") or {},
            stored.get("abstain_p"),
        )
        try:
            reading = self._reading(reply, prompt) if stored else None
        except CitationParseError:  # stored under other validation options: ask again
            reading = None
        self.cache.count(hit=reading is not None)
        if reading is None:
            return None
        return replace(
            reading,
            attempts=0,
            prompt_tokens=None,
            completion_tokens=None,
            cached=True,
            extra={**reading.extra, "cache": "hit"},
        )

    def _to_cache(self, key: str | None, replies: list[Reply], reading: Reading) -> Reading:
        """Store the reply behind a successful reading; mark the reading a miss."""
        if key is None or self.cache is None:
            return reading
        if replies and not reading.failed:
            self.cache.put(key, asdict(replies[-1]))
        return replace(reading, cached=False)

    # ------------------------------------------------------------------ reading
    def _read_steps(
        self,
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int] | None,
        options: dict[str, Any],
        asynchronous: bool,
    ) -> Steps[Reading]:
        """One reading for :meth:`read` and :meth:`aread` (:func:`run_steps`, one driver for
        all of it): the prompt, the cache (a file cache in a worker thread on the async
        path), then attempts under the retry policy (:func:`retry_steps`)."""
        try:
            prompt = self.prompt(question, documents, labels=labels)
        except DocumentsDoNotFitError as err:  # no call can succeed: a failed reading, no retry
            return Reading.failure(f"{type(err).__name__}: {err}", attempts=0)
        if not prompt.documents:
            return no_documents_reading()
        key = self._cache_key(prompt)
        off_loop = asynchronous and self.cache is not None and self.cache.path is not None
        hit = yield _in_thread_if(off_loop, self._from_cache, key, prompt)
        if hit is not None:
            return _with_cut(hit, prompt)
        replies: list[Reply] = []
        deadline = self._deadline()
        reading = yield from retry_steps(
            functools.partial(
                self._attempt_steps,
                prompt,
                options=options,
                replies=replies,
                asynchronous=asynchronous,
                deadline=deadline,
            ),
            policy=RetryPolicy(self.max_attempts, self.wait),
            what=repr(self),
            deadline=deadline,
            asynchronous=asynchronous,
        )
        reading = _with_cut(self._check_mode(reading), prompt)
        return (yield _in_thread_if(off_loop, self._to_cache, key, replies, reading))

    def _attempt_steps(
        self,
        prompt: Prompt,
        usage: Usage,
        *,
        options: dict[str, Any],
        replies: list[Reply],
        asynchronous: bool,
        deadline: Deadline | None = None,
    ) -> Steps[Reading]:
        """One attempt: a concurrency slot, the call, the reply validated (raises when
        malformed, so the attempt is retried); a reply moves the query's ``deadline``,
        which the attempt's calls see (:func:`attempting`)."""
        with attempting(deadline):
            usage.calls += 1
            left = None if deadline is None else deadline.remaining()  # None: the clock starts at the send
            queued = None if deadline is None or left is None else (deadline, left)
            yield from self.call_limit.acquiring(asynchronous)
            try:
                reply = yield from self._reply_steps(prompt, usage, options, asynchronous, queued)
            finally:
                self.call_limit.release()
            if deadline is not None:
                deadline.replied()
            reading = self._reading(reply, prompt)
            replies.append(reply)
            return reading

    def _read(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        return run_steps(self._read_steps(question, documents, labels, options, asynchronous=False))

    async def _aread(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        return await arun_steps(self._read_steps(question, documents, labels, options, asynchronous=True))

    def _check_mode(self, reading: Reading) -> Reading:
        """Count cite-mode readings and the unreadable ones; warn once, naming answer mode,
        when more than half of at least :data:`MODE_CHECK_READINGS` were unreadable."""
        if self.mode != "cite":
            return reading
        self.cite_readings += 1
        if reading.failed and reading.extra.get("error_type") == "CitationParseError":
            self.unreadable_replies += 1
        n, bad = self.cite_readings, self.unreadable_replies
        if not self._warned_mode and n >= MODE_CHECK_READINGS and 2 * bad > n:
            self._warned_mode = True
            logger.warning(
                "%r: %d of the first %d cite-mode readings could not be read as citations (last: %s). "
                "This model may not cite documents by label: try mode='answer' (CLI: --mode answer), "
                "where the model answers and the documents holding its answer count as cited",
                self,
                bad,
                n,
                truncate(reading.raw, 120) if reading.failed else "readable",
            )
        return reading

    def read(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Ask the model about one prompt.

        Args:
            question: The question.
            documents: Documents in prompt order, shape ``(m,)``.
            labels: The label each document is shown under this round, shape ``(m,)``
                (distinct ints >= 1); None: ``1..m``.

        Returns:
            The validated citations as 0-based positions into ``documents``, or a
            failed reading (beliefs unchanged for the round).

        Raises:
            FatalReaderError: A permanent failure (authentication, unknown model or
                URL, closed port, redirect elsewhere): retrying cannot fix it.
            MissingExtraError: An optional package this reader needs is missing.
        """
        return self._read(question, documents, labels)

    async def aread(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Asynchronous :meth:`read`."""
        return await self._aread(question, documents, labels)


def _with_cut(reading: Reading, prompt: Prompt) -> Reading:
    """``reading`` counting the cuts that fitted ``prompt`` (failed readings too)."""
    if not prompt.documents_cut:
        return reading
    return replace(
        reading, documents_cut=prompt.documents_cut, chars_cut=prompt.chars_cut, cut_at=prompt.cut_at
    )


def _in_thread_if(off_loop: bool, fn: Any, *args: Any) -> Any:
    """A call of ``fn(*args)``: in a worker thread (awaited) when ``off_loop``, else here."""
    return functools.partial(asyncio.to_thread, fn, *args) if off_loop else functools.partial(fn, *args)


# ------------------------------------------------------------------ adapting a user's reader
_WARNED: set[tuple[type, str]] = set()  # (reader class, method) already warned about


def _numbered(reading: Any, m: int) -> Any:
    """``reading`` marked as shown under labels ``1..m``."""
    if isinstance(reading, Reading) and reading.labels is None:
        return replace(reading, labels=tuple(range(1, m + 1)))
    return reading


class AdaptedReader:
    """A user's reader whose ``read`` and/or ``aread`` takes no ``labels``, fitted to the
    reader protocol: ``labels`` are dropped where a method does not take them (its readings
    then report labels ``1..m``), other keywords passed on; every other attribute is the
    wrapped reader's."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        for method in ("read", "aread"):
            fn = getattr(reader, method, None)
            if callable(fn):
                takes = takes_keyword(fn, "labels")
                if not takes:
                    _warn_unlabelled(reader, method)
                setattr(self, method, self._make(method, fn, takes))

    @staticmethod
    def _make(method: str, fn: Callable[..., Any], takes: bool) -> Callable[..., Any]:
        def read(question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any) -> Any:
            if takes:
                return fn(question, documents, labels=labels, **options)
            return _numbered(fn(question, documents, **options), len(documents))

        async def aread(
            question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any
        ) -> Any:
            if takes:
                return await fn(question, documents, labels=labels, **options)
            return _numbered(await fn(question, documents, **options), len(documents))

        return read if method == "read" else aread

    def __getattr__(self, name: str) -> Any:
        if name == "reader":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.reader, name)

    def __repr__(self) -> str:
        return f"AdaptedReader({self.reader!r})"


def _warn_unlabelled(reader: Any, method: str) -> None:
    key = (type(reader), method)
    if key in _WARNED:
        return
    _WARNED.add(key)
    logger.warning(
        "%s.%s takes no 'labels' argument: documents are shown under labels 1..m, so a "
        "document that says 'cite document 1' can steer credit. Add `*, labels` to the "
        "reader's %s and render documents under them.",
        type(reader).__name__,
        method,
        method,
    )


def adapt_reader(obj: Any) -> Any:
    """``obj`` (an object with ``read`` and/or ``aread``) as a reader of the protocol: as
    it is when every such method takes ``labels``, else in an :class:`AdaptedReader`
    (TypeError when it has neither method)."""
    if isinstance(obj, AdaptedReader):
        return obj
    methods = [getattr(obj, m, None) for m in ("read", "aread")]
    present = [fn for fn in methods if callable(fn)]
    if not present:
        raise TypeError(
            f"{type(obj).__name__} is not a reader: it needs read(question, documents, *, labels) "
            "-> Reading and/or async aread(question, documents, *, labels) -> Reading"
        )
    if all(takes_keyword(fn, "labels") for fn in present):
        return obj
    return AdaptedReader(obj)


def accepts(reader: Any, method: str, name: str) -> bool:
    """Whether ``reader.method`` takes the keyword ``name`` (through an
    :class:`AdaptedReader`, the wrapped reader's method)."""
    inner = reader.reader if isinstance(reader, AdaptedReader) else reader
    fn = getattr(inner, method, None)
    return fn is not None and takes_keyword(fn, name)
