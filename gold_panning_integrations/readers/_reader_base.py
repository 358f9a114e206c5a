"""The one reader base: its options, its prompt, and ``read``/``aread`` written once each.

A reader built on :class:`BaseReader` supplies only its call (:meth:`BaseReader._call`,
:meth:`BaseReader._acall` when it has a native async path, :meth:`BaseReader._call_structured`
when the model has structured output) and its conversion (:meth:`BaseReader._messages`
and a :class:`~._prompt.Reply`). A reading is two explicit methods in the shape of the
panner's ``run``/``arun`` (:meth:`BaseReader._read`, :meth:`BaseReader._aread`): the
prompt (:meth:`BaseReader.prompt`; :mod:`._prompt`, :mod:`._fitting`), the cache
(:mod:`._cache`), then attempts under tenacity's ``Retrying``/``AsyncRetrying`` as its
documentation drives them (``for attempt in Retrying(...): with attempt: ...``; the
policy's parts in :mod:`._limits`). An attempt takes a slot of the reader's
:class:`CallLimit` (calls in flight, shared by every query through the reader, first come
first served, held for one attempt only), makes one call within the rate limit
(:meth:`BaseReader._reply`) and reads the reply (:meth:`BaseReader._reading`). An
exception is classified (:func:`~._errors.classify_error`): retried (transient, malformed
output), a failed reading (any other ``ReaderError``), or raised (fatal, a missing extra).
No attempt starts, and no wait is slept, past the query's deadline (a reader's ``timeout``,
:class:`~._limits.Deadline`). Each retry is logged at DEBUG: a query's failures are summed
up once, by the panner.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any, ClassVar

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_any

from ..engine.records import Reading
from ..errors import CitationParseError, FatalReaderError, MissingExtraError, ReaderError
from ._adapted import template_labels
from ._cache import ReplyCache, cache_key, cached_reading, stored_reading
from ._errors import classified, failed_reading, is_retryable
from ._fitting import CHARS_PER_TOKEN, CharTokenizer, DocumentsDoNotFitError, Tokenizer, fit_documents
from ._limits import (
    Deadline,
    RateLimit,
    Waiter,
    check_max_concurrency,
    make_wait,
    query_deadline,
    stop_at_deadline,
)
from ._options import DEFAULT_CONTEXT_TOKENS, READER_OPTIONS, declared_options, resolve_options
from ._prompt import (
    SYSTEM_PROMPT,
    Prompt,
    PromptTemplate,
    Reply,
    Usage,
    attach_raw,
    check_labels,
    reading_from_citations,
    render_user,
    sanitize_texts,
    truncate,
)

__all__ = ["MESSAGE_OVERHEAD_TOKENS", "MODE_CHECK_READINGS", "BaseReader", "CallLimit"]

logger = logging.getLogger(__name__)

MODE_CHECK_READINGS = 5
"""Cite-mode readings after which a reader whose replies are mostly unreadable as
citations warns, naming answer mode (see :meth:`BaseReader._check_mode`)."""

MESSAGE_OVERHEAD_TOKENS = 16
"""Chat-template tokens per message (role markers, separators), counted when fitting."""

_RETRYABLE = retry_if_exception(is_retryable)
"""tenacity's retry condition: transient errors and malformed output (:func:`~._errors.is_retryable`)."""


# ------------------------------------------------------------------------------ calls in flight
class CallLimit:
    """At most ``limit`` calls in flight (None: no limit), for threads and tasks alike:
    :meth:`acquire` (blocks the thread) or ``await`` :meth:`aacquire`, then :meth:`release`;
    or ``with limit.slot():`` / ``async with limit.aslot():`` around the call. Waiters are
    served first come first served; an interrupted or cancelled waiter leaves the queue
    (or passes on a slot granted meanwhile). ``in_flight`` counts the calls holding a slot
    now, ``peak`` the most that held one at once."""

    def __init__(self, limit: int | None) -> None:
        self.limit = check_max_concurrency(limit)
        self.in_flight = self.peak = 0
        self._lock = threading.Lock()
        self._waiters: deque[Waiter] = deque()

    def _take(self) -> bool:
        """Take a free slot if there is one and nobody is queued (lock held)."""
        if self.limit is None or (self.in_flight < self.limit and not self._waiters):
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return True
        return False

    def acquire(self) -> None:
        """Take a slot, blocking this thread while none is free."""
        with self._lock:
            if self._take():
                return
            waiter = Waiter(event=threading.Event())
            self._waiters.append(waiter)
        try:
            waiter.event.wait()  # type: ignore[union-attr]
        except BaseException:  # interrupted (Ctrl-C) while queued
            self._abandon(waiter)
            raise

    async def aacquire(self) -> None:
        """Take a slot, awaiting (on the running loop) while none is free; cancellation-safe."""
        with self._lock:
            if self._take():
                return
            loop = asyncio.get_running_loop()
            waiter = Waiter(future=loop.create_future(), loop=loop)
            self._waiters.append(waiter)
        try:
            await waiter.future  # type: ignore[misc]
        except BaseException:  # cancelled while queued
            self._abandon(waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter that can take it, else free it."""
        with self._lock:
            while self._waiters:
                if self._waiters.popleft().grant():
                    return  # the slot passes on; in_flight is unchanged
            self.in_flight -= 1

    def _abandon(self, waiter: Waiter) -> None:
        """A waiter gives up: it leaves the queue, or passes on a slot granted meanwhile."""
        with self._lock:
            waiter.gone = True
            granted = waiter.granted
        if granted:
            self.release()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for the body (blocks this thread while none is free)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    @asynccontextmanager
    async def aslot(self) -> AsyncIterator[None]:
        """Hold a slot for the body (awaits while none is free; cancellation-safe)."""
        await self.aacquire()
        try:
            yield
        finally:
            self.release()


# ------------------------------------------------------------------------ the reader base
@declared_options
class BaseReader:
    """Options and ``read``/``aread`` shared by every model reader; the ``Args:`` below
    derive from the declarations in :mod:`._options`. Failures are failed readings
    except permanent ones (see :meth:`read`). ``sleep`` and ``asleep``, the waits between
    attempts, are injectable (tests never sleep).

    Args:
    """

    recommended_profile: ClassVar[Any] = None
    """The detector profile measured for this reader's model (a bundled name, a path or a
    ``DetectorProfile``), used when the user names none."""

    option_defaults: ClassVar[Mapping[str, Any]] = {}
    """Defaults used instead of the declared ones (also for base options it does not take)."""

    option_notes: ClassVar[Mapping[str, str]] = {}
    """A sentence per option added to its declared doc in this reader's docstring."""

    query_seconds: float | None = None
    """Seconds the endpoint may keep a query waiting without a reply (the query's
    :class:`~._limits.Deadline`; :class:`~.openai.OpenAIReader`: its ``timeout``); None:
    no deadline beyond what each call has of its own."""

    # the base options' values (:mod:`._options`)
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
        self.sleep: Callable[[float], None] = time.sleep
        self.asleep: Callable[[float], Any] = asyncio.sleep
        self._wait = make_wait(self.wait)
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
        :meth:`read`; documents may be anything ``str`` takes), the documents cut to fit
        the model's context when they would not (:meth:`_fit`)."""
        q, *texts = sanitize_texts([question, *documents])
        docs = tuple(texts)
        labs = check_labels(labels, len(docs))
        system, user = self._render(q, docs, labs)
        cut = chars = 0
        at: tuple[int, ...] = ()
        fitted = self._fit(q, docs, labs, system, user)
        if fitted is not None:
            docs, cut, chars, at = fitted
            system, user = self._render(q, docs, labs)
        if self.mode == "answer" or not callable(self.template):
            return Prompt(q, docs, labs, system, user, cut, chars, at)
        shown = template_labels(self.template, labs)
        if shown != labs and not self._warned_template:
            self._warned_template = True
            logger.warning(
                "%r: the callable template takes no labels= parameter, so documents are numbered 1..m "
                "instead of the panner's per-round labels; add a labels keyword to the template",
                self,
            )
        return Prompt(q, docs, shown, system, user, cut, chars, at)

    def _render(self, question: str, docs: Sequence[str], labels: tuple[int, ...]) -> tuple[str, str]:
        """The system and user messages of one prompt in this reader's mode."""
        if self.mode == "answer":
            from .answer import ANSWER_SYSTEM_PROMPT, answer_user_message

            return ANSWER_SYSTEM_PROMPT, answer_user_message(
                question, docs, self.template, self.max_chars_per_doc
            )
        return SYSTEM_PROMPT, render_user(question, docs, labels, self.template, self.max_chars_per_doc)

    def messages(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Any:
        """The chat messages (system + user) for one prompt, in the model's own type."""
        return self._messages(self.prompt(question, documents, labels=labels))

    def _messages(self, prompt: Prompt) -> Any:
        """The prompt in the framework's message type (default: OpenAI-style dicts)."""
        return prompt.as_dicts()

    # ------------------------------------------------------------------ fitting the context
    def _max_tokens(self) -> int | None:
        """The reader's completion budget (``max_tokens``), when it has one."""
        value = getattr(self, "max_tokens", None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

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
        self, question: str, docs: tuple[str, ...], labels: tuple[int, ...], system: str, user: str
    ) -> tuple[tuple[str, ...], int, int, tuple[int, ...]] | None:
        """``docs`` cut evenly to fit :meth:`_context_limit` (:func:`._fitting.fit_documents`),
        how many were cut, the characters removed and the positions cut; None when nothing is cut (no context
        known, a callable template, or the documents fit). ``system``/``user``: the prompt
        rendered with ``docs`` whole."""
        context = None if not docs or callable(self.template) else self._context_limit()
        if context is None:
            return None
        # The reply's tokens (max_tokens, else 256) are kept free, and one token per
        # document of slack: a cut re-tokenised in the prompt may shift.
        room = context - MESSAGE_OVERHEAD_TOKENS * 2 - (self._max_tokens() or 256) - len(docs)
        tokenizer = self._tokenizer()
        if tokenizer is None:
            # The estimate is ceil(characters / 3) per text, and the prompt without its
            # documents is shorter than with them: when this holds, nothing is cut.
            chars = (len(system), len(user), sum(map(len, docs)))
            if sum(chars) / CHARS_PER_TOKEN + 2 + len(docs) <= room:
                return None
            tokenizer = CharTokenizer()
        fixed = sum([tokenizer.count(m) for m in self._render(question, ("",) * len(docs), labels)])
        fitted = fit_documents(docs, room - fixed, tokenizer=tokenizer, context=context)
        if not fitted.cut:
            return None
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
        return fitted.texts, fitted.cut, fitted.removed, fitted.cut_at

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

    def _reply(
        self,
        prompt: Prompt,
        usage: Usage,
        options: Mapping[str, Any],
        deadline: Deadline | None,
        left: float | None,
    ) -> Reply:
        """One model call within the rate limit (the caller holds a slot): structured output
        in cite mode when the reader uses it (until the model turns out to have none), else
        text. ``left``: what the query's ``deadline`` had left when the caller queued for its
        slot, given back once the request is admitted (None: no deadline, or not started)."""
        entry, limit = None, self.rate_limit
        before: tuple[int | None, int | None] = (None, None)
        if limit.active:
            entry = limit.acquire(self._token_estimate(prompt))
            before = usage.tokens()
        if left is not None:
            deadline.queued(left)  # type: ignore[union-attr]
        try:
            if self._use_structured and self.mode == "cite":
                try:
                    return self._call_structured(prompt, usage, **options)
                except NotImplementedError:
                    self._fall_back_to_text()
            return self._call(prompt, usage, **options)
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
        """Asynchronous :meth:`_reply`."""
        entry, limit = None, self.rate_limit
        before: tuple[int | None, int | None] = (None, None)
        if limit.active:
            entry = await limit.aacquire(self._token_estimate(prompt))
            before = usage.tokens()
        if left is not None:
            deadline.queued(left)  # type: ignore[union-attr]
        try:
            if self._use_structured and self.mode == "cite":
                try:
                    return await self._acall_structured(prompt, usage, **options)
                except NotImplementedError:
                    self._fall_back_to_text()
            return await self._acall(prompt, usage, **options)
        finally:
            if entry is not None:
                limit.settle(entry, usage.tokens_since(before))

    # ------------------------------------------------------------------ reply -> reading
    def _reading(self, reply: Reply, prompt: Prompt) -> Reading:
        """Validate one reply into a :class:`Reading` (raises CitationParseError when
        it is malformed, so the attempt is retried)."""
        extra: dict[str, Any] = {"model": self.model_name, **reply.extra}
        if prompt.labels != tuple(range(1, len(prompt.documents) + 1)):
            extra["labels"] = list(prompt.labels)
        if self.mode == "answer":
            from .answer import reading_from_reply

            return reading_from_reply(
                reply.text,
                prompt.documents,
                question=prompt.question,
                attribution=self.attribution,
                extra=extra,
                abstain_p=reply.abstain_p,
            )
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

    def _check_mode(self, reading: Reading) -> None:
        """Count cite-mode readings and the unreadable ones; warn once, naming answer mode,
        when more than half of at least :data:`MODE_CHECK_READINGS` were unreadable."""
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

    # ------------------------------------------------------------------ limits
    def _token_estimate(self, prompt: Prompt) -> int:
        """Tokens ``prompt`` counts against ``tokens_per_minute`` until the server reports
        usage: a token per 4 characters of the messages (rounded up), plus ``max_tokens``."""
        return math.ceil((len(prompt.system) + len(prompt.user)) / 4) + (self._max_tokens() or 0)

    def _deadline(self) -> Deadline | None:
        """This reader's deadline in the current query (:func:`~._limits.query_deadline`),
        or None (no :attr:`query_seconds`)."""
        return None if self.query_seconds is None else query_deadline(self, self.query_seconds)

    # ------------------------------------------------------------------ the retry policy
    def _retrying(self, deadline: Deadline | None) -> dict[str, Any]:
        """tenacity's ``Retrying``/``AsyncRetrying`` options for one reading: ``max_attempts``
        attempts (none past ``deadline``), the ``wait`` between them, retrying transient
        errors and malformed output; the last error is raised when they run out."""
        stop = stop_after_attempt(self.max_attempts)
        return {
            "stop": stop if deadline is None else stop_any(stop, stop_at_deadline(deadline)),
            "wait": self._wait,
            "retry": _RETRYABLE,
            "reraise": True,
            "before_sleep": self._log_retry,
        }

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.debug("%r: attempt %d failed (%s); retrying in %.2f s", self, state.attempt_number, exc, wait)

    def _done(self, reading: Reading, usage: Usage | None, prompt: Prompt) -> Reading:
        """A reading made: the attempts and tokens of ``usage`` filled in (None: a failed
        reading, which has them), counted for the mode check, the cuts that fitted ``prompt``."""
        if usage is not None:
            pt, ct = usage.prompt_tokens, usage.completion_tokens
            pt, ct = (
                reading.prompt_tokens if pt is None else pt,
                reading.completion_tokens if ct is None else ct,
            )
            reading = replace(reading, attempts=usage.calls, prompt_tokens=pt, completion_tokens=ct)
        if self.mode == "cite":
            self._check_mode(reading)
        if prompt.documents_cut:
            reading = replace(
                reading, documents_cut=prompt.documents_cut, chars_cut=prompt.chars_cut, cut_at=prompt.cut_at
            )
        return reading

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

    # ------------------------------------------------------------------ reading
    def _read(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        """One reading for :meth:`read`: the prompt, the cache, then attempts under the retry
        policy, each a slot of the call limit, one call (:meth:`_reply`) and its reply read
        (:meth:`_reading`); ``options`` go to the call."""
        try:
            prompt = self.prompt(question, documents, labels=labels)
        except DocumentsDoNotFitError as err:  # no call can succeed: a failed reading, no retry
            return Reading.failure(f"{type(err).__name__}: {err}", attempts=0)
        if not prompt.documents:  # nothing cited, no model call
            return Reading(cited=(), attempts=0, extra={"skipped": "no documents"})
        cache, key = self.cache, ""
        if cache is not None:
            key = cache_key(self._cache_identity(), prompt.as_dicts())
            hit = cached_reading(cache, key, prompt, self._reading)
            if hit is not None:
                return hit
        deadline = None if self.query_seconds is None else self._deadline()
        usage, replies = Usage(), []
        try:
            for attempt in Retrying(sleep=self.sleep, **self._retrying(deadline)):
                with attempt:
                    try:
                        left = None
                        if deadline is not None:
                            deadline.check()
                            left = deadline.remaining()  # None: the clock starts at the send
                        usage.calls += 1
                        self.call_limit.acquire()
                        try:
                            reply = self._reply(prompt, usage, options, deadline, left)
                        finally:
                            self.call_limit.release()
                        if deadline is not None:
                            deadline.replied()
                        reading = self._reading(reply, prompt)
                        replies.append(reply)
                    except (ReaderError, MissingExtraError):
                        raise
                    except Exception as err:  # classify everything a model call may raise
                        raise classified(err) from err
        except FatalReaderError as err:
            raise FatalReaderError(f"{self!r}: {err}", status_code=err.status_code) from err
        except ReaderError as err:
            reading = self._done(failed_reading(repr(self), err, usage, deadline), None, prompt)
        else:
            reading = self._done(reading, usage, prompt)
        return reading if cache is None else stored_reading(cache, key, replies, reading)

    async def _aread(
        self, question: str, documents: Sequence[Any], labels: Sequence[int] | None, **options: Any
    ) -> Reading:
        """Asynchronous :meth:`_read` (a file cache is read and written in a worker thread)."""
        try:
            prompt = self.prompt(question, documents, labels=labels)
        except DocumentsDoNotFitError as err:  # no call can succeed: a failed reading, no retry
            return Reading.failure(f"{type(err).__name__}: {err}", attempts=0)
        if not prompt.documents:  # nothing cited, no model call
            return Reading(cited=(), attempts=0, extra={"skipped": "no documents"})
        cache, key = self.cache, ""
        on_disk = cache is not None and cache.path is not None  # a file: read and written off the loop
        if cache is not None:
            key = cache_key(self._cache_identity(), prompt.as_dicts())
            args = (cache, key, prompt, self._reading)
            hit = await asyncio.to_thread(cached_reading, *args) if on_disk else cached_reading(*args)
            if hit is not None:
                return hit
        deadline = None if self.query_seconds is None else self._deadline()
        usage, replies = Usage(), []
        try:
            async for attempt in AsyncRetrying(sleep=self.asleep, **self._retrying(deadline)):
                with attempt:
                    try:
                        left = None
                        if deadline is not None:
                            deadline.check()
                            left = deadline.remaining()
                        usage.calls += 1
                        await self.call_limit.aacquire()
                        try:
                            reply = await self._areply(prompt, usage, options, deadline, left)
                        finally:
                            self.call_limit.release()
                        if deadline is not None:
                            deadline.replied()
                        reading = self._reading(reply, prompt)
                        replies.append(reply)
                    except (ReaderError, MissingExtraError):
                        raise
                    except Exception as err:  # as in _read
                        raise classified(err) from err
        except FatalReaderError as err:
            raise FatalReaderError(f"{self!r}: {err}", status_code=err.status_code) from err
        except ReaderError as err:
            reading = self._done(failed_reading(repr(self), err, usage, deadline), None, prompt)
        else:
            reading = self._done(reading, usage, prompt)
        if cache is None:
            return reading
        if on_disk:
            return await asyncio.to_thread(stored_reading, cache, key, replies, reading)
        return stored_reading(cache, key, replies, reading)

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
