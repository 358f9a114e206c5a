"""The panning loop: score, assign, ask the reader, update, stop; one result type.

:class:`GoldPanner` runs GP-Belief (or GP-Entropy / PSC) for one question over ``n``
documents. The round logic lives in :class:`_PanningState` so the synchronous
:meth:`GoldPanner.run` and the asynchronous :meth:`GoldPanner.arun` share every line
except the reader call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import AllRoundsFailedError
from .assignment import assign, position_order, shown_order
from .beliefs import DEFAULT_EPS, PriorSpec, initial_log_odds, log_likelihood_ratios, sigmoid, update_log_odds
from .curves import resample_curve
from .policies import POLICIES, score_documents, vote_ranking
from .reading import Reading

__all__ = ["GoldPanner", "PanningResult", "RoundTrace", "ProfileLike", "StopReason"]

logger = logging.getLogger(__name__)

StopReason = Literal[
    "rounds",
    "threshold",
    "call-budget",
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

    Attributes:
        round: 1-based round number.
        shown: Document indices (into the input list) in prompt order, shape ``(m,)``.
        positions: Profile position of each shown document, same order; with a
            resampled profile this is ``0..m-1``.
        cited: Document indices the reader cited (validated), ascending.
        failed: True when the reading failed; beliefs were left unchanged.
        reading: The reader's full :class:`Reading` (diagnostics, tokens, answer).
        posteriors: Posterior of every document after the round, shape ``(n,)``.
        seconds: Wall time of the reader call.
    """

    round: int
    shown: tuple[int, ...]
    positions: tuple[int, ...]
    cited: tuple[int, ...]
    failed: bool
    reading: Reading
    posteriors: NDArray[np.float64]
    seconds: float


@dataclass(frozen=True)
class PanningResult:
    """The outcome of panning one question; every adapter converts from this.

    Attributes:
        posteriors: Posterior probability of relevance per input document, shape ``(n,)``.
        log_odds: The same in log-odds, shape ``(n,)``.
        ranking: Input indices best first, shape ``(n,)``: by posterior (stable, so
            ties keep input order), or by citation count for the ``random`` (PSC) policy.
        selected: The top ``k`` of ``ranking``, shape ``(min(k, n),)``.
        citation_counts: Times each document was cited, shape ``(n,)``.
        rounds: Per-round trace.
        calls: Reader calls made (one per round; retries are in each reading's
            ``attempts``).
        stop_reason: Why panning stopped.
        panned: False when no evidence was used (no documents, uninformative profile,
            or every round failed with ``on_failure="fallback"``): the order is the prior's.
        policy: The placement policy used.
        k: Number of documents selected.
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

    @property
    def failed_rounds(self) -> int:
        """Number of rounds whose reading failed."""
        return sum(1 for r in self.rounds if r.failed)

    @property
    def attempts(self) -> int:
        """Model calls including retries."""
        return sum(r.reading.attempts for r in self.rounds)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens reported by the provider over all rounds (0 if none reported)."""
        return sum(r.reading.prompt_tokens or 0 for r in self.rounds)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens reported by the provider over all rounds (0 if none reported)."""
        return sum(r.reading.completion_tokens or 0 for r in self.rounds)

    @property
    def invalid_labels(self) -> int:
        """Labels dropped as invalid over all rounds."""
        return sum(r.reading.invalid_labels for r in self.rounds)

    @property
    def answer(self) -> str | None:
        """The model's answer from the last successful round that produced one."""
        for r in reversed(self.rounds):
            if not r.failed and r.reading.answer:
                return r.reading.answer
        return None

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (lists, not arrays)."""
        return {
            "policy": self.policy,
            "k": self.k,
            "panned": self.panned,
            "stop_reason": self.stop_reason,
            "calls": self.calls,
            "attempts": self.attempts,
            "failed_rounds": self.failed_rounds,
            "invalid_labels": self.invalid_labels,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "ranking": self.ranking.tolist(),
            "selected": self.selected.tolist(),
            "posteriors": [round(float(p), 6) for p in self.posteriors],
            "rounds": [
                {
                    "round": r.round,
                    "shown": list(r.shown),
                    "cited": list(r.cited),
                    "failed": r.failed,
                    "error": r.reading.error,
                    "invalid_labels": r.reading.invalid_labels,
                    "duplicate_labels": r.reading.duplicate_labels,
                    "attempts": r.reading.attempts,
                    "prompt_tokens": r.reading.prompt_tokens,
                    "completion_tokens": r.reading.completion_tokens,
                    "answer": r.reading.answer,
                    "seconds": round(r.seconds, 4),
                }
                for r in self.rounds
            ],
        }


def _validate_cited(reading: Reading, m: int) -> tuple[tuple[int, ...], Reading]:
    """Defence in depth: keep only in-range, unique positions; count the rest."""
    seen: set[int] = set()
    keep: list[int] = []
    bad = 0
    dup = 0
    for c in reading.cited:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= int(c) < m:
            bad += 1
            continue
        if int(c) in seen:
            dup += 1
            continue
        seen.add(int(c))
        keep.append(int(c))
    if bad or dup:
        logger.warning("reader returned %d invalid and %d duplicate positions; dropped", bad, dup)
        reading = Reading(
            **{
                **reading.__dict__,
                "cited": tuple(sorted(keep)),
                "invalid_labels": reading.invalid_labels + bad,
                "duplicate_labels": reading.duplicate_labels + dup,
            }
        )
    return tuple(sorted(keep)), reading


class _PanningState:
    """Mutable state of one panning run; the reader call happens outside."""

    def __init__(
        self,
        panner: GoldPanner,
        n: int,
        *,
        k: int,
        prior_probs: ArrayLike | None,
        prior_log_odds: ArrayLike | None,
        rng: np.random.Generator,
        truth: ArrayLike | None,
    ) -> None:
        self.p = panner
        self.n = n
        self.k = k
        self.rng = rng
        self.truth = None if truth is None else np.asarray(truth, dtype=bool).reshape(-1)
        if self.truth is not None and self.truth.shape != (n,):
            raise ValueError(f"truth must have shape ({n},), got {self.truth.shape}")
        if panner.policy == "oracle" and self.truth is None:
            raise ValueError("policy 'oracle' needs truth=...: it is for simulation only")
        self.log_odds = initial_log_odds(
            n, k=k, prior=panner.prior, prior_probs=prior_probs, prior_log_odds=prior_log_odds
        )
        self.prior_log_odds = self.log_odds.copy()
        self.counts = np.zeros(n, dtype=np.int64)
        self.traces: list[RoundTrace] = []
        budget = panner.max_docs_per_prompt
        self.m = n if budget is None else min(n, budget)
        tpr = np.asarray(panner.profile.tpr, dtype=np.float64)
        fpr = np.asarray(panner.profile.fpr, dtype=np.float64)
        if panner.resample_profile and self.m >= 1 and tpr.size != self.m:
            tpr, fpr = resample_curve(tpr, self.m), resample_curve(fpr, self.m)
        elif not panner.resample_profile and tpr.size < self.m:
            raise ValueError(
                f"the profile has {tpr.size} positions but {self.m} documents would be shown; "
                "set resample_profile=True or max_docs_per_prompt <= the profile's positions"
            )
        self.tpr, self.fpr = tpr, fpr
        self.pos_order = position_order(tpr, fpr)
        self.llr_cited, self.llr_missed = log_likelihood_ratios(tpr, fpr, eps=panner.eps)
        self.informative = bool(np.any(np.abs(tpr - fpr) > 1e-9))
        self.stop_reason: StopReason | None = None
        if n == 0:
            self.stop_reason = "no-documents"
        elif not self.informative:
            logger.warning(
                "the detector profile has TPR == FPR at every position: citations carry no "
                "evidence, so no model calls are made and the prior order is returned"
            )
            self.stop_reason = "uninformative-profile"

    # -------------------------------------------------------------- the loop
    def next_round(self) -> tuple[NDArray[np.intp], NDArray[np.intp]] | None:
        """Plan the next round: ``(shown doc indices, their positions)`` or None to stop."""
        if self.stop_reason is not None:
            return None
        if len(self.traces) >= self.p.rounds:
            self.stop_reason = "rounds"
            return None
        if self.p.max_calls is not None and len(self.traces) >= self.p.max_calls:
            self.stop_reason = "call-budget"
            return None
        if self.p.stop_at is not None and self.traces and self._selected_confidence() >= self.p.stop_at:
            self.stop_reason = "threshold"
            return None
        scores = score_documents(self.p.policy, self.log_odds, rng=self.rng, truth=self.truth)
        doc_positions = assign(scores, self.pos_order)
        shown = shown_order(doc_positions)
        return shown, doc_positions[shown]

    def observe(
        self, shown: NDArray[np.intp], positions: NDArray[np.intp], reading: Reading, seconds: float
    ) -> None:
        """Apply one reading (positions in ``reading.cited`` index into ``shown``)."""
        cited_pos, reading = _validate_cited(reading, len(shown))
        cited_docs = shown[list(cited_pos)] if cited_pos else np.zeros(0, dtype=np.intp)
        if not reading.failed:
            doc_positions = np.full(self.n, -1, dtype=np.intp)
            doc_positions[shown] = positions
            cited = np.zeros(self.n, dtype=bool)
            cited[cited_docs] = True
            self.log_odds = update_log_odds(
                self.log_odds, doc_positions, cited, self.llr_cited, self.llr_missed
            )
            self.counts[cited_docs] += 1
        else:
            logger.warning("round %d failed: %s", len(self.traces) + 1, reading.error)
        self.traces.append(
            RoundTrace(
                round=len(self.traces) + 1,
                shown=tuple(int(i) for i in shown),
                positions=tuple(int(j) for j in positions),
                cited=tuple(sorted(int(i) for i in cited_docs)) if not reading.failed else (),
                failed=reading.failed,
                reading=reading,
                posteriors=self.posteriors(),
                seconds=seconds,
            )
        )

    # ----------------------------------------------------------------- views
    def posteriors(self) -> NDArray[np.float64]:
        return sigmoid(self.log_odds)

    def ranking(self) -> NDArray[np.intp]:
        if self.p.policy == "random" and self.traces:
            return vote_ranking(self.counts, rng=self.rng)
        return np.argsort(-self.log_odds, kind="stable")

    def _selected_confidence(self) -> float:
        """Mean posterior of the current top-k: the expected precision of the selection."""
        top = np.argsort(-self.log_odds, kind="stable")[: self.k]
        return float(np.mean(sigmoid(self.log_odds[top]))) if top.size else 0.0

    def result(self) -> PanningResult:
        reason = self.stop_reason or "rounds"
        panned = reason not in ("no-documents", "uninformative-profile")
        if self.traces and all(t.failed for t in self.traces):
            errors = tuple(t.reading.error or "unknown error" for t in self.traces)
            if self.p.on_failure == "raise":
                raise AllRoundsFailedError(
                    f"all {len(self.traces)} panning rounds failed; last error: {errors[-1]}. "
                    "Check the model endpoint, or pass on_failure='fallback' to get the "
                    "input order back flagged as not panned.",
                    errors=errors,
                )
            reason, panned = "all-rounds-failed", False
        ranking = self.ranking() if panned else np.argsort(-self.log_odds, kind="stable")
        return PanningResult(
            posteriors=self.posteriors(),
            log_odds=self.log_odds.copy(),
            ranking=ranking,
            selected=ranking[: min(self.k, self.n)],
            citation_counts=self.counts.copy(),
            rounds=tuple(self.traces),
            calls=len(self.traces),
            stop_reason=reason,
            panned=panned,
            policy=self.p.policy,
            k=min(self.k, self.n),
        )


class GoldPanner:
    """Bayesian active search for the relevant documents of one question.

    Each round the panner scores documents by their belief (``policy="belief"``),
    matches the best to the most diagnostic positions of the detector profile, asks the
    reader which shown documents answer the question, and updates every shown
    document's log-odds by Bayes' rule.

    Args:
        reader: Object with ``read(question, documents) -> Reading`` (for :meth:`run`)
            and/or ``async aread(...)`` (for :meth:`arun`). May be None when only the
            planning helpers are used.
        profile: Detector profile: a ``DetectorProfile``, a bundled profile name, a
            path to a profile JSON file, or any object with ``tpr``/``fpr`` sequences.
        rounds: Maximum number of rounds (one reader call each). The paper uses 8.
        k: Number of relevant documents to select (top-k), ``>= 1``.
        policy: ``"belief"`` (GP-Belief), ``"entropy"`` (GP-Entropy), ``"random"`` (PSC),
            or ``"oracle"`` (simulation only; needs ``truth=`` in :meth:`run`).
        max_docs_per_prompt: Context budget in documents. When more documents are
            given, the lowest-scoring ones sit on dummy positions each round: left out
            of the prompt, beliefs unchanged.
        prior: Uniform prior when no per-document prior is given: ``"base-rate"``
            (probability ``k/n``, the default: posteriors are probabilities) or
            ``"uniform"`` (0.5, the paper's setting).
        stop_at: Stop early once the mean posterior of the selected top-k reaches this
            value (e.g. 0.9). None disables early stopping.
        max_calls: Hard budget of reader calls (None: ``rounds`` is the only limit).
        on_failure: When every round fails: ``"raise"`` an
            :class:`~gold_panning_integrations.errors.AllRoundsFailedError`, or
            ``"fallback"`` to the prior order with ``panned=False``.
        eps: Clamp for rates in the update (see :mod:`.beliefs`).
        resample_profile: Resample the profile to the number of shown documents (by
            relative position). If False, documents take the most diagnostic of the
            profile's positions and the rest are filled by dummy documents.
        rng: ``numpy.random.Generator`` or seed; used by the ``random``/``oracle``
            policies and PSC tie-breaking.
    """

    def __init__(
        self,
        reader: Any = None,
        *,
        profile: Any = "lost-in-the-middle",
        rounds: int = 4,
        k: int = 1,
        policy: str = "belief",
        max_docs_per_prompt: int | None = None,
        prior: PriorSpec = "base-rate",
        stop_at: float | None = None,
        max_calls: int | None = None,
        on_failure: Literal["raise", "fallback"] = "raise",
        eps: float = DEFAULT_EPS,
        resample_profile: bool = True,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        if isinstance(profile, (str, Path)):
            from ..profiles import load_profile  # pydantic model; resolved lazily

            profile = load_profile(profile)
        if not hasattr(profile, "tpr") or not hasattr(profile, "fpr"):
            raise TypeError(
                f"profile must be a DetectorProfile, a bundled name, a path, or have tpr/fpr; "
                f"got {type(profile).__name__}"
            )
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds!r}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        if max_docs_per_prompt is not None and max_docs_per_prompt < 1:
            raise ValueError(f"max_docs_per_prompt must be >= 1 or None, got {max_docs_per_prompt!r}")
        if stop_at is not None and not 0.0 < stop_at < 1.0:
            raise ValueError(f"stop_at must be in (0, 1) or None, got {stop_at!r}")
        if max_calls is not None and max_calls < 1:
            raise ValueError(f"max_calls must be >= 1 or None, got {max_calls!r}")
        if on_failure not in ("raise", "fallback"):
            raise ValueError(f"on_failure must be 'raise' or 'fallback', got {on_failure!r}")
        if prior not in ("base-rate", "uniform"):
            raise ValueError(f"prior must be 'base-rate' or 'uniform', got {prior!r}")
        self.reader = reader
        self.profile = profile
        self.rounds = rounds
        self.k = k
        self.policy = policy
        self.max_docs_per_prompt = max_docs_per_prompt
        self.prior: PriorSpec = prior
        self.stop_at = stop_at
        self.max_calls = max_calls
        self.on_failure = on_failure
        self.eps = eps
        self.resample_profile = resample_profile
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def _start(
        self,
        documents: Sequence[Any],
        *,
        k: int | None,
        prior_probs: ArrayLike | None,
        prior_log_odds: ArrayLike | None,
        rng: np.random.Generator | None,
        truth: ArrayLike | None,
    ) -> _PanningState:
        kk = self.k if k is None else k
        if kk < 1:
            raise ValueError(f"k must be >= 1, got {kk!r}")
        return _PanningState(
            self,
            len(documents),
            k=kk,
            prior_probs=prior_probs,
            prior_log_odds=prior_log_odds,
            rng=self.rng if rng is None else rng,
            truth=truth,
        )

    def run(
        self,
        question: str,
        documents: Sequence[Any],
        *,
        k: int | None = None,
        prior_probs: ArrayLike | None = None,
        prior_log_odds: ArrayLike | None = None,
        rng: np.random.Generator | None = None,
        truth: ArrayLike | None = None,
    ) -> PanningResult:
        """Pan ``documents`` for ``question`` with the synchronous reader.

        Args:
            question: The user's question.
            documents: ``n`` documents; passed to the reader in prompt order each round.
            k: Override of the panner's ``k`` for this call.
            prior_probs: Per-document prior probabilities, shape ``(n,)``.
            prior_log_odds: Per-document prior log-odds, shape ``(n,)``.
            rng: Generator for this call (defaults to the panner's).
            truth: Relevance labels, shape ``(n,)``; only the ``oracle`` policy uses them.

        Returns:
            A :class:`PanningResult`.
        """
        if self.reader is None or not hasattr(self.reader, "read"):
            raise TypeError("GoldPanner.run needs a reader with a read(question, documents) method")
        state = self._start(
            documents, k=k, prior_probs=prior_probs, prior_log_odds=prior_log_odds, rng=rng, truth=truth
        )
        while (plan := state.next_round()) is not None:
            shown, positions = plan
            texts = [documents[i] for i in shown]
            t0 = time.perf_counter()
            try:
                reading = self.reader.read(question, texts)
            except Exception as err:  # a reader must not crash the run: record and go on
                logger.warning("reader raised %s", type(err).__name__, exc_info=True)
                reading = Reading.failure(f"{type(err).__name__}: {err}")
            state.observe(shown, positions, reading, time.perf_counter() - t0)
        return state.result()

    async def arun(
        self,
        question: str,
        documents: Sequence[Any],
        *,
        k: int | None = None,
        prior_probs: ArrayLike | None = None,
        prior_log_odds: ArrayLike | None = None,
        rng: np.random.Generator | None = None,
        truth: ArrayLike | None = None,
    ) -> PanningResult:
        """Asynchronous :meth:`run`: awaits ``reader.aread`` (no threads)."""
        if self.reader is None or not hasattr(self.reader, "aread"):
            raise TypeError("GoldPanner.arun needs a reader with an async aread(question, documents) method")
        state = self._start(
            documents, k=k, prior_probs=prior_probs, prior_log_odds=prior_log_odds, rng=rng, truth=truth
        )
        while (plan := state.next_round()) is not None:
            shown, positions = plan
            texts = [documents[i] for i in shown]
            t0 = time.perf_counter()
            try:
                reading = await self.reader.aread(question, texts)
            except Exception as err:
                logger.warning("reader raised %s", type(err).__name__, exc_info=True)
                reading = Reading.failure(f"{type(err).__name__}: {err}")
            state.observe(shown, positions, reading, time.perf_counter() - t0)
        return state.result()
