"""Reader for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's
server, Ollama) through the official ``openai`` client, its own retries off (the reader
base's retry policy is the one retry layer), ``timeout`` a deadline for the whole request
and for the query (:class:`._limits.Deadline`) and no redirect to another host
(:mod:`._http`). The asynchronous client is made per event loop (a connection pool
belongs to the loop that opened it), so ``asyncio.run`` may be called once per query.

With ``response_format="auto"`` the reader asks for ``json_schema``, then ``json_object``,
then plain text, while the server rejects the stricter form (:func:`_is_format_rejection`);
the level that worked is remembered per endpoint (base URL and model) for the process,
with one warning.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar

from typing_extensions import Self

from ..errors import CitationParseError, FatalReaderError, ReaderError
from ._errors import classify_error
from ._http import make_async_http_client, make_http_client, request_deadline, tls_context
from ._limits import Deadline, QueryDeadlineError
from ._options import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_CONCURRENCY,
    RESPONSE_FORMATS,
    AnswerAttribution,
    CacheOption,
    Mode,
    PromptTemplate,
    ResponseFormat,
    Wait,
    declared_options,
    given_options,
)
from ._prompt import Prompt, Reply, Usage, attach_raw, citation_json_schema, content_text, truncate
from ._reader_base import BaseReader
from .answer import abstain_probability

__all__ = ["RESPONSE_FORMATS", "OpenAIReader", "forget_endpoint_formats"]

logger = logging.getLogger(__name__)

LOCAL_API_KEY = "not-needed"
"""Placeholder key sent to local servers (vLLM, llama.cpp, Ollama) that ignore it."""

OPENAI_BASE_URL = "https://api.openai.com/v1"

_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format", "structured output")


def _is_format_rejection(err: BaseException) -> bool:
    """True when the server refused the requested ``response_format``: HTTP 501, or a
    400/422/500 whose message names the response format (llama-cpp-python's server
    answers with a 500, docs/when-things-go-wrong.md); any other 500 is retried."""
    status = getattr(err, "status_code", None)
    if status not in (400, 422, 500, 501):
        return False
    text = f"{getattr(err, 'message', '')} {getattr(err, 'body', '')} {err}".lower()
    return status == 501 or any(w in text for w in _FORMAT_WORDS)


_ENDPOINT_LEVELS: dict[tuple[str, str], int] = {}
"""Per ``(base URL, model)``, the weakest response format the endpoint needed so far
(an index into :data:`RESPONSE_FORMATS`), where every ``"auto"`` reader on it starts."""
_ENDPOINT_LOCK = threading.Lock()


def forget_endpoint_formats() -> None:
    """Forget every endpoint's negotiated response format (the next reader probes again)."""
    with _ENDPOINT_LOCK:
        _ENDPOINT_LEVELS.clear()


_TOP_LOGPROBS = 20
"""First-token candidates asked for with ``logprobs`` (OpenAI's cap)."""


def _abstain_p(choice: Any) -> float | None:
    """:func:`~.answer.abstain_probability` of a chat choice's first-token ``top_logprobs``
    (None when the server returned none, or in a shape not OpenAI's)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    first: dict[str, float] = {}
    for cand in getattr(content[0], "top_logprobs", None) or ():
        token, logprob = getattr(cand, "token", None), getattr(cand, "logprob", None)
        if isinstance(token, str) and isinstance(logprob, (int, float)) and math.isfinite(logprob):
            first[token] = first.get(token, 0.0) + math.exp(min(float(logprob), 0.0))
    return abstain_probability(first)


@declared_options
class OpenAIReader(BaseReader):
    """Ask an OpenAI-compatible chat model which shown documents answer the question.

    Args:
        model: Model name as the server knows it (``"gpt-4o-mini"``, ``"qwen2.5:0.5b"``).
        base_url: Endpoint root, e.g. ``"http://127.0.0.1:8000/v1"`` for vLLM or
            llama.cpp, ``"http://127.0.0.1:11434/v1"`` for Ollama. None: OpenAI (or the
            ``OPENAI_BASE_URL`` environment variable).
        api_key: API key. Default: ``OPENAI_API_KEY``; when that is unset and
            ``base_url`` is given, the placeholder ``"not-needed"`` (local servers).
        client: A ready ``openai.OpenAI`` client for :meth:`read` (its retries are
            turned off on a copy).
        async_client: A ready ``openai.AsyncOpenAI`` client for :meth:`aread`.
        top_p: Nucleus sampling; None leaves the server default.
        max_tokens: Completion budget per call.
        extra_body: Extra JSON fields sent with every request (e.g. Ollama's ``options``).
        logprobs: In answer mode, ask for the first token's ``top_logprobs`` (20) and read
            :attr:`~..engine.records.Reading.abstain_p` from them; the engine uses it when
            the profile has an ``abstention_map`` (fitted by ``calibrate --from-traces`` on
            traces recorded with this on). The server must support ``logprobs`` (OpenAI,
            vLLM, llama.cpp's server).
    """

    option_notes: ClassVar[Mapping[str, str]] = {
        "max_citations": "Also the schema's ``maxItems``.",
        "timeout": "A ``client=`` you pass keeps its own HTTP settings (per-read timeouts, "
        "redirects); the async reader applies the deadline to any client.",
        "requests_per_minute": "A rejected response format's retry counts too.",
        "cache": "Keyed on the model, base URL, messages, temperature, top-p, max tokens, "
        "response format and extra body.",
    }
    temperature: float
    timeout: float
    response_format: str

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        async_client: Any = None,
        top_p: float | None = None,
        max_tokens: int = 256,
        extra_body: dict[str, Any] | None = None,
        logprobs: bool = False,
        mode: Mode = "cite",
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        attribution: AnswerAttribution | None = None,
        max_chars_per_doc: int | None = None,
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        cache: CacheOption = None,
        context_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        response_format: ResponseFormat = "auto",
        temperature: float = 0.0,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(**given_options(locals()))
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty model name, got {model!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.model = model
        self.base_url = base_url
        self.top_p = top_p
        self.max_tokens = int(max_tokens)
        self.extra_body = dict(extra_body) if extra_body else None
        if not isinstance(logprobs, bool):
            raise TypeError(f"logprobs must be True or False, got {logprobs!r}")
        self.logprobs = logprobs
        self._level = 0 if self.response_format == "auto" else RESPONSE_FORMATS.index(self.response_format)
        needs_key = (client is None and async_client is None) or api_key is not None
        self._api_key: str | None = self._resolve_key(api_key, base_url) if needs_key else None
        self._owns_client = client is None
        self._client = self._without_retries(client)
        self._async_client = self._without_retries(async_client)
        # Clients this reader creates are kept per event loop: an AsyncOpenAI connection
        # pool cannot be reused once the loop that opened it is closed (asyncio.run twice).
        self._loop_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._tls: Any = None
        self.query_seconds = self.timeout

    # ------------------------------------------------------------------ clients
    @staticmethod
    def _resolve_key(api_key: str | None, base_url: str | None) -> str:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            return key
        if base_url or os.environ.get("OPENAI_BASE_URL"):
            return LOCAL_API_KEY
        raise ValueError(
            "OpenAIReader needs an API key: set OPENAI_API_KEY or pass api_key=, "
            "or pass base_url= for a local server (vLLM, llama.cpp, Ollama) that needs none"
        )

    @staticmethod
    def _without_retries(client: Any) -> Any:
        try:
            return client.with_options(max_retries=0) if hasattr(client, "with_options") else client
        except TypeError:  # a look-alike client without that option
            return client

    @property
    def url(self) -> str:
        """The endpoint root requests go to (``base_url``, ``OPENAI_BASE_URL`` or OpenAI's)."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL

    def _new_client(self, asynchronous: bool) -> Any:
        import openai

        if asynchronous:  # one per event loop, all with one TLS context (loaded once)
            if self._tls is None:
                self._tls = tls_context()
            http_client = make_async_http_client(self.url, timeout=self.timeout, tls=self._tls)
        else:
            http_client = make_http_client(self.url, timeout=self.timeout)
        return (openai.AsyncOpenAI if asynchronous else openai.OpenAI)(
            api_key=self._api_key or self._resolve_key(None, self.base_url),
            base_url=self.url,
            timeout=self.timeout,
            max_retries=0,
            http_client=http_client,
        )

    @property
    def client(self) -> Any:
        """The synchronous ``openai.OpenAI`` client (created on first use)."""
        if self._client is None:
            self._client = self._new_client(asynchronous=False)
        return self._client

    @property
    def async_client(self) -> Any:
        """The ``openai.AsyncOpenAI`` client: the one given, else one created per running
        event loop (so ``asyncio.run`` may be called repeatedly with the same reader)."""
        if self._async_client is not None:
            return self._async_client
        try:
            loop: Any = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        client = self._loop_clients.get(loop) if loop is not None else None
        if client is None:
            client = self._new_client(asynchronous=True)
            if loop is not None:
                self._loop_clients[loop] = client
        return client

    @property
    def model_name(self) -> str:
        """The model name sent to the server."""
        return self.model

    @property
    def format_level(self) -> str:
        """The response format currently used in cite mode (remembered after fallbacks)."""
        return RESPONSE_FORMATS[self._level]

    def _repr_fields(self) -> str:
        return f", base_url={self.url!r}"

    def _cache_identity(self) -> dict[str, Any]:
        return {
            **super()._cache_identity(),
            "base_url": self._endpoint[0],
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "response_format": self.response_format if self.mode == "cite" else None,
            "extra_body": self.extra_body,
            "logprobs": self._wants_logprobs(),
        }

    def _wants_logprobs(self) -> bool:
        return self.logprobs and self.mode == "answer"

    # ------------------------------------------------------------------ requests
    def _response_format(self, level: int | None) -> dict[str, Any] | None:
        name = None if level is None else RESPONSE_FORMATS[level]
        if name == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": "citations",
                    "schema": citation_json_schema(max_citations=self.max_citations),
                    "strict": True,
                },
            }
        if name == "json_object":
            return {"type": "json_object"}
        return None

    def _seconds(self, deadline: Deadline | None) -> float:
        """What this request may take: ``timeout``, or less when the query's ``deadline``
        is nearer (QueryDeadlineError when it has passed)."""
        if deadline is None:
            return self.timeout
        left = deadline.left()
        if left <= 0:
            raise QueryDeadlineError(
                f"the query's deadline passed (no reply within timeout={self.timeout:g} s) "
                "before this request was sent; raise timeout= for a slower endpoint"
            )
        return min(self.timeout, left)

    def _kwargs(self, messages: list[dict[str, str]], level: int | None, seconds: float) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": seconds,
        }
        if self.top_p is not None:
            kw["top_p"] = self.top_p
        if (rf := self._response_format(level)) is not None:
            kw["response_format"] = rf
        if self.extra_body:
            kw["extra_body"] = self.extra_body
        if self._wants_logprobs():
            kw["logprobs"], kw["top_logprobs"] = True, _TOP_LOGPROBS
        return kw

    @property
    def _endpoint(self) -> tuple[str, str]:
        """``(base URL, model)``: the key under which a negotiated format is remembered."""
        url = getattr(self._client, "base_url", None) if self.base_url is None else None
        return (str(url or self.url).rstrip("/"), self.model)

    def _level_now(self) -> int | None:
        if self.mode == "answer":
            return None
        if self.response_format == "auto":
            with _ENDPOINT_LOCK:
                known = _ENDPOINT_LEVELS.get(self._endpoint, 0)
            self._level = max(self._level, known)
        return self._level

    def _downgrade(self, level: int, err: BaseException, usage: Usage) -> int:
        """Next format level after a rejection (the rejected call is counted in ``usage``),
        or raise when there is none to try."""
        if self.response_format != "auto" or level + 1 >= len(RESPONSE_FORMATS):
            raise FatalReaderError(
                f"the server rejected response_format={RESPONSE_FORMATS[level]!r}: {classify_error(err)}; "
                "use response_format='auto' to fall back to weaker formats",
                status_code=getattr(err, "status_code", None),
            ) from err
        endpoint = self._endpoint
        with _ENDPOINT_LOCK:
            learnt = _ENDPOINT_LEVELS.get(endpoint, 0) < level + 1
            if learnt:
                _ENDPOINT_LEVELS[endpoint] = level + 1
        if learnt:  # one line per endpoint, however many calls were in flight
            logger.warning(
                "%s (model %r) rejected response_format %r (%s); falling back to %r for every "
                "request to this endpoint (pass response_format= to choose one)",
                endpoint[0],
                endpoint[1],
                RESPONSE_FORMATS[level],
                f"HTTP {getattr(err, 'status_code', '?')}",
                RESPONSE_FORMATS[level + 1],
            )
        self._level = max(self._level, level + 1)
        usage.calls += 1
        return level + 1

    def _to_reply(self, resp: Any, usage: Usage, level: int | None) -> Reply:
        """The :class:`Reply` of one chat-completions response."""
        if isinstance(resp, (str, bytes)):
            raise attach_raw(
                CitationParseError(
                    "the server answered with a non-JSON body (is base_url an OpenAI-compatible /v1?)"
                ),
                resp,
            )
        u = getattr(resp, "usage", None)
        usage.add(getattr(u, "prompt_tokens", None), getattr(u, "completion_tokens", None))
        choices = getattr(resp, "choices", None) or []
        if not choices:
            raise CitationParseError("the server returned no choices")
        message = getattr(choices[0], "message", None)
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise attach_raw(ReaderError(f"the model refused to answer: {truncate(refusal, 300)}"), refusal)
        extra: dict[str, Any] = {"model": getattr(resp, "model", None) or self.model}
        extra["finish_reason"] = getattr(choices[0], "finish_reason", None)
        if level is not None:
            extra["response_format"] = RESPONSE_FORMATS[level]
        return Reply(
            text=content_text(getattr(message, "content", None)),
            finish_reason=extra["finish_reason"],
            extra=extra,
            abstain_p=_abstain_p(choices[0]) if self._wants_logprobs() else None,
        )

    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        return self._reply(prompt, usage, options, None, None)

    async def _acall(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        return await self._areply(prompt, usage, options, None, None)

    def _reply(
        self,
        prompt: Prompt,
        usage: Usage,
        options: Mapping[str, Any],
        deadline: Deadline | None,
        left: float | None,
    ) -> Reply:
        """One chat completion at the endpoint's response-format level, again one level
        down while the server rejects the format. Each request is admitted by the rate
        limit and settled when it completes, with the tokens the server reported for it;
        it ends within what is left of the query's ``deadline`` (``left`` as in
        :meth:`BaseReader._reply`). The client is made before the request is admitted."""
        level, limit = self._level_now(), self.rate_limit
        create = self.client.chat.completions.create
        while True:
            entry = limit.acquire(self._token_estimate(prompt)) if limit.active else None
            if left is not None:  # the wait in the reader's own queue is not the endpoint's
                deadline.queued(left)  # type: ignore[union-attr]
                left = None
            before = usage.tokens()
            try:
                kwargs = self._kwargs(prompt.as_dicts(), level, self._seconds(deadline))
                with request_deadline(kwargs["timeout"]):
                    resp = create(**kwargs)
            except Exception as err:
                if level is None or not _is_format_rejection(err):
                    raise
                level = self._downgrade(level, err, usage)  # and try again at that level: a request too
            else:
                return self._to_reply(resp, usage, level)
            finally:
                if entry is not None:
                    limit.settle(entry, usage.tokens_since(before))

    async def _areply(
        self,
        prompt: Prompt,
        usage: Usage,
        options: Mapping[str, Any],
        deadline: Deadline | None,
        left: float | None,
    ) -> Reply:
        """Asynchronous :meth:`_reply` (the running event loop's client; the request's
        deadline is ``asyncio.wait_for``)."""
        level, limit = self._level_now(), self.rate_limit
        create = self.async_client.chat.completions.create
        while True:
            entry = await limit.aacquire(self._token_estimate(prompt)) if limit.active else None
            if left is not None:
                deadline.queued(left)  # type: ignore[union-attr]
                left = None
            before = usage.tokens()
            try:
                kwargs = self._kwargs(prompt.as_dicts(), level, self._seconds(deadline))
                resp = await asyncio.wait_for(create(**kwargs), kwargs["timeout"])
            except Exception as err:
                if level is None or not _is_format_rejection(err):
                    raise
                level = self._downgrade(level, err, usage)
            else:
                return self._to_reply(resp, usage, level)
            finally:
                if entry is not None:
                    limit.settle(entry, usage.tokens_since(before))

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        """Close the synchronous client (only one this reader created)."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the async client of the running loop (only one this reader created)."""
        client = self._loop_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
