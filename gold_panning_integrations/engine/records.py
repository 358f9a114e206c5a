"""What passes between the engine, its readers and its callers.

The reader's side: the labels documents are shown under, what a reader returns for one
prompt (:class:`Reading`), the reader protocol the panner calls, and the query a reading
belongs to (:func:`query_scope`) with its random stream (:func:`derived_rng`). Readers do
all I/O; the engine never does. The caller's side: the one result type of a panning run,
:class:`PanningResult` with a :class:`RoundTrace` per round; every adapter (LangChain,
LlamaIndex, CLI) converts from it.

Labels are distinct random numbers per prompt, from at least :data:`LABELS_PER_DOCUMENT`
numbers per document shown, so a number a document writes ("cite document 1") is almost
never a label on screen.

Same input, same output: with no seed, the panner's generator is seeded by a SHA-256
digest of the input, so a repeated query repeats its prompts and ranking (and a reply
cache can serve it); ``rng="fresh"`` on the panner, ``seed="fresh"`` on the adapters draw
fresh entropy.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import FatalReaderError
from .beliefs import SUSPECT_AT, p_none

__all__ = [
    "FRESH",
    "LABELS_PER_DOCUMENT",
    "MIN_LABEL_DIGITS",
    "PanningResult",
    "ProfileLike",
    "Query",
    "Reader",
    "Reading",
    "RoundTrace",
    "Seed",
    "StopReason",
    "check_rng_option",
    "current_query",
    "derived_rng",
    "draw_labels",
    "input_digest",
    "label_range",
    "query_scope",
    "reader_failure",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """The outcome of asking the model about one prompt.

    Attributes:
        cited: 0-based positions (indices into the documents as shown) that the model
            cited: in range, unique, sorted.
        failed: True when no usable answer was obtained (after retries); beliefs are
            left unchanged.
        error: Why the reading failed (or a warning).
        answer: The model's free-text answer, if any.
        raw: The raw model output (possibly truncated).
        invalid_labels: Labels dropped as unknown (counted, never mapped to another document).
        duplicate_labels: Labels dropped because they repeated an earlier one.
        attempts: Model calls made for this reading, retries included.
        prompt_tokens, completion_tokens: Tokens the provider reported (None: not reported).
        extra: Free-form reader-specific diagnostics.
        documents_cut: Documents of the prompt cut to fit the model's context.
        chars_cut: Characters those cuts removed from the documents' text, summed.
        cut_at: Which ones: their positions in the prompt (indices into the documents as
            shown), ascending; ``len(cut_at) == documents_cut`` for a reader that says.
        labels: The labels the documents were shown under, shape ``(m,)``, when not the
            panner's (a reader that takes no labels shows ``1..m``); None: the panner's.
        cached: True: a reply-cache hit (no model call, ``attempts`` 0); False: a miss
            (the reply was stored); None: the reader has no cache.
        abstain_p: The probability the model gave, at its first token, to starting the way
            out ("unknown", answer mode) when the endpoint returns it; None otherwise. The
            engine reads it through the profile's ``abstention_map``.
    """

    cited: tuple[int, ...] = ()
    failed: bool = False
    error: str | None = None
    answer: str | None = None
    raw: str | None = None
    invalid_labels: int = 0
    duplicate_labels: int = 0
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    labels: tuple[int, ...] | None = None
    cached: bool | None = None
    documents_cut: int = 0
    chars_cut: int = 0
    abstain_p: float | None = None
    cut_at: tuple[int, ...] = ()

    @classmethod
    def failure(cls, error: str, *, attempts: int = 1, raw: str | None = None) -> Reading:
        """A failed reading: no citations, beliefs will be left unchanged."""
        return cls(cited=(), failed=True, error=error, attempts=attempts, raw=raw)


@runtime_checkable
class Reader(Protocol):
    """The one reader protocol the panner calls.

    * ``read(question, documents, *, labels) -> Reading`` (for ``GoldPanner.run``) and/or
      ``async aread(...)`` (for ``arun``): ``documents`` in prompt order, ``labels[i]``
      (distinct positive ints, drawn at random: :func:`label_range`) names
      ``documents[i]``; ``Reading.cited`` holds 0-based *positions*. Return
      ``Reading.failure(...)`` for model-side problems; any other exception becomes a
      failed reading, except :class:`~gold_panning_integrations.errors.FatalReaderError`,
      which ends the run.
    * ``model_name``: the model's name, as recorded in profiles and traces.
    * ``recommended_profile``: the profile measured for this model (a bundled name, a path
      or a ``DetectorProfile``) or None, used when the user names none.
    * ``max_concurrency``: the most calls in flight (None: no limit; 1: one at a time).

    :func:`gold_panning_integrations.readers.as_reader` adapts a user's reader: the
    attributes default to the class name, None and 1, and a ``read``/``aread`` without
    ``labels`` is wrapped to show ``1..m``.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def recommended_profile(self) -> Any: ...

    @property
    def max_concurrency(self) -> int | None: ...

    def read(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt and return the validated citations."""
        ...

    async def aread(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt asynchronously and return the validated citations."""
        ...


def reader_failure(
    err: Exception, log: logging.Logger, what: str = "", *, level: int = logging.WARNING
) -> Reading:
    """The failed :class:`Reading` for an exception a reader raised (logged on ``log`` at
    ``level`` with its traceback, prefixed ``what``); a
    :class:`~gold_panning_integrations.errors.FatalReaderError` is raised again instead."""
    if isinstance(err, FatalReaderError):
        raise err
    log.log(level, "%sreader raised %s: %s", what, type(err).__name__, err, exc_info=err)
    return Reading.failure(f"{type(err).__name__}: {err}")


# ------------------------------------------------------------------------------ the query
@dataclass(eq=False)
class Query:
    """One query's run through the panner (every round and prompt of it), where a reader
    keeps what it holds per query, e.g. its deadline (:meth:`state`)."""

    _state: dict[Any, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def state(self, key: Any, make: Callable[[], T]) -> T:
        """The value kept under ``key`` for this query, made by ``make()`` on first use
        (threads and tasks of the query share it)."""
        with self._lock:
            if key not in self._state:
                self._state[key] = make()
            return self._state[key]  # type: ignore[no-any-return]


_QUERY: contextvars.ContextVar[Query | None] = contextvars.ContextVar("gp_query", default=None)


@contextlib.contextmanager
def query_scope() -> Iterator[Query]:
    """The panner runs one query inside this block; readings made in it (in this thread,
    the threads the panner starts with the context copied, and the tasks of an event
    loop) see the same :class:`Query` through :func:`current_query`."""
    query = Query()
    token = _QUERY.set(query)
    try:
        yield query
    finally:
        _QUERY.reset(token)


def current_query() -> Query | None:
    """The query being run (:func:`query_scope`), or None outside one (a reader called
    directly: each reading is then its own query)."""
    return _QUERY.get()


# ------------------------------------------------------------------------------ the query's random stream
FRESH: Literal["fresh"] = "fresh"
"""The spelling that asks for fresh entropy on every run instead of a derived stream."""

Seed = np.random.Generator | int | Literal["fresh"] | None
"""What ``rng=`` / ``seed=`` accept: a Generator or an int (a fixed stream), ``"fresh"``
(fresh entropy) or None (derived from the question and the documents)."""

_DOMAIN = b"gold-panning/rng/v1"


def input_digest(question: Any, documents: Sequence[Any]) -> bytes:
    """SHA-256 (32 bytes) of ``question`` and ``documents``, each part length-prefixed
    after a version tag so no two inputs share an encoding. A non-string document is
    hashed by its ``str()``: give it a stable ``__str__`` (or pass a seed)."""
    h = hashlib.sha256(_DOMAIN)
    h.update(len(documents).to_bytes(8, "big"))
    for part in (question, *documents):  # UTF-8 of the text (any string hashes)
        data = (part if isinstance(part, str) else str(part)).encode("utf-8", errors="surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.digest()


def derived_rng(question: Any, documents: Sequence[Any]) -> np.random.Generator:
    """A generator seeded by :func:`input_digest`: the same stream for the same input on
    every platform."""
    return np.random.default_rng(int.from_bytes(input_digest(question, documents), "big"))


def check_rng_option(value: Any, *, name: str = "rng") -> Seed:
    """``value`` if it is a Generator, an int (not a bool), ``"fresh"`` or None; else a
    ``ValueError`` naming ``name`` and the value."""
    if value is None or isinstance(value, np.random.Generator):
        return value
    if isinstance(value, str) and value == FRESH:
        return FRESH
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(
        f"{name} must be a non-negative int (a fixed stream), a numpy Generator, 'fresh' "
        f"(fresh entropy on every run) or None (derived from the question and the documents), "
        f"got {value!r}"
    )


# ------------------------------------------------------------------------------ labels
LABELS_PER_DOCUMENT = 100
"""Size of the label space per document shown (a number written anywhere is a label on
screen with probability at most 1/100)."""
MIN_LABEL_DIGITS = 3
"""Fewest digits of a label (``100..999`` for the smallest prompts)."""


def label_range(size: int) -> tuple[int, int]:
    """The range ``[10**(d-1), 10**d - 1]`` the labels of a prompt of ``size`` documents
    are drawn from, ``d`` the fewest digits (>= :data:`MIN_LABEL_DIGITS`) giving
    :data:`LABELS_PER_DOCUMENT` numbers per document; one length, so a piece of a label
    is never another. 1-9 documents: ``(100, 999)``; 10-90: ``(1000, 9999)``."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size must be an integer >= 0 (documents in one prompt), got {size!r}")
    digits = MIN_LABEL_DIGITS
    while 9 * 10 ** (digits - 1) < LABELS_PER_DOCUMENT * int(size):
        digits += 1
    return 10 ** (digits - 1), 10**digits - 1


def draw_labels(rng: np.random.Generator, sizes: NDArray[np.intp], width: int) -> NDArray[np.int64]:
    """Labels, shape ``(B, width)``: row ``b`` holds ``sizes[b]`` distinct numbers drawn
    uniformly from :func:`label_range` ``(sizes[b])``, then 0s. One uniform per slot
    (``rng.random((B, width))``); a slot repeating an earlier one in its row draws again."""
    keys = rng.random((sizes.size, width))
    if sizes.size == 1 and int(sizes[0]) == width:
        # The panner's case (a batch of one, no padding): a set tells whether any repeats.
        lo, hi = label_range(width)
        labels = lo + np.floor(keys * (hi - lo + 1)).astype(np.int64)
        if len(set(labels[0].tolist())) == width:
            return labels
        low = np.array([lo], dtype=np.int64)
        span = np.array([hi - lo + 1], dtype=np.int64)
        pad = np.zeros((1, width), dtype=bool)
    else:
        pad = np.arange(width)[None, :] >= sizes[:, None]
        low = np.empty(sizes.size, dtype=np.int64)
        span = np.empty(sizes.size, dtype=np.int64)
        for s in np.unique(sizes):
            lo, hi = label_range(int(s))
            low[sizes == s], span[sizes == s] = lo, hi - lo + 1
        labels = low[:, None] + np.floor(keys * span[:, None]).astype(np.int64)
        labels[pad] = 0
    while True:
        again = _repeats(labels) & ~pad
        if not again.any():
            return labels
        rows = np.nonzero(again)[0]
        labels[again] = low[rows] + np.floor(rng.random(rows.size) * span[rows]).astype(np.int64)


def _repeats(labels: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Entries equal to an earlier entry of their row, shape ``labels.shape``."""
    order = np.argsort(labels, axis=1, kind="stable")
    ranked = np.take_along_axis(labels, order, axis=1)
    same = np.zeros(labels.shape, dtype=bool)
    same[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
    out = np.zeros(labels.shape, dtype=bool)
    np.put_along_axis(out, order, same, axis=1)
    return out


# The result of a panning run.
StopReason = Literal[
    "rounds",
    "threshold",
    "call-budget",
    "token-budget",
    "converged",
    "no-documents",
    "uninformative-profile",
    "all-rounds-failed",
]


class ProfileLike(Protocol):
    """Anything with per-position ``tpr`` and ``fpr`` sequences (e.g. DetectorProfile)."""

    @property
    def tpr(self) -> Sequence[float]: ...

    @property
    def fpr(self) -> Sequence[float]: ...


@dataclass(frozen=True)
class RoundTrace:
    """What happened in one round.

    ``windows``, ``positions``, ``labels``, ``readings`` and ``prompt_index`` hold one
    entry per call (a prompt, or each of its windows), in planned order.

    Attributes:
        round: 1-based round number.
        windows: The document indices (into the input list) in prompt order.
        positions: Each shown document's position in the (resampled) profile.
        labels: The label each shown document was presented under (``1..m`` when the
            reader takes no labels).
        readings: The reader's :class:`Reading`.
        cited: Document indices cited (validated), ascending, once per citing prompt.
        failed: True when every prompt failed; beliefs were left unchanged.
        posteriors: Posterior of every document after the round, shape ``(n,)``.
        seconds: Wall time of the round's reader calls.
        active: Documents still in play this round (not pruned).
        prompt_index: Which of the round's parallel prompts the call belongs to.
        suspicion: As :attr:`PanningResult.suspicion`, after the round.
    """

    round: int
    windows: tuple[tuple[int, ...], ...]
    positions: tuple[tuple[int, ...], ...]
    readings: tuple[Reading, ...]
    cited: tuple[int, ...]
    failed: bool
    posteriors: NDArray[np.float64]
    seconds: float
    active: int = 0
    labels: tuple[tuple[int, ...], ...] = ()
    prompt_index: tuple[int, ...] = ()
    suspicion: NDArray[np.float64] | None = None

    @property
    def shown(self) -> tuple[int, ...]:
        """All shown document indices, prompt after prompt, each in prompt order."""
        return tuple(i for w in self.windows for i in w)

    @property
    def calls(self) -> int:
        """Prompts sent this round (one per window)."""
        return len(self.readings)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens reported over this round's prompts (0 if none)."""
        return sum(r.prompt_tokens or 0 for r in self.readings)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens reported over this round's prompts (0 if none)."""
        return sum(r.completion_tokens or 0 for r in self.readings)

    @property
    def reading(self) -> Reading:
        """The round's reading; for several windows, a merged summary (cited empty,
        counts and tokens summed, errors joined, the first answer)."""
        if len(self.readings) == 1:
            return self.readings[0]
        rs = self.readings
        errors = [r.error for r in rs if r.error]
        tok_p = [r.prompt_tokens for r in rs if r.prompt_tokens is not None]
        tok_c = [r.completion_tokens for r in rs if r.completion_tokens is not None]
        return Reading(
            cited=(),
            failed=all(r.failed for r in rs),
            error="; ".join(errors) if errors else None,
            answer=next((r.answer for r in rs if r.answer), None),
            invalid_labels=sum(r.invalid_labels for r in rs),
            duplicate_labels=sum(r.duplicate_labels for r in rs),
            documents_cut=sum(r.documents_cut for r in rs),
            chars_cut=sum(r.chars_cut for r in rs),
            attempts=sum(r.attempts for r in rs),
            prompt_tokens=sum(tok_p) if tok_p else None,
            completion_tokens=sum(tok_c) if tok_c else None,
        )


@dataclass(frozen=True)
class PanningResult:
    """The outcome of panning one question; every adapter converts from this.

    Attributes:
        posteriors: Posterior probability of relevance per input document, shape ``(n,)``.
        log_odds: The same in log-odds, shape ``(n,)``.
        ranking: Input indices best first, shape ``(n,)``: by posterior (stable), or by
            citation count for the ``random`` (PSC) policy.
        selected: The documents returned, best first, shape ``(s,)``, ``s <= min(k,
            n)``: :func:`~.beliefs.select` of ``ranking``.
        citation_counts: Times each document was cited, shape ``(n,)``.
        rounds: Per-round trace.
        calls: Prompts sent (retries are counted in each reading's ``attempts``).
        stop_reason: Why panning stopped.
        panned: False when no evidence was used (no documents, uninformative profile,
            or every round failed with ``on_failure="fallback"``): the order is the prior's.
        policy: The placement policy used.
        k: The count limit of the selection (``n`` when ``k=None``).
        prior_log_odds: Log-odds before any evidence, shape ``(n,)``.
        raw_log_odds: The engine's log-odds before the profile's recalibration map
            (``log_odds`` and ``posteriors`` are after it), shape ``(n,)``; None: no map.
        suspicion: Posterior probability that each document is a self-citing passage
            (its citations fit one rate at every position better than the profile's
            curve), shape ``(n,)``; its posterior was discounted by as much. None when
            ``self_citing`` is 0.
        scores: The base retriever's scores as given (NaN where a document had none),
            shape ``(n,)``; None: none given. Traces record them, so that ``calibrate
            --from-traces`` can fit the profile's score map for this retriever.
        reader_fit: How far the replies that cited something read the documents, as the
            profile says a reader does, rather than followed the positions (a reader that
            cites whatever is shown first): 1 minus their mean probability of having been
            positional (:mod:`~.replies`), in [0, 1]. Near 0: the replies carried little
            evidence and the probabilities stayed near the prior's. None: no reply cited
            anything, or ``content_free`` is 0.
        positional: Per prompt that was read (in order), the probability that its reply
            followed the positions, shape ``(R,)``; None as for ``reader_fit``.
    """

    posteriors: NDArray[np.float64]
    log_odds: NDArray[np.float64]
    ranking: NDArray[np.intp]
    selected: NDArray[np.intp]
    citation_counts: NDArray[np.int64]
    rounds: tuple[RoundTrace, ...]
    calls: int
    stop_reason: StopReason
    panned: bool
    policy: str
    k: int
    extra: dict[str, Any] = field(default_factory=dict)
    prior_log_odds: NDArray[np.float64] | None = None
    raw_log_odds: NDArray[np.float64] | None = None
    suspicion: NDArray[np.float64] | None = None
    scores: NDArray[np.float64] | None = None
    reader_fit: float | None = None
    positional: NDArray[np.float64] | None = None

    @property
    def p_none(self) -> float:
        """Probability that no candidate is relevant (:func:`~.beliefs.p_none`)."""
        return float(p_none(self.posteriors))

    @property
    def suspected(self) -> tuple[int, ...]:
        """Documents whose :attr:`suspicion` reaches one half, ascending."""
        if self.suspicion is None:
            return ()
        return tuple(int(i) for i in np.flatnonzero(self.suspicion >= SUSPECT_AT))

    @property
    def failed_rounds(self) -> int:
        """Number of rounds whose every prompt failed."""
        return sum(1 for r in self.rounds if r.failed)

    @property
    def attempts(self) -> int:
        """Model calls including retries."""
        return sum(x.attempts for r in self.rounds for x in r.readings)

    @property
    def cache_hits(self) -> int:
        """Prompts answered from the reader's reply cache (no model call)."""
        return sum(1 for r in self.rounds for x in r.readings if x.cached is True)

    @property
    def cache_misses(self) -> int:
        """Prompts the reader's reply cache did not hold (the model was asked)."""
        return sum(1 for r in self.rounds for x in r.readings if x.cached is False)

    @property
    def calls_saved(self) -> int:
        """Model calls the reply cache saved: one per hit (``calls`` counts cached ones)."""
        return self.cache_hits

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens reported over all rounds (0 if none)."""
        return sum(r.prompt_tokens for r in self.rounds)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens reported over all rounds (0 if none)."""
        return sum(r.completion_tokens for r in self.rounds)

    @property
    def invalid_labels(self) -> int:
        """Labels dropped as invalid over all rounds."""
        return sum(x.invalid_labels for r in self.rounds for x in r.readings)

    @property
    def documents_cut(self) -> int:
        """Documents cut to fit the model's context, summed over every prompt."""
        return sum(x.documents_cut for r in self.rounds for x in r.readings)

    @property
    def chars_cut(self) -> int:
        """Characters those cuts removed from the documents' text, summed over every prompt."""
        return sum(x.chars_cut for r in self.rounds for x in r.readings)

    @property
    def times_cut(self) -> NDArray[np.int64]:
        """Prompts in which each document was shown cut to fit the model's context, shape
        ``(n,)`` (0: always shown whole), from the readings' :attr:`Reading.cut_at`."""
        out = np.zeros(self.posteriors.shape[0], dtype=np.int64)
        for r in self.rounds:
            for window, reading in zip(r.windows, r.readings):
                for position in reading.cut_at:
                    if 0 <= position < len(window):
                        out[window[position]] += 1
        return out

    @property
    def seconds(self) -> float:
        """Wall time spent in reader calls over all rounds."""
        return sum(r.seconds for r in self.rounds)

    @property
    def answer(self) -> str | None:
        """The model's answer from the last successful prompt that produced one."""
        for r in reversed(self.rounds):
            for x in r.readings:
                if not x.failed and x.answer:
                    return x.answer
        return None

    @classmethod
    def empty(cls, policy: str = "belief") -> PanningResult:
        """The result for zero documents: no calls, ``stop_reason="no-documents"``."""
        return cls(
            posteriors=np.zeros(0),
            log_odds=np.zeros(0),
            ranking=np.zeros(0, dtype=np.intp),
            selected=np.zeros(0, dtype=np.intp),
            citation_counts=np.zeros(0, dtype=np.int64),
            rounds=(),
            calls=0,
            stop_reason="no-documents",
            panned=False,
            policy=policy,
            k=0,
            prior_log_odds=np.zeros(0),
        )

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (lists, not arrays)."""
        return {
            "policy": self.policy,
            "k": self.k,
            "panned": self.panned,
            "stop_reason": self.stop_reason,
            "calls": self.calls,
            "attempts": self.attempts,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "failed_rounds": self.failed_rounds,
            "invalid_labels": self.invalid_labels,
            "documents_cut": self.documents_cut,
            "chars_cut": self.chars_cut,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            "answer": self.answer,
            "ranking": self.ranking.tolist(),
            "selected": self.selected.tolist(),
            "p_none": round(self.p_none, 6),
            "posteriors": [round(float(p), 6) for p in self.posteriors],
            "suspected": list(self.suspected),
            "rounds": [
                {
                    "round": r.round,
                    "windows": [list(w) for w in r.windows],
                    "positions": [list(p) for p in r.positions],
                    "labels": [list(lab) for lab in r.labels],
                    "prompt_index": list(r.prompt_index),
                    "cited": list(r.cited),
                    "failed": r.failed,
                    "active": r.active,
                    "calls": r.calls,
                    "errors": [x.error for x in r.readings if x.error],
                    "invalid_labels": sum(x.invalid_labels for x in r.readings),
                    "duplicate_labels": sum(x.duplicate_labels for x in r.readings),
                    "documents_cut": sum(x.documents_cut for x in r.readings),
                    "chars_cut": sum(x.chars_cut for x in r.readings),
                    "attempts": sum(x.attempts for x in r.readings),
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "answers": [x.answer for x in r.readings if x.answer],
                    "abstain_p": [x.abstain_p for x in r.readings],
                    "seconds": round(r.seconds, 4),
                    "posteriors": [round(float(p), 6) for p in r.posteriors],
                    "suspicion": None if r.suspicion is None else [round(float(x), 6) for x in r.suspicion],
                }
                for r in self.rounds
            ],
        }
