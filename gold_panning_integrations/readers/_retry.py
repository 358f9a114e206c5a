"""The retry policy every reader shares: classify, retry with tenacity, finish.

One reading is one or more *attempts*. An attempt either returns a :class:`Reading` or
raises; :func:`classify_error` maps the exception, by the SDKs' own exception types
(``openai.APIStatusError`` and its subclasses, ``openai.APITimeoutError``,
``openai.APIConnectionError``, ``httpx`` timeouts and connection errors), into

* **transient** (:class:`~gold_panning_integrations.errors.TransientReaderError`): rate
  limits (429, with the server's Retry-After), 408/409, 5xx, timeouts, dropped
  connections, malformed HTTP bodies: retried;
* **malformed output** (:class:`~gold_panning_integrations.errors.CitationParseError`):
  no JSON, wrong shape, only invalid labels, empty choices: retried;
* **this reading failed** (a plain :class:`~gold_panning_integrations.errors.ReaderError`):
  other 4xx (a prompt too long for the model: 413, or 400/422 saying so), a refusal,
  an unexpected error in a framework: not retried, a failed reading (beliefs
  unchanged for that round);
* **fatal** (:class:`~gold_panning_integrations.errors.FatalReaderError`): 401, 403,
  404, a closed port (connection refused), a redirect to another host or a redirect loop: raised at once, so the panner ends the run with one clear message instead of
  failing every round. A missing extra (:class:`~gold_panning_integrations.errors.MissingExtraError`)
  propagates too.

:func:`with_retries` is the one wrapper for synchronous and asynchronous attempts. The
wait between attempts is injectable (a tenacity wait strategy or any callable
``(tenacity.RetryCallState) -> seconds``) and so is the sleep, so tests never sleep.
The default, :class:`wait_retry_after`, honours the server's Retry-After and otherwise
backs off exponentially with jitter.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import inspect
import json
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
    wait_fixed,
)

from ..engine.reading import Reading
from ..errors import (
    CitationParseError,
    FatalReaderError,
    MissingExtraError,
    ReaderError,
    TransientReaderError,
)
from ._prompt import MAX_RAW_CHARS

__all__ = [
    "MAX_RAW_CHARS",
    "MAX_RETRY_AFTER",
    "FatalReaderError",
    "RetryPolicy",
    "Usage",
    "Wait",
    "acall_with_retries",
    "call_with_retries",
    "check_max_attempts",
    "classify_error",
    "is_retryable",
    "make_wait",
    "parse_retry_after",
    "retry_after",
    "wait_retry_after",
    "with_retries",
]

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER = 120.0
"""Longest Retry-After (seconds) the default wait honours; longer values are capped."""

Wait = Callable[[RetryCallState], float]
"""A tenacity wait strategy, or any callable ``(retry_state) -> seconds``."""


class RedirectRefused(Exception):
    """Raised from the HTTP client's request hook: a redirect to another origin (the
    question and documents would be re-sent there) is never followed."""


# ----------------------------------------------------------------------- classification
def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date).

    Args:
        headers: A mapping with ``.get`` (httpx headers, dict); None gives None.

    Returns:
        Non-negative seconds, or None when absent or unparsable.
    """
    if headers is None or not hasattr(headers, "get"):
        return None
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None and math.isfinite(float(ms)):
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        try:
            seconds = email.utils.parsedate_to_datetime(str(value)).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, AttributeError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _sdk(name: str) -> Any:
    """The SDK module ``name`` if it is loaded (an exception of its types cannot exist
    otherwise), without importing it."""
    return sys.modules.get(name)


def _message_of(err: BaseException) -> str:
    msg = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(msg).split())[:500]


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from (``__cause__``/``__context__``)."""
    chain: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in chain and len(chain) < 10:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _refused(chain: list[BaseException]) -> bool:
    for e in chain:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return True
        if "connection refused" in str(e).lower() or "[errno 111]" in str(e).lower():
            return True
    return False


_CONTEXT_WORDS = (
    "context length",
    "context_length",
    "context size",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "exceed_context",
)


def _from_status(status: int, msg: str, headers: Any) -> ReaderError:
    """The error for an HTTP status (from any SDK's status error)."""
    if status == 429:
        return TransientReaderError(f"rate limited (HTTP 429): {msg}", retry_after=parse_retry_after(headers))
    if status >= 500 or status in (408, 409):
        return TransientReaderError(
            f"server error (HTTP {status}): {msg}", retry_after=parse_retry_after(headers)
        )
    if status == 401:
        return FatalReaderError(
            f"authentication failed (HTTP 401): check OPENAI_API_KEY or pass api_key=. Server said: {msg}",
            status_code=status,
        )
    if status == 403:
        return FatalReaderError(
            f"permission denied (HTTP 403): the key cannot use this model or endpoint. Server said: {msg}",
            status_code=status,
        )
    if status == 404:
        return FatalReaderError(
            f"not found (HTTP 404): check the model name and base_url (it usually ends in /v1). "
            f"Server said: {msg}",
            status_code=status,
        )
    if 300 <= status < 400:
        where = headers.get("location") if headers is not None and hasattr(headers, "get") else None
        return FatalReaderError(
            f"the server redirected (HTTP {status}) to {where or 'another URL'}; redirects are not "
            "followed (the question and documents would be re-sent there): set base_url to the final URL",
            status_code=status,
        )
    if status == 413 or (status in (400, 422) and any(w in msg.lower() for w in _CONTEXT_WORDS)):
        # this prompt's reading fails (another round's window may be smaller)
        return ReaderError(
            f"the prompt is too long for the model (HTTP {status}): show fewer documents per prompt "
            "(max_docs_per_prompt=, windows=True) or cut long documents (the reader's "
            f"max_chars_per_doc=). Server said: {msg}"
        )
    return ReaderError(f"request rejected (HTTP {status}): {msg}")


def _sdk_status_error(
    err: BaseException, msg: str, chain: list[BaseException], openai: Any, httpxes: list[Any]
) -> ReaderError | None:
    """The error for an OpenAI or httpx status error, or an httpx redirect loop; else ``None``."""
    if openai is not None and isinstance(err, openai.APIStatusError):
        return _from_status(int(err.status_code), msg, err.response.headers)
    for httpx in httpxes:
        if isinstance(err, httpx.HTTPStatusError):
            return _from_status(err.response.status_code, msg, err.response.headers)
        if any(isinstance(e, httpx.TooManyRedirects) for e in chain):
            return FatalReaderError("redirect loop (too many redirects): fix base_url")
    return None


def _sdk_types(
    base: tuple[type[BaseException], ...], httpx_name: str, openai_name: str, openai: Any, httpxes: list[Any]
) -> tuple[type[BaseException], ...]:
    """``base`` plus the class ``httpx_name`` of each httpx and ``openai_name`` of openai (if installed)."""
    types = base + tuple(getattr(h, httpx_name) for h in httpxes)
    if openai is not None:
        types += (getattr(openai, openai_name),)
    return types


def _from_connection(msg: str, chain: list[BaseException], httpxes: list[Any]) -> ReaderError:
    """The error for a failed connection: refused or bad scheme (fatal), else transient."""
    if _refused(chain):
        return FatalReaderError(
            "connection refused: nothing is listening there; start the server or fix base_url"
        )
    if any(isinstance(e, h.UnsupportedProtocol) for e in chain for h in httpxes):
        return FatalReaderError(
            "base_url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
        )
    root = _message_of(chain[-1])  # the underlying cause says more than "Connection error."
    return TransientReaderError(f"connection failed: {msg}" + (f" ({root})" if root != msg else ""))


def _from_other(err: BaseException, msg: str) -> ReaderError:
    """Other SDKs' status errors (a ``status_code`` int), malformed JSON, else a plain error."""
    status = getattr(err, "status_code", None)  # other SDKs' status errors (same pattern)
    if isinstance(status, int) and not isinstance(status, bool):
        return _from_status(status, msg, getattr(getattr(err, "response", None), "headers", None))
    if isinstance(err, json.JSONDecodeError):
        return TransientReaderError(f"the server sent a malformed response body: {msg}")
    return ReaderError(f"{type(err).__name__}: {msg}")


def classify_error(err: BaseException) -> ReaderError:
    """Map any exception raised while calling a model to the package's error family
    (see the module docstring for the classes and what each one does).

    Returns:
        The package error to raise instead of ``err`` (``err`` itself when it already
        is one), with a message that says what to do.
    """
    if isinstance(err, ReaderError):
        return err
    openai = _sdk("openai")
    httpxes = [m for m in (_sdk("httpx"), _sdk("httpx2")) if m is not None]  # openai 3.x ships httpx2
    msg = _message_of(err)
    chain = _causes(err)
    from_status = _sdk_status_error(err, msg, chain, openai, httpxes)
    if from_status is not None:
        return from_status
    refused = next((e for e in chain if isinstance(e, RedirectRefused)), None)
    if refused is not None:
        return FatalReaderError(str(refused))
    timeouts = (TimeoutError, asyncio.TimeoutError)
    if isinstance(err, _sdk_types(timeouts, "TimeoutException", "APITimeoutError", openai, httpxes)):
        return TransientReaderError(f"request timed out: {msg}")
    connections = (ConnectionError,)
    if isinstance(err, _sdk_types(connections, "TransportError", "APIConnectionError", openai, httpxes)):
        return _from_connection(msg, chain, httpxes)
    return _from_other(err, msg)


def is_retryable(err: BaseException) -> bool:
    """True for transient errors and malformed output (see the module docstring)."""
    return isinstance(err, (TransientReaderError, CitationParseError))


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
        fallback: Wait used when there is no Retry-After; default exponential backoff
            with jitter (0.5 s, 1 s, 2 s, ... up to 20 s).
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
    """Model calls and tokens spent on one reading, across all its attempts.

    A reader's attempt receives this tally and adds to it; :func:`with_retries` writes
    the totals into the returned :class:`Reading`.
    """

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


# ----------------------------------------------------------------------------- running
@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, how long to wait between them, how to sleep.

    Args:
        max_attempts: Attempts per reading, retries included (>= 1).
        wait: See :func:`make_wait`.
        sleep: Sleep function (sync: ``(seconds) -> None``, async: awaitable); None
            uses ``time.sleep`` / ``asyncio.sleep``. Tests inject a recorder.
    """

    max_attempts: int = 3
    wait: Wait | float | None = None
    sleep: Callable[[float], Any] | None = None

    def __post_init__(self) -> None:
        check_max_attempts(self.max_attempts)
        make_wait(self.wait)


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.info("%s: attempt %d failed (%s); retrying in %.2f s", what, state.attempt_number, exc, wait)

    return before_sleep


class _Run:
    """The bookkeeping of one reading: attempts, tokens, classification, the result."""

    def __init__(self, policy: RetryPolicy, what: str) -> None:
        self.policy = policy
        self.what = what
        self.usage = Usage()
        self.count = 0

    def options(self, default_sleep: Callable[[float], Any]) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.policy.max_attempts),
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
        new.__cause__ = err
        return new

    def finish(self, reading: Reading) -> Reading:
        u = self.usage
        return replace(
            reading,
            attempts=max(self.count, u.calls),
            prompt_tokens=reading.prompt_tokens if u.prompt_tokens is None else u.prompt_tokens,
            completion_tokens=reading.completion_tokens
            if u.completion_tokens is None
            else u.completion_tokens,
        )

    def failed(self, err: ReaderError) -> Reading:
        retryable = is_retryable(err)
        n = max(self.count, self.usage.calls)
        if retryable:
            error = f"{self.what}: gave up after {n} attempt{'s' if n != 1 else ''}: {err}"
        else:
            error = f"{self.what}: {err}"
        return Reading(
            cited=(),
            failed=True,
            error=error,
            raw=getattr(err, "raw", None),
            attempts=n,
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            extra={"error_type": type(err).__name__, "retryable": retryable},
        )

    def fatal(self, err: FatalReaderError) -> FatalReaderError:
        new = FatalReaderError(f"{self.what}: {err}", status_code=err.status_code)
        return new


def with_retries(
    attempt: Callable[[Usage], Reading] | Callable[[Usage], Awaitable[Reading]],
    *,
    policy: RetryPolicy,
    what: str = "reader",
) -> Any:
    """Run ``attempt`` until it returns, retrying transient errors and malformed output.

    One wrapper for both flavours: a coroutine function ``attempt`` gives an awaitable
    (tenacity's ``AsyncRetrying``), a plain one gives the reading (``Retrying``).

    Args:
        attempt: One model call plus parsing: ``(usage) -> Reading``. It adds calls and
            tokens to ``usage`` and raises on failure (any exception; it is classified
            with :func:`classify_error`).
        policy: Attempts, wait and sleep.
        what: The reader, named in messages and logs (e.g. its model and URL).

    Returns:
        The attempt's reading with ``attempts`` and summed tokens filled in, or a failed
        reading.

    Raises:
        FatalReaderError: A permanent failure (message prefixed with ``what``).
        MissingExtraError: An optional package is missing.
    """
    run = _Run(policy, what)
    if inspect.iscoroutinefunction(attempt):

        async def aonce() -> Reading:
            run.count += 1
            try:
                return await attempt(run.usage)  # type: ignore[misc]
            except Exception as err:  # classify everything a model call may raise
                raise run.classified(err) from err

        async def arun() -> Reading:
            try:
                reading = await AsyncRetrying(**run.options(asyncio.sleep))(aonce)
            except FatalReaderError as err:
                raise run.fatal(err) from err
            except ReaderError as err:
                return run.failed(err)
            return run.finish(reading)

        return arun()

    def once() -> Reading:
        run.count += 1
        try:
            return attempt(run.usage)  # type: ignore[return-value]
        except Exception as err:  # classify everything a model call may raise
            raise run.classified(err) from err

    try:
        reading = Retrying(**run.options(time.sleep))(once)
    except FatalReaderError as err:
        raise run.fatal(err) from err
    except ReaderError as err:
        return run.failed(err)
    return run.finish(reading)


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


async def acall_with_retries(
    attempt: Callable[[Usage], Awaitable[Reading]],
    *,
    max_attempts: int = 3,
    wait: Wait | float | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    what: str = "reader",
) -> Reading:
    """:func:`with_retries` for an asynchronous ``attempt`` with the policy spelled out."""
    return await with_retries(attempt, policy=RetryPolicy(max_attempts, wait, sleep), what=what)  # type: ignore[no-any-return]
