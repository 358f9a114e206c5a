"""A scriptable fault-injection server speaking the OpenAI chat-completions protocol.

A real HTTP server on 127.0.0.1 (ephemeral port, ``ThreadingHTTPServer`` in a daemon
thread) for tests that go through the real ``openai`` client. Each request to
``POST /v1/chat/completions`` takes the next :class:`Behaviour` from a queue (or the
default when the queue is empty); every request is recorded (:class:`RecordedRequest`)
so tests can assert on messages and ``response_format`` fallbacks.

Behaviours (factories below): :func:`ok`, :func:`cite`, :func:`status` (429 with
Retry-After, 5xx, 401, ...), :func:`delay` (slower than the client timeout),
:func:`reset` (connection reset mid-body), :func:`empty_choices`, :func:`content_null`,
:func:`refusal`, :func:`raw_body` (any HTTP body, e.g. non-JSON or truncated JSON),
:func:`enormous`, :func:`reject_format`, :func:`dynamic` (computed from the request,
e.g. a scripted model that follows instructions found in the documents), :func:`drip`
(a valid answer sent one byte at a time, slower than any sane client) and
:func:`redirect` (a 3xx to another URL, e.g. another server or itself).

Server-wide switches: ``reject_formats={"json_schema"}`` answers 400 to every request
asking for those ``response_format`` types without consuming the queue (a server that
does not support them; with ``reject_like="llama-cpp-python"`` the answer is that
server's HTTP 500 and body, :data:`LLAMA_CPP_PYTHON_FORMAT_ERROR`); ``api_key="..."``
answers 401 to requests with another key.

Usage::

    with FakeOpenAIServer() as server:
        server.script(status(429, retry_after=7), cite(2))
        reader = OpenAIReader(model="m", base_url=server.base_url, wait=0)
        reading = reader.read("q?", ["a", "b"])
        assert server.requests[1].response_format_type == "json_schema"
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from gold_panning_integrations.evaluate._serve import LoopbackHTTPServer, ServedInThread

__all__ = [
    "HOSTILE_OUTPUTS",
    "LLAMA_CPP_PYTHON_FORMAT_ERROR",
    "Behaviour",
    "FakeOpenAIServer",
    "RecordedRequest",
    "cite",
    "completion_body",
    "content_null",
    "delay",
    "drip",
    "dynamic",
    "empty_choices",
    "enormous",
    "ok",
    "raw_body",
    "redirect",
    "refusal",
    "reject_format",
    "reset",
    "status",
]


# --------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: ``"POST"``/``"GET"``.
        path: Request path, e.g. ``"/v1/chat/completions"``.
        headers: Header names lowercased.
        body: The decoded JSON body (None when not JSON).
        raw: The raw body bytes.
        behaviour: Name of the behaviour used to answer.
        at: ``time.monotonic()`` when the server received it.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    behaviour: str = ""
    at: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages sent (empty when absent)."""
        return list((self.body or {}).get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def user_text(self) -> str:
        """Text of the last user message ('' when absent)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                c = m.get("content")
                return c if isinstance(c, str) else json.dumps(c)
        return ""

    @property
    def response_format(self) -> Any:
        """The ``response_format`` field sent (None when absent)."""
        return self.body.get("response_format") if isinstance(self.body, dict) else None

    @property
    def response_format_type(self) -> str | None:
        """``response_format["type"]`` or None when no response format was requested."""
        rf = self.response_format
        return rf.get("type") if isinstance(rf, dict) else None


# -------------------------------------------------------------------------- behaviours
@dataclass(frozen=True)
class Behaviour:
    """How to answer one request. Build with the factory functions of this module."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Short description, recorded with the request."""
        detail = self.params.get("code", "")
        return f"{self.kind}{detail and f'({detail})'}"


def completion_body(
    content: Any,
    *,
    model: str = "fake-model",
    prompt_tokens: int | None = 100,
    completion_tokens: int | None = 10,
    refusal: str | None = None,
    finish_reason: str = "stop",
    choices: list[Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` response object (usage omitted when both token counts are None)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": (
            choices
            if choices is not None
            else [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            ]
        ),
    }
    if prompt_tokens is not None or completion_tokens is not None:
        body["usage"] = {
            "prompt_tokens": prompt_tokens or 0,
            "completion_tokens": completion_tokens or 0,
            "total_tokens": (prompt_tokens or 0) + (completion_tokens or 0),
        }
    return body


def ok(
    content: Any,
    *,
    prompt_tokens: int | None = 100,
    completion_tokens: int | None = 10,
    finish_reason: str = "stop",
) -> Behaviour:
    """200 with one choice whose message content is ``content`` (any text, JSON or not)."""
    return Behaviour(
        "ok",
        {
            "content": content,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "finish_reason": finish_reason,
        },
    )


def cite(*labels: Any, key: str = "cited", **kwargs: Any) -> Behaviour:
    """200 with content ``{"cited": [labels...]}`` (labels sent exactly as given)."""
    return ok(json.dumps({key: list(labels)}), **kwargs)


def status(
    code: int,
    *,
    retry_after: float | str | None = None,
    message: str | None = None,
    headers: dict[str, str] | None = None,
) -> Behaviour:
    """An error status (429, 500, 502, 503, 400, 401, ...) with an OpenAI-style error body."""
    return Behaviour(
        "status",
        {"code": code, "retry_after": retry_after, "message": message, "headers": dict(headers or {})},
    )


def delay(seconds: float, then: Behaviour | None = None) -> Behaviour:
    """Wait ``seconds`` (e.g. longer than the client timeout), then answer with ``then``
    (default ``cite()``). The wait ends early when the server stops."""
    return Behaviour("delay", {"seconds": seconds, "then": then or cite()})


def reset(partial: bytes = b'{"id": "chatcmpl-fake", "choices": [{"index": 0, "mess') -> Behaviour:
    """Send 200 headers and part of the body, then reset the connection (TCP RST)."""
    return Behaviour("reset", {"partial": partial})


def empty_choices() -> Behaviour:
    """200 with ``"choices": []``."""
    return Behaviour("empty_choices")


def content_null(*, finish_reason: str = "stop") -> Behaviour:
    """200 with ``message.content`` null (and no refusal)."""
    return Behaviour("content_null", {"finish_reason": finish_reason})


def refusal(text: str = "I'm sorry, I can't help with that.") -> Behaviour:
    """200 with ``message.refusal`` set and ``content`` null."""
    return Behaviour("refusal", {"text": text})


def raw_body(body: str | bytes, *, code: int = 200, content_type: str = "application/json") -> Behaviour:
    """Any HTTP body as is (non-JSON text, a truncated JSON document, HTML, ...)."""
    return Behaviour("raw_body", {"body": body, "code": code, "content_type": content_type})


def enormous(n_chars: int = 2_000_000, *, fill: str = "gold ") -> Behaviour:
    """200 with message content of ``n_chars`` characters of prose (no JSON)."""
    reps = n_chars // len(fill) + 1
    return ok((fill * reps)[:n_chars], completion_tokens=n_chars // 4)


def reject_format(*types: str, then: Behaviour | None = None) -> Behaviour:
    """400 (as vLLM/llama.cpp do for unsupported formats) when the request's
    ``response_format.type`` is one of ``types`` (default ``json_schema``); otherwise
    answer with ``then`` (default ``cite()``). Consumes one queue entry either way."""
    return Behaviour("reject_format", {"types": tuple(types or ("json_schema",)), "then": then or cite()})


def drip(interval: float, then: Behaviour | None = None) -> Behaviour:
    """200 with the body of ``then`` (default ``cite()``) sent one byte every
    ``interval`` seconds: each read finishes well within a per-read timeout, the whole
    request does not. The drip ends early when the server stops or the client leaves."""
    return Behaviour("drip", {"interval": interval, "then": then or cite()})


def redirect(location: str, *, code: int = 307) -> Behaviour:
    """A redirect (``307`` keeps the method and body) to ``location``."""
    return Behaviour("redirect", {"location": location, "code": code})


def dynamic(fn: Callable[[RecordedRequest], Behaviour]) -> Behaviour:
    """Compute the behaviour from the request (e.g. a scripted model reading the prompt)."""
    return Behaviour("dynamic", {"fn": fn})


HOSTILE_OUTPUTS: dict[str, str] = {
    "non_json_text": "The answer is in the second document.",
    "truncated_json": '{"cited": [1, 2',
    "wrong_key": '{"documents": [1]}',
    "label_zero": '{"cited": [0]}',
    "label_negative": '{"cited": [-1]}',
    "label_n_plus_1": '{"cited": [4]}',
    "label_huge": '{"cited": [99999999999999999999]}',
    "duplicates": '{"cited": [2, 2, 2]}',
    "label_string": '{"cited": ["2"]}',
    "label_float": '{"cited": [2.0]}',
    "label_bool": '{"cited": [true]}',
    "nested_list": '{"cited": [[1, 2]]}',
    "null_list": '{"cited": null}',
    "null_label": '{"cited": [null]}',
    "fenced_json": 'Here you go:\n```json\n{"cited": [2]}\n```',
    "prose_around_json": 'Sure! {"cited": [3]} Hope this helps.',
    "mixed_valid_invalid": '{"cited": [0, 1, "3", 3, 3, 9]}',
    "bare_list": "[1, 3]",
    "empty_object": "{}",
    "empty_string": "",
}
"""Named model outputs for three shown documents (labels 1..3), for reliability tests."""


LLAMA_CPP_PYTHON_FORMAT_ERROR: dict[str, Any] = {
    "error": {
        "message": (
            "1 validation error:\n"
            "  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n"
            "\n"
            '  File "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
            "    POST /v1/chat/completions"
        ),
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
"""What llama-cpp-python's server (0.3.36, ``python -m llama_cpp.server``, FastAPI 0.165.0,
pydantic 2.13.4) answers, with HTTP 500, to ``response_format={"type": "json_schema", ...}``:
FastAPI's validation error wrapped by its error handler, captured verbatim from the real
server on the embedded model with ``curl`` (2026-11-25); the slow test
``test_the_real_llama_cpp_python_server_answers_500_and_the_reader_falls_back`` compares."""


# ------------------------------------------------------------------------------ server
class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ------------------------------------------------------------------ plumbing
    def _send(
        self, code: int, body: bytes, *, content_type: str = "application/json", headers: Any = ()
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in dict(headers).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _json(self, code: int, obj: Any, headers: Any = ()) -> None:
        self._send(code, json.dumps(obj).encode(), headers=headers)

    def _error(
        self,
        code: int,
        message: str,
        *,
        headers: Any = (),
        err_type: str = "invalid_request_error",
        param: str | None = None,
    ) -> None:
        self._json(
            code, {"error": {"message": message, "type": err_type, "param": param, "code": None}}, headers
        )

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:  # the client or a reset behaviour closed the socket
            pass

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = RecordedRequest(self.command, self.path, headers, body, raw)
        srv = self.server.owner
        if not self.path.rstrip("/").endswith("/chat/completions"):
            srv._record(req, "not_found")
            self._error(404, f"no route {self.path}")
            return
        if srv.api_key is not None and headers.get("authorization") != f"Bearer {srv.api_key}":
            srv._record(req, "unauthorized")
            self._error(401, "Incorrect API key provided.", err_type="invalid_api_key")
            return
        if req.response_format_type in srv.reject_formats:
            srv._record(req, "reject_format")
            if srv.reject_like == "llama-cpp-python":
                self._json(500, LLAMA_CPP_PYTHON_FORMAT_ERROR)
            else:
                self._reject_format(req)
            return
        behaviour = srv._next()
        srv._record(req, behaviour.name)
        try:
            self._answer(behaviour, req)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _reject_format(self, req: RecordedRequest) -> None:
        self._error(
            400,
            f"response_format type {req.response_format_type!r} is not supported by this server",
            param="response_format",
        )

    def _answer(self, b: Behaviour, req: RecordedRequest) -> None:
        p = b.params
        model = (req.body or {}).get("model", "fake-model") if isinstance(req.body, dict) else "fake-model"
        if b.kind == "dynamic":
            self._answer(p["fn"](req), req)
        elif b.kind == "ok":
            self._json(
                200,
                completion_body(
                    p["content"],
                    model=model,
                    prompt_tokens=p["prompt_tokens"],
                    completion_tokens=p["completion_tokens"],
                    finish_reason=p["finish_reason"],
                ),
            )
        elif b.kind == "status":
            code = int(p["code"])
            hdrs = dict(p["headers"])
            if p["retry_after"] is not None:
                hdrs["Retry-After"] = str(p["retry_after"])
            default_msg = {
                400: "Bad request.",
                401: "Incorrect API key provided.",
                403: "You are not allowed to sample from this model.",
                404: "The model does not exist.",
                429: "Rate limit reached. Please try again later.",
            }.get(code, "The server had an error while processing your request.")
            self._error(code, p["message"] or default_msg, headers=hdrs)
        elif b.kind == "delay":
            self.server.owner._stopping.wait(float(p["seconds"]))
            self._answer(p["then"], req)
        elif b.kind == "reset":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(p["partial"])
            self.wfile.flush()
            sock: socket.socket = self.connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            self.close_connection = True
        elif b.kind == "empty_choices":
            self._json(200, completion_body(None, model=model, choices=[]))
        elif b.kind == "content_null":
            self._json(200, completion_body(None, model=model, finish_reason=p["finish_reason"]))
        elif b.kind == "refusal":
            self._json(200, completion_body(None, model=model, refusal=p["text"]))
        elif b.kind == "raw_body":
            data = p["body"] if isinstance(p["body"], bytes) else p["body"].encode()
            self._send(int(p["code"]), data, content_type=p["content_type"])
        elif b.kind == "drip":
            then = p["then"]
            assert then.kind == "ok", "drip sends an ok() body"
            body = json.dumps(
                completion_body(
                    then.params["content"],
                    model=model,
                    prompt_tokens=then.params["prompt_tokens"],
                    completion_tokens=then.params["completion_tokens"],
                    finish_reason=then.params["finish_reason"],
                )
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            for i in range(len(body)):
                if self.server.owner._stopping.wait(float(p["interval"])):
                    break
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                self.server.owner._drip_bytes += 1
        elif b.kind == "redirect":
            self.send_response(int(p["code"]))
            self.send_header("Location", p["location"])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif b.kind == "reject_format":
            if req.response_format_type in p["types"]:
                self._reject_format(req)
            else:
                self._answer(p["then"], req)
        else:  # pragma: no cover - a typo in a test script
            self._error(500, f"unknown behaviour {b.kind!r}")


class _Server(LoopbackHTTPServer):
    allow_reuse_address = True
    owner: FakeOpenAIServer


class FakeOpenAIServer(ServedInThread):
    """The loopback chat-completions server (see the module docstring).

    Args:
        default: Behaviour when the queue is empty (default ``cite()``: no citations).
        reject_formats: ``response_format`` types answered with 400 on every request.
        reject_like: ``"openai"`` (400 naming ``response_format``) or
            ``"llama-cpp-python"`` (its 500 validation error) for ``reject_formats``.
        api_key: When set, requests must send ``Authorization: Bearer <api_key>``.
    """

    def __init__(
        self,
        *,
        default: Behaviour | None = None,
        reject_formats: Iterable[str] = (),
        reject_like: str = "openai",
        api_key: str | None = None,
    ) -> None:
        self.default = default or cite()
        self.reject_formats = set(reject_formats)
        self.reject_like = reject_like
        self.api_key = api_key
        self._queue: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._drip_bytes = 0

    # ------------------------------------------------------------------ lifecycle
    def _new_server(self) -> _Server:
        return _Server(("127.0.0.1", 0), _Handler)

    @property
    def port(self) -> int:
        """The bound port."""
        return self.bound_port()

    # ------------------------------------------------------------------ scripting
    def script(self, *behaviours: Behaviour) -> FakeOpenAIServer:
        """Queue behaviours; each chat-completions request consumes the next one."""
        with self._lock:
            self._queue.extend(behaviours)
        return self

    def clear(self) -> None:
        """Drop queued behaviours and recorded requests."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()

    @property
    def pending(self) -> int:
        """Behaviours still queued."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def drip_bytes(self) -> int:
        """Body bytes :func:`drip` behaviours have sent so far."""
        return self._drip_bytes

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Requests once at least ``n`` arrived (the server records before answering)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reqs = self.requests
            if len(reqs) >= n:
                return reqs
            time.sleep(0.01)
        return self.requests

    def _next(self) -> Behaviour:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _record(self, req: RecordedRequest, behaviour: str) -> None:
        with self._lock:
            self._requests.append(
                RecordedRequest(
                    req.method, req.path, req.headers, req.body, req.raw, behaviour, time.monotonic()
                )
            )
