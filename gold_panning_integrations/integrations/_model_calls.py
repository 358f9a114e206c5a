"""Every model call shown to the framework's tracing: :class:`ReportedReader`, a thin
wrapper an adapter puts around a reader that does not report its calls itself (an
``OpenAIReader``, the CLI's and the docs' default; ``LocalReader``; a user's reader), so that
each ``read``/``aread`` becomes a model run of the framework (a LangChain chat-model child
run, LlamaIndex LLM events) with its messages, its reply and its tokens, and tracing tools
(``astream_events``, LangSmith, LlamaIndex's instrumentation and token counters) show what a
query cost.

The wrapper changes nothing of the reading: it calls the reader's own method with the same
arguments and returns its :class:`~gold_panning_integrations.engine.records.Reading`; every
other attribute (``model_name``, ``max_concurrency``, ...) is the reader's. One ``read`` is
one run, its retries included (``Reading.attempts``). Nothing here imports a framework: the
LangChain and LlamaIndex reports are the subclasses in :mod:`._langchain_calls` and
:mod:`._llama_index_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..engine.records import Reading

__all__ = ["ReportedReader", "prompt_messages", "reply_text", "token_usage"]


def prompt_messages(
    reader: Any, question: str, documents: Sequence[Any], labels: Sequence[int]
) -> list[dict[str, str]]:
    """The chat messages of one call, ``[{"role", "content"}, ...]``: the reader's own
    rendering when it has one (``prompt(...).as_dicts()``, a ``BaseReader``), else one user
    message with the question and the documents under their labels."""
    render = getattr(reader, "prompt", None)
    if callable(render):
        try:
            messages = render(question, documents, labels=labels).as_dicts()
        except Exception:  # noqa: BLE001 - the call itself reports the problem; show the input
            messages = None
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            return messages
    shown = "\n".join(f"[{label}] {doc}" for label, doc in zip(labels, documents))
    return [{"role": "user", "content": f"{question}\n\n{shown}"}]


def reply_text(reading: Reading) -> str:
    """What the model answered, for the run's output: its raw reply, else its answer, else
    the citations it gave (a cached reading keeps no raw text), else the failure."""
    if reading.raw:
        return reading.raw
    if reading.answer:
        return reading.answer
    if reading.failed:
        return f"(failed: {reading.error})"
    return json.dumps({"cited_positions": list(reading.cited)})


def token_usage(reading: Reading) -> dict[str, int]:
    """``{"prompt_tokens", "completion_tokens", "total_tokens"}`` the endpoint reported for
    the reading (its attempts summed; 0 where it reported none)."""
    prompt, completion = reading.prompt_tokens or 0, reading.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ReportedReader:
    """``reader`` with each ``read``/``aread`` reported as a model run (see the module
    docstring); only the methods the reader has are present. Subclasses report:
    :meth:`_call` and :meth:`_acall` wrap one call in the framework's run, given the
    framework's options (``report``) the engine passes per call (``reader_options``)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        for method in ("read", "aread"):
            fn = getattr(reader, method, None)
            if callable(fn):
                setattr(self, method, self._reported(method, fn))

    def _reported(self, method: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def read(question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any) -> Any:
            report = options.pop(self.option, None)
            return self._call(report, fn, question, documents, labels, options)

        async def aread(
            question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any
        ) -> Any:
            report = options.pop(self.option, None)
            return await self._acall(report, fn, question, documents, labels, options)

        return read if method == "read" else aread

    option = "config"
    """The ``reader_options`` keyword through which an adapter hands its run to a call."""

    @property
    def model(self) -> str:
        """The model's name for the run (the reader's ``model_name``, else its class)."""
        name = getattr(self.reader, "model_name", None)
        return name if isinstance(name, str) and name else type(self.reader).__name__

    def messages(
        self, question: str, documents: Sequence[Any], labels: Sequence[int]
    ) -> list[dict[str, str]]:
        """:func:`prompt_messages` of one call."""
        return prompt_messages(self.reader, question, documents, labels)

    def _call(
        self,
        report: Any,
        fn: Callable[..., Reading],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        return fn(question, documents, labels=labels, **options)

    async def _acall(
        self,
        report: Any,
        fn: Callable[..., Any],
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int],
        options: dict[str, Any],
    ) -> Reading:
        return await fn(question, documents, labels=labels, **options)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name == "reader":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.reader, name)

    def __repr__(self) -> str:
        return repr(self.reader)
