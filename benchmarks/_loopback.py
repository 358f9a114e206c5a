"""A loopback OpenAI-compatible server that plays a position-biased model.

:class:`PositionBiasedModel` is the reader: a document shown at position ``i`` of ``m``
in a prompt is cited with the detector profile's rate at that position (the profile
resampled to ``m`` positions): its TPR when the document is relevant to the request's
question, its FPR otherwise. Relevance comes from the task instances
(:meth:`PositionBiasedModel.add_relevant`: question -> relevant texts); a request's
question is the longest registered question found in its text. The draws are seeded by
a hash of the request's messages and the run seed, so a request gets the same answer
whenever it arrives (arrival order changes nothing) and a repeated prompt gets the same
mistakes, as a model at temperature 0 would.

:class:`LoopbackServer` serves that model over HTTP on 127.0.0.1 (stdlib
``ThreadingHTTPServer``, one thread per connection): ``POST /v1/chat/completions`` in
every format of :mod:`._peer_formats`, ``GET /v1/models``. Each answered call takes
``latency`` seconds; at most ``capacity`` calls are served at once, and a request above
that either waits for a slot (``overflow="queue"``, up to ``queue_timeout`` seconds,
then HTTP 503) or is answered at once with HTTP 429 and ``Retry-After``
(``overflow="429"``). A call whose client hangs up during its latency (a cancelled
request) is dropped unanswered, like a server that aborts a request whose client left.
The server counts requests, answered calls, 429s, hang-ups, prompt and completion
tokens (a word-and-punctuation count, reported in ``usage``), requests whose question it
did not know, the most requests open at once, and per format how the answer was asked
for (:class:`LoopbackStats`).

A request counts as open from its arrival until its reply is about to be written: the
count drops before the client can see the reply, so a client that keeps ``k`` calls in
flight is never seen with more than ``k`` open.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations.evaluate._serve import ServedInThread

from ._peer_formats import (
    ParsedRequest,
    UnknownFormatError,
    message_text,
    normalize,
    parse_request,
    render_answer,
)

__all__ = [
    "MAX_BODY_BYTES",
    "OVERFLOW",
    "PROTOCOLS",
    "LoopbackServer",
    "LoopbackStats",
    "PositionBiasedModel",
    "count_tokens",
]

logger = logging.getLogger(__name__)

Overflow = Literal["queue", "429"]
OVERFLOW: tuple[str, ...] = ("queue", "429")
"""What the server does with a request above its capacity: wait for a slot, or answer 429."""

Protocol = Literal["HTTP/1.0", "HTTP/1.1"]
PROTOCOLS: tuple[str, ...] = ("HTTP/1.0", "HTTP/1.1")
"""The HTTP versions the server speaks: 1.0 closes each connection, 1.1 keeps it alive."""

MAX_BODY_BYTES = 16 * 2**20
"""Largest request body read (bytes); a longer one is answered 413."""

_TOKEN = re.compile(r"\w+|[^\w\s]")
_TRUNCATED = "[...]"
_POLL = 0.02
"""Seconds between checks that the client of a call in its latency is still there."""
_MIN_PREFIX = 32
"""Shortest shown text (characters) matched as a cut-off prefix of a relevant text."""


def count_tokens(text: str) -> int:
    """Tokens of ``text`` as the loopback server counts them: runs of word characters
    and single punctuation marks (a stand-in for a model's tokenizer)."""
    return len(_TOKEN.findall(text))


class PositionBiasedModel:
    """The position-biased reader the loopback server plays.

    Args:
        profile: Detector profile (anything with per-position ``tpr``/``fpr`` and a
            ``resample(m)`` method, e.g. a ``DetectorProfile``).
        relevant: Question -> its relevant document texts (more with :meth:`add_relevant`).
        seed: Run seed mixed into every request's seed.
    """

    def __init__(
        self, profile: Any, relevant: Mapping[str, Iterable[str]] | None = None, *, seed: int = 0
    ) -> None:
        if not hasattr(profile, "resample"):
            raise TypeError(
                f"profile must be a DetectorProfile (with resample()), got {type(profile).__name__}"
            )
        self.profile = profile
        self.seed = int(seed)
        self._relevant: dict[str, set[str]] = {}
        self._rates: dict[int, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        self._lock = threading.Lock()
        for question, texts in (relevant or {}).items():
            self.add_relevant(question, texts)

    def add_relevant(self, question: str, texts: Iterable[str]) -> None:
        """Declare ``texts`` relevant to ``question`` (added to any declared before)."""
        q = normalize(question)
        if not q:
            raise ValueError("question must be non-empty text")
        with self._lock:
            self._relevant.setdefault(q, set()).update(normalize(t) for t in texts)

    def rates(self, m: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(tpr, fpr)`` of the profile resampled to ``m`` positions, each shape ``(m,)``."""
        with self._lock:
            if m not in self._rates:
                p = self.profile.resample(m)
                self._rates[m] = (np.asarray(p.tpr, dtype=np.float64), np.asarray(p.fpr, dtype=np.float64))
            return self._rates[m]

    def question_of(self, text: str) -> str | None:
        """The longest declared question found in ``text`` (normalised), or None."""
        t = normalize(text)
        with self._lock:
            found = [q for q in self._relevant if q in t]
        return max(found, key=len) if found else None

    def relevance(self, question: str | None, texts: Iterable[str]) -> NDArray[np.bool_]:
        """Whether each shown text is relevant to ``question``, shape ``(m,)``: equal to a
        relevant text after :func:`~._peer_formats.normalize`, or a prefix of one of at
        least 32 characters (a document the prompt cut short, ``" [...]"`` ignored)."""
        with self._lock:
            rel = set(self._relevant.get(question, ())) if question is not None else set()
        out = []
        for t in texts:
            s = normalize(t)
            if s.endswith(_TRUNCATED):
                s = s[: -len(_TRUNCATED)].rstrip()
            out.append(s in rel or (len(s) >= _MIN_PREFIX and any(r.startswith(s) for r in rel)))
        return np.asarray(out, dtype=bool)

    def request_rng(self, messages: Any) -> np.random.Generator:
        """The generator of one request: seeded by the run seed and a SHA-256 of its messages."""
        key = json.dumps(messages, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
        digest = hashlib.sha256(key).digest()
        return np.random.default_rng([self.seed, int.from_bytes(digest[:8], "little")])

    def cite(self, relevant: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.bool_]:
        """Which of ``m`` shown documents (prompt order, relevance ``relevant``, shape
        ``(m,)``) the reader cites: each independently at its position's TPR or FPR."""
        tpr, fpr = self.rates(relevant.size)
        return rng.random(relevant.size) < np.where(relevant, tpr, fpr)

    def answer(self, body: Mapping[str, Any]) -> tuple[ParsedRequest, dict[str, Any], bool]:
        """Read one request and answer it.

        Returns:
            ``(parsed request, the chat.completion message {"content", "tool_calls"},
            whether its question was known)``.

        Raises:
            UnknownFormatError: the request is in no known format.
        """
        req = parse_request(body)
        question = self.question_of(req.text)
        relevant = self.relevance(question, (t for _, t in req.documents))
        cited = self.cite(relevant, self.request_rng(body.get("messages")))
        content, tool_calls = render_answer(req, cited.tolist())
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls is not None:
            message["tool_calls"] = tool_calls
        return req, message, question is not None


_COUNTERS = (
    "requests",
    "answered",
    "rejected",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "unknown_question",
    "abandoned",
)
"""The cumulative fields of :class:`LoopbackStats` (the others are levels and maxima)."""


@dataclass
class LoopbackStats:
    """What the server saw (cumulative; :meth:`minus` gives the counts of a span).

    Attributes:
        requests: ``POST .../chat/completions`` requests received.
        answered: Requests answered 200 (the model calls).
        rejected: Requests answered 429 (over capacity).
        errors: Requests answered with another error (unknown format, 503 after the
            queue deadline, bad body, a fault of :meth:`LoopbackServer.fail_next`).
        prompt_tokens: Prompt tokens of the answered calls (:func:`count_tokens`).
        completion_tokens: Completion tokens of the answered calls.
        unknown_question: Answered calls whose question was never declared relevant
            texts for (every document then counts as irrelevant).
        abandoned: Calls whose client hung up during their latency (cancelled); they
            are dropped unanswered, as a model server aborts them.
        max_open: Most requests open at once (being served, queued or being rejected).
        open: Requests open now.
        max_serving: Most calls served at once (at most the capacity).
        serving: Calls being served now.
        queued: Requests waiting for a slot now (``overflow="queue"``).
        asked: Format -> how its answer was asked for -> answered calls
            (e.g. ``{"langchain-listwise": {"json_schema": 60}}``).
    """

    requests: int = 0
    answered: int = 0
    rejected: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unknown_question: int = 0
    abandoned: int = 0
    max_open: int = 0
    open: int = 0
    max_serving: int = 0
    serving: int = 0
    queued: int = 0
    asked: dict[str, dict[str, int]] = field(default_factory=dict)

    def copy(self) -> LoopbackStats:
        """An independent copy."""
        return LoopbackStats(**{**self.__dict__, "asked": {k: dict(v) for k, v in self.asked.items()}})

    def minus(self, before: LoopbackStats) -> LoopbackStats:
        """The counts since ``before`` (the maxima and the current levels are kept as they are now)."""
        asked: dict[str, dict[str, int]] = {}
        for kind, forms in self.asked.items():
            for form, n in forms.items():
                d = n - before.asked.get(kind, {}).get(form, 0)
                if d:
                    asked.setdefault(kind, {})[form] = d
        spans = {k: getattr(self, k) - getattr(before, k) for k in _COUNTERS}
        return LoopbackStats(**{**self.__dict__, **spans, "asked": asked})

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return self.copy().__dict__


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120.0  # seconds a socket read may block (an idle keep-alive connection is closed)
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (delayed ACK)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _write(self, code: int, obj: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(obj).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client went away (cancelled, timed out): nothing to answer
            self.close_connection = True

    def _error(self, code: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> None:
        self._write(code, {"error": {"message": message, "type": "loopback", "code": code}}, headers)

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/").endswith("/models"):
            self._write(200, {"object": "list", "data": [{"id": owner.model_name, "object": "model"}]})
        else:
            self._error(404, f"no such path {self.path!r}; the loopback server serves /v1/chat/completions")

    def do_POST(self) -> None:
        owner = self.server.owner
        if not self.path.rstrip("/").endswith("/chat/completions"):
            length = int(self.headers.get("Content-Length") or 0)
            if 0 < length <= MAX_BODY_BYTES:
                self.rfile.read(length)
            self._error(404, f"no such path {self.path!r}; the loopback server serves /v1/chat/completions")
            return
        owner._arrive()
        state = {"replied": False, "slot": False}

        def reply(code: int | None, obj: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
            # The slot and the open count are released before the reply is written: once
            # the client has its answer, the server no longer counts the request.
            if not state["replied"]:
                state["replied"] = True
                owner._leave(free_slot=bool(state["slot"]))
                state["slot"] = False
            if code is not None:
                self._write(code, obj, headers)

        try:
            self._serve(owner, reply, state)
        finally:
            if not state["replied"]:  # an exception before any reply
                owner._leave(free_slot=bool(state["slot"]))

    def _client_gone(self) -> bool:
        """Whether the client closed its connection (a cancelled request)."""
        try:
            ready, _, _ = select.select([self.connection], [], [], 0)
            return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _wait(self, owner: LoopbackServer, until: float) -> bool:
        """Sleep until ``until`` (monotonic seconds), watching the connection: False as
        soon as the client hangs up (the call is then dropped unanswered)."""
        while True:
            left = until - time.monotonic()
            if left <= 0 or owner._stopping.is_set():
                return True
            try:
                ready, _, _ = select.select([self.connection], [], [], min(left, _POLL))
            except (OSError, ValueError):
                return False
            if ready and self._client_gone():
                return False
            if ready:  # data from the client (a pipelined request): keep the latency
                owner._stopping.wait(max(0.0, until - time.monotonic()))
                return True

    def _serve(self, owner: LoopbackServer, reply: Any, state: dict[str, bool]) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            owner._count(errors=1)
            self.close_connection = True
            reply(413, {"error": {"message": f"request body over {MAX_BODY_BYTES} bytes", "code": 413}})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError) as err:
            owner._count(errors=1)
            reply(400, {"error": {"message": f"the request body is not JSON: {err}", "code": 400}})
            return
        if not isinstance(body, dict):
            owner._count(errors=1)
            reply(400, {"error": {"message": "the request body must be a JSON object", "code": 400}})
            return
        if body.get("stream"):
            owner._count(errors=1)
            reply(
                400,
                {"error": {"message": "the loopback server does not stream; send stream=false", "code": 400}},
            )
            return
        fault = owner._fault()
        if fault is not None:
            owner._count(errors=1)
            headers = owner._retry_headers() if fault in (429, 503) else []
            reply(fault, {"error": {"message": f"scripted fault (HTTP {fault})", "code": fault}}, headers)
            return
        slot = owner._take_slot()
        state["slot"] = slot == "ok"
        if slot == "429":
            owner._count(rejected=1)
            reply(429, owner._rate_limit_body(), owner._retry_headers())
            return
        if slot == "timeout":
            owner._count(errors=1)
            reply(
                503,
                {"error": {"message": "the loopback server's queue deadline passed", "code": 503}},
                owner._retry_headers(),
            )
            return
        t0 = time.monotonic()
        try:
            req, message, known = owner.model.answer(body)
        except UnknownFormatError as err:
            owner._count(errors=1)
            reply(400, {"error": {"message": str(err), "type": "invalid_request_error", "code": 400}})
            return
        prompt = "\n".join(message_text(m.get("content")) for m in body.get("messages") or [])
        completion = message.get("content") or json.dumps(message.get("tool_calls"))
        usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": count_tokens(completion)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not self._wait(owner, t0 + owner.latency):
            owner._count(abandoned=1)
            self.close_connection = True
            reply(None, None)  # the client hung up (cancelled): release, write nothing
            return
        owner._count(
            answered=1,
            unknown_question=int(not known),
            kind=req.kind,
            asked=req.asked,
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
        )
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        reply(
            200,
            {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model") or owner.model_name),
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage,
            },
        )


class _Http10Handler(_Handler):
    """:class:`_Handler` speaking HTTP/1.0: the connection is closed after each response."""

    protocol_version = "HTTP/1.0"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # a flood of connections must not overflow the listen backlog
    owner: LoopbackServer


class LoopbackServer(ServedInThread):
    """The position-biased model on an OpenAI-compatible loopback endpoint.

    Args:
        model: The reader to play.
        latency: Seconds each answered call takes (``>= 0``), computing the answer included.
        capacity: Calls served at once (``>= 1``).
        overflow: Above capacity: ``"queue"`` (wait for a slot) or ``"429"`` (answer
            HTTP 429 with ``Retry-After`` at once).
        retry_after: Seconds sent in ``Retry-After`` (whole seconds, rounded up) and
            ``retry-after-ms`` with a 429 or 503 (``>= 0``).
        queue_timeout: Longest wait for a slot with ``overflow="queue"`` (seconds,
            ``> 0``); past it the request is answered 503.
        model_name: Name listed by ``GET /v1/models``.
        protocol: ``"HTTP/1.1"`` (keep-alive: a client reuses its connections) or
            ``"HTTP/1.0"`` (each connection closed after its response).
    """

    _stopping: threading.Event

    def __init__(
        self,
        model: PositionBiasedModel,
        *,
        latency: float = 0.5,
        capacity: int = 16,
        overflow: Overflow = "queue",
        retry_after: float = 1.0,
        queue_timeout: float = 600.0,
        model_name: str = "loopback-position-biased",
        protocol: Protocol = "HTTP/1.1",
    ) -> None:
        if not (isinstance(latency, (int, float)) and math.isfinite(latency) and latency >= 0):
            raise ValueError(f"latency must be a finite number of seconds >= 0, got {latency!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an int >= 1 (calls served at once), got {capacity!r}")
        if overflow not in OVERFLOW:
            raise ValueError(f"overflow must be 'queue' or '429', got {overflow!r}")
        if not (isinstance(retry_after, (int, float)) and math.isfinite(retry_after) and retry_after >= 0):
            raise ValueError(f"retry_after must be a finite number of seconds >= 0, got {retry_after!r}")
        if not (
            isinstance(queue_timeout, (int, float)) and math.isfinite(queue_timeout) and queue_timeout > 0
        ):
            raise ValueError(f"queue_timeout must be a finite number of seconds > 0, got {queue_timeout!r}")
        self.model = model
        self.latency = float(latency)
        self.capacity = capacity
        self.overflow = overflow
        self.retry_after = float(retry_after)
        self.queue_timeout = float(queue_timeout)
        self.model_name = model_name
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be 'HTTP/1.0' or 'HTTP/1.1', got {protocol!r}")
        self.protocol = protocol
        self._lock = threading.Lock()
        self._slots = threading.Condition(self._lock)
        self._stats = LoopbackStats()
        self._stopping = threading.Event()
        self._faults: deque[int] = deque()
        self._arrivals: list[float] = []

    # --------------------------------------------------------------- bookkeeping
    def fail_next(self, *codes: int) -> None:
        """Answer the next ``len(codes)`` requests with these HTTP statuses, in order (a
        429 or 503 with ``Retry-After``), before any slot or latency: a scripted fault."""
        with self._lock:
            self._faults.extend(int(c) for c in codes)

    def _fault(self) -> int | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def arrivals(self) -> list[float]:
        """When each request arrived (``time.monotonic()`` seconds), in arrival order."""
        with self._lock:
            return list(self._arrivals)

    def _arrive(self) -> None:
        with self._lock:
            self._arrivals.append(time.monotonic())
            s = self._stats
            s.requests += 1
            s.open += 1
            s.max_open = max(s.max_open, s.open)

    def _leave(self, *, free_slot: bool) -> None:
        with self._lock:
            self._stats.open -= 1
            if free_slot:
                self._stats.serving -= 1
            self._slots.notify_all()

    def _take_slot(self) -> str:
        """``"ok"`` (a slot is held), ``"429"`` (over capacity, overflow 429) or ``"timeout"``."""
        s = self._stats
        with self._slots:
            if s.serving >= self.capacity:
                if self.overflow == "429":
                    return "429"
                end = time.monotonic() + self.queue_timeout
                s.queued += 1
                try:
                    while s.serving >= self.capacity:
                        left = end - time.monotonic()
                        if left <= 0 or self._stopping.is_set():
                            return "timeout"
                        self._slots.wait(min(left, 0.5))
                finally:
                    s.queued -= 1
            s.serving += 1
            s.max_serving = max(s.max_serving, s.serving)
            return "ok"

    def _count(self, *, kind: str | None = None, asked: str | None = None, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                setattr(self._stats, k, getattr(self._stats, k) + v)
            if kind is not None and asked is not None:
                forms = self._stats.asked.setdefault(kind, {})
                forms[asked] = forms.get(asked, 0) + 1

    def _retry_headers(self) -> list[tuple[str, str]]:
        return [
            ("Retry-After", str(math.ceil(self.retry_after))),
            ("retry-after-ms", str(round(self.retry_after * 1000))),
        ]

    def _rate_limit_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": f"over capacity ({self.capacity} calls at once); retry after "
                f"{self.retry_after:g} s",
                "type": "rate_limit_exceeded",
                "code": 429,
            }
        }

    # --------------------------------------------------------------------- views
    def stats(self) -> LoopbackStats:
        """A snapshot of the counters."""
        with self._lock:
            return self._stats.copy()

    def reset_maxima(self) -> None:
        """Restart ``max_open`` and ``max_serving`` from the levels now (before a measured span)."""
        with self._lock:
            self._stats.max_open = self._stats.open
            self._stats.max_serving = self._stats.serving

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is open (at most ``timeout`` seconds); whether it is."""
        end = time.monotonic() + timeout
        with self._slots:
            while self._stats.open > 0:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._slots.wait(min(left, 0.1))
            return True

    # ----------------------------------------------------------------- lifecycle
    def _new_server(self) -> _Server:
        handler = _Handler if self.protocol == "HTTP/1.1" else _Http10Handler
        return _Server(("127.0.0.1", 0), handler)
