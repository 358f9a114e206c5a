"""The panning loop's parts: one run's state (plan, observe, result) and a round's reading.

:class:`PanningRun` runs the batch functions of :mod:`.rounds` with a batch of one and
the stop rules of :mod:`.beliefs`; :func:`read_round` and :func:`aread_round` send a
round's prompts to the reader: in daemon threads (sync path) or gathered tasks (async
path), never leaving a call behind the run that made it. The one panner class,
:class:`gold_panning_integrations.GoldPanner`, resolves the profile and the reader once
and drives a :class:`PanningRun` per query with them; this module imports neither.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from typing import Any, TypedDict, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import AllRoundsFailedError
from .beliefs import (
    call_budget_exceeded,
    gain_too_small,
    initial_log_odds,
    recalibrate,
    rounds_done,
    select,
    selected_confidence,
    sigmoid,
    threshold_reached,
    token_budget_exceeded,
    vote_ranking,
)
from .config import PanningConfig
from .priors import (
    BOUND_SHARE,
    DEFAULT_HEAD_DECAY,
    RankMap,
    ScoreMap,
    rank_map_of,
    rank_shape_of,
    retriever_prior_probs,
    score_map_of,
    score_temperature,
)
from .records import PanningResult, ProfileLike, Reading, RoundTrace, StopReason, draw_labels, reader_failure
from .rounds import (
    BatchState,
    DecisionRates,
    active_mask,
    evidence_swing,
    observe_round,
    place,
    plan_round,
    rank_documents,
    settle_round,
    suspected_shares,
    suspicion,
)

__all__ = [
    "PanningConfig",
    "PanningResult",
    "PanningRun",
    "ProfileLike",
    "RoundTrace",
    "RunOptions",
    "StopReason",
    "aread_round",
    "gather_all",
    "in_daemon_thread",
    "rank_map_of",
    "rank_shape_of",
    "read_round",
    "score_map_of",
    "score_temperature",
    "settle",
    "takes_concurrent_calls",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _abstain_of(reading: Reading) -> NDArray[np.float64] | None:
    """``reading.abstain_p`` as a ``(1,)`` array, None when absent or not a probability
    (a reader's bad value is ignored, with a warning: it is evidence only when it is one)."""
    p = getattr(reading, "abstain_p", None)
    if p is None:
        return None
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        logger.warning("ignoring a reading's abstain_p of %r: not a probability in [0, 1]", p)
        return None
    return np.array([float(p)])


def _validate_cited(reading: Any, m: int) -> tuple[tuple[int, ...], Reading]:
    """Defence in depth: keep only in-range, unique positions and count the rest; anything
    but a :class:`Reading` with an iterable ``cited`` becomes a failed reading."""
    if not isinstance(reading, Reading):
        return (), Reading.failure(f"reader returned {type(reading).__name__}, expected a Reading")
    try:
        iter(reading.cited)
    except TypeError:
        return (), Reading.failure(
            f"reader returned a Reading whose cited is {type(reading.cited).__name__}, expected a tuple"
        )
    given = list(reading.cited)
    valid = [
        int(c) for c in given if not isinstance(c, bool) and isinstance(c, (int, np.integer)) and 0 <= c < m
    ]
    keep = tuple(sorted(set(valid)))
    bad, dup = len(given) - len(valid), len(valid) - len(keep)
    if bad or dup:
        logger.warning("reader returned %d invalid and %d duplicate positions; dropped", bad, dup)
        reading = replace(
            reading,
            cited=keep,
            invalid_labels=reading.invalid_labels + bad,
            duplicate_labels=reading.duplicate_labels + dup,
        )
    return keep, reading


@dataclass(frozen=True)
class _Window:
    """One prompt of a planned round: ``docs`` in prompt order and their ``labels``
    (``(m,)``), ``positions`` of the run's documents (``(1, n)``, -1 = not shown), and
    which of the round's parallel prompts it belongs to."""

    docs: NDArray[np.intp]
    positions: NDArray[np.intp]
    labels: NDArray[np.int64]
    prompt: int = 0

    @property
    def shown_positions(self) -> NDArray[np.intp]:
        """Position of each shown document, in prompt order, shape ``(m,)``."""
        return self.positions[0][self.docs]


@dataclass(frozen=True)
class _Plan:
    """One planned round: one window per prompt."""

    windows: tuple[_Window, ...]
    active: int

    def first_prompts(self, count: int) -> _Plan:
        """The plan cut to its first ``count`` parallel prompts (all their windows)."""
        return _Plan(tuple(w for w in self.windows if w.prompt < count), self.active)


class PanningRun:
    """Mutable state of one panning run over ``n`` documents; the reader calls happen
    outside (:func:`read_round`). ``geometry`` and ``recalibration`` are the panner's,
    built once from its profile; ``reader`` names the reader in warnings."""

    def __init__(
        self,
        n: int,
        *,
        config: PanningConfig,
        geometry: DecisionRates,
        recalibration: Any,
        reader: Any,
        prior_probs: ArrayLike | None,
        prior_log_odds: ArrayLike | None,
        rng: np.random.Generator,
        truth: ArrayLike | None,
        scores: Sequence[float | None] | None = None,
    ) -> None:
        if prior_probs is None and prior_log_odds is None and config.prior == "uniform":
            # every document at 0.5 is no probability a reply can be judged by: the
            # reader's check (content_free) needs the base rate or the retriever's prior
            config = replace(config, content_free=0.0)
        self.cfg = config
        self.scores = _recorded_scores(scores, n)
        self.n = n
        self.rng = rng
        self.reader = reader
        self.geometry = geometry
        self.recalibration = recalibration
        self.truth = None if truth is None else np.asarray(truth, dtype=bool).reshape(-1)
        if self.truth is not None and self.truth.shape != (n,):
            raise ValueError(f"truth must have shape ({n},), got {self.truth.shape}")
        if config.policy == "oracle" and self.truth is None:
            raise ValueError("policy 'oracle' needs truth=...: it is for simulation only")
        lo = initial_log_odds(
            n,
            k=config.prior_mass,
            prior=config.prior,
            prior_probs=prior_probs,
            prior_log_odds=prior_log_odds,
        )
        self.state = BatchState.start(lo[None, :])
        self.traces: list[RoundTrace] = []
        self.stop_reason: StopReason | None = None
        budget = config.max_docs_per_prompt
        m = n if budget is None else min(n, budget)
        size = self.geometry.tpr.size
        if not config.resample_profile and size < m:
            raise ValueError(
                f"the profile has {size} positions but {m} documents would be shown; "
                "set resample_profile=True or max_docs_per_prompt <= the profile's positions"
            )
        if n == 0:
            self.stop_reason = "no-documents"
        elif not self.geometry.informative:
            logger.warning(
                "the detector profile has TPR == FPR at every position: citations carry no "
                "evidence, so no model calls are made and the prior order is returned"
            )
            self.stop_reason = "uninformative-profile"

    @property
    def log_odds(self) -> NDArray[np.float64]:
        return self.state.log_odds[0]

    def plan(self) -> _Plan:
        """The next round's prompts, each split into windows when ``windows=True`` and the
        active documents exceed ``max_docs_per_prompt``."""
        cfg, st = self.cfg, self.state
        active = active_mask(st, k=cfg.focus, prune_below=cfg.prune_below, started=bool(self.traces))
        truth = None if self.truth is None else self.truth[None, :]
        n_active = int(np.count_nonzero(active))
        budget = cfg.max_docs_per_prompt or n_active
        split = cfg.windows and n_active > budget
        windows: list[_Window] = []
        for b in range(cfg.prompts_per_round):
            if not split:
                p = plan_round(
                    st, active, config=cfg, geometry=self.geometry, rng=self.rng, truth=truth, prompt=b
                )
                size = int(p.sizes[0])
                windows.append(_Window(p.prompt[0, :size], p.positions, p.labels[0, :size], b))
                continue
            # Windows: deal the ranked documents round-robin, one prompt each.
            order, _ = rank_documents(
                cfg.policy,
                st,
                active,
                rng=self.rng,
                truth=truth,
                shuffle_top=cfg.shuffle_top,
                prompt=b,
                prompts=cfg.prompts_per_round,
                spread=cfg.spread,
            )
            ranked = order[0, :n_active]
            suspects = suspected_shares(st, cfg, self.geometry)
            n_win = -(-n_active // budget)
            for w in range(n_win):
                group = ranked[w::n_win]
                rest = np.setdiff1d(np.arange(self.n), group, assume_unique=True)
                sizes = np.array([group.size], dtype=np.intp)
                order = np.concatenate([group, rest])[None, :]
                positions, prompt = place(order, sizes, self.geometry, suspects=suspects)
                labels = draw_labels(self.rng, sizes, group.size)
                windows.append(_Window(prompt[0, : group.size], positions, labels[0], b))
        return _Plan(tuple(windows), n_active)

    def next_round(self) -> _Plan | None:
        """The next round's plan (its clock starts now), or None and ``stop_reason`` set."""
        plan = self._next_round()
        self._sent = time.perf_counter()
        return plan

    def _next_round(self) -> _Plan | None:
        if self.stop_reason is not None:
            return None
        cfg = self.cfg
        done = len(self.traces)
        if rounds_done(done, cfg.rounds):
            self.stop_reason = "rounds"
            return None
        if (
            cfg.stop_at is not None
            and threshold_reached(
                self.state.log_odds, k=cfg.focus, stop_at=cfg.stop_at, done=done, min_rounds=cfg.min_rounds
            )[0]
        ):
            self.stop_reason = "threshold"
            return None
        plan = self.plan()
        calls = sum(t.calls for t in self.traces) if cfg.max_calls is not None else 0
        if call_budget_exceeded(calls, len(plan.windows), cfg.max_calls):
            # Send the round's first prompts (with all their windows) that still fit.
            per_prompt = len(plan.windows) // cfg.prompts_per_round
            fit = (int(cfg.max_calls or 0) - calls) // per_prompt
            if fit < 1:
                self.stop_reason = "call-budget"
                return None
            plan = plan.first_prompts(fit)
        if cfg.max_prompt_tokens is not None and token_budget_exceeded(
            sum(t.prompt_tokens for t in self.traces),
            sum(len(w) for t in self.traces for w in t.windows),
            sum(w.docs.size for w in plan.windows),
            cfg.max_prompt_tokens,
        ):
            self.stop_reason = "token-budget"
            return None
        if cfg.min_gain is not None and gain_too_small(
            self._expected_gain(plan), min_gain=cfg.min_gain, done=done, min_rounds=cfg.min_rounds
        ):
            self.stop_reason = "converged"
            return None
        return plan

    def observe(self, plan: _Plan, readings: Sequence[Reading], seconds: float | None = None) -> None:
        """Apply one round's readings (one per window); ``seconds`` the round took (None:
        since :meth:`next_round`)."""
        if seconds is None:
            seconds = time.perf_counter() - self._sent
        validated: list[Reading] = []
        cited_all: list[int] = []
        for w, reading in zip(plan.windows, readings):
            cited_pos, reading = _validate_cited(reading, w.docs.size)
            validated.append(reading)
            if reading.failed:  # logged once per query, in result()
                logger.debug("round %d: a reading failed: %s", len(self.traces) + 1, reading.error)
                continue
            docs = w.docs[list(cited_pos)]
            cited = np.zeros((1, self.n), dtype=bool)
            cited[0][docs] = True
            sizes = np.array([w.docs.size], dtype=np.intp)
            abstain = _abstain_of(reading)
            observe_round(
                self.state,
                w.positions,
                sizes,
                cited,
                abstain_p=abstain,
                config=self.cfg,
                geometry=self.geometry,
                settle=False,
            )
            cited_all.extend(docs.tolist())
        settle_round(self.state, self.cfg, self.geometry)
        self.traces.append(
            RoundTrace(
                round=len(self.traces) + 1,
                windows=tuple([tuple(w.docs.tolist()) for w in plan.windows]),
                positions=tuple([tuple(w.shown_positions.tolist()) for w in plan.windows]),
                readings=tuple(validated),
                cited=tuple(sorted(cited_all)),
                failed=all(r.failed for r in validated),
                posteriors=self.posteriors(),
                seconds=seconds,
                active=plan.active,
                labels=tuple(
                    [
                        tuple(w.labels.tolist()) if r.labels is None else tuple(r.labels)
                        for w, r in zip(plan.windows, validated)
                    ]
                ),
                prompt_index=tuple([w.prompt for w in plan.windows]),
                suspicion=suspicion(self.state, self.cfg, self.geometry, row=0),
            )
        )

    def posteriors(self) -> NDArray[np.float64]:
        return sigmoid(self.log_odds)

    def ranking(self) -> NDArray[np.intp]:
        if self.cfg.policy == "random" and self.traces:
            return vote_ranking(self.state.counts[0], rng=self.rng)
        return np.argsort(-self.log_odds, kind="stable")

    def _expected_gain(self, plan: _Plan, samples: int = 64) -> float:
        """Expected rise (>= 0) of the selection confidence if ``plan`` were run, under the
        model's own predictive distribution (Monte Carlo, fixed seed per round)."""
        rng = np.random.default_rng(len(self.traces))
        lo0 = self.log_odds
        lo = np.broadcast_to(lo0, (samples, self.n)).copy()
        for w in plan.windows:
            g = self.geometry.for_size(w.docs.size)
            pos = w.shown_positions
            b = sigmoid(lo0[w.docs])
            q = b * g.tpr[pos] + (1.0 - b) * g.fpr[pos]  # predictive citation probability
            cited = rng.random((samples, w.docs.size)) < q
            lo[:, w.docs] += np.where(cited, g.llr_cited[pos], g.llr_missed[pos])
        after = float(np.mean(selected_confidence(lo, self.cfg.focus)))
        return after - float(selected_confidence(lo0, self.cfg.focus))

    def _warn_once(self) -> None:
        """One warning line for the query: the documents cut to fit the reader's context
        and the readings that failed (each is in the trace)."""
        readings = [r for t in self.traces for r in t.readings]
        cut = sum(r.documents_cut for r in readings)
        if cut:
            prompts = sum(1 for r in readings if r.documents_cut)
            logger.warning(
                "%r cut documents to fit its context budget in %d of %d prompts (%d document%s cut, "
                "%s characters removed in all: PanningResult.documents_cut, .chars_cut); raise its "
                "context_tokens= if the model takes more",
                self.reader,
                prompts,
                len(readings),
                cut,
                "" if cut == 1 else "s",
                f"{sum(r.chars_cut for r in readings):,}",
            )
        failed = [r for r in readings if r.failed]
        if failed and not (self.cfg.on_failure == "raise" and all(t.failed for t in self.traces)):
            logger.warning(
                "%d of %d readings failed over %d rounds (beliefs unchanged for them); last error: %s",
                len(failed),
                len(readings),
                len(self.traces),
                failed[-1].error,
            )

    def result(self) -> PanningResult:
        self._warn_once()
        reason = self.stop_reason or "rounds"
        panned = reason not in ("no-documents", "uninformative-profile")
        if self.traces and all(t.failed for t in self.traces):
            errors = tuple(r.error or "unknown error" for t in self.traces for r in t.readings)
            if self.cfg.on_failure == "raise":
                raise AllRoundsFailedError(
                    f"all {len(self.traces)} panning rounds failed; last error: {errors[-1]}. "
                    "Check the model endpoint, or pass on_failure='fallback' to get the "
                    "input order back flagged as not panned.",
                    errors=errors,
                )
            reason, panned = "all-rounds-failed", False
        ranking = self.ranking() if panned else np.argsort(-self.log_odds, kind="stable")
        cfg, raw = self.cfg, self.log_odds
        log_odds = recalibrate(raw, self.recalibration)
        posteriors = sigmoid(log_odds)
        selected = select(
            posteriors, ranking, k=cfg.k, min_relevance=cfg.min_relevance, recall_target=cfg.recall_target
        )
        return PanningResult(
            posteriors=posteriors,
            log_odds=log_odds,
            raw_log_odds=None if self.recalibration is None else raw.copy(),
            ranking=ranking,
            selected=selected,
            citation_counts=self.state.counts[0].copy(),
            rounds=tuple(self.traces),
            calls=sum(t.calls for t in self.traces),
            stop_reason=reason,
            panned=panned,
            policy=self.cfg.policy,
            k=self.n if cfg.k is None else min(cfg.k, self.n),
            prior_log_odds=self.state.prior_log_odds[0].copy(),
            suspicion=suspicion(self.state, self.cfg, self.geometry, row=0),
            scores=self.scores,
            **self._fit(),
        )

    def _fit(self) -> dict[str, Any]:
        """``reader_fit`` and ``positional`` of the result (:class:`PanningResult`)."""
        replies = self.state.replies
        if not len(replies):
            return {}
        spoke = np.array([bool(s[0]) for s in replies.spoke])
        if not spoke.any():
            return {}
        positional = self.state.positional[0]
        return {"reader_fit": float(1.0 - positional[spoke].mean()), "positional": positional.copy()}


def _recorded_scores(scores: Sequence[float | None] | None, n: int) -> NDArray[np.float64] | None:
    """The retriever's ``scores`` as a result records them: shape ``(n,)``, NaN where one is
    missing or not a finite number; None when none were given (or not one per document)."""
    if scores is None or len(scores) != n or n == 0:
        return None
    out = np.full(n, np.nan)
    for i, v in enumerate(scores):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[i] = float(v)
    return out


def _take(documents: Sequence[Any], idx: NDArray[np.intp]) -> list[Any]:
    """``[documents[i] for i in idx]``, via Python ints (3x faster than numpy scalars)."""
    return [documents[i] for i in idx.tolist()]


class RunOptions(TypedDict, total=False):
    """The keyword options of ``GoldPanner.run`` and ``arun`` (documented there)."""

    k: int | None
    scores: Sequence[float | None] | None
    prior_probs: ArrayLike | None
    prior_log_odds: ArrayLike | None
    rng: np.random.Generator | None
    truth: ArrayLike | None
    reader_options: Mapping[str, Any] | None


def _read_one(
    reader: Any, question: str, documents: Sequence[Any], window: _Window, options: Mapping[str, Any]
) -> Reading:
    """One prompt through ``reader.read`` (with ``options``, the query's reader keywords);
    any error but a fatal one becomes a failed reading (its traceback at DEBUG; the
    query's one warning names it)."""
    try:
        reading: Reading = reader.read(
            question, _take(documents, window.docs), labels=window.labels.tolist(), **options
        )
    except Exception as err:  # noqa: BLE001 - a reader must not crash the run: record, go on
        return reader_failure(err, logger, level=logging.DEBUG)
    return reading


async def _aread_one(
    reader: Any, question: str, documents: Sequence[Any], window: _Window, options: Mapping[str, Any]
) -> Reading:
    """Asynchronous :func:`_read_one` (``reader.aread``)."""
    try:
        reading: Reading = await reader.aread(
            question, _take(documents, window.docs), labels=window.labels.tolist(), **options
        )
    except Exception as err:  # noqa: BLE001 - as in _read_one
        return reader_failure(err, logger, level=logging.DEBUG)
    return reading


def read_round(
    reader: Any,
    question: str,
    documents: Sequence[Any],
    windows: Sequence[_Window],
    options: Mapping[str, Any],
) -> list[Reading]:
    """A round's prompts through ``reader.read``, one reading per window: in threads
    beside this one when :func:`takes_concurrent_calls`, else one after another. A
    :class:`FatalReaderError` is raised once the running prompts finished; prompts not
    yet started are cancelled."""
    if len(windows) == 1 or not takes_concurrent_calls(reader):
        readings = []
        for w in windows:
            readings.append(_read_one(reader, question, documents, w, options))
        return readings
    futures = [
        in_daemon_thread(contextvars.copy_context().run, _read_one, reader, question, documents, w, options)
        for w in windows[1:]
    ]
    try:
        first = _read_one(reader, question, documents, windows[0], options)
    except BaseException as err:
        settle(futures, err)
        raise
    readings = [first]
    for i, f in enumerate(futures):
        try:
            readings.append(f.result())
        except BaseException as err:
            settle(futures[i + 1 :], err)
            raise
    return readings


async def aread_round(
    reader: Any,
    question: str,
    documents: Sequence[Any],
    windows: Sequence[_Window],
    options: Mapping[str, Any],
) -> list[Reading]:
    """A round's prompts through ``reader.aread``, gathered (one prompt: awaited)."""
    if len(windows) == 1:
        return [await _aread_one(reader, question, documents, windows[0], options)]
    return await gather_all(_aread_one(reader, question, documents, w, options) for w in windows)


def check_profile(profile: Any) -> ProfileLike:
    """``profile`` when it has per-position ``tpr`` and ``fpr`` of one length >= 1.

    Raises:
        TypeError: it has no ``tpr``/``fpr``.
        ValueError: they are empty or of different lengths.
    """
    if profile is None or not hasattr(profile, "tpr") or not hasattr(profile, "fpr"):
        raise TypeError(
            "profile must have per-position tpr and fpr (e.g. a DetectorProfile), a bundled "
            f"profile name or a path, got {type(profile).__name__}"
        )
    if len(profile.tpr) < 1 or len(profile.tpr) != len(profile.fpr):
        raise ValueError(
            f"profile needs tpr and fpr of equal length >= 1, got {len(profile.tpr)} and {len(profile.fpr)}"
        )
    return profile  # type: ignore[no-any-return]


def _retriever_prior(
    config: PanningConfig,
    n: int,
    scores: Sequence[float | None] | None,
    temperature: float | None,
    score_map: ScoreMap | None = None,
    rank_map: RankMap | None = None,
    rank_shape: tuple[float, float] | None = None,
    mass_given: bool = False,
) -> NDArray[np.float64] | None:
    """The prior of ``config.retriever_prior`` over ``n`` documents (None: the flat
    ``uniform`` prior), with the score prior's ``temperature`` (None: not known), the
    profile's ``score_map`` and ``rank_map`` (:func:`rank_map_of`; None: the mass of
    ``config``), and the older rank shape where ``rank_shape`` (:func:`rank_shape_of`)
    says so; a prior not fitted for the retriever is bounded by
    :data:`~.priors.BOUND_SHARE` of :func:`~.rounds.evidence_swing`. The flat
    ``base-rate`` prior is the rank map's :meth:`~.priors.RankMap.flat`, or, with
    ``mass_given`` (``expected_relevant`` set in the options), that mass spread over the
    ``n`` documents."""
    if scores is not None and len(scores) != n:
        raise ValueError(f"scores must have one entry per document ({n}), got {len(scores)}")
    probs = retriever_prior_probs(
        n,
        k=config.prior_mass,
        mode=config.retriever_prior,
        top10_recall=0.5 if rank_shape is None else rank_shape[0],
        head_decay=DEFAULT_HEAD_DECAY if rank_shape is None else rank_shape[1],
        rank_shape=rank_shape is not None,
        scores=scores if config.retriever_prior in ("score", "auto") else None,
        temperature=temperature,
        score_map=score_map,
        rank_map=rank_map,
        max_gap=BOUND_SHARE * evidence_swing(config, n),
    )
    if probs is None and rank_map is not None and config.prior == "base-rate" and n > 0:
        # the flat prior: with the mass set, min(m / n, 0.5) each (initial_log_odds); else
        # the rank map's chance that none is relevant, spread evenly
        return None if mass_given else rank_map.flat(n)
    return probs


def takes_concurrent_calls(reader: Any) -> bool:
    """Whether ``reader.read`` may take several prompts at once from threads: it declares
    ``max_concurrency`` None or above 1 (nothing declared: one at a time, as ``read`` may
    not be thread-safe; ``aread`` calls are always gathered)."""
    limit = getattr(reader, "max_concurrency", 1)
    return limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit > 1)


# ------------------------------------------------------------------------------ prompts at once
def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` in a new daemon thread; its future. Not a ThreadPoolExecutor,
    whose workers Python joins at exit: after Ctrl-C a running call would hold the
    process for its whole deadline. Readers bound their own calls in flight."""
    future: Future[Any] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(err)

    threading.Thread(target=work, daemon=True, name="gold-panning-prompt").start()
    return future


def settle(futures: Sequence[Future[Any]], err: BaseException) -> None:
    """Cancel the futures not started and wait for the running ones, so no call outlives
    its run; after an interrupt, running calls are left to end on their own."""
    for f in futures:
        f.cancel()
    if not isinstance(err, KeyboardInterrupt):
        wait(futures)


async def gather_all(coros: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that, when one raises or the caller is cancelled, cancels and
    awaits the others before the error propagates."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
