"""Logic the framework readers (OpenAI, LangChain, LlamaIndex) share.

Option checks, the two chat messages of a prompt in cite or answer mode, the reading
returned for an empty prompt, and turning a model's reply text into a :class:`Reading`.
Framework-specific work (message classes, usage fields, structured output) stays in the
reader modules; this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..engine.reading import Reading
from ..errors import CitationParseError
from ._prompt import SYSTEM_PROMPT, PromptTemplate, render_prompt
from ._retry import reading_from_citations, truncate

__all__ = [
    "answer_reading",
    "check_max_citations",
    "check_structured",
    "no_documents_reading",
    "reading_from_text",
    "system_prompt",
    "token_counts",
    "user_message",
]


def check_structured(structured: Any) -> Any:
    """Validate a ``structured`` option: ``"auto"``, ``True`` or ``False``."""
    if structured not in ("auto", True, False):
        raise ValueError(f"structured must be 'auto', True or False, got {structured!r}")
    return structured


def check_max_citations(max_citations: int | None) -> int | None:
    """Validate a ``max_citations`` option: None (no limit) or >= 1."""
    if max_citations is not None and max_citations < 1:
        raise ValueError(f"max_citations must be >= 1 or None, got {max_citations!r}")
    return max_citations


def token_counts(usage: dict[str, Any]) -> tuple[Any, Any]:
    """``(prompt, completion)`` tokens of a usage mapping, OpenAI names
    (``prompt_tokens``/``completion_tokens``) before LangChain/Anthropic ones
    (``input_tokens``/``output_tokens``); None where absent."""
    return (
        usage.get("prompt_tokens", usage.get("input_tokens")),
        usage.get("completion_tokens", usage.get("output_tokens")),
    )


def no_documents_reading() -> Reading:
    """The reading for a prompt with no documents: nothing cited, no model call."""
    return Reading(cited=(), attempts=0, extra={"skipped": "no documents"})


def system_prompt(mode: str) -> str:
    """The system message of ``mode`` (``"cite"`` or ``"answer"``)."""
    if mode == "answer":
        from .answer import ANSWER_SYSTEM_PROMPT

        return ANSWER_SYSTEM_PROMPT
    return SYSTEM_PROMPT


def user_message(
    question: str,
    documents: Sequence[str],
    *,
    mode: str,
    template: PromptTemplate | None,
    max_chars_per_doc: int | None,
) -> str:
    """The user message of one prompt in ``mode``; ``documents`` in prompt order, shape ``(m,)``.

    A callable ``template`` renders the whole message from the documents as they are
    (``max_chars_per_doc`` is not applied to it).
    """
    if mode == "answer":
        from .answer import render_answer_prompt

        if callable(template):
            return template(question, documents)
        return render_answer_prompt(
            question, documents, template=template, max_chars_per_doc=max_chars_per_doc
        )
    return render_prompt(question, documents, template=template, max_chars_per_doc=max_chars_per_doc)


def answer_reading(
    text: str | None,
    documents: Sequence[str],
    *,
    question: str,
    attribution: Any,
    extra: dict[str, Any],
) -> Reading:
    """Answer mode: the shown documents containing the answer in ``text`` count as
    cited (:func:`.answer.reading_from_answer`); ``raw`` keeps the text (truncated)."""
    from .answer import reading_from_answer

    r = reading_from_answer(text, documents, question=question, attribution=attribution, extra=extra)
    return replace(r, raw=truncate(text))


def reading_from_text(
    text: str | None,
    documents: Sequence[str],
    *,
    mode: str,
    question: str,
    attribution: Any,
    max_citations: int | None,
    extra: dict[str, Any],
    no_text: str,
) -> Reading:
    """A reply's text as a :class:`Reading` in ``mode``.

    Raises:
        CitationParseError: Cite mode and ``text`` is empty (message ``no_text``) or not
            citation JSON.
    """
    if mode == "answer":
        return answer_reading(text, documents, question=question, attribution=attribution, extra=extra)
    if text is None or not text.strip():
        raise CitationParseError(no_text)
    return reading_from_citations(text, documents, max_citations=max_citations, raw=text, extra=extra)
