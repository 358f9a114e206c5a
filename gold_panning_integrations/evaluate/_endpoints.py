"""The endpoint ``gold-panning evaluate`` talks to: the embedded model served by
``python -m llama_cpp.server`` (:class:`EmbeddedServer`), behind the loopback proxy that
counts every method's calls and tokens alike (:class:`UsageProxy`).
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from typing_extensions import Self

from ..errors import MissingExtraError, NativeCrashError
from ..readers._native import LlamaLibrary, signal_name
from ._serve import LoopbackHTTPServer, ServedInThread

__all__ = ["EmbeddedServer", "UsageProxy", "check_server_extra", "free_port", "llama_server_command"]


# ============================================================================ usage proxy
_USAGE_KEYS = ("calls", "prompt_tokens", "completion_tokens", "http_errors", "usage_missing")
"""The counters of :meth:`UsageProxy.stats`."""

_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "accept-encoding",
    "upgrade",
    "proxy-connection",
    "te",
    "trailer",
}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        proxy: UsageProxy = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Accept-Encoding"] = "identity"
        path = self.path.removeprefix(proxy.url_path)
        target = proxy.upstream_path + path
        is_llm = self.command == "POST" and path.rstrip("/").endswith(("/chat/completions", "/completions"))
        try:
            conn_cls = http.client.HTTPSConnection if proxy.scheme == "https" else http.client.HTTPConnection
            conn = conn_cls(proxy.host, proxy.port, timeout=proxy.timeout)
            try:
                conn.request(self.command, target, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, reason, rheaders = resp.status, resp.reason, resp.getheaders()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as err:
            message = {"error": {"message": f"evaluate proxy: upstream unreachable: {err}", "type": "proxy"}}
            status, reason, data = 502, "Bad Gateway", json.dumps(message).encode()
            rheaders = [("Content-Type", "application/json")]
        if is_llm:
            proxy._record(status=status, data=data)
        try:
            self.send_response(status, reason)
            for k, v in rheaders:
                if k.lower() not in _HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout); nothing to answer
            self.close_connection = True

    do_GET = do_POST = _forward


class UsageProxy(ServedInThread):
    """A loopback reverse proxy that counts LLM calls and the server's token usage.

    Every method is pointed at :attr:`base_url`; requests are forwarded unchanged to
    ``upstream`` and every ``POST .../chat/completions`` (or ``.../completions``) is counted
    with the ``usage`` of its response (retries count as calls).

    Args:
        upstream: The real endpoint root, e.g. ``"http://127.0.0.1:8080/v1"``.
        timeout: Seconds to wait for the upstream per request.
    """

    def __init__(self, upstream: str, *, timeout: float = 600.0) -> None:
        u = urllib.parse.urlsplit(upstream)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base URL must be http(s)://host[:port]/path, got {upstream!r}")
        self.upstream = upstream
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.upstream_path = u.path.rstrip("/")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(_USAGE_KEYS, 0)

    def _record(self, *, status: int, data: bytes) -> None:
        pt = ct = None
        if status < 400:
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                usage = json.loads(data).get("usage") or {}
                pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        with self._lock:
            s = self._stats
            s["calls"] += 1
            if status >= 400:
                s["http_errors"] += 1
            elif isinstance(pt, int) and isinstance(ct, int):
                s["prompt_tokens"] += pt
                s["completion_tokens"] += ct
            else:
                s["usage_missing"] += 1

    def stats(self) -> dict[str, int]:
        """Counters so far: ``calls``, ``prompt_tokens``, ``completion_tokens``,
        ``http_errors`` (status >= 400) and ``usage_missing`` (a 2xx without usage)."""
        with self._lock:
            return dict(self._stats)

    def _new_server(self) -> LoopbackHTTPServer:
        return LoopbackHTTPServer(("127.0.0.1", 0), _ProxyHandler)


# ========================================================================= embedded server
def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released; a tiny race remains)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def llama_server_command(
    model_path: str | Path, *, port: int, n_ctx: int = 8192, threads: int | None = None
) -> list[str]:
    """``python -m llama_cpp.server`` on loopback for ``model_path``."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--n_ctx", str(n_ctx)]
    if threads is not None:
        cmd += ["--n_threads", str(threads)]
    return cmd


def check_server_extra() -> None:
    """Raise :class:`MissingExtraError` (naming the ``local`` extra) unless llama-cpp-python
    and its server's packages are installed."""
    for mod in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(mod) is None:
            pkg = "llama-cpp-python" if mod == "llama_cpp" else "llama-cpp-python[server]"
            raise MissingExtraError(
                pkg, "local", "Serving the embedded model (`gold-panning evaluate --reader embedded`)"
            )


class EmbeddedServer:
    """Runs an OpenAI-compatible server as a child process for the length of a ``with``.

    Ready when ``GET /v1/models`` answers 200. Always stopped on exit, also on an error,
    Ctrl-C or SIGTERM: terminated, then killed after ``stop_timeout`` seconds (the server
    would finish a completion first, which can take tens of seconds on a CPU). A server
    killed by a signal (SIGILL: a llama-cpp-python build for another CPU) is reported as
    :class:`NativeCrashError`, at once, before it was ready or later (:meth:`check`).

    Args:
        command: The argv to run (:func:`llama_server_command`), listening on ``port``.
        log: File receiving the server's stdout and stderr.
        ready_timeout: Deadline in seconds for readiness (checked every ``poll`` seconds).
        stop_timeout: Seconds between terminating the server and killing it.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        port: int,
        log: str | Path,
        ready_timeout: float = 180.0,
        poll: float = 0.25,
        stop_timeout: float = 2.0,
    ) -> None:
        self.command = list(command)
        self.stop_timeout = stop_timeout
        self.port = port
        self.log = Path(log)
        self.ready_timeout = ready_timeout
        self.poll = poll
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/v1/models")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _exited(self, when: str) -> Exception | None:
        """The error for a server process that has exited ``when`` (None while it runs):
        :class:`NativeCrashError` for a signal, else RuntimeError; both name the log."""
        proc = self.proc
        if proc is None or proc.poll() is None:
            return None
        sig = signal_name(proc.returncode)
        if sig is not None:
            lib = LlamaLibrary.installed()
            what = f"{when}, the model server (`python -m llama_cpp.server`, log {str(self.log)!r})"
            return NativeCrashError(
                what, signal_name=sig, version=lib.version if lib else None, output=self._tail()
            )
        return RuntimeError(
            f"the model server exited with code {proc.returncode} {when}; log {str(self.log)!r}:\n{self._tail()}"
        )

    def check(self) -> None:
        """Raise if the server has exited since it was started (see :meth:`_exited`);
        ``gold-panning evaluate`` calls it around every method's run on an instance."""
        err = self._exited("during the run")
        if err is not None:
            raise err

    def start(self) -> Self:
        """Start the process and wait for readiness (raises RuntimeError naming the log, or
        :class:`NativeCrashError` for a server killed by a signal)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as fh:
            self.proc = subprocess.Popen(
                self.command,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.ready_timeout
        try:
            while True:
                if (err := self._exited("before it was ready")) is not None:
                    raise err
                if self._ready():
                    return self
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the model server was not ready within {self.ready_timeout:.0f} s on port {self.port}; "
                        f"log {str(self.log)!r}:\n{self._tail()}"
                    )
                time.sleep(self.poll)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the process (kill after ``stop_timeout`` s); safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
