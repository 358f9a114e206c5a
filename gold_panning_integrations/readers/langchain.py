"""Reader for any LangChain chat model (``langchain_core.language_models.BaseChatModel``).

Structured output first: with ``structured="auto"`` the reader asks the model for
``with_structured_output(Citations, include_raw=True)``; models without it (LangChain's
fake chat models raise ``NotImplementedError``) are read as plain text and the JSON is
extracted and validated strictly. On the structured path the *raw* tool-call arguments
are validated (not the pydantic-coerced object), so ``"3"``, ``3.0`` or ``true`` labels
are counted as invalid exactly as in text mode.

This is the only module of the package that imports ``langchain_core`` for readers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from ..engine.reading import Reading
from ..errors import CitationParseError
from ._common import (
    check_max_citations,
    check_structured,
    no_documents_reading,
    reading_from_text,
    system_prompt,
    token_counts,
    user_message,
)
from ._prompt import Citations, PromptTemplate, check_max_chars_per_doc
from ._retry import (
    Usage,
    Wait,
    acall_with_retries,
    attach_raw,
    call_with_retries,
    check_max_attempts,
    check_mode,
    reading_from_citations,
)

__all__ = ["ChatModelReader"]

logger = logging.getLogger(__name__)

Structured = Literal["auto"] | bool


def _text_of(message: Any) -> str | None:
    """Text content of a chat message (string content, or the text parts of a list)."""
    if message is None:
        return None
    if isinstance(message, str):
        return message
    content = getattr(message, "content", message)
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") in (None, "text") and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    return str(content)


def _usage_of(message: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens from ``AIMessage.usage_metadata`` or ``response_metadata``."""
    meta = getattr(message, "usage_metadata", None)
    if isinstance(meta, dict) and ("input_tokens" in meta or "output_tokens" in meta):
        return meta.get("input_tokens"), meta.get("output_tokens")
    rm = getattr(message, "response_metadata", None) or {}
    tu = rm.get("token_usage") or rm.get("usage") if isinstance(rm, dict) else None
    if isinstance(tu, dict):
        return token_counts(tu)
    return None, None


class ChatModelReader:
    """Ask a LangChain chat model which shown documents answer the question.

    Args:
        chat_model: Any ``BaseChatModel`` (``ChatOpenAI``, ``ChatOllama``, a fake, ...).
            Its own retries (e.g. ``ChatOpenAI(max_retries=...)``) add to this reader's.
        template: Replacement user message (cite mode: see :mod:`._prompt`; answer
            mode: see :mod:`.answer`).
        max_citations: Most labels accepted per reading; the rest count as invalid.
        max_attempts: Attempts per reading, retries included (>= 1).
        wait: Wait between attempts (see :func:`._retry.make_wait`); inject ``0`` in tests.
        structured: ``"auto"`` (structured output when the model supports it, else
            text), ``True`` (require it; ``ValueError`` now if unsupported) or ``False``.
        mode: ``"cite"`` (JSON document numbers) or ``"answer"`` (the model answers;
            documents containing the answer count as cited).
        attribution: Answer-mode matching rules (:class:`.answer.AnswerAttribution`).
        config: ``RunnableConfig`` (callbacks, tags) passed to every model call;
            :meth:`read`/:meth:`aread` also take a per-call ``config``.
        max_chars_per_doc: Longest document text shown in a prompt, in characters;
            longer documents are cut there and marked ``" [...]"`` (their label is
            unchanged). None (default): no limit, and a prompt too long for the model
            fails with an error saying so. Not applied to a callable ``template``.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        structured: Structured = "auto",
        mode: Literal["cite", "answer"] = "cite",
        attribution: Any = None,
        config: RunnableConfig | None = None,
        max_chars_per_doc: int | None = None,
    ) -> None:
        if not isinstance(chat_model, BaseChatModel):
            raise TypeError(
                f"ChatModelReader needs a langchain_core BaseChatModel, got {type(chat_model).__name__}"
            )
        check_structured(structured)
        self.chat_model = chat_model
        self.template = template
        self.max_citations = check_max_citations(max_citations)
        self.max_attempts = check_max_attempts(max_attempts)
        self.wait = wait
        self.structured = structured
        self.mode = check_mode(mode)
        self.attribution = attribution
        self.config = config
        self.max_chars_per_doc = check_max_chars_per_doc(max_chars_per_doc)
        self._structured_runnable: Runnable | None = None
        self._use_structured = structured is not False and self.mode == "cite"
        if self._use_structured:
            self._structured_runnable = self._make_structured()
            if self._structured_runnable is None:
                if structured is True:
                    raise ValueError(
                        f"{type(chat_model).__name__} does not support with_structured_output; "
                        "use structured='auto' or False to read JSON from plain text"
                    )
                self._use_structured = False

    @property
    def model_name(self) -> str:
        """The chat model's ``model_name``/``model`` attribute, else its class name."""
        for attr in ("model_name", "model"):
            value = getattr(self.chat_model, attr, None)
            if isinstance(value, str) and value:
                return value
        return type(self.chat_model).__name__

    @property
    def uses_structured_output(self) -> bool:
        """True when readings go through ``with_structured_output``."""
        return self._use_structured

    def _make_structured(self) -> Runnable | None:
        try:
            return self.chat_model.with_structured_output(Citations, include_raw=True)
        except NotImplementedError:
            logger.info(
                "%s has no structured output; reading plain-text JSON", type(self.chat_model).__name__
            )
            return None
        except (TypeError, ValueError) as err:  # include_raw unsupported by an override
            logger.info("with_structured_output(include_raw=True) failed (%s); trying without", err)
        try:
            return self.chat_model.with_structured_output(Citations)
        except (NotImplementedError, TypeError, ValueError):
            return None

    # ------------------------------------------------------------------ prompts
    def messages(self, question: str, documents: Sequence[str]) -> list[BaseMessage]:
        """The chat messages (system + human) for one prompt."""
        user = user_message(
            question,
            documents,
            mode=self.mode,
            template=self.template,
            max_chars_per_doc=self.max_chars_per_doc,
        )
        return [SystemMessage(content=system_prompt(self.mode)), HumanMessage(content=user)]

    def _config(self, config: RunnableConfig | None) -> RunnableConfig | None:
        if config is None:
            return self.config
        if self.config is None:
            return config
        return {**self.config, **config}

    # ------------------------------------------------------------------ outputs
    def _from_text(
        self, message: Any, question: str, docs: Sequence[str], usage: Usage, extra: dict[str, Any]
    ) -> Reading:
        pt, ct = _usage_of(message)
        usage.add(pt, ct)
        return reading_from_text(
            _text_of(message),
            docs,
            mode=self.mode,
            question=question,
            attribution=self.attribution,
            max_citations=self.max_citations,
            extra=extra,
            no_text="the chat model returned no text",
        )

    def _from_structured(self, out: Any, docs: Sequence[str], usage: Usage) -> Reading:
        extra: dict[str, Any] = {"structured": True}
        raw_msg = out.get("raw") if isinstance(out, dict) and "raw" in out else None
        if raw_msg is not None:
            pt, ct = _usage_of(raw_msg)
            usage.add(pt, ct)
            calls = getattr(raw_msg, "tool_calls", None) or []
            if calls and isinstance(calls[0], dict) and isinstance(calls[0].get("args"), dict):
                args = calls[0]["args"]
                return reading_from_citations(
                    args, docs, max_citations=self.max_citations, raw=args, extra=extra
                )
            text = _text_of(raw_msg)
            if text and text.strip():
                return reading_from_citations(
                    text, docs, max_citations=self.max_citations, raw=text, extra=extra
                )
            parsed = out.get("parsed")
            if parsed is None:
                err = out.get("parsing_error")
                raise attach_raw(
                    CitationParseError(f"structured output could not be parsed: {err or 'empty reply'}"),
                    raw_msg,
                )
        else:
            parsed = out
        if isinstance(parsed, Citations):
            value: Any = parsed.model_dump()
        elif hasattr(parsed, "model_dump"):
            value = parsed.model_dump()
        else:
            value = parsed
        if not isinstance(value, (dict, list)):
            raise attach_raw(
                CitationParseError(f"structured output of unexpected type {type(value).__name__}"), value
            )
        return reading_from_citations(value, docs, max_citations=self.max_citations, raw=value, extra=extra)

    # ------------------------------------------------------------------ reading
    def read(
        self, question: str, documents: Sequence[str], *, config: RunnableConfig | None = None
    ) -> Reading:
        """Ask the model about one prompt (``invoke``); ``documents`` in prompt order.

        Returns:
            Validated citations (0-based positions) or a failed reading; never raises
            for model-side errors.
        """
        docs = [str(d) for d in documents]
        if not docs:
            return no_documents_reading()
        messages = self.messages(question, docs)
        cfg = self._config(config)

        def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            if self._use_structured and self._structured_runnable is not None:
                try:
                    out = self._structured_runnable.invoke(messages, config=cfg)
                except NotImplementedError:
                    self._fall_back_to_text()
                else:
                    return self._from_structured(out, docs, usage)
            msg = self.chat_model.invoke(messages, config=cfg)
            return self._from_text(msg, question, docs, usage, {"structured": False})

        return call_with_retries(attempt, max_attempts=self.max_attempts, wait=self.wait, what=self._what())

    async def aread(
        self, question: str, documents: Sequence[str], *, config: RunnableConfig | None = None
    ) -> Reading:
        """Asynchronous :meth:`read` (``ainvoke``)."""
        docs = [str(d) for d in documents]
        if not docs:
            return no_documents_reading()
        messages = self.messages(question, docs)
        cfg = self._config(config)

        async def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            if self._use_structured and self._structured_runnable is not None:
                try:
                    out = await self._structured_runnable.ainvoke(messages, config=cfg)
                except NotImplementedError:
                    self._fall_back_to_text()
                else:
                    return self._from_structured(out, docs, usage)
            msg: AIMessage = await self.chat_model.ainvoke(messages, config=cfg)
            return self._from_text(msg, question, docs, usage, {"structured": False})

        return await acall_with_retries(
            attempt, max_attempts=self.max_attempts, wait=self.wait, what=self._what()
        )

    def _fall_back_to_text(self) -> None:
        if self.structured is True:
            raise NotImplementedError(
                f"{type(self.chat_model).__name__} failed structured output at call time; use structured='auto'"
            )
        logger.info("structured output not implemented at call time; switching to plain text")
        self._use_structured = False

    def _what(self) -> str:
        return f"ChatModelReader({type(self.chat_model).__name__})"

    def __repr__(self) -> str:
        return f"ChatModelReader({type(self.chat_model).__name__}, mode={self.mode!r}, structured={self._use_structured})"
