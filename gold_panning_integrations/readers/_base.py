"""The one reader base: options, prompts and ``read``/``aread``, written once.

A reader built on :class:`BaseReader` supplies only its call (:meth:`BaseReader._call`,
:meth:`BaseReader._acall` when it has a native async path, :meth:`BaseReader._call_structured`
when the model has structured output) and its conversion (:meth:`BaseReader._messages`
and a :class:`Reply`). Everything else is here: option checks, sanitising, labels,
fitting the context (:mod:`._fit_context`), retries (:mod:`._retry`) within the query's deadline
(:mod:`._deadline`), the structured-to-text fallback, replies read into a
:class:`~gold_panning_integrations.engine.reading.Reading` in cite or answer mode, the
shared limits (:mod:`._limit`) and the reply cache (:mod:`._cache`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from .._steps import Steps, arun_steps, run_steps
from ..engine.reading import Reading, current_query
from ..errors import CitationParseError
from ._cache import ReplyCache, cache_key
from ._deadline import Deadline, attempting
from ._errors import Usage
from ._fit_context import CharTokenizer, DocumentsDoNotFitError, Tokenizer, fit_documents
from ._limit import CallLimit, RateLimit
from ._options import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_CONCURRENCY,
    READER_OPTIONS,
    Mode,
    declared_options,
    resolve_options,
)
from ._prompt import (
    SYSTEM_PROMPT,
    PromptTemplate,
    attach_raw,
    check_labels,
    reading_from_citations,
    render_prompt,
    sanitize_text,
    template_labels,
    truncate,
)
from ._retry import RetryPolicy, retry_steps

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "MODE_CHECK_READINGS",
    "BaseReader",
    "Mode",
    "Prompt",
    "Reply",
    "content_text",
    "no_documents_reading",
    "token_counts",
]

logger = logging.getLogger(__name__)


MODE_CHECK_READINGS = 5
"""Cite-mode readings after which a reader whose replies are mostly unreadable as
citations warns, naming answer mode (see :meth:`BaseReader._check_mode`)."""


MESSAGE_OVERHEAD_TOKENS = 16
"""Chat-template tokens per message (role markers, separators), counted when fitting."""


def token_counts(usage: dict[str, Any]) -> tuple[Any, Any]:
    """``(prompt, completion)`` tokens of a usage mapping (``prompt_tokens`` before
    ``input_tokens``, ``completion_tokens`` before ``output_tokens``); None where absent."""
    return (
        usage.get("prompt_tokens", usage.get("input_tokens")),
        usage.get("completion_tokens", usage.get("output_tokens")),
    )


def content_text(content: Any) -> str | None:
    """Message content as text: a string as is, the text parts of a list joined (strings,
    ``{"type": "text", "text": ...}`` dicts, objects with a ``text`` string), else ``str``."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts = [
        p.get("text") if isinstance(p, dict) and p.get("type") in (None, "text") else getattr(p, "text", p)
        for p in content
    ]
    return "".join(text for text in parts if isinstance(text, str))


def no_documents_reading() -> Reading:
    """The reading for a prompt with no documents: nothing cited, no model call."""
    return Reading(cited=(), attempts=0, extra={"skipped": "no documents"})


@dataclass(frozen=True)
class Prompt:
    """One round's prompt, rendered once and shared by every attempt: the question and
    ``documents`` (texts in prompt order, sanitised, as shown, shape ``(m,)``), the
    ``labels`` they are shown under (shape ``(m,)``: the panner's, or ``1..m`` for a
    callable template that numbers documents itself), the system and user messages."""

    question: str
    documents: tuple[str, ...]
    labels: tuple[int, ...]
    system: str
    user: str
    documents_cut: int = 0
    """Documents cut to fit the model's context (:mod:`._fit_context`); ``documents`` holds them cut."""
    chars_cut: int = 0
    """Characters those cuts removed from the documents' text."""

    def as_dicts(self) -> list[dict[str, str]]:
        """The two chat messages as OpenAI-style ``{"role", "content"}`` dicts."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass
class Reply:
    """What one model call gave back, before validation: its ``text``, or the decoded
    structured ``value`` (validated instead), the ``finish_reason`` (``"length"`` adds a
    hint to parse errors), ``extra`` diagnostics for ``Reading.extra`` and ``abstain_p``
    (:attr:`Reading.abstain_p`, from the first token's probabilities when the endpoint
    returned them)."""

    text: str | None = None
    value: Any = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    abstain_p: float | None = None


@declared_options
class BaseReader:
    """Options and ``read``/``aread`` shared by every model reader; the ``Args:`` below
    derive from the declarations in :mod:`._options`. Failures are failed readings
    except permanent ones (see :meth:`read`).

    Args:
    """

    recommended_profile: ClassVar[Any] = None
    """The detector profile measured for this reader's model (a bundled name, a path or a
    ``DetectorProfile``), used when the user names none."""

    option_defaults: ClassVar[Mapping[str, Any]] = {}
    """Defaults used instead of the declared ones (also for base options it does not take)."""

    option_notes: ClassVar[Mapping[str, str]] = {}
    """A sentence per option added to its declared doc in this reader's docstring."""

    # the base options' values (:mod:`._options`), set by ``__init__``
    mode: str
    template: PromptTemplate | None
    max_citations: int | None
    max_attempts: int
    wait: Any
    attribution: Any
    max_chars_per_doc: int | None
    structured: Any
    cache: ReplyCache | None
    context_tokens: int | None

    def __init__(self, **options: Any) -> None:
        values = resolve_options(type(self), options)
        for opt in READER_OPTIONS.values():
            if opt.name in values and opt.store:
                setattr(self, opt.name, values[opt.name])
        self.call_limit = CallLimit(values["max_concurrency"])
        self.rate_limit = RateLimit(values["requests_per_minute"], values["tokens_per_minute"])
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
    def requests_per_minute(self) -> int | None:
        """The most requests per 60-second window through this reader (None: no limit)."""
        return self.rate_limit.requests_per_minute

    @property
    def tokens_per_minute(self) -> int | None:
        """The most tokens per 60-second window through this reader (None: no limit)."""
        return self.rate_limit.tokens_per_minute

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
        """The prompt for one round: texts converted and sanitised, labels checked (as in
        :meth:`read`; documents may be anything ``str`` takes)."""
        docs = tuple(sanitize_text(d) for d in documents)
        q = sanitize_text(question)
        labs = check_labels(labels, len(docs))
        docs, cut, chars = self._fit(q, docs, labs)
        system, user = self._render(q, docs, labs)
        if self.mode == "answer":
            return Prompt(q, docs, labs, system, user, cut, chars)
        shown = template_labels(self.template, labs)
        if shown != labs and not self._warned_template:
            self._warned_template = True
            logger.warning(
                "%r: the callable template takes no labels= parameter, so documents are numbered 1..m "
                "instead of the panner's per-round labels; add a labels keyword to the template",
                self,
            )
        return Prompt(q, docs, shown, system, user, cut, chars)

    def _render(self, question: str, docs: Sequence[str], labels: tuple[int, ...]) -> tuple[str, str]:
        """The system and user messages of one prompt in this reader's mode."""
        if self.mode == "answer":
            from .answer import ANSWER_SYSTEM_PROMPT, render_answer_prompt

            tpl = self.template
            user = (
                tpl(question, list(docs))
                if callable(tpl)
                else render_answer_prompt(
                    question, docs, template=tpl, max_chars_per_doc=self.max_chars_per_doc
                )
            )
            return ANSWER_SYSTEM_PROMPT, user
        user = render_prompt(
            question, docs, labels=labels, template=self.template, max_chars_per_doc=self.max_chars_per_doc
        )
        return SYSTEM_PROMPT, user

    # ------------------------------------------------------------------ fitting the context
    def _max_tokens(self) -> int | None:
        """The reader's completion budget (``max_tokens``), when it has one."""
        value = getattr(self, "max_tokens", None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    @property
    def reply_tokens(self) -> int:
        """Tokens kept free for the reply when fitting documents: ``max_tokens``, else 256."""
        return self._max_tokens() or 256

    def _context_limit(self) -> int | None:
        """The context to fit prompts into (tokens), or None: no fitting. ``context_tokens``
        when given; by default the smaller of it and the context the model declares."""
        limit = self.context_tokens
        if limit is None or limit != DEFAULT_CONTEXT_TOKENS:
            return limit
        try:
            declared = self._declared_context()
        except Exception:  # noqa: BLE001 - metadata that fails to load says nothing
            declared = None
        if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 64:
            return min(limit, declared)
        return limit

    def _declared_context(self) -> int | None:
        """The context window (tokens) the model itself declares, when it does (None)."""
        return None

    def _tokenizer(self) -> Tokenizer | None:
        """The model's tokenizer, when the reader has one (None: the estimate)."""
        return None

    def _fit(
        self, question: str, docs: tuple[str, ...], labels: tuple[int, ...]
    ) -> tuple[tuple[str, ...], int, int]:
        """``docs`` cut evenly to fit :meth:`_context_limit` (:mod:`._fit_context`), how many were
        cut and the characters removed (none with no context known or a callable template)."""
        context = None if not docs or callable(self.template) else self._context_limit()
        if context is None:
            return docs, 0, 0
        tokenizer = self._tokenizer() or CharTokenizer()
        fixed = sum(tokenizer.count(m) for m in self._render(question, ("",) * len(docs), labels))
        # One token per document of slack: a cut re-tokenised in the prompt may shift.
        budget = context - fixed - MESSAGE_OVERHEAD_TOKENS * 2 - self.reply_tokens - len(docs)
        fitted = fit_documents(docs, budget, tokenizer=tokenizer, context=context)
        if not fitted.cut:
            return docs, 0, 0
        # DEBUG: the panner warns once per query with the totals (PanningResult.chars_cut)
        logger.debug(
            "%r: cut %d of %d documents to %d tokens each (%d characters removed) to fit a %d-token context",
            self,
            fitted.cut,
            len(docs),
            fitted.share,
            fitted.removed,
            context,
        )
        return fitted.texts, fitted.cut, fitted.removed

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
            return _with_cut(replace(r, abstain_p=reply.abstain_p), prompt)
        value: Any = reply.value if reply.value is not None else reply.text
        if value is None or (isinstance(value, str) and not value.strip()):
            hint = f" (finish_reason={reply.finish_reason!r})" if reply.finish_reason else ""
            raise CitationParseError(f"the model returned no text{hint}")
        try:
            r = reading_from_citations(
                value,
                prompt.documents,
                labels=prompt.labels,
                max_citations=self.max_citations,
                raw=value,
                extra=extra,
            )
            return _with_cut(r, prompt)
        except CitationParseError as err:
            if reply.finish_reason == "length":
                new = CitationParseError(f"{err} (output cut at the token limit; raise max_tokens)")
                raise attach_raw(new, value) from err
            raise

    # ------------------------------------------------------------------ limits
    def _token_estimate(self, prompt: Prompt) -> int:
        """Tokens ``prompt`` counts against ``tokens_per_minute`` until the server reports
        usage: a token per 4 characters of the messages (rounded up), plus ``max_tokens``."""
        return math.ceil((len(prompt.system) + len(prompt.user)) / 4) + (self._max_tokens() or 0)

    @staticmethod
    def _spent(before: tuple[int | None, int | None], usage: Usage) -> int | None:
        """Tokens reported between ``before`` and now (None when none were reported)."""
        if usage.prompt_tokens == before[0] and usage.completion_tokens == before[1]:
            return None
        return (
            (usage.prompt_tokens or 0) - (before[0] or 0) + (usage.completion_tokens or 0) - (before[1] or 0)
        )

    def _prepare(self, *, asynchronous: bool) -> None:
        """Set up what a call needs (a client, a model) before the rate limit admits the
        request, so the time it is counted at is the time it leaves; default: nothing."""

    def _reply_steps(
        self,
        prompt: Prompt,
        usage: Usage,
        options: dict[str, Any],
        asynchronous: bool,
        queued: tuple[Deadline, float] | None = None,
    ) -> Steps[Reply]:
        """One model call within the rate limit (the caller holds a concurrency slot), for
        both paths (:mod:`.._steps`): structured output in cite mode when the reader uses
        it, else (or once the model turns out to have none) plain text. ``queued``: the
        query's deadline and the time it had left when the caller queued for its slot
        (the queue's wait, this reader's own, is given back once the request is admitted)."""
        if self.rate_limit.active:
            self._prepare(asynchronous=asynchronous)
        entry = yield from self.rate_limit._acquiring(self._token_estimate(prompt), asynchronous)
        if queued is not None:
            queued[0].queued(queued[1])
        before = (usage.prompt_tokens, usage.completion_tokens)
        try:
            if self._use_structured and self.mode == "cite":
                structured = self._acall_structured if asynchronous else self._call_structured
                try:
                    return (yield functools.partial(structured, prompt, usage, **options))
                except NotImplementedError:
                    self._fall_back_to_text()
            call = self._acall if asynchronous else self._call
            return (yield functools.partial(call, prompt, usage, **options))
        finally:
            self.rate_limit.settle(entry, self._spent(before, usage))

    # ------------------------------------------------------------------ the query's deadline
    def _deadline_seconds(self) -> float | None:
        """Seconds the endpoint may keep a query waiting without a reply (:mod:`._deadline`);
        None (default): no deadline beyond what each call has of its own."""
        return None

    def _deadline(self) -> Deadline | None:
        """This reader's deadline in the current query (one per query, made on first use;
        outside the panner a new one per reading), or None."""
        seconds = self._deadline_seconds()
        if seconds is None:
            return None
        query = current_query()
        if query is None:
            return Deadline(seconds)
        return query.state((self, "deadline"), lambda: Deadline(seconds))

    # ------------------------------------------------------------------ cache
    def _cache_identity(self) -> dict[str, Any]:
        """Everything besides the messages that changes a reply (reader kind, model,
        mode, structured output); readers add their endpoint and sampling options."""
        return {
            "reader": f"{type(self).__module__}.{type(self).__qualname__}",
            "model": self.model_name,
            "mode": self.mode,
            "structured": self._use_structured and self.mode == "cite",
        }

    def _cache_key(self, prompt: Prompt) -> str | None:
        return None if self.cache is None else cache_key(self._cache_identity(), prompt.as_dicts())

    def _from_cache(self, key: str | None, prompt: Prompt) -> Reading | None:
        """The reading of a cached reply (counted as a hit), or None (a miss)."""
        if key is None or self.cache is None:
            return None
        stored = self.cache.get(key) or {}
        reply = Reply(
            stored.get("text"),
            stored.get("value"),
            stored.get("finish_reason"),
            stored.get("extra") or {},
            stored.get("abstain_p"),
        )
        try:
            reading = self._reading(reply, prompt) if stored else None
        except CitationParseError:  # stored under other validation options: ask again
            reading = None
        self.cache.count(hit=reading is not None)
        if reading is None:
            return None
        return replace(
            reading,
            attempts=0,
            prompt_tokens=None,
            completion_tokens=None,
            cached=True,
            extra={**reading.extra, "cache": "hit"},
        )

    def _to_cache(self, key: str | None, replies: list[Reply], reading: Reading) -> Reading:
        """Store the reply behind a successful reading; mark the reading a miss."""
        if key is None or self.cache is None:
            return reading
        if replies and not reading.failed:
            self.cache.put(key, asdict(replies[-1]))
        return replace(reading, cached=False)

    # ------------------------------------------------------------------ reading
    def _read_steps(
        self,
        question: str,
        documents: Sequence[Any],
        labels: Sequence[int] | None,
        options: dict[str, Any],
        asynchronous: bool,
    ) -> Steps[Reading]:
        """One reading for :meth:`read` and :meth:`aread` (:mod:`.._steps`, one driver for
        all of it): the prompt, the cache (a file cache in a worker thread on the async
        path), then attempts under the retry policy (:func:`._retry.retry_steps`)."""
        try:
            prompt = self.prompt(question, documents, labels=labels)
        except DocumentsDoNotFitError as err:  # no call can succeed: a failed reading, no retry
            return Reading.failure(f"{type(err).__name__}: {err}", attempts=0)
        if not prompt.documents:
            return no_documents_reading()
        key = self._cache_key(prompt)
        off_loop = asynchronous and self.cache is not None and self.cache.path is not None
        hit = yield _in_thread_if(off_loop, self._from_cache, key, prompt)
        if hit is not None:
            return hit
        replies: list[Reply] = []
        deadline = self._deadline()
        reading = yield from retry_steps(
            functools.partial(
                self._attempt_steps,
                prompt,
                options=options,
                replies=replies,
                asynchronous=asynchronous,
                deadline=deadline,
            ),
            policy=RetryPolicy(self.max_attempts, self.wait),
            what=repr(self),
            deadline=deadline,
            asynchronous=asynchronous,
        )
        reading = _with_cut(self._check_mode(reading), prompt)
        return (yield _in_thread_if(off_loop, self._to_cache, key, replies, reading))

    def _attempt_steps(
        self,
        prompt: Prompt,
        usage: Usage,
        *,
        options: dict[str, Any],
        replies: list[Reply],
        asynchronous: bool,
        deadline: Deadline | None = None,
    ) -> Steps[Reading]:
        """One attempt: a concurrency slot, the call, the reply validated (raises when
        malformed, so the attempt is retried); a reply moves the query's ``deadline``,
        which the attempt's calls see (:func:`._deadline.attempting`)."""
        with attempting(deadline):
            usage.calls += 1
            left = None if deadline is None else deadline.remaining()  # None: the clock starts at the send
            queued = None if deadline is None or left is None else (deadline, left)
            yield from self.call_limit.acquiring(asynchronous)
            try:
                reply = yield from self._reply_steps(prompt, usage, options, asynchronous, queued)
            finally:
                self.call_limit.release()
            if deadline is not None:
                deadline.replied()
            reading = self._reading(reply, prompt)
            replies.append(reply)
            return reading

    def _read(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        return run_steps(self._read_steps(question, documents, labels, options, asynchronous=False))

    async def _aread(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        return await arun_steps(self._read_steps(question, documents, labels, options, asynchronous=True))

    def _check_mode(self, reading: Reading) -> Reading:
        """Count cite-mode readings and the unreadable ones; warn once, naming answer mode,
        when more than half of at least :data:`MODE_CHECK_READINGS` were unreadable."""
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


def _with_cut(reading: Reading, prompt: Prompt) -> Reading:
    """``reading`` counting the cuts that fitted ``prompt`` (failed readings too)."""
    if not prompt.documents_cut:
        return reading
    return replace(reading, documents_cut=prompt.documents_cut, chars_cut=prompt.chars_cut)


def _in_thread_if(off_loop: bool, fn: Any, *args: Any) -> Any:
    """A call of ``fn(*args)``: in a worker thread (awaited) when ``off_loop``, else here."""
    return functools.partial(asyncio.to_thread, fn, *args) if off_loop else functools.partial(fn, *args)
