"""Each model call as LlamaIndex sees an LLM's (:class:`LlamaIndexReportedReader`): a
dispatcher span with ``LLMChatStartEvent`` and ``LLMChatEndEvent`` (the reply as a
``ChatResponse`` whose ``raw["usage"]`` and ``additional_kwargs`` hold the tokens, as
LlamaIndex's OpenAI LLM gives them), and the legacy callback manager's ``LLM`` event, so
that LlamaIndex's instrumentation, its ``TokenCountingHandler`` and tracing tools built on
them show every call and what it cost. Needs ``llama-index-core`` (the adapter that uses it
does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMChatStartEvent

from ..engine.records import Reading
from ._model_calls import ReportedReader, reply_text, token_usage

__all__ = ["LlamaIndexReportedReader"]

dispatcher = get_dispatcher(__name__)


class LlamaIndexReportedReader(ReportedReader):
    """A reader whose every call is reported to LlamaIndex (see the module docstring);
    ``callback_manager`` gives the callback manager of the moment (the postprocessor's, whose
    handlers get the legacy events), None: none."""

    def __init__(
        self, reader: Any, *, callback_manager: Callable[[], CallbackManager | None] | None = None
    ) -> None:
        super().__init__(reader)
        self._callbacks = callback_manager

    @property
    def callback_manager(self) -> CallbackManager:
        """The legacy callback manager the events go to (an empty one when none is given)."""
        manager = None if self._callbacks is None else self._callbacks()
        return manager if manager is not None else CallbackManager([])

    def _start(
        self, question: str, documents: Sequence[Any], labels: Sequence[int]
    ) -> tuple[list[ChatMessage], str]:
        messages = [
            ChatMessage(role=m["role"], content=m["content"])
            for m in self.messages(question, documents, labels)
        ]
        model = {"model": self.model, "class_name": type(self.reader).__name__}
        dispatcher.event(LLMChatStartEvent(messages=messages, additional_kwargs={}, model_dict=model))
        payload: dict[str, Any] = {EventPayload.MESSAGES: messages, EventPayload.SERIALIZED: model}
        return messages, self.callback_manager.on_event_start(CBEventType.LLM, payload=payload)

    def _end(self, messages: list[ChatMessage], event_id: str, reading: Reading) -> None:
        usage = token_usage(reading)
        response = ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=reply_text(reading)),
            raw={"model": self.model, "usage": usage, "attempts": reading.attempts, "failed": reading.failed},
            additional_kwargs=dict(usage),
        )
        payload: dict[str, Any] = {EventPayload.MESSAGES: messages, EventPayload.RESPONSE: response}
        self.callback_manager.on_event_end(CBEventType.LLM, payload=payload, event_id=event_id)
        dispatcher.event(LLMChatEndEvent(messages=messages, response=response))

    def _failed(self, messages: list[ChatMessage], event_id: str, err: BaseException) -> None:
        self.callback_manager.on_event_end(
            CBEventType.LLM, payload={EventPayload.EXCEPTION: err}, event_id=event_id
        )
        dispatcher.event(LLMChatEndEvent(messages=messages, response=None))

    @dispatcher.span
    def _call(
        self,
        report: Any,
        fn: Callable[..., Reading],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        messages, event_id = self._start(question, documents, labels)
        try:
            reading = fn(question, documents, labels=labels, **options)
        except BaseException as err:
            self._failed(messages, event_id, err)
            raise
        self._end(messages, event_id, reading)
        return reading

    @dispatcher.span
    async def _acall(
        self,
        report: Any,
        fn: Callable[..., Any],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        messages, event_id = self._start(question, documents, labels)
        try:
            reading: Reading = await fn(question, documents, labels=labels, **options)
        except BaseException as err:
            self._failed(messages, event_id, err)
            raise
        self._end(messages, event_id, reading)
        return reading
