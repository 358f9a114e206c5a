"""The one result type of a panning run: :class:`PanningResult` with a :class:`RoundTrace`
per round. Every adapter (LangChain, LlamaIndex, CLI) converts from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from .beliefs import SUSPECT_AT, p_none
from .reading import Reading

__all__ = ["PanningResult", "ProfileLike", "RoundTrace", "StopReason"]

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
