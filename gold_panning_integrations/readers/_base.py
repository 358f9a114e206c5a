"""The one reader base: options, prompts and ``read``/``aread``, written once.

A reader built on :class:`BaseReader` supplies only

* its call: :meth:`BaseReader._call` (and :meth:`BaseReader._acall` when it has a native
  async path; otherwise a worker thread runs the sync call), plus
  :meth:`BaseReader._call_structured` when the model has structured output;
* its conversion: :meth:`BaseReader._messages` (the prompt in the framework's message
  type) and a :class:`Reply` (the model's text or decoded structured value, its
  finish reason and tokens added to the :class:`~._errors.Usage` tally).

Everything else is here: option checks; string conversion and sanitising of the
question and documents (a lone surrogate becomes U+FFFD instead of failing every
request); the labels the panner passes; the empty-prompt shortcut (no model call);
retries (:func:`._retry.with_retries`); the structured-to-text fallback; turning a reply
into a :class:`~gold_panning_integrations.engine.reading.Reading` in cite or answer
mode (raw output cut at :data:`._prompt.MAX_RAW_CHARS`); and a short ``repr``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from ..engine.reading import Reading
from ..errors import CitationParseError
from ._errors import Usage
from ._limit import CallLimit
from ._prompt import (
    SYSTEM_PROMPT,
    PromptTemplate,
    attach_raw,
    check_labels,
    check_max_chars_per_doc,
    reading_from_citations,
    render_prompt,
    sanitize_text,
    template_labels,
    truncate,
)
from ._retry import RetryPolicy, Wait, check_max_attempts, make_wait, with_retries

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "MODE_CHECK_READINGS",
    "BaseReader",
    "Mode",
    "Prompt",
    "Reply",
    "check_max_citations",
    "check_mode",
    "check_structured",
    "no_documents_reading",
    "token_counts",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 16
"""Calls in flight through one network reader unless ``max_concurrency=`` says otherwise."""

Mode = Literal["cite", "answer"]
Structured = Literal["auto"] | bool


MODE_CHECK_READINGS = 5
"""Cite-mode readings after which a reader whose replies are mostly unreadable as
citations warns, naming answer mode (see :meth:`BaseReader._check_mode`)."""


def check_mode(mode: str) -> str:
    """Validate ``mode`` (``"cite"`` or ``"answer"``)."""
    if mode not in ("cite", "answer"):
        raise ValueError(
            f"mode must be 'cite' (the model lists document numbers) or 'answer' "
            f"(the model answers; documents containing the answer count as cited), got {mode!r}"
        )
    return mode


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


@dataclass(frozen=True)
class Prompt:
    """One round's prompt, rendered once and shared by every attempt.

    Attributes:
        question: The question (sanitised).
        documents: Texts in prompt order (strings, sanitised), shape ``(m,)``.
        labels: The label each document is shown under, shape ``(m,)``: the panner's,
            or ``1..m`` (also for a callable template that numbers documents itself).
        system: The system message.
        user: The user message.
    """

    question: str
    documents: tuple[str, ...]
    labels: tuple[int, ...]
    system: str
    user: str

    def as_dicts(self) -> list[dict[str, str]]:
        """The two chat messages as OpenAI-style ``{"role", "content"}`` dicts."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass
class Reply:
    """What one model call gave back, before validation.

    Attributes:
        text: The reply text (None when the model returned none).
        value: Decoded structured output (a dict or list) when the call was structured;
            validated instead of ``text``.
        finish_reason: Why generation stopped (``"length"`` adds a hint to parse errors).
        extra: Diagnostics recorded in ``Reading.extra`` (model, response format, ...).
    """

    text: str | None = None
    value: Any = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class BaseReader:
    """Options and ``read``/``aread`` shared by every model reader.

    Args:
        mode: ``"cite"``: the model lists document labels as JSON. ``"answer"``: the
            model answers in a few words and the shown documents containing the answer
            count as cited (:func:`.answer.reading_from_answer`).
        template: Replacement user message (cite mode: see :data:`._prompt.PromptTemplate`;
            answer mode: :data:`.answer.ANSWER_TEMPLATE`).
        max_citations: Most labels accepted per reading; the rest count as invalid.
        max_attempts: Attempts per reading, retries included (>= 1).
        wait: Wait between attempts (see :func:`._retry.make_wait`); inject ``0`` in tests.
        attribution: Answer-mode matching rules (:class:`.answer.AnswerAttribution`).
        max_chars_per_doc: Longest document text shown in a prompt, in characters;
            longer documents are cut there and marked ``" [...]"`` (their label is
            unchanged). None: no limit. Not applied to a callable ``template``.
        structured: ``"auto"``, ``True`` or ``False``: whether cite mode uses the model's
            structured output (readers without it ignore this).
        max_concurrency: The most model calls in flight through this reader at once,
            shared by every query and every prompt that goes through it (threads and
            event loops alike); further calls wait their turn, first come first served.
            ``1``: the reader takes no concurrent calls, and the panner sends a round's
            prompts one after another. None: no limit.

    Failures never raise from :meth:`read`/:meth:`aread` except permanent ones
    (:class:`~gold_panning_integrations.errors.FatalReaderError`, naming the reader, its
    model and URL) and a missing extra; every other failure gives a failed
    :class:`Reading` whose ``error`` says what went wrong and what to do.
    """

    recommended_profile: ClassVar[Any] = None
    """The detector profile measured for this reader's model (a bundled name, a path or
    a ``DetectorProfile``), or None: :func:`~gold_panning_integrations.profiles.resolve_profile`
    uses it when the user names none."""

    def __init__(
        self,
        *,
        mode: Mode = "cite",
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        attribution: Any = None,
        max_chars_per_doc: int | None = None,
        structured: Structured = "auto",
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        self.mode = check_mode(mode)
        self.template = template
        self.max_citations = check_max_citations(max_citations)
        self.max_attempts = check_max_attempts(max_attempts)
        make_wait(wait)
        self.wait = wait
        self.attribution = attribution
        self.max_chars_per_doc = check_max_chars_per_doc(max_chars_per_doc)
        self.structured = check_structured(structured)
        self.call_limit = CallLimit(max_concurrency)
        self._use_structured = False
        self._warned_template = False
        self.cite_readings = 0  # cite-mode readings made through this reader
        self.unreadable_replies = 0  # ... of which no reply could be read as citations
        self._warned_mode = False

    # ------------------------------------------------------------------ identity
    @property
    def model_name(self) -> str:
        """The model's name, as recorded in profiles and traces."""
        raise NotImplementedError

    @property
    def max_concurrency(self) -> int | None:
        """The most model calls in flight through this reader (None: no limit)."""
        return self.call_limit.limit

    @property
    def uses_structured_output(self) -> bool:
        """True when cite-mode readings go through the model's structured output."""
        return self._use_structured

    def _repr_fields(self) -> str:
        """Extra ``, key=value`` text for :meth:`__repr__` (e.g. the base URL)."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_name!r}{self._repr_fields()}, mode={self.mode!r})"

    # ------------------------------------------------------------------ prompts
    def prompt(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Prompt:
        """The prompt for one round: texts converted and sanitised, labels checked.

        Args:
            question: The question.
            documents: Documents in prompt order, shape ``(m,)`` (anything ``str`` takes).
            labels: Label of each document this round, shape ``(m,)``; None: ``1..m``.
        """
        docs = tuple(sanitize_text(d) for d in documents)
        q = sanitize_text(question)
        labs = check_labels(labels, len(docs))
        if self.mode == "answer":
            from .answer import ANSWER_SYSTEM_PROMPT, render_answer_prompt

            tpl = self.template
            user = (
                tpl(q, list(docs))
                if callable(tpl)
                else render_answer_prompt(
                    q, docs, labels=labs, template=tpl, max_chars_per_doc=self.max_chars_per_doc
                )
            )
            return Prompt(q, docs, labs, ANSWER_SYSTEM_PROMPT, user)
        user = render_prompt(
            q, docs, labels=labs, template=self.template, max_chars_per_doc=self.max_chars_per_doc
        )
        shown = template_labels(self.template, labs)
        if shown != labs and not self._warned_template:
            self._warned_template = True
            logger.warning(
                "%r: the callable template takes no labels= parameter, so documents are numbered 1..m "
                "instead of the panner's per-round labels; add a labels keyword to the template",
                self,
            )
        return Prompt(q, docs, shown, SYSTEM_PROMPT, user)

    def messages(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Any:
        """The chat messages (system + user) for one prompt, in the model's own type."""
        return self._messages(self.prompt(question, documents, labels=labels))

    def _messages(self, prompt: Prompt) -> Any:
        """The prompt in the framework's message type (default: OpenAI-style dicts)."""
        return prompt.as_dicts()

    # ------------------------------------------------------------------ the call (per reader)
    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """One plain-text model call; adds tokens (and extra calls) to ``usage``."""
        raise NotImplementedError

    async def _acall(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """Asynchronous :meth:`_call`; default: the sync call in a worker thread."""
        return await asyncio.to_thread(self._call, prompt, usage, **options)

    def _call_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """One structured-output call (``Reply.value`` set); NotImplementedError when
        the model has none (the reader then falls back to text)."""
        raise NotImplementedError

    async def _acall_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """Asynchronous :meth:`_call_structured`; default: in a worker thread."""
        return await asyncio.to_thread(self._call_structured, prompt, usage, **options)

    def _fall_back_to_text(self) -> None:
        if self.structured is True:
            raise NotImplementedError(
                f"{self!r}: structured output failed at call time; use structured='auto'"
            )
        logger.info("%r: structured output not implemented at call time; switching to plain text", self)
        self._use_structured = False

    # ------------------------------------------------------------------ reply -> reading
    def _reading(self, reply: Reply, prompt: Prompt) -> Reading:
        """Validate one reply into a :class:`Reading` (raises CitationParseError when
        it is malformed, so the attempt is retried)."""
        extra: dict[str, Any] = {"model": self.model_name, **reply.extra}
        if prompt.labels != tuple(range(1, len(prompt.documents) + 1)):
            extra["labels"] = list(prompt.labels)
        if self.mode == "answer":
            from .answer import reading_from_answer

            if reply.text is None or not reply.text.strip():
                raise CitationParseError("the model returned no text")
            r = reading_from_answer(
                reply.text,
                prompt.documents,
                question=prompt.question,
                attribution=self.attribution,
                extra=extra,
            )
            return replace(r, raw=truncate(reply.text))
        value: Any = reply.value if reply.value is not None else reply.text
        if value is None or (isinstance(value, str) and not value.strip()):
            hint = f" (finish_reason={reply.finish_reason!r})" if reply.finish_reason else ""
            raise CitationParseError(f"the model returned no text{hint}")
        try:
            return reading_from_citations(
                value,
                prompt.documents,
                labels=prompt.labels,
                max_citations=self.max_citations,
                raw=value,
                extra=extra,
            )
        except CitationParseError as err:
            if reply.finish_reason == "length":
                new = CitationParseError(f"{err} (output cut at the token limit; raise max_tokens)")
                raise attach_raw(new, value) from err
            raise

    # ------------------------------------------------------------------ reading
    def _reply(self, prompt: Prompt, usage: Usage, options: dict[str, Any]) -> Reply:
        if self._use_structured and self.mode == "cite":
            try:
                return self._call_structured(prompt, usage, **options)
            except NotImplementedError:
                self._fall_back_to_text()
        return self._call(prompt, usage, **options)

    async def _areply(self, prompt: Prompt, usage: Usage, options: dict[str, Any]) -> Reply:
        if self._use_structured and self.mode == "cite":
            try:
                return await self._acall_structured(prompt, usage, **options)
            except NotImplementedError:
                self._fall_back_to_text()
        return await self._acall(prompt, usage, **options)

    def _policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, self.wait)

    def _read(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        prompt = self.prompt(question, documents, labels=labels)
        if not prompt.documents:
            return no_documents_reading()

        def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            with self.call_limit.slot():
                reply = self._reply(prompt, usage, options)
            return self._reading(reply, prompt)

        return self._check_mode(with_retries(attempt, policy=self._policy(), what=repr(self)))  # type: ignore[arg-type]

    async def _aread(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        prompt = self.prompt(question, documents, labels=labels)
        if not prompt.documents:
            return no_documents_reading()

        async def attempt(usage: Usage) -> Reading:
            usage.calls += 1
            async with self.call_limit.aslot():
                reply = await self._areply(prompt, usage, options)
            return self._reading(reply, prompt)

        return self._check_mode(await with_retries(attempt, policy=self._policy(), what=repr(self)))  # type: ignore[arg-type]

    def _check_mode(self, reading: Reading) -> Reading:
        """Count cite-mode readings and those no reply of which could be read as
        citations; once :data:`MODE_CHECK_READINGS` readings are in and more than half
        were unreadable, say once (a warning) that this model may not cite by label and
        that answer mode is the one to try."""
        if self.mode != "cite":
            return reading
        self.cite_readings += 1
        if reading.failed and reading.extra.get("error_type") == "CitationParseError":
            self.unreadable_replies += 1
        n, bad = self.cite_readings, self.unreadable_replies
        if not self._warned_mode and n >= MODE_CHECK_READINGS and 2 * bad > n:
            self._warned_mode = True
            logger.warning(
                "%r: %d of the first %d cite-mode readings could not be read as citations (last: %s). "
                "This model may not cite documents by label: try mode='answer' (CLI: --mode answer), "
                "where the model answers and the documents holding its answer count as cited",
                self,
                bad,
                n,
                truncate(reading.raw, 120) if reading.failed else "readable",
            )
        return reading

    def read(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Ask the model about one prompt.

        Args:
            question: The question.
            documents: Documents in prompt order, shape ``(m,)``.
            labels: The label each document is shown under this round, shape ``(m,)``
                (distinct ints >= 1); None: ``1..m``.

        Returns:
            The validated citations as 0-based positions into ``documents``, or a
            failed reading (beliefs unchanged for the round).

        Raises:
            FatalReaderError: A permanent failure (authentication, unknown model or
                URL, closed port, redirect elsewhere): retrying cannot fix it.
            MissingExtraError: An optional package this reader needs is missing.
        """
        return self._read(question, documents, labels)

    async def aread(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Asynchronous :meth:`read`."""
        return await self._aread(question, documents, labels)
