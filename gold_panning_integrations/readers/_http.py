"""HTTP clients for the OpenAI-compatible reader: a deadline for the whole request and
no redirects to another host.

* **Deadline**: an httpx timeout bounds each socket operation, not the request (a server
  dripping bytes holds it indefinitely). The synchronous client's streams cut every
  socket timeout to the time left before :func:`request_deadline` and then raise the transport's
  ``ReadTimeout`` (retried); the asynchronous reader uses ``asyncio.wait_for`` instead.
* **Redirects**: a redirect to another origin would re-send the question and documents
  there; a request hook refuses it (:class:`._errors.RedirectRefused`, fatal), and at most
  :data:`MAX_REDIRECTS` same-origin redirects are followed.

The httpx the ``openai`` SDK ships (``httpx2`` in openai 3.x) is found from
``openai.DefaultHttpxClient``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._errors import RedirectRefused

__all__ = ["MAX_REDIRECTS", "make_async_http_client", "make_http_client", "request_deadline", "tls_context"]

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 3
"""Same-origin redirects followed per request; one more is a redirect-loop error."""


@dataclass
class _Deadline:
    """A request's time budget; the clock starts at its first socket operation, so the
    client's own preparation (imports, request building) does not eat the budget."""

    seconds: float
    end: float | None = None

    def left(self) -> float:
        now = time.monotonic()
        if self.end is None:
            self.end = now + self.seconds
        return self.end - now


_DEADLINE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar("gp_http_deadline", default=None)


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[None]:
    """Requests made inside this block by clients from :func:`make_http_client` end within
    ``seconds`` of their first network operation."""
    token = _DEADLINE.set(_Deadline(float(seconds)))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _httpx_module() -> Any:
    """The httpx module the installed ``openai`` uses (``httpx2`` or ``httpx``)."""
    import openai

    for klass in openai.DefaultHttpxClient.__mro__:
        if klass.__name__ == "Client" and klass.__module__.split(".")[0].startswith("httpx"):
            return sys.modules[klass.__module__.split(".")[0]]
    import httpx  # pragma: no cover - an SDK without DefaultHttpxClient's usual base

    return httpx  # pragma: no cover


def _origin(url: Any) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def _same_origin_hook(base_url: str, httpx: Any) -> Any:
    origin = _origin(httpx.URL(base_url))

    def check(request: Any) -> None:
        if _origin(request.url) != origin:
            target = str(request.url.copy_with(query=None))
            raise RedirectRefused(
                f"the server at {base_url} redirected to {target}: redirects to another host are not "
                "followed (the question and documents would be re-sent there); set base_url to the "
                "server you mean to use"
            )

    return check


def _deadline_backend(core: Any, inner: Any) -> Any:
    """``inner`` (an httpcore sync network backend) with every socket timeout cut to the
    time left before the current :func:`request_deadline`."""

    def bounded(timeout: float | None) -> float | None:
        budget = _DEADLINE.get()
        if budget is None:
            return timeout
        left = budget.left()
        if left <= 0:
            raise core.ReadTimeout(
                "the request's deadline passed (the whole request took longer than timeout)"
            )
        return left if timeout is None else min(timeout, left)

    class Stream(core.NetworkStream):  # type: ignore[misc,name-defined]
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._stream.read(max_bytes, bounded(timeout))  # type: ignore[no-any-return]

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._stream.write(buffer, bounded(timeout))

        def close(self) -> None:
            self._stream.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            return Stream(self._stream.start_tls(ssl_context, server_hostname, bounded(timeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

    class Backend(core.NetworkBackend):  # type: ignore[misc,name-defined]
        def connect_tcp(self, host: str, port: int, timeout: float | None = None, **options: Any) -> Any:
            return Stream(inner.connect_tcp(host, port, bounded(timeout), **options))

        def connect_unix_socket(self, path: str, timeout: float | None = None, **options: Any) -> Any:
            return Stream(inner.connect_unix_socket(path, bounded(timeout), **options))

        def sleep(self, seconds: float) -> None:
            inner.sleep(seconds)

    return Backend()


def make_http_client(base_url: str, *, timeout: float) -> Any:
    """The synchronous HTTP client for ``openai.OpenAI(http_client=...)``: deadline-aware
    sockets, same-origin redirects only (at most :data:`MAX_REDIRECTS`)."""
    import openai

    httpx = _httpx_module()
    transport = httpx.HTTPTransport()
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if inner is not None:
        core = sys.modules[type(pool).__module__.split(".")[0]]
        pool._network_backend = _deadline_backend(core, inner)  # type: ignore[union-attr]
    else:  # pragma: no cover - an httpx without the usual pool: per-operation timeouts only
        logger.warning("this httpx has no connection pool to wrap: timeout bounds each read, not the request")
    hook = _same_origin_hook(base_url, httpx)
    return openai.DefaultHttpxClient(
        transport=transport, event_hooks={"request": [hook]}, **_redirects(timeout)
    )


def tls_context() -> Any:
    """The TLS context the SDK's httpx makes by default (``httpx.create_ssl_context()``:
    its CA bundle, ``SSL_CERT_FILE``), made once so that clients made later share it."""
    return _httpx_module().create_ssl_context()


def make_async_http_client(base_url: str, *, timeout: float, tls: Any = None) -> Any:
    """The asynchronous HTTP client for ``openai.AsyncOpenAI(http_client=...)``:
    same-origin redirects only (the deadline is ``asyncio.wait_for`` around the call).
    ``tls``: a :func:`tls_context` to use instead of loading the CA bundle again (a reader
    makes a client per event loop; loading the bundle takes tens of milliseconds)."""
    import openai

    httpx = _httpx_module()
    check = _same_origin_hook(base_url, httpx)

    async def acheck(request: Any) -> None:
        check(request)

    verify = {} if tls is None else {"verify": tls}
    return openai.DefaultAsyncHttpxClient(event_hooks={"request": [acheck]}, **verify, **_redirects(timeout))


def _redirects(timeout: float) -> dict[str, Any]:
    """The client options both clients share: the timeout, same-origin redirects only."""
    return {"timeout": timeout, "follow_redirects": True, "max_redirects": MAX_REDIRECTS}
