"""Reader for any LangChain chat model or chat-model Runnable (a ``BaseChatModel``, or one
wrapped by ``bind``, ``with_retry``, ``with_fallbacks``, ``configurable_fields``); the
only reader module that imports ``langchain_core``.

With ``structured="auto"`` a plain ``BaseChatModel`` (not a wrapper, whose bindings would
be lost) is asked for ``with_structured_output(Citations, include_raw=True)``, and the raw
tool-call arguments are validated by the package's own parser where the message keeps
them; other models are read as plain text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs

from ..engine.records import Reading
from ..errors import CitationParseError
from ._options import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_CONCURRENCY,
    AnswerAttribution,
    CacheOption,
    Mode,
    PromptTemplate,
    Structured,
    Wait,
    declared_options,
    given_options,
)
from ._prompt import Citations, Prompt, Reply, Usage, attach_raw, content_text, token_counts
from ._reader_base import BaseReader

__all__ = ["ChatModelReader", "is_chat_runnable", "raw_tool_arguments"]

logger = logging.getLogger(__name__)

Labels = Sequence[int] | None
Config = RunnableConfig | None


def _text_of(message: Any) -> str | None:
    """Text content of a chat message (:func:`._prompt.content_text`)."""
    return content_text(getattr(message, "content", message))


def _usage_of(message: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens from ``AIMessage.usage_metadata`` or ``response_metadata``."""
    meta = getattr(message, "usage_metadata", None)
    if isinstance(meta, dict) and ("input_tokens" in meta or "output_tokens" in meta):
        return meta.get("input_tokens"), meta.get("output_tokens")
    rm = getattr(message, "response_metadata", None) or {}
    tu = rm.get("token_usage") or rm.get("usage") if isinstance(rm, dict) else None
    return token_counts(tu) if isinstance(tu, dict) else (None, None)


def raw_tool_arguments(message: Any, call: dict[str, Any]) -> str | None:
    """The arguments of tool call ``call`` as the model wrote them (a JSON string), when
    ``message`` keeps them: OpenAI-style ``additional_kwargs["tool_calls"]`` (matched by id,
    else the first) or a streamed ``tool_call_chunks`` entry; None otherwise."""
    raw_calls = (getattr(message, "additional_kwargs", None) or {}).get("tool_calls")
    if isinstance(raw_calls, list) and raw_calls:
        same = [
            c for c in raw_calls if isinstance(c, dict) and call.get("id") and c.get("id") == call.get("id")
        ]
        first = (same or raw_calls)[0]
        fn = first.get("function") if isinstance(first, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            return fn["arguments"]
    chunks = getattr(message, "tool_call_chunks", None) or []
    if chunks and isinstance(chunks[0], dict) and isinstance(chunks[0].get("args"), str):
        return str(chunks[0]["args"])
    return None


def underlying_chat_model(runnable: Any) -> BaseChatModel | None:
    """The ``BaseChatModel`` inside a chat-model Runnable (itself, ``.bind()``'s bound,
    ``.with_retry()``'s bound, ``.with_fallbacks()``'s first runnable,
    ``.configurable_fields()``'s default), or None."""
    cur = runnable
    for _ in range(8):
        if isinstance(cur, BaseChatModel):
            return cur
        cur = getattr(cur, "bound", None) or getattr(cur, "runnable", None) or getattr(cur, "default", None)
    return None


def is_chat_runnable(obj: Any) -> bool:
    """True for a Runnable taking messages and returning a message: a chat model, or a
    ``bind``/``with_retry``/``with_fallbacks``/``configurable_fields`` wrapper of one."""
    return isinstance(obj, Runnable) and underlying_chat_model(obj) is not None


def _base_url_of(model: Any) -> str | None:
    """The endpoint a chat model talks to, when it says (``openai_api_base``,
    ``base_url``, its openai client's ``base_url``)."""
    for attr in ("openai_api_base", "base_url", "api_base"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    for attr in ("root_client", "client"):
        value = getattr(getattr(model, attr, None), "base_url", None)
        if value is not None:
            return str(value)
    return None


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _plain_fields(model: Any) -> dict[str, Any]:
    """A model's fields that are plain JSON values (model name, temperature, ...), for
    the reply cache's key: clients, callbacks and secrets are left out."""
    return {k: v for k, v in sorted(vars(model).items()) if not k.startswith("_") and _plain(v)}


@declared_options
class ChatModelReader(BaseReader):
    """Ask a LangChain chat model which shown documents answer the question.

    Args:
        chat_model: Any ``BaseChatModel`` (``ChatOpenAI``, ``ChatOllama``, a fake, ...)
            or a Runnable wrapping one (``.bind()``, ``.with_retry()``,
            ``.with_fallbacks()``, ``.configurable_fields()``). Its own retries (e.g.
            ``ChatOpenAI(max_retries=...)``) add to this reader's.
        config: ``RunnableConfig`` (callbacks, tags) passed to every model call; a
            per-call ``config`` to :meth:`read`/:meth:`aread` is merged with it
            (``merge_configs``: both configs' callbacks, tags and metadata are kept).
    """

    option_notes: ClassVar[Mapping[str, str]] = {
        "structured": '``"auto"``: structured output when the model supports it, else text; '
        "``True``: require it (``ValueError`` now if unsupported).",
    }

    def __init__(
        self,
        chat_model: Runnable,
        *,
        config: RunnableConfig | None = None,
        mode: Mode = "cite",
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        attribution: AnswerAttribution | None = None,
        max_chars_per_doc: int | None = None,
        structured: Structured = "auto",
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        cache: CacheOption = None,
        context_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        if not is_chat_runnable(chat_model):
            raise TypeError(
                "ChatModelReader needs a LangChain chat model or a Runnable wrapping one (bind, with_retry, "
                f"with_fallbacks, configurable_fields), got {type(chat_model).__name__}"
            )
        super().__init__(**given_options(locals()))
        structured = self.structured
        self.chat_model = chat_model
        self.config = config
        self._inner = underlying_chat_model(chat_model)
        self._structured_runnable: Runnable | None = None
        if structured is not False and self.mode == "cite":
            self._structured_runnable = self._make_structured()
            if self._structured_runnable is None and structured is True:
                raise ValueError(
                    f"{type(chat_model).__name__} does not support with_structured_output; "
                    "use structured='auto' or False to read JSON from plain text"
                )
        self._use_structured = self._structured_runnable is not None

    @property
    def model_name(self) -> str:
        """The chat model's ``model_name``/``model`` attribute, else its class name."""
        for attr in ("model_name", "model"):
            name = getattr(self._inner, attr, None)
            if isinstance(name, str) and name:
                return name
        return type(self._inner).__name__

    @property
    def base_url(self) -> str | None:
        """The endpoint the chat model talks to, when it exposes one."""
        return _base_url_of(self._inner)

    def _repr_fields(self) -> str:
        wrapper = "" if self.chat_model is self._inner else f", runnable={type(self.chat_model).__name__}"
        url = self.base_url
        return f"{wrapper}, chat_model={type(self._inner).__name__}" + (f", base_url={url!r}" if url else "")

    def _cache_identity(self) -> dict[str, Any]:
        params: Any = repr(self.chat_model)
        if self._inner is not None:
            try:  # LangChain's own cache key (no secrets) and the model's plain fields
                params = [self._inner._get_llm_string(), _plain_fields(self._inner)]
            except Exception:  # noqa: BLE001 - a model that cannot describe itself: its repr
                params = repr(self._inner)
        wrapper = None
        if self.chat_model is not self._inner:
            wrapper = [type(self.chat_model).__name__, getattr(self.chat_model, "kwargs", None)]
        return {**super()._cache_identity(), "params": params, "wrapper": wrapper, "base_url": self.base_url}

    def _declared_context(self) -> int | None:
        """The chat model's ``profile["max_input_tokens"]`` (langchain-core's model
        profiles), when it has one."""
        profile = getattr(self._inner, "profile", None)
        return profile.get("max_input_tokens") if isinstance(profile, Mapping) else None

    def _make_structured(self) -> Runnable | None:
        if self.chat_model is not self._inner:
            return None  # a wrapper's bindings, retries or fallbacks would be lost
        try:
            return self._inner.with_structured_output(Citations, include_raw=True)
        except NotImplementedError:
            logger.info("%s has no structured output; reading plain-text JSON", type(self._inner).__name__)
            return None
        except (TypeError, ValueError) as err:  # include_raw unsupported by an override
            logger.info("with_structured_output(include_raw=True) failed (%s); trying without", err)
        try:
            return self._inner.with_structured_output(Citations)
        except (NotImplementedError, TypeError, ValueError):
            return None

    # ------------------------------------------------------------------ conversion
    def _messages(self, prompt: Prompt) -> list[BaseMessage]:
        return [SystemMessage(content=prompt.system), HumanMessage(content=prompt.user)]

    def _config(self, config: RunnableConfig | None) -> RunnableConfig | None:
        if config is None or self.config is None:
            return self.config if config is None else config
        return merge_configs(self.config, config)

    @staticmethod
    def _text_reply(message: Any, usage: Usage) -> Reply:
        usage.add(*_usage_of(message))
        return Reply(text=content_text(getattr(message, "content", message)), extra={"structured": False})

    @staticmethod
    def _structured_reply(out: Any, usage: Usage) -> Reply:
        extra: dict[str, Any] = {"structured": True}
        raw_msg = out.get("raw") if isinstance(out, dict) and "raw" in out else None
        if raw_msg is not None:
            usage.add(*_usage_of(raw_msg))
            calls = getattr(raw_msg, "tool_calls", None) or []
            if calls and isinstance(calls[0], dict) and isinstance(calls[0].get("args"), dict):
                raw_args = raw_tool_arguments(raw_msg, calls[0])
                if raw_args is not None:  # decoded here: a repeated key is not the last value
                    return Reply(text=raw_args, extra=extra)
                return Reply(value=calls[0]["args"], extra=extra)
            text = _text_of(raw_msg)
            if text and text.strip():
                return Reply(text=text, extra=extra)
            parsed = out.get("parsed")
            if parsed is None:
                err = out.get("parsing_error")
                raise attach_raw(
                    CitationParseError(f"structured output could not be parsed: {err or 'empty reply'}"),
                    raw_msg,
                )
        else:
            parsed = out
        value = parsed.model_dump() if hasattr(parsed, "model_dump") else parsed
        if not isinstance(value, (dict, list)):
            raise attach_raw(
                CitationParseError(f"structured output of unexpected type {type(value).__name__}"), value
            )
        return Reply(value=value, extra=extra)

    # ------------------------------------------------------------------ calls
    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        return self._text_reply(
            self.chat_model.invoke(self._messages(prompt), config=options.get("config")), usage
        )

    async def _acall(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        msg = await self.chat_model.ainvoke(self._messages(prompt), config=options.get("config"))
        return self._text_reply(msg, usage)

    def _call_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        assert self._structured_runnable is not None
        out = self._structured_runnable.invoke(self._messages(prompt), config=options.get("config"))
        return self._structured_reply(out, usage)

    async def _acall_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        assert self._structured_runnable is not None
        out = await self._structured_runnable.ainvoke(self._messages(prompt), config=options.get("config"))
        return self._structured_reply(out, usage)

    # ------------------------------------------------------------------ reading
    def read(
        self, question: str, documents: Sequence[Any], *, labels: Labels = None, config: Config = None
    ) -> Reading:
        """:meth:`BaseReader.read` through ``invoke``; ``config`` (callbacks, tags)
        is merged over the reader's own."""
        merged = self.config if config is None else config if self.config is None else self._config(config)
        return self._read(question, documents, labels, config=merged)

    async def aread(
        self, question: str, documents: Sequence[Any], *, labels: Labels = None, config: Config = None
    ) -> Reading:
        """Asynchronous :meth:`read` (``ainvoke``)."""
        merged = self.config if config is None else config if self.config is None else self._config(config)
        return await self._aread(question, documents, labels, config=merged)
