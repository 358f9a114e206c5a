"""Each model call as a LangChain chat-model run (:class:`LangChainReportedReader`), a
child of the retriever's or compressor's run: ``on_chat_model_start`` with the call's
messages, then ``on_llm_end`` with the reply and the tokens in the ``LLMResult``
(``llm_output["token_usage"]`` and the message's ``usage_metadata``), or ``on_llm_error``,
so that ``astream_events`` and LangSmith show every call and what it cost. The run's
metadata carries LangSmith's ``ls_provider``/``ls_model_name``/``ls_model_type``, as a
LangChain chat model's does. Needs ``langchain-core`` (the adapter that uses it does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.messages import AIMessage, convert_to_messages
from langchain_core.outputs import ChatGeneration, LLMResult

from ..engine.records import Reading
from ._model_calls import ReportedReader, reply_text, token_usage

__all__ = ["LangChainReportedReader"]


class LangChainReportedReader(ReportedReader):
    """A reader whose calls are LangChain chat-model runs under the ``callbacks`` of the
    ``config`` the adapter passes with each call (``reader_options={"config": ...}``); a
    call without one is made as is, unreported."""

    def _ls_params(self) -> dict[str, Any]:
        """LangSmith's model parameters, as ``BaseChatModel._get_ls_params`` gives them."""
        cls = type(self.reader).__name__
        params: dict[str, Any] = {
            "ls_provider": "openai" if cls == "OpenAIReader" else cls.lower(),
            "ls_model_name": self.model,
            "ls_model_type": "chat",
        }
        for name, key in (("temperature", "ls_temperature"), ("max_tokens", "ls_max_tokens")):
            value = getattr(self.reader, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                params[key] = value
        return params

    def _start_args(
        self, question: str, documents: Sequence[Any], labels: Sequence[int]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        cls = type(self.reader).__name__
        serialized = {
            "lc": 1,
            "type": "not_implemented",
            "id": [type(self.reader).__module__, cls],
            "name": cls,
        }
        messages = convert_to_messages(self.messages(question, documents, labels))
        invocation = {"_type": cls, "model": self.model}
        invocation |= {
            k.removeprefix("ls_"): v
            for k, v in self._ls_params().items()
            if k.startswith("ls_") and k not in ("ls_provider", "ls_model_name", "ls_model_type")
        }
        return (serialized, [messages]), {"invocation_params": invocation, "name": cls}

    def _result(self, reading: Reading) -> LLMResult:
        usage = token_usage(reading)
        meta = {
            "model_name": self.model,
            "token_usage": usage,
            "attempts": reading.attempts,
            "cached": reading.cached,
            "failed": reading.failed,
        }
        message = AIMessage(
            content=reply_text(reading),
            usage_metadata={
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
            },
            response_metadata=meta,
        )
        return LLMResult(
            generations=[[ChatGeneration(message=message)]],
            llm_output={"token_usage": usage, "model_name": self.model},
        )

    def _manager(self, report: Any, factory: Any) -> Any:
        """The run's callback manager, or None when nothing would see the run (no callbacks
        given, or none configured: no handler, no tracer), so the call is made as is, without
        rendering its messages again for nobody."""
        callbacks = report.get("callbacks") if isinstance(report, dict) else None
        if callbacks is None:
            return None
        manager = factory.configure(inheritable_callbacks=callbacks, local_metadata=self._ls_params())
        return manager if manager.handlers else None

    def _call(
        self,
        report: Any,
        fn: Callable[..., Reading],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        manager = self._manager(report, CallbackManager)
        if manager is None:
            return fn(question, documents, labels=labels, **options)
        args, kwargs = self._start_args(question, documents, labels)
        (run,) = manager.on_chat_model_start(*args, **kwargs)
        try:
            reading = fn(question, documents, labels=labels, **options)
        except BaseException as err:
            run.on_llm_error(err)
            raise
        run.on_llm_end(self._result(reading))
        return reading

    async def _acall(
        self,
        report: Any,
        fn: Callable[..., Any],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        manager = self._manager(report, AsyncCallbackManager)
        if manager is None:
            return await fn(question, documents, labels=labels, **options)  # type: ignore[no-any-return]
        args, kwargs = self._start_args(question, documents, labels)
        (run,) = await manager.on_chat_model_start(*args, **kwargs)
        try:
            reading: Reading = await fn(question, documents, labels=labels, **options)
        except BaseException as err:
            await run.on_llm_error(err)
            raise
        await run.on_llm_end(self._result(reading))
        return reading
