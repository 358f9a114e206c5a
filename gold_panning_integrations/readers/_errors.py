"""How a reader's failure is classified.

:func:`classify_error` maps an attempt's exception, by the SDKs' own exception types
(``openai``, ``httpx``), into the package's errors: **transient** (429 with its
Retry-After, 408/409, 5xx, timeouts, dropped connections, malformed bodies) and
**malformed output** (``CitationParseError``) are retried (:func:`is_retryable`); other
4xx (a prompt too long), a refusal or an unexpected error are a plain ``ReaderError``, a
failed reading; 401/403/404, a closed port, a redirect elsewhere or a redirect loop are
**fatal** (``FatalReaderError``), raised at once. :func:`failed_reading` is the failed
reading a reading's last error ends in.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import errno
import json
import math
import sys
import time
from typing import Any

from ..engine.records import Reading
from ..errors import CitationParseError, FatalReaderError, ReaderError, TransientReaderError
from ._limits import Deadline
from ._prompt import Usage

__all__ = [
    "RedirectRefused",
    "classified",
    "classify_error",
    "failed_reading",
    "is_retryable",
    "parse_retry_after",
]


class RedirectRefused(Exception):
    """Raised from the HTTP client's request hook: a redirect to another origin (the
    question and documents would be re-sent there) is never followed."""


# ----------------------------------------------------------------------- classification
def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait (>= 0) from the ``retry-after-ms`` / ``retry-after`` (seconds or an
    HTTP date) of ``headers`` (anything with ``.get``), or None when absent or unparsable."""
    if headers is None or not hasattr(headers, "get"):
        return None
    ms = headers.get("retry-after-ms")
    with contextlib.suppress(TypeError, ValueError):
        if ms is not None and math.isfinite(float(ms)):
            return max(0.0, float(ms) / 1000.0)
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
        if any(w in str(e).lower() for w in ("connection refused", "[errno 111]")):
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


_FATAL_STATUS = {
    401: "authentication failed (HTTP 401): check OPENAI_API_KEY or pass api_key=",
    403: "permission denied (HTTP 403): the key cannot use this model or endpoint",
    404: "not found (HTTP 404): check the model name and base_url (it usually ends in /v1)",
}


def _from_status(status: int, msg: str, headers: Any) -> ReaderError:
    """The error for an HTTP status (from any SDK's status error)."""
    if status == 429:
        return TransientReaderError(f"rate limited (HTTP 429): {msg}", retry_after=parse_retry_after(headers))
    if status >= 500 or status in (408, 409):
        return TransientReaderError(
            f"server error (HTTP {status}): {msg}", retry_after=parse_retry_after(headers)
        )
    if status in _FATAL_STATUS:
        return FatalReaderError(f"{_FATAL_STATUS[status]}. Server said: {msg}", status_code=status)
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
            f"the prompt is too long for the model (HTTP {status}): set the reader's context_tokens= "
            "to the model's context (long documents are then cut to fit; default 8192) or show fewer "
            f"documents per prompt (max_docs_per_prompt=, windows=True). Server said: {msg}"
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
    """The package error (see the module docstring) to raise instead of ``err``, which a
    model call raised (``err`` itself when it is one), its message saying what to do."""
    if isinstance(err, ReaderError):
        return err
    # the SDKs if loaded (an exception of their types cannot exist otherwise); openai 3.x ships httpx2
    openai = sys.modules.get("openai")
    httpxes = [m for m in (sys.modules.get("httpx"), sys.modules.get("httpx2")) if m is not None]
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


def classified(err: Exception) -> ReaderError:
    """:func:`classify_error` of ``err``, carrying its raw model output."""
    new = classify_error(err)
    raw = getattr(err, "raw", None)
    if raw is not None:
        new.raw = raw  # type: ignore[attr-defined]
    return new


def failed_reading(what: str, err: ReaderError, usage: Usage, deadline: Deadline | None) -> Reading:
    """The failed reading of a reading whose attempts (``usage``: calls and tokens) ended
    with ``err``, its error naming the reader (``what``), the attempts when ``err`` was
    retried, and the query's ``deadline`` when it had passed."""
    retryable = is_retryable(err)
    n = usage.calls
    gave_up = f"gave up after {n} attempt{'s' if n != 1 else ''}: " if retryable else ""
    late = ""
    if retryable and deadline is not None and deadline.passed:
        late = (
            f" (no reply within timeout={deadline.seconds:g} s, the query's deadline: "
            "no retry, and the query's later prompts are not sent)"
        )
    return Reading(
        cited=(),
        failed=True,
        error=f"{what}: {gave_up}{err}{late}",
        raw=getattr(err, "raw", None),
        attempts=n,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        extra={"error_type": type(err).__name__, "retryable": retryable},
    )
