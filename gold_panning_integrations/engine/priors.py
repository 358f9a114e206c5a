"""Priors from the base retriever: its order (and scores) as prior probabilities.

:func:`retriever_prior_probs` is what the panner applies for
``PanningConfig.retriever_prior``: a rank prior that decays geometrically inside the top 10
(:func:`rank_prior_probs`), a softmax over the scores (:func:`score_prior_probs`), or,
with a profile fitted for the retriever, its :class:`ScoreMap` from each score and rank to a
probability (whose sum, the expected number of relevant candidates, then varies per query).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "AUTO_MIN_SCORED",
    "BOUND_SHARE",
    "DEFAULT_HEAD_DECAY",
    "DEFAULT_HEAD_FLOOR",
    "DEFAULT_RANK_MAP",
    "DEFAULT_SCORE_TEMPERATURE",
    "MAX_PRIOR",
    "RankMap",
    "ScoreMap",
    "bounded_prior",
    "rank_map_of",
    "rank_prior_probs",
    "rank_shape_of",
    "retriever_prior_probs",
    "score_map_of",
    "score_prior_probs",
    "score_temperature",
]

logger = logging.getLogger(__name__)

MAX_PRIOR = 0.95
"""No prior probability exceeds this: a prior never overrules the evidence entirely."""

BOUND_SHARE = 0.75
"""A prior not fitted for the retriever at hand (the rank prior, or scores read without a
fitted temperature) puts no document further ahead of another, in log-odds, than this
share of the swing consistent evidence can make (:func:`bounded_prior`)."""

DEFAULT_HEAD_FLOOR = 0.2
"""Share of the default rank prior's top-10 mass spread evenly over the top 10."""

AUTO_MIN_SCORED = 5
"""``retriever_prior="auto"`` reads scores only from this many documents up: the scores are
divided by their standard deviation, and over fewer documents that says little about how
sure the retriever was (two different scores always stand two deviations apart). The
default temperature was fitted on 5 to 30 candidates (docs/embedded-model.md)."""

DEFAULT_SCORE_TEMPERATURE = 0.5
"""The score prior's temperature (standard deviations) fitted on BM25 scores over Natural
Questions passages (docs/embedded-model.md): what ``retriever_prior="score"`` uses when
neither the options nor the profile give one. ``"auto"`` never uses it on its own: another
retriever's scores have another scale."""

DEFAULT_HEAD_DECAY = 0.6
"""Ratio between consecutive ranks inside the top 10 of the default rank prior (at 10
documents: 0.34 for the first, 0.21 for the second, 0.023 for the tenth)."""


def _map_fields(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` read from ``data`` (a profile's JSON object);
    ValueError naming ``what`` and the missing or unknown fields otherwise."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a {what} must be an object, got {data!r:.60}")  # noqa: TRY004 - a profile's ValueError
    names = [f.name for f in dataclasses.fields(cls)]
    missing, extra = [f for f in names if f not in data], sorted(set(data) - set(names))
    if missing or extra:
        raise ValueError(f"a {what} has the fields {', '.join(names)}; missing {missing}, unknown {extra}")
    return {f: data[f] for f in names}


@dataclass(frozen=True)
class ScoreMap:
    """A retriever's scores as prior probabilities, fitted on labelled queries of that
    retriever (:func:`~gold_panning_integrations.calibration.score_maps.fit_score_map`) and
    stored in a detector profile: the document at 0-based rank ``r`` with score ``s`` is
    relevant with probability ``sigmoid(score * s + log_rank * log(1 + r) + offset)``.

    Unlike the softmax of :func:`score_prior_probs`, this reads the scores' level: a query
    whose best candidate scores low gets a small prior mass, so ``p_none`` starts high.
    A level means something only on the scale it was fitted on: :meth:`probabilities`
    declines a query whose top score lies outside ``[low, high]``, the range of the top
    scores of the fitting queries (another retriever's scores, e.g. a cosine similarity
    read through a BM25 map).

    Attributes:
        score: Log-odds per unit of score (finite).
        log_rank: Log-odds per unit of ``log(1 + rank)`` (finite).
        offset: Log-odds at score 0, rank 0 (finite).
        low: Lowest top score of the fitting queries (finite).
        high: Highest top score of the fitting queries (finite, >= ``low``).
    """

    score: float
    log_rank: float
    offset: float
    low: float
    high: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            name, value = f.name, getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"a score map's {name} must be a finite number, got {value!r:.40}")
            object.__setattr__(self, name, float(value))
        if self.low > self.high:
            raise ValueError(f"a score map's low ({self.low}) must not exceed its high ({self.high})")

    def covers(self, scores: ArrayLike) -> bool:
        """Whether the top of ``scores`` (shape ``(n,)``, n >= 1) lies in ``[low, high]``."""
        top = float(np.max(np.asarray(scores, dtype=np.float64)))
        return self.low <= top <= self.high

    def probabilities(self, scores: ArrayLike) -> NDArray[np.float64] | None:
        """Prior probability of each document, shape ``(n,)``, for finite ``scores`` in
        the retriever's order (rank 0 first), each in ``[1e-6, MAX_PRIOR]``; None when
        :meth:`covers` says the scores are off the fitted scale (or there are none)."""
        s = np.asarray(scores, dtype=np.float64).reshape(-1)
        if s.size == 0 or not self.covers(s):
            return None
        z = self.score * s + self.log_rank * np.log1p(np.arange(s.size, dtype=np.float64)) + self.offset
        return np.clip(1.0 / (1.0 + np.exp(-z)), 1e-6, MAX_PRIOR)

    def to_dict(self) -> dict[str, float]:
        """JSON-ready: ``{"score", "log_rank", "offset", "low", "high"}``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreMap:
        """The map of :meth:`to_dict`; ValueError naming the missing or bad field otherwise."""
        return cls(**_map_fields(cls, data, "score map"))


@dataclass(frozen=True)
class RankMap:
    """The base retriever's order as prior probabilities that do not depend on how many
    candidates there are: the document at 0-based rank ``r`` is relevant with probability
    ``sigmoid(offset + log_rank * log(1 + r))``, whether the retriever returned 1 candidate
    or 50. So one candidate starts at the first rank's probability, not at a mass spread
    over one, and ``p_none`` starts at ``prod_r (1 - p_r)``, which falls as candidates are
    added, less and less. Fitted on traces (labelled or not, :mod:`~gold_panning_integrations.calibration.traces`)
    into a profile's ``rank_map``.

    Attributes:
        log_rank: Log-odds per unit of ``log(1 + rank)`` (finite, <= 0: later ranks are
            not likelier).
        offset: Log-odds at rank 0 (finite).
    """

    log_rank: float
    offset: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            name, value = f.name, getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"a rank map's {name} must be a finite number, got {value!r:.40}")
            object.__setattr__(self, name, float(value))
        if self.log_rank > 0:
            raise ValueError(
                f"a rank map's log_rank must be <= 0 (later ranks no likelier), got {self.log_rank}"
            )

    def probabilities(self, n: int) -> NDArray[np.float64]:
        """Prior probability of ranks ``0 .. n-1``, shape ``(n,)``, each in ``[1e-6, MAX_PRIOR]``."""
        z = self.offset + self.log_rank * np.log1p(np.arange(n, dtype=np.float64))
        return np.clip(1.0 / (1.0 + np.exp(-z)), 1e-6, MAX_PRIOR)

    def mass(self, n: int) -> float:
        """Expected number of relevant documents among the first ``n``."""
        return float(self.probabilities(n).sum())

    def flat(self, n: int) -> NDArray[np.float64]:
        """``n`` equal prior probabilities with the same chance that none is relevant as
        the first ``n`` ranks: ``1 - prod_r (1 - p_r) ** (1 / n)``, shape ``(n,)``."""
        if n == 0:
            return np.zeros(0)
        log_none = float(np.log1p(-self.probabilities(n)).sum())
        return np.full(n, float(np.clip(-np.expm1(log_none / n), 1e-6, MAX_PRIOR)))

    def with_mass(self, mass: float, n: int = 10) -> RankMap:
        """This map's shape with the offset that puts ``mass`` (> 0) relevant documents in
        expectation among the first ``n`` (bisection; capped where every rank is at
        :data:`MAX_PRIOR`)."""
        if not mass > 0:
            raise ValueError(f"mass must be > 0, got {mass!r}")
        lo, hi = -40.0, 40.0
        for _ in range(80):
            mid = (lo + hi) / 2.0
            if RankMap(self.log_rank, mid).mass(n) < mass:
                lo = mid
            else:
                hi = mid
        return RankMap(self.log_rank, (lo + hi) / 2.0)

    def to_dict(self) -> dict[str, float]:
        """JSON-ready: ``{"log_rank", "offset"}``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankMap:
        """The map of :meth:`to_dict`; ValueError naming the missing or bad field otherwise."""
        return cls(**_map_fields(cls, data, "rank map"))


DEFAULT_RANK_MAP = RankMap(log_rank=-1.0, offset=-1.3802)
"""The rank map of a retriever and reader we know nothing about: even odds that the first
10 candidates hold something relevant (``p_none`` 0.50 at 10; 0.80 for one candidate, 0.42
at 20, 0.28 at 100), the odds of relevance falling as ``1 / (1 + rank)`` (the harmonic
shape, which assumes no retriever's sharpness; BM25 on Natural Questions is sharper, slope
-2.44, and the bundled NQ profiles carry that: docs/probabilities.md). A profile's
``expected_relevant`` (or the option) sets the expected count among the first 10 with the
same slope."""


def _to_expected_k(weights: NDArray[np.float64], k: float) -> NDArray[np.float64]:
    """Non-negative weights scaled to sum to ``k``, each capped at :data:`MAX_PRIOR` (the
    excess redistributed)."""
    n = weights.size
    k_eff = min(float(k), MAX_PRIOR * n)
    w = weights / weights.sum()
    p = k_eff * w
    for _ in range(n):  # water-filling: at most n passes, usually one or two
        over = p > MAX_PRIOR
        if not over.any():
            break
        excess = float((p[over] - MAX_PRIOR).sum())
        p[over] = MAX_PRIOR
        free = ~over & (p < MAX_PRIOR)
        if not free.any():
            break
        p[free] += excess * w[free] / w[free].sum()
    return np.clip(p, 1e-6, MAX_PRIOR)


def rank_prior_probs(
    n: int,
    *,
    k: float = 1,
    top10_recall: float = 0.5,
    head_decay: float = DEFAULT_HEAD_DECAY,
    head_floor: float = DEFAULT_HEAD_FLOOR,
) -> NDArray[np.float64]:
    """Prior probability of relevance by base-retriever rank (rank 0 first), shape
    ``(n,)``, non-increasing, summing to ``k`` (each capped at :data:`MAX_PRIOR`).

    A relevant document sits in the top 10 with probability ``top10_recall`` (in (0, 1);
    raised to chance, ``10/n``): there its rank decays geometrically (ratio
    ``head_decay``, in (0, 1]) mixed with a flat share ``head_floor`` (in [0, 1]); below,
    the prior is flat, so a retriever's misses are not buried.
    """
    if not 0.0 < top10_recall < 1.0:
        raise ValueError(f"top10_recall must be in (0, 1), got {top10_recall!r}")
    if not 0.0 < head_decay <= 1.0:
        raise ValueError(f"head_decay must be in (0, 1], got {head_decay!r}")
    if not 0.0 <= head_floor <= 1.0:
        raise ValueError(f"head_floor must be in [0, 1], got {head_floor!r}")
    if n == 0:
        return np.zeros(0)
    head = min(10, n)
    g = head_decay ** np.arange(head, dtype=np.float64)
    g = (1.0 - head_floor) * g / g.sum() + head_floor / head
    w = np.empty(n)
    if n <= head:
        w[:] = g
    else:
        # A retriever's top 10 holds the answer at least as often as chance (10/n): a
        # lower figure would make every tail document likelier than the head and the
        # prior flat (n = 11..19 at the default 0.5), throwing the retriever's order away.
        recall = max(top10_recall, head / n)
        w[:head] = recall * g / g.sum()
        w[head:] = (1.0 - recall) / (n - head)
        # Keep the order monotone when the tail would outweigh the head's last rank.
        w[:head] = np.maximum(w[:head], w[head])
    return _to_expected_k(w, k)


def score_prior_probs(scores: ArrayLike, *, k: float = 1, temperature: float = 1.0) -> NDArray[np.float64]:
    """Prior probabilities from finite ``scores`` (shape ``(n,)``, higher = more relevant):
    a softmax at ``temperature`` (> 0) scaled to sum to ``k``, each capped at
    :data:`MAX_PRIOR`."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"scores must be finite; scores[{i}] = {s[i]!r}")
    if s.size == 0:
        return np.zeros(0)
    z = (s - s.max()) / temperature
    return _to_expected_k(np.maximum(np.exp(z), 1e-12), k)


def bounded_prior(probs: ArrayLike, *, max_gap: float) -> NDArray[np.float64]:
    """``probs`` (shape ``(n,)``, in (0, 1)) with their log-odds pulled linearly toward the
    lowest until no two differ by more than ``max_gap`` nats (order kept), then shifted
    alike so that they sum as before (each still at most :data:`MAX_PRIOR`).

    Example: ``[0.9, 0.1]`` (log-odds gap 4.39) with ``max_gap=2.197`` (a 9:1 odds
    ratio): log-odds ``(c + 2.197, c)`` with sigmoids summing to 1, i.e. ``[0.75, 0.25]``.
    """
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if p.size < 2 or not math.isfinite(max_gap):
        return p.copy()
    lo = np.log(p) - np.log1p(-p)
    low, gap = float(lo.min()), float(lo.max() - lo.min())
    if gap <= max_gap:
        return p.copy()
    shape = (lo - low) * (max_gap / gap)
    mass = min(float(p.sum()), MAX_PRIOR * p.size)
    # sum(sigmoid(shape + c)) rises with c: bisect for the shift that restores the mass.
    a, b = -60.0, 60.0
    for _ in range(100):
        c = (a + b) / 2.0
        if float(np.sum(1.0 / (1.0 + np.exp(-(shape + c))))) < mass:
            a = c
        else:
            b = c
    out = 1.0 / (1.0 + np.exp(-(shape + (a + b) / 2.0)))
    return np.clip(out, 1e-6, MAX_PRIOR)


@functools.lru_cache(maxsize=256)
def _bounded_rank_prior(rank_map: RankMap, n: int, max_gap: float) -> NDArray[np.float64]:
    """:func:`bounded_prior` of the rank map's first ``n`` probabilities, kept per map, ``n``
    and bound (the same for every query of that size)."""
    return bounded_prior(rank_map.probabilities(n), max_gap=max_gap)


def _usable_scores(scores: Sequence[float | None], n: int) -> bool:
    """Whether ``scores`` holds one finite number per document (bools are not scores)."""
    return len(scores) == n and all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores
    )


_warned_unordered = False


def _scores_follow_the_order(scores: Sequence[float | None]) -> bool:
    """Whether usable ``scores`` never increase along the documents' order, as a retriever's
    similarities do; once per process, a warning when they do not (distances, lower being
    better, or an order the scores did not make): ``"auto"`` then uses the rank."""
    global _warned_unordered
    s = np.asarray(scores, dtype=np.float64)
    if bool(np.all(np.diff(s) <= 0.0)):
        return True
    if not _warned_unordered:
        _warned_unordered = True
        logger.warning(
            "retriever_prior='auto': the documents' scores do not decrease along their order "
            "(distances, where lower is better, or an order the scores did not make); using the rank "
            "prior. Pass similarities in the retriever's order, or retriever_prior='score' to use them anyway"
        )
    return False


_warned_off_scale = False


def _warn_off_scale(score_map: ScoreMap, scores: Sequence[float | None]) -> None:
    """Once per process: the scores are not on the scale the profile's score map was fitted on."""
    global _warned_off_scale
    if not _warned_off_scale:
        _warned_off_scale = True
        top = max(float(s) for s in scores if s is not None)
        logger.warning(
            "the profile's score map was fitted on top scores in [%.4g, %.4g] and this query's top score is "
            "%.4g: another retriever's scale, so the map is not used. Fit one for this retriever "
            "(gold-panning calibrate --from-traces on traces that record its scores)",
            score_map.low,
            score_map.high,
            top,
        )


def _mapped_prior(
    score_map: ScoreMap, scores: Sequence[float | None], temperature: float | None, *, follow: bool
) -> NDArray[np.float64] | None:
    """The prior read through ``score_map`` (see :func:`retriever_prior_probs`), or None:
    the scores do not follow the order (when ``follow``) or are off the map's scale."""
    if follow and not _scores_follow_the_order(scores):
        return None
    s = np.asarray(scores, dtype=np.float64)
    mapped = score_map.probabilities(s)
    if mapped is None:
        _warn_off_scale(score_map, scores)
        return None
    if temperature is None or s.size < AUTO_MIN_SCORED or float(s.std()) <= 0.0:
        return mapped
    # The map reads the level (how many relevant to expect); the softmax fitted for the
    # same retriever shares that mass out.
    return score_prior_probs(s / float(s.std()), k=float(mapped.sum()), temperature=temperature)


def retriever_prior_probs(
    n: int,
    *,
    k: float,
    mode: str,
    top10_recall: float,
    head_decay: float = DEFAULT_HEAD_DECAY,
    scores: Sequence[float | None] | None = None,
    temperature: float | None = None,
    score_map: ScoreMap | None = None,
    rank_map: RankMap | None = None,
    rank_shape: bool = False,
    max_gap: float = math.inf,
) -> NDArray[np.float64] | None:
    """Prior probability of relevance for ``n`` documents in the base retriever's order,
    summing to ``k`` (the prior mass, never the number of documents asked for).

    ``mode`` is the option ``retriever_prior`` (its help says what each does);
    ``top10_recall`` and ``head_decay`` shape ``"rank"`` (:func:`rank_prior_probs`),
    ``scores`` (``(n,)``, None where unknown) and ``temperature`` (in standard deviations,
    fitted for this retriever; None: not known) ``"score"``. ``"auto"`` reads the scores
    only with a known ``temperature`` and where :data:`AUTO_MIN_SCORED` documents or more
    have usable scores that never rise along the order (else the rank); ``"score"`` without
    a temperature uses :data:`DEFAULT_SCORE_TEMPERATURE`. With a ``score_map`` (fitted
    for this retriever) both read the scores through it instead, from one document up, where
    it :meth:`~ScoreMap.covers` them (else, with a warning once per process, as without it):
    the prior's mass is then the sum of the map's probabilities, not ``k``, and with a known
    ``temperature`` (and :data:`AUTO_MIN_SCORED` documents or more) the softmax shares that
    mass out; without one the map's probabilities are the prior. A prior not fitted for this
    retriever (the rank prior; scores without a known temperature) is
    :func:`bounded_prior` at ``max_gap`` nats. With a ``rank_map`` the rank prior is its
    probabilities and the score prior's mass is its :meth:`~RankMap.mass` over ``n``
    (``k`` is not used): the prior does not assume how many candidates there are; with
    ``rank_shape`` the rank prior is :func:`rank_prior_probs` of ``top10_recall`` and
    ``head_decay`` carrying the map's mass over ``n``. Returns shape ``(n,)``, or None for the
    flat prior.
    """
    if mode not in ("auto", "rank", "score", "none"):
        raise ValueError(f"retriever_prior must be 'auto', 'rank', 'score' or 'none', got {mode!r}")
    if n == 0 or mode == "none":
        return None
    if (
        score_map is not None
        and mode in ("auto", "score")
        and scores is not None
        and _usable_scores(scores, n)
    ):
        mapped = _mapped_prior(score_map, scores, temperature, follow=mode == "auto")
        if mapped is not None:
            return mapped
    if mode == "score" or (mode == "auto" and temperature is not None and n >= AUTO_MIN_SCORED):
        if (
            scores is not None
            and _usable_scores(scores, n)
            and (mode == "score" or _scores_follow_the_order(scores))
        ):
            s = np.asarray(scores, dtype=np.float64)
            spread = float(s.std())
            if spread <= 0.0:
                return None
            mass = k if rank_map is None else rank_map.mass(n)
            if temperature is not None:
                return score_prior_probs(s / spread, k=mass, temperature=temperature)
            p = score_prior_probs(s / spread, k=mass, temperature=DEFAULT_SCORE_TEMPERATURE)
            return bounded_prior(p, max_gap=max_gap)
        if mode == "score":
            logger.warning(
                "retriever_prior='score' but not every document has a finite score; using the rank prior instead"
            )
    if rank_map is not None and rank_shape:
        p = rank_prior_probs(n, k=rank_map.mass(n), top10_recall=top10_recall, head_decay=head_decay)
        return bounded_prior(p, max_gap=max_gap)
    if rank_map is not None:
        return _bounded_rank_prior(rank_map, n, max_gap).copy()
    p = rank_prior_probs(n, k=k, top10_recall=top10_recall, head_decay=head_decay)
    return bounded_prior(p, max_gap=max_gap)


# ------------------------------------------------------------------------------ the prior a profile gives
class PriorOptions(Protocol):
    """The options the prior reads (a :class:`~.config.PanningConfig` has them): declared
    here so that the priors need not import the configuration."""

    @property
    def prior_temperature(self) -> float | None: ...
    @property
    def expected_relevant(self) -> float | None: ...
    @property
    def prior_head_decay(self) -> float | None: ...
    @property
    def prior_top10_recall(self) -> float | None: ...


def score_temperature(config: PriorOptions, profile: Any) -> float | None:
    """The score prior's temperature: the option, else the profile's ``prior_temperature``
    (fitted for its retriever), else None (not known: ``auto`` reads the order only)."""
    if config.prior_temperature is not None:
        return float(config.prior_temperature)
    value = getattr(profile, "prior_temperature", None)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"the profile's prior_temperature must be a number > 0, got {value!r}; "
            "fix or remove it, or pass prior_temperature explicitly"
        )
    return float(value)


def score_map_of(config: PriorOptions, profile: Any) -> ScoreMap | None:
    """The profile's :class:`~.priors.ScoreMap` (fitted for its retriever), unless the
    options set ``prior_temperature`` (which asks for the softmax) or the profile has none."""
    value = getattr(profile, "score_map", None)
    if config.prior_temperature is not None or value is None:
        return None
    if isinstance(value, ScoreMap):
        return value
    try:
        return ScoreMap.from_dict(value)
    except ValueError as err:
        raise ValueError(f"the profile's score_map is not usable: {err}; fix or remove it") from err


def rank_map_of(options: PriorOptions, profile: Any) -> RankMap:
    """The rank map the prior reads (:class:`~.priors.RankMap`): the profile's
    ``rank_map`` (learned from traces), else :data:`~.priors.DEFAULT_RANK_MAP`; with
    ``expected_relevant`` set in ``options`` (the options as given, before the profile fills
    them in), else on a profile without a rank map, shifted to that many relevant documents
    among the first 10."""
    value = getattr(profile, "rank_map", None)
    base = DEFAULT_RANK_MAP
    if value is not None:
        try:
            base = value if isinstance(value, RankMap) else RankMap.from_dict(value)
        except ValueError as err:
            raise ValueError(f"the profile's rank_map is not usable: {err}; fix or remove it") from err
    mass = options.expected_relevant
    if mass is None and value is None:
        mass = getattr(profile, "expected_relevant", None)
    return base if mass is None else base.with_mass(float(mass))


def rank_shape_of(options: PriorOptions, profile: Any) -> tuple[float, float] | None:
    """``(top10_recall, head_decay)`` of the rank prior's older shape
    (:func:`~.priors.rank_prior_probs`) when ``options`` (as given, before the profile
    fills them in) set either, or the profile has a ``prior_head_decay`` and no
    ``rank_map``; else None: the rank map's own shape."""
    decay = options.prior_head_decay
    if decay is None and getattr(profile, "rank_map", None) is None:
        decay = getattr(profile, "prior_head_decay", None)
    if options.prior_top10_recall is None and decay is None:
        return None
    recall = 0.5 if options.prior_top10_recall is None else float(options.prior_top10_recall)
    return recall, DEFAULT_HEAD_DECAY if decay is None else float(decay)
