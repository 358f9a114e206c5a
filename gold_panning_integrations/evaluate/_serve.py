"""Serving an HTTP server on loopback in a daemon thread: one lifecycle (start, stop,
``with``, ``base_url``) for the usage proxy (and the lab's loopback model), and the tests'
scripted OpenAI-compatible server."""

from __future__ import annotations

import threading
from http.server import HTTPServer, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self

__all__ = ["LoopbackHTTPServer", "ServedInThread"]


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A thread per request, daemon threads, and a listen backlog of 128 instead of the
    standard library's 5, which a reader's 16 concurrent connections can overflow."""

    daemon_threads = True
    request_queue_size = 128


class ServedInThread:
    """Binds 127.0.0.1 on a free port and serves in a daemon thread.

    A subclass builds its server in :meth:`_new_server` (the server gets ``owner`` set to
    the instance, for its handlers) and may hold ``_stopping``, an event set on
    :meth:`stop` (so waits inside handlers end at once) and cleared on :meth:`start`.
    ``url_path`` is the path of :attr:`base_url`.
    """

    url_path = "/v1"
    _httpd: Any = None
    _thread: threading.Thread | None = None
    _stopping: threading.Event | None = None

    def _new_server(self) -> HTTPServer:
        raise NotImplementedError

    def start(self) -> Self:
        """Bind and serve (a no-op when already serving)."""
        if self._httpd is not None:
            return self
        if self._stopping is not None:
            self._stopping.clear()
        httpd = self._new_server()
        httpd.owner = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name=type(self).__name__
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._stopping is not None:
            self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def bound_port(self) -> int:
        """The port the server is bound to."""
        if self._httpd is None:
            raise RuntimeError(
                f"the {type(self).__name__} is not running; call start() or use it in a with block"
            )
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` plus :attr:`url_path`."""
        return f"http://127.0.0.1:{self.bound_port()}{self.url_path}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
