"""The retry policy every reader shares, and the small helpers readers have in common.

One reading is one or more *attempts*. An attempt either returns a :class:`Reading` or
raises; the exception is classified (:func:`classify_error`) into

* **transient** (:class:`~gold_panning_integrations.errors.TransientReaderError`): rate
  limits (429, with the server's Retry-After), 408/409, 5xx, timeouts, dropped
  connections, malformed HTTP bodies;
* **malformed output** (:class:`~gold_panning_integrations.errors.CitationParseError`):
  no JSON, wrong shape, empty choices, ``content`` null;
* **fatal** (any other :class:`~gold_panning_integrations.errors.ReaderError`): 400,
  401, 403, 404, refusals, programming errors in a framework.

Transient and malformed attempts are retried with tenacity up to ``max_attempts`` in all;
fatal ones stop at once. Neither path raises: when the reading cannot be obtained, a
failed :class:`Reading` carries the last error, the attempt count and the tokens spent,
and the panner leaves the beliefs unchanged for that round.

The wait between attempts is injectable (a tenacity wait strategy or any callable
``(tenacity.RetryCallState) -> seconds``), so tests never sleep. The default,
:class:`wait_retry_after`, honours the server's Retry-After and otherwise backs off
exponentially with jitter.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
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

__all__ = [
    "MAX_RAW_CHARS",
    "MAX_RETRY_AFTER",
    "MAX_SCAN_CHARS",
    "FatalReaderError",
    "Usage",
    "Wait",
    "acall_with_retries",
    "call_with_retries",
    "classify_error",
    "is_retryable",
    "make_wait",
    "parse_retry_after",
    "retry_after",
    "truncate",
    "wait_retry_after",
]

logger = logging.getLogger(__name__)

MAX_RAW_CHARS = 4000
"""Raw model output kept in a :class:`Reading` (characters); longer output is cut."""

MAX_SCAN_CHARS = 4000
"""Longest model output searched for JSON embedded in prose (characters). Longer output
is still accepted when it is JSON as a whole; otherwise only its first
``MAX_SCAN_CHARS`` characters are searched, which bounds the time a hostile enormous
reply (megabytes of brackets) can cost."""

MAX_RETRY_AFTER = 120.0
"""Longest Retry-After (seconds) the default wait honours; longer values are capped."""

Wait = Callable[[RetryCallState], float]
"""A tenacity wait strategy, or any callable ``(retry_state) -> seconds``."""


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
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            value = headers.get(name.title())
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except (TypeError, ValueError):
            if name != "retry-after":
                continue
            try:
                when = email.utils.parsedate_to_datetime(str(value))
            except (TypeError, ValueError, IndexError):
                continue
            if when is None:
                continue
            seconds = when.timestamp() - time.time()
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _status_of(err: BaseException) -> int | None:
    status = getattr(err, "status_code", None)
    if status is None:
        status = getattr(getattr(err, "response", None), "status_code", None)
    if status is None:
        status = getattr(err, "status", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def _message_of(err: BaseException) -> str:
    msg = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(msg).split())[:500]


_TIMEOUT_NAMES = ("timeout", "timedout")
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
_CONNECTION_NAMES = ("connection", "connect", "remoteprotocol", "readerror", "networkerror", "transport")


def classify_error(err: BaseException) -> ReaderError:
    """Map any exception raised while calling a model to the package's error family.

    Works by duck typing (``status_code``, ``response.headers``, class names), so it
    covers the ``openai`` client and the frameworks wrapping it without importing them.

    Returns:
        A :class:`TransientReaderError` (worth retrying), a
        :class:`CitationParseError` (malformed output, worth retrying) or a
        :class:`FatalReaderError` (stop now) whose message says what to do.
    """
    if isinstance(err, ReaderError):
        return err
    status = _status_of(err)
    msg = _message_of(err)
    name = type(err).__name__.lower()
    if status is not None:
        headers = getattr(getattr(err, "response", None), "headers", None)
        if status == 429:
            return TransientReaderError(
                f"rate limited (HTTP 429): {msg}", retry_after=parse_retry_after(headers)
            )
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
                f"not found (HTTP 404): check model= and base_url= (it usually ends in /v1). Server said: {msg}",
                status_code=status,
            )
        if status == 413 or (status in (400, 422) and any(w in msg.lower() for w in _CONTEXT_WORDS)):
            return FatalReaderError(
                f"the prompt is too long for the model (HTTP {status}): show fewer documents per prompt "
                "(max_docs_per_prompt=, windows=True) or cut long documents (the reader's "
                f"max_chars_per_doc=). Server said: {msg}",
                status_code=status,
            )
        return FatalReaderError(f"request rejected (HTTP {status}): {msg}", status_code=status)
    if isinstance(err, (TimeoutError, asyncio.TimeoutError)) or any(t in name for t in _TIMEOUT_NAMES):
        return TransientReaderError(f"request timed out: {msg}")
    if isinstance(err, ConnectionError) or any(t in name for t in _CONNECTION_NAMES):
        return TransientReaderError(f"connection failed: {msg}")
    if isinstance(err, json.JSONDecodeError):
        return TransientReaderError(f"the server sent a malformed response body: {msg}")
    return FatalReaderError(f"{type(err).__name__}: {msg}")


def is_retryable(err: BaseException) -> bool:
    """True for transient errors and malformed output (see the module docstring)."""
    return isinstance(err, (TransientReaderError, CitationParseError))


# ----------------------------------------------------------------------------- waiting
def retry_after(retry_state: RetryCallState) -> float | None:
    """The Retry-After (seconds) of the exception that ended the last attempt, if any."""
    outcome = retry_state.outcome
    if outcome is None or not outcome.failed:
        return None
    exc = outcome.exception()
    value = getattr(exc, "retry_after", None)
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
@dataclass
class Usage:
    """Model calls and tokens spent on one reading, across all its attempts.

    A reader's attempt function receives this tally and adds to it; the retry wrapper
    writes the totals into the returned :class:`Reading`.
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


def _as_count(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def truncate(text: Any, limit: int = MAX_RAW_CHARS) -> str | None:
    """``text`` as a string cut to ``limit`` characters (with a marker), None stays None."""
    if text is None:
        return None
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return s
    return s[:limit] + f"... [truncated, {len(s)} characters in all]"


def attach_raw(err: BaseException, raw: Any) -> BaseException:
    """Remember the raw model output on an exception, for the failed reading."""
    try:
        err.raw = truncate(raw)  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions with __slots__
        pass
    return err


# ----------------------------------------------------------------------------- running
def _finish(reading: Reading, usage: Usage, attempts: int) -> Reading:
    return replace(
        reading,
        attempts=max(attempts, usage.calls),
        prompt_tokens=reading.prompt_tokens if usage.prompt_tokens is None else usage.prompt_tokens,
        completion_tokens=(
            reading.completion_tokens if usage.completion_tokens is None else usage.completion_tokens
        ),
    )


def _failed(err: ReaderError, usage: Usage, attempts: int, what: str) -> Reading:
    retryable = is_retryable(err)
    n = max(attempts, usage.calls)
    if retryable:
        error = f"{what}: gave up after {n} attempt{'s' if n != 1 else ''}: {err}"
    else:
        error = f"{what}: {err}"
    return Reading(
        cited=(),
        failed=True,
        error=error,
        raw=getattr(err, "raw", None),
        attempts=n,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        extra={"error_type": type(err).__name__, "retryable": retryable},
    )


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.info("%s: attempt %d failed (%s); retrying in %.2f s", what, state.attempt_number, exc, wait)

    return before_sleep


def _retry_options(max_attempts: int, wait: Wait | float | None, sleep: Any, what: str) -> dict[str, Any]:
    """Keyword arguments of ``Retrying``/``AsyncRetrying`` for the shared policy."""
    return {
        "stop": stop_after_attempt(max_attempts),
        "wait": make_wait(wait),
        "retry": retry_if_exception(is_retryable),
        "sleep": sleep,
        "reraise": True,
        "before_sleep": _log_retry(what),
    }


def _reclassified(err: Exception) -> ReaderError | None:
    """The classified error to raise in place of ``err`` (carrying its ``raw``), or
    None when ``err`` itself should propagate (already classified, or a missing extra)."""
    if isinstance(err, MissingExtraError):
        return None
    classified = classify_error(err)
    if classified is err:
        return None
    if getattr(err, "raw", None) is not None:
        attach_raw(classified, err.raw)  # type: ignore[attr-defined]
    return classified


def call_with_retries(
    attempt: Callable[[Usage], Reading],
    *,
    max_attempts: int = 3,
    wait: Wait | float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    what: str = "reader",
) -> Reading:
    """Run ``attempt`` until it returns, retrying transient errors and malformed output.

    Args:
        attempt: One model call plus parsing: ``(usage) -> Reading``. It adds calls and
            tokens to ``usage`` and raises on failure (any exception; it is classified
            with :func:`classify_error`).
        max_attempts: Attempts in all, >= 1.
        wait: See :func:`make_wait`.
        sleep: How to sleep between attempts (tests may pass a no-op).
        what: Name used in error messages and logs.

    Returns:
        The attempt's reading with ``attempts`` and summed tokens filled in, or a failed
        reading (never raises for model-side errors).
    """
    check_max_attempts(max_attempts)
    usage = Usage()
    count = 0

    def once() -> Reading:
        nonlocal count
        count += 1
        try:
            return attempt(usage)
        except Exception as err:  # classify everything a model call may raise
            classified = _reclassified(err)
            if classified is None:
                raise
            raise classified from err

    retrying = Retrying(**_retry_options(max_attempts, wait, sleep, what))
    try:
        reading = retrying(once)
    except ReaderError as err:
        return _failed(err, usage, count, what)
    return _finish(reading, usage, count)


async def acall_with_retries(
    attempt: Callable[[Usage], Awaitable[Reading]],
    *,
    max_attempts: int = 3,
    wait: Wait | float | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    what: str = "reader",
) -> Reading:
    """Asynchronous :func:`call_with_retries`: ``attempt`` is awaited, and so is the sleep."""
    check_max_attempts(max_attempts)
    usage = Usage()
    count = 0

    async def once() -> Reading:
        nonlocal count
        count += 1
        try:
            return await attempt(usage)
        except Exception as err:
            classified = _reclassified(err)
            if classified is None:
                raise
            raise classified from err

    retrying = AsyncRetrying(**_retry_options(max_attempts, wait, sleep, what))
    try:
        reading = await retrying(once)
    except ReaderError as err:
        return _failed(err, usage, count, what)
    return _finish(reading, usage, count)


# ------------------------------------------------------------------ shared reading logic
def check_echo(text: str, documents: Sequence[str]) -> None:
    """Raise :class:`CitationParseError` when the output repeats the prompt's document
    block (models or mocks that echo the prompt would otherwise "cite" label ``[1]``)."""
    if len(documents) == 0 or not text:
        return
    from ._prompt import render_documents

    # The first document's line, at most 80 characters: enough to recognise an echo,
    # cheap for megabyte documents, and still found when max_chars_per_doc cut it (>= 76).
    first = render_documents([documents[0]])[:80]
    if len(first) >= 8 and first in text:
        raise CitationParseError("the model echoed the prompt instead of answering")


def _bounded(text: str) -> Any:
    """``text`` decoded when it is JSON as a whole, else at most its first
    :data:`MAX_SCAN_CHARS` characters (for the JSON search in prose)."""
    if len(text) <= MAX_SCAN_CHARS:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        logger.info("model output of %d characters: searching only the first %d", len(text), MAX_SCAN_CHARS)
        return text[:MAX_SCAN_CHARS]
    return value if isinstance(value, (dict, list)) else text[:MAX_SCAN_CHARS]


def reading_from_citations(
    value: Any,
    documents: Sequence[str],
    *,
    max_citations: int | None,
    raw: Any,
    extra: dict[str, Any] | None = None,
) -> Reading:
    """Validate a model output (text, or decoded JSON from structured output) into a
    :class:`Reading`; raises :class:`CitationParseError` (with ``raw`` attached) when
    it is not citation JSON."""
    from ._prompt import parse_citations

    try:
        if isinstance(value, str):
            check_echo(value, documents)
            value = _bounded(value)
        parsed = parse_citations(value, len(documents), max_citations=max_citations)
    except CitationParseError as err:
        raise attach_raw(err, raw) from None
    return Reading(
        cited=parsed.cited,
        answer=parsed.answer,
        raw=truncate(raw),
        invalid_labels=parsed.invalid,
        duplicate_labels=parsed.duplicates,
        extra={"mode": "cite", **(extra or {})},
    )


def check_mode(mode: str) -> str:
    """Validate ``mode`` (``"cite"`` or ``"answer"``)."""
    if mode not in ("cite", "answer"):
        raise ValueError(
            f"mode must be 'cite' (the model lists document numbers) or 'answer' "
            f"(the model answers; documents containing the answer count as cited), got {mode!r}"
        )
    return mode
