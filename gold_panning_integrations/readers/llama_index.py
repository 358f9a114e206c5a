"""Reader for any LlamaIndex LLM (``llama_index.core.llms.LLM``).

Two paths:

* **structured**: ``llm.structured_predict(output_cls, prompt, **prompt_args)`` (and
  ``astructured_predict``). With ``structured="auto"`` it is used for function-calling
  models or when the LLM has a non-default ``pydantic_program_mode``; the output class
  accepts any label values so that validation stays strict and per label (a ``"3"`` is
  counted as invalid, not coerced to 3).
* **chat**: ``llm.chat(messages)`` / ``achat`` and the JSON extracted from the text, for
  everything else (completion-only models, ``CustomLLM`` subclasses, ``MockLLM``).

A model that echoes the prompt (LlamaIndex's ``MockLLM`` does) gives a failed reading,
never citations read off the echoed document labels.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM
from llama_index.core.prompts import ChatPromptTemplate
from llama_index.core.types import PydanticProgramMode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from ..engine.reading import Reading
from ..errors import CitationParseError
from ._common import (
    check_max_citations,
    check_structured,
    no_documents_reading,
    reading_from_text,
    system_prompt,
    token_counts,
)
from ._common import user_message as _user_message
from ._prompt import SYSTEM_PROMPT, PromptTemplate, check_max_chars_per_doc
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

__all__ = ["CitationsOutput", "LlamaIndexLLMReader"]

logger = logging.getLogger(__name__)

Structured = Literal["auto"] | bool


class CitationsOutput(BaseModel):
    """The numbers (labels) of the documents that contain the answer to the question."""

    model_config = ConfigDict(title="Citations")

    cited: Annotated[list[Any], WithJsonSchema({"type": "array", "items": {"type": "integer"}})] = Field(
        description="Numbers (labels) of the documents that contain the answer."
    )


def _usage_from(obj: Any) -> tuple[Any, Any]:
    """(prompt, completion) tokens from a dict or object with usage-like fields."""
    if obj is None:
        return None, None
    if not isinstance(obj, dict):
        usage = getattr(obj, "usage", None)
        if usage is None:
            return None, None
        obj = (
            usage
            if isinstance(usage, dict)
            else {
                "prompt_tokens": getattr(usage, "prompt_tokens", None),
                "completion_tokens": getattr(usage, "completion_tokens", None),
            }
        )
    elif "usage" in obj and isinstance(obj["usage"], dict):
        obj = obj["usage"]
    return token_counts(obj)


def _chat_usage(response: Any) -> tuple[Any, Any]:
    """Tokens a ``ChatResponse`` reports: ``additional_kwargs`` (response or message),
    else ``raw`` (OpenAI-style ``usage``)."""
    msg = getattr(response, "message", None)
    for source in (getattr(response, "additional_kwargs", None), getattr(msg, "additional_kwargs", None)):
        if isinstance(source, dict):
            pt, ct = _usage_from(source)
            if pt is not None or ct is not None:
                return pt, ct
    return _usage_from(getattr(response, "raw", None))


class LlamaIndexLLMReader:
    """Ask a LlamaIndex LLM which shown documents answer the question.

    Args:
        llm: Any ``llama_index.core.llms.LLM`` (``OpenAI``, ``Ollama``, a
            ``CustomLLM``, ``MockLLM``, ...).
        template: Replacement user message (cite mode: see :mod:`._prompt`; answer
            mode: see :mod:`.answer`).
        max_citations: Most labels accepted per reading; the rest count as invalid.
        max_attempts: Attempts per reading, retries included (>= 1).
        wait: Wait between attempts (see :func:`._retry.make_wait`); inject ``0`` in tests.
        structured: ``"auto"`` (``structured_predict`` for function-calling models or
            a configured ``pydantic_program_mode``; chat otherwise), ``True`` (always
            ``structured_predict``) or ``False`` (always chat).
        mode: ``"cite"`` (JSON document numbers) or ``"answer"`` (the model answers;
            documents containing the answer count as cited).
        attribution: Answer-mode matching rules (:class:`.answer.AnswerAttribution`).
        max_chars_per_doc: Longest document text shown in a prompt, in characters;
            longer documents are cut there and marked ``" [...]"`` (their label is
            unchanged). None (default): no limit, and a prompt too long for the model
            fails with an error saying so. Not applied to a callable ``template``.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        structured: Structured = "auto",
        mode: Literal["cite", "answer"] = "cite",
        attribution: Any = None,
        max_chars_per_doc: int | None = None,
    ) -> None:
        if not isinstance(llm, LLM):
            raise TypeError(f"LlamaIndexLLMReader needs a llama_index.core LLM, got {type(llm).__name__}")
        check_structured(structured)
        self.llm = llm
        self.template = template
        self.max_citations = check_max_citations(max_citations)
        self.max_attempts = check_max_attempts(max_attempts)
        self.wait = wait
        self.structured = structured
        self.mode = check_mode(mode)
        self.attribution = attribution
        self.max_chars_per_doc = check_max_chars_per_doc(max_chars_per_doc)
        if self.mode == "answer" or structured is False:
            self._use_structured = False
        elif structured is True:
            self._use_structured = True
        else:
            self._use_structured = self._supports_structured()
        self._prompt = ChatPromptTemplate(
            message_templates=[
                ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM_PROMPT),
                ChatMessage(role=MessageRole.USER, content="{gp_user_message}"),
            ]
        )

    def _supports_structured(self) -> bool:
        try:
            if getattr(self.llm.metadata, "is_function_calling_model", False):
                return True
        except Exception:  # noqa: BLE001 - a metadata property that fails is a model we should not trust
            return False
        mode = getattr(self.llm, "pydantic_program_mode", PydanticProgramMode.DEFAULT)
        return mode not in (None, PydanticProgramMode.DEFAULT)

    @property
    def model_name(self) -> str:
        """``llm.metadata.model_name``, else the LLM's class name."""
        try:
            name = getattr(self.llm.metadata, "model_name", None)
        except Exception:  # noqa: BLE001 - display only
            name = None
        return name if isinstance(name, str) and name else type(self.llm).__name__

    @property
    def uses_structured_output(self) -> bool:
        """True when readings go through ``structured_predict``."""
        return self._use_structured

    # ------------------------------------------------------------------ prompts
    def user_message(self, question: str, documents: Sequence[str]) -> str:
        """The user message for one prompt."""
        return _user_message(
            question,
            documents,
            mode=self.mode,
            template=self.template,
            max_chars_per_doc=self.max_chars_per_doc,
        )

    def messages(self, question: str, documents: Sequence[str]) -> list[ChatMessage]:
        """The chat messages (system + user) for one prompt."""
        return [
            ChatMessage(role=MessageRole.SYSTEM, content=system_prompt(self.mode)),
            ChatMessage(role=MessageRole.USER, content=self.user_message(question, documents)),
        ]

    # ------------------------------------------------------------------ outputs
    def _from_chat(self, response: Any, question: str, docs: Sequence[str], usage: Usage) -> Reading:
        pt, ct = _chat_usage(response)
        usage.add(pt, ct)
        msg = getattr(response, "message", None)
        text = getattr(msg, "content", None) if msg is not None else None
        if text is not None and not isinstance(text, str):
            text = str(text)
        return reading_from_text(
            text,
            docs,
            mode=self.mode,
            question=question,
            attribution=self.attribution,
            max_citations=self.max_citations,
            extra={"structured": False},
            no_text="the LLM returned no text",
        )

    def _from_structured(self, out: Any, docs: Sequence[str]) -> Reading:
        if isinstance(out, list) and out:  # some programs return a list of objects
            out = out[0]
        value = out.model_dump() if hasattr(out, "model_dump") else out
        if not isinstance(value, (dict, list)):
            raise attach_raw(
                CitationParseError(f"structured output of unexpected type {type(out).__name__}"), out
            )
        return reading_from_citations(
            value, docs, max_citations=self.max_citations, raw=value, extra={"structured": True}
        )

    @staticmethod
    def _structured_error(err: Exception) -> CitationParseError:
        return CitationParseError(f"structured output could not be parsed: {type(err).__name__}: {err}")

    # ------------------------------------------------------------------ reading
    def read(self, question: str, documents: Sequence[str]) -> Reading:
        """Ask the LLM about one prompt; ``documents`` in prompt order.

        Returns:
            Validated citations (0-based positions) or a failed reading; never raises
            for model-side errors.
        """
        docs = [str(d) for d in documents]
        if not docs:
            return no_documents_reading()

        def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            if self._use_structured:
                try:
                    out = self.llm.structured_predict(
                        CitationsOutput, self._prompt, gp_user_message=self.user_message(question, docs)
                    )
                except NotImplementedError:
                    self._fall_back_to_chat()
                except (ValidationError, ValueError, TypeError) as err:
                    raise self._structured_error(err) from err
                else:
                    return self._from_structured(out, docs)
            response = self.llm.chat(self.messages(question, docs))
            return self._from_chat(response, question, docs, usage)

        return call_with_retries(attempt, max_attempts=self.max_attempts, wait=self.wait, what=self._what())

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        """Asynchronous :meth:`read` (``astructured_predict`` / ``achat``)."""
        docs = [str(d) for d in documents]
        if not docs:
            return no_documents_reading()

        async def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            if self._use_structured:
                try:
                    out = await self.llm.astructured_predict(
                        CitationsOutput, self._prompt, gp_user_message=self.user_message(question, docs)
                    )
                except NotImplementedError:
                    self._fall_back_to_chat()
                except (ValidationError, ValueError, TypeError) as err:
                    raise self._structured_error(err) from err
                else:
                    return self._from_structured(out, docs)
            response = await self.llm.achat(self.messages(question, docs))
            return self._from_chat(response, question, docs, usage)

        return await acall_with_retries(
            attempt, max_attempts=self.max_attempts, wait=self.wait, what=self._what()
        )

    def _fall_back_to_chat(self) -> None:
        if self.structured is True:
            raise NotImplementedError(
                f"{type(self.llm).__name__} does not implement structured_predict; use structured='auto'"
            )
        logger.info("structured_predict not implemented; switching to chat")
        self._use_structured = False

    def _what(self) -> str:
        return f"LlamaIndexLLMReader({type(self.llm).__name__})"

    def __repr__(self) -> str:
        return f"LlamaIndexLLMReader({type(self.llm).__name__}, mode={self.mode!r}, structured={self._use_structured})"
