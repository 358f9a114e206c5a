"""One panning round, written once with a leading batch axis (numpy only).

The panner calls these functions with a batch of one, :func:`~.simulator.simulate` with
thousands of trials. A round is :func:`active_mask` (pruning); :func:`plan_round` per
prompt (score, rank, ``spread``, ``shuffle_top``, match to positions, draw labels); the
reader's citations; :func:`observe_round` per prompt, in prompt order (the update, read
through :func:`~.beliefs.mixed_evidence`). The policy generator's draws come in a fixed
order (scores, shuffle, labels), so a batch of one consumes it exactly as the panner does.

The mixture's rates for a config, what a reply says (read or positional, empty, the way
out) and weighing a round's replies together are in :mod:`.replies` (re-exported here).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .beliefs import (
    TEST_AT,
    flat_evidence,
    log_likelihood_ratios,
    mixed_evidence,
    move_suspects,
    score_documents,
    self_citing_share,
    sigmoid,
)
from .config import PanningConfig
from .positions import position_order, resample_curve
from .records import draw_labels
from .replies import (
    ABSTAIN_CLIP,
    Replies,
    abstention_evidence,
    abstention_update,
    empty_reply_misses,
    evidence_swing,
    lead_rate,
    mixture_rates,
    reply_posterior,
    reply_rates,
    self_citing_rate,
)

__all__ = [
    "ABSTAIN_CLIP",
    "DRAW_TEMPERATURE",
    "ROBUST_SCALE",
    "ROBUST_SHIFT",
    "BatchState",
    "DecisionRates",
    "Placement",
    "Rates",
    "abstention_evidence",
    "active_mask",
    "empty_reply_misses",
    "evidence_swing",
    "lead_rate",
    "mixture_rates",
    "observe_round",
    "plan_round",
    "robust_rates",
    "self_citing_rate",
    "settle_round",
    "suspected_shares",
    "suspicion",
]

DRAW_TEMPERATURE = 0.5
"""Scale of the Gumbel noise the ``"draw"`` spread adds to the policy's score."""

ROBUST_SCALE = 0.95
ROBUST_SHIFT = 0.025


def _row_index(b: int) -> NDArray[np.intp]:
    """Row numbers as a column, shape ``(b, 1)``: ``a[_row_index(b), idx]`` is
    ``np.take_along_axis(a, idx, axis=1)`` without its wrapper."""
    return np.arange(b)[:, None]


def _where0(mask: NDArray[np.bool_], x: NDArray[np.generic]) -> NDArray[np.float64]:
    """``np.where(mask, x, 0.0)`` as float64, cheaper (a masked copy)."""
    out = np.zeros(x.shape)
    np.copyto(out, x, where=mask)
    return out


def _accumulate(
    total: NDArray[np.float64], x: NDArray[np.float64] | NDArray[np.int64], rows: NDArray[np.bool_] | None
) -> None:
    """``total += np.where(rows, x, 0.0)`` in place; ``rows=None`` adds all of ``x``."""
    if rows is None:
        total += x
    else:
        total += _where0(rows, x)


def robust_rates(tpr: ArrayLike, fpr: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The robust likelihood's ``(tpr, fpr)`` (each shape ``(m,)``, in ``[0.025, 0.975]``):
    ``0.95 * rate + 0.025``, then both set to their mean where TPR < FPR."""
    t = ROBUST_SCALE * np.asarray(tpr, dtype=np.float64) + ROBUST_SHIFT
    f = ROBUST_SCALE * np.asarray(fpr, dtype=np.float64) + ROBUST_SHIFT
    inverted = t < f
    mean = (t + f) / 2.0
    return np.where(inverted, mean, t), np.where(inverted, mean, f)


@dataclass(frozen=True)
class Rates:
    """Decision rates for one prompt size, each shape ``(m,)``: ``tpr``/``fpr`` (robust
    transform applied), ``pos_order`` (most diagnostic first), tempered ``llr_cited`` and
    ``llr_missed``; ``both`` is ``tpr`` and ``fpr`` stacked, ``(2, m)``."""

    tpr: NDArray[np.float64]
    fpr: NDArray[np.float64]
    pos_order: NDArray[np.intp]
    llr_cited: NDArray[np.float64]
    llr_missed: NDArray[np.float64]
    both: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "both", np.stack((self.tpr, self.fpr)))


class DecisionRates:
    """A profile's decision rates (``tpr``, ``fpr``: shape ``(M,)``) per prompt size,
    cached; ``config`` gives ``resample_profile``, ``robust`` and ``eps``, ``temperature``
    divides every log-likelihood ratio, ``placement`` (other ``(tpr, fpr)``) decides
    placement only (the simulator's ablation; default the profile), and ``abstention`` is
    the profile's ``abstention_map`` (None: abstention probabilities are not read)."""

    def __init__(
        self,
        tpr: ArrayLike,
        fpr: ArrayLike,
        *,
        config: PanningConfig,
        temperature: float = 1.0,
        placement: tuple[ArrayLike, ArrayLike] | None = None,
        abstention: tuple[float, float] | None = None,
    ) -> None:
        self.tpr = np.asarray(tpr, dtype=np.float64)
        self.fpr = np.asarray(fpr, dtype=np.float64)
        self._placement = (
            None if placement is None else tuple(np.asarray(x, dtype=np.float64) for x in placement)
        )
        self.config = config
        self.temperature = float(temperature)
        self.abstention = None if abstention is None else (float(abstention[0]), float(abstention[1]))
        self._cache: dict[int, Rates] = {}

    @functools.cached_property
    def informative(self) -> bool:
        """False when TPR equals FPR at every position of the profile."""
        return bool(np.any(np.abs(self.tpr - self.fpr) > 1e-9))

    def for_size(self, size: int) -> Rates:
        """Rates for a prompt of ``size`` documents (the profile resampled, unless
        ``resample_profile=False``)."""
        r = self._cache.get(size)
        if r is None:
            t, f = self._sized(self.tpr, size), self._sized(self.fpr, size)
            # Placement uses the profile's own diagnosticity; the update the robust rates.
            if self._placement is None:
                order = position_order(t, f)
            else:
                order = position_order(
                    self._sized(self._placement[0], size), self._sized(self._placement[1], size)
                )
            if self.config.robust:
                t, f = robust_rates(t, f)
            c, m = log_likelihood_ratios(t, f, eps=self.config.eps)
            r = Rates(t, f, order, c / self.temperature, m / self.temperature)
            self._cache[size] = r
        return r

    def _sized(self, curve: NDArray[np.float64], size: int) -> NDArray[np.float64]:
        if self.config.resample_profile and curve.size != size:
            return resample_curve(curve, size)
        return curve

    def stacked(self, sizes: NDArray[np.intp], width: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Decision ``(tpr, fpr)`` per row for prompts of ``sizes`` documents, each shape
        ``(B, W)`` (zero-padded to ``W = max(width, profile positions)``), or ``(1, W)``
        when every row has the same size."""
        uniq = sizes[:1] if sizes.size == 1 else np.unique(sizes)
        w = max(width, self.tpr.size) if not self.config.resample_profile else max(width, 1)
        if uniq.size == 1:
            r = self.for_size(int(uniq[0]))
            t = np.zeros((1, max(w, r.tpr.size)))
            f = np.zeros_like(t)
            t[0, : r.tpr.size], f[0, : r.fpr.size] = r.tpr, r.fpr
            return t, f
        widths = [self.for_size(int(s)).tpr.size for s in uniq]
        w = max([w, *widths])
        t = np.zeros((sizes.size, w))
        f = np.zeros_like(t)
        for s in uniq:
            r = self.for_size(int(s))
            rows = sizes == s
            t[rows, : r.tpr.size] = r.tpr
            f[rows, : r.fpr.size] = r.fpr
        return t, f

    def rates_at(self, positions: NDArray[np.intp], sizes: NDArray[np.intp]) -> NDArray[np.float64]:
        """Decision TPR and FPR at each document's position (``(B, n)``; -1, not shown,
        reads position 0) in prompts of ``sizes`` (``(B,)``), shape ``(2, B, n)``."""
        pos = np.maximum(positions, 0)  # -1 (not shown) -> 0
        uniq = sizes[:1] if sizes.size == 1 else np.unique(sizes)
        if uniq.size == 1:
            r = self.for_size(int(uniq[0]))
            if r.tpr.size:
                return r.both.take(pos, axis=1)
        tpr, fpr = self.stacked(sizes, positions.shape[1])
        rows = _row_index(positions.shape[0]) if tpr.shape[0] > 1 else 0
        return np.stack((tpr[rows, pos], fpr[rows, pos]))


@dataclass
class BatchState:
    """Beliefs and tallies of ``B`` panning runs over ``n`` documents each.

    Per document, shape ``(B, n)``: ``log_odds``, ``prior_log_odds``, ``counts``
    (citations), ``times_shown`` (in prompts that updated beliefs), ``evidence`` (summed
    log-likelihood ratio), ``abstained`` (summed :func:`abstention_evidence`, a measured
    likelihood ratio the mixture does not bound again; ``log_odds = prior_log_odds +
    mixed_evidence(evidence) + abstained``),
    ``relevant``/``irrelevant`` (summed log-likelihoods at the profile's own rates, kept
    for ``self_citing``). Per run, shape ``(B,)``: citations ``observed`` and
    ``predicted`` (level adaptation), over the replies that cited something.

    The reader's fit: ``replies`` keeps each prompt's readings (:class:`Replies`), and
    ``positional`` (``(B, R)``) the probability that reply ``r`` followed the positions, not
    the documents (:func:`weigh_replies`); ``evidence`` is each reply's evidence weighted
    by the probability that it read the documents.
    """

    log_odds: NDArray[np.float64]
    prior_log_odds: NDArray[np.float64]
    replies: Replies = field(init=False)
    positional: NDArray[np.float64] = field(init=False)
    unsettled: NDArray[np.bool_] = field(init=False)
    evidence: NDArray[np.float64] = field(init=False)
    abstained: NDArray[np.float64] = field(init=False)
    relevant: NDArray[np.float64] = field(init=False)
    irrelevant: NDArray[np.float64] = field(init=False)
    counts: NDArray[np.int64] = field(init=False)
    times_shown: NDArray[np.int64] = field(init=False)
    observed: NDArray[np.float64] = field(init=False)
    predicted: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        b, n = self.log_odds.shape
        self.replies = Replies()
        self.positional = np.zeros((b, 0))
        self.unsettled = np.zeros(b, dtype=bool)
        self.evidence = np.zeros((b, n))
        self.abstained = np.zeros((b, n))
        self.relevant = np.zeros((b, n))
        self.irrelevant = np.zeros((b, n))
        self.counts = np.zeros((b, n), dtype=np.int64)
        self.times_shown = np.zeros((b, n), dtype=np.int64)
        self.observed = np.zeros(b)
        self.predicted = np.zeros(b)

    @classmethod
    def start(cls, log_odds: NDArray[np.float64]) -> BatchState:
        """A state starting from ``log_odds``, shape ``(B, n)`` (copied)."""
        lo = np.array(log_odds, dtype=np.float64, ndmin=2)
        return cls(lo, lo.copy())

    @property
    def level(self) -> NDArray[np.float64]:
        """``min(1, (observed + 1) / (predicted + 1))``, shape ``(B,)``."""
        return np.minimum(1.0, (self.observed + 1.0) / (self.predicted + 1.0))


@dataclass(frozen=True)
class Placement:
    """One planned prompt per run: ``positions`` per document (``(B, n)``, -1 = not
    shown), ``sizes`` shown (``(B,)``), ``prompt`` (document indices in prompt order, the
    shown first, ``(B, n)``) and ``labels`` per slot (:func:`draw_labels`, ``(B, W)``)."""

    positions: NDArray[np.intp]
    sizes: NDArray[np.intp]
    prompt: NDArray[np.intp]
    labels: NDArray[np.int64]


def active_mask(state: BatchState, *, k: int, prune_below: float | None, started: bool) -> NDArray[np.bool_]:
    """Documents still in play, shape ``(B, n)``: all but those pruned (``prune_below``)."""
    lo = state.log_odds
    if prune_below is None or not started:
        return np.ones(lo.shape, dtype=bool)
    # One miss at a strong position can push a needle far down; a second independent
    # look rarely agrees by chance, so a document leaves only after two.
    keep = (lo - state.prior_log_odds >= np.log(prune_below)) | (state.times_shown < 2)
    top = np.argsort(-lo, axis=1, kind="stable")[:, :k]
    keep[_row_index(lo.shape[0]), top] = True
    return keep


def _shuffle_top(
    order: NDArray[np.intp], sizes: NDArray[np.intp], top: int, rng: np.random.Generator
) -> None:
    """Permute, in place and uniformly, the first ``min(top, sizes[b])`` entries of each row."""
    t = min(top, order.shape[1])
    if t < 2:
        return
    b = order.shape[0]
    keys = rng.random((b, t))
    short = int(sizes[0]) < t if b == 1 else bool((sizes < t).any())
    if short:  # a row with fewer than t documents keeps the rest in place
        cols = np.arange(t)[None, :]
        keys = np.where(cols < np.minimum(sizes, t)[:, None], keys, cols + 1.0)
    perm = keys.argsort(axis=1, kind="stable")
    if b == 1:
        order[0, :t] = order[0][perm[0]]
    else:
        order[:, :t] = order[_row_index(b), perm]


def _stride(
    order: NDArray[np.intp], n_active: NDArray[np.intp], prompt: int, prompts: int
) -> NDArray[np.intp]:
    """``order`` (best first) with ranks ``prompt, prompt + prompts, ...`` of the active
    documents first, the other active ones next, the inactive last."""
    r = np.arange(order.shape[1])[None, :]
    live = r < n_active[:, None]
    group = np.where(live & (r % prompts == prompt), 0, np.where(live, 1, 2))
    return order[_row_index(order.shape[0]), np.argsort(group, axis=1, kind="stable")]


def rank_documents(
    policy: str,
    state: BatchState,
    active: NDArray[np.bool_],
    *,
    rng: np.random.Generator,
    truth: NDArray[np.bool_] | None = None,
    shuffle_top: int = 0,
    prompt: int = 0,
    prompts: int = 1,
    spread: str = "stride",
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``(order, n_active)``, shapes ``(B, n)`` and ``(B,)``: documents best first by the
    policy's score (the first ``shuffle_top`` permuted), inactive ones last. Prompt 0 of
    the round's ``prompts`` is the policy's own order, the others differ by ``spread``."""
    scores = score_documents(policy, state.log_odds, rng=rng, truth=truth)
    if prompt > 0 and spread == "draw" and policy != "random":
        gumbel = -np.log(-np.log(np.maximum(rng.random(scores.shape), 1e-300)))
        scores = scores + DRAW_TEMPERATURE * gumbel
    scores = np.where(active, scores, -np.inf)
    order = (-scores).argsort(axis=1, kind="stable")
    n_active = active.sum(axis=1).astype(np.intp)
    if prompt > 0 and spread == "stride" and policy != "random":
        order = _stride(order, n_active, prompt, prompts)
    _shuffle_top(order, n_active, shuffle_top, rng)
    return order, n_active


def place(
    order: NDArray[np.intp],
    sizes: NDArray[np.intp],
    geometry: DecisionRates,
    *,
    suspects: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``(positions, prompt)``, each ``(B, n)``: rank ``r < sizes[b]`` of row ``b`` takes
    the ``r``-th most diagnostic position (the rest -1), then :func:`move_suspects` of
    ``suspects``; ``prompt`` lists document indices by ascending position, shown first."""
    b, n = order.shape
    if b == 1 and geometry.config.resample_profile and suspects is None:
        # The s shown take positions 0..s-1 (a permutation, the profile resampled to s):
        # prompt slot pos_order[r] holds rank r; the others follow by document index.
        s0 = int(sizes[0])
        po = geometry.for_size(s0).pos_order[:s0]
        positions = np.full((1, n), -1, dtype=np.intp)
        positions[0, order[0, :s0]] = po
        prompt = np.empty((1, n), dtype=np.intp)
        prompt[0, po] = order[0, :s0]
        prompt[0, s0:] = np.sort(order[0, s0:])
        return positions, prompt
    pos_by_rank = np.full((b, n), -1, dtype=np.intp)
    for s in np.unique(sizes):
        po = geometry.for_size(int(s)).pos_order[: int(s)]
        pos_by_rank[sizes == s, : int(s)] = po
    positions = np.empty((b, n), dtype=np.intp)
    positions[_row_index(b), order] = pos_by_rank
    if suspects is not None:
        positions = move_suspects(positions, geometry.rates_at(positions, sizes)[0], suspects)
    key = np.where(positions >= 0, positions, np.iinfo(np.intp).max)
    prompt = np.argsort(key, axis=1, kind="stable")
    return positions, prompt


def plan_round(
    state: BatchState,
    active: NDArray[np.bool_],
    *,
    config: PanningConfig,
    geometry: DecisionRates,
    rng: np.random.Generator,
    truth: NDArray[np.bool_] | None = None,
    prompt: int = 0,
) -> Placement:
    """Plan one prompt per run (the whole active set, cut to ``max_docs_per_prompt``):
    prompt ``prompt`` of the round's ``config.prompts_per_round``."""
    order, n_active = rank_documents(
        config.policy,
        state,
        active,
        rng=rng,
        truth=truth,
        shuffle_top=config.shuffle_top,
        prompt=prompt,
        prompts=config.prompts_per_round,
        spread=config.spread,
    )
    budget = config.max_docs_per_prompt
    sizes = n_active if budget is None else np.minimum(n_active, budget)
    positions, prompt_order = place(
        order, sizes, geometry, suspects=suspected_shares(state, config, geometry)
    )
    labels = draw_labels(rng, sizes, int(sizes.max()) if sizes.size else 0)
    return Placement(positions, sizes, prompt_order, labels)


def _relevant_share(log_odds: NDArray[np.float64], k: float) -> NDArray[np.float64]:
    """``min(1, k * p / sum(p))`` with ``p = sigmoid(log_odds)``, shape ``(B, n)``."""
    p = sigmoid(log_odds)
    return np.minimum(1.0, k * p / np.maximum(np.add.reduce(p, axis=1, keepdims=True), 1e-12))


def _clamped_logs(
    rates: NDArray[np.float64], eps: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(clamped, log, log1p(-clamped))`` of stacked rates, each shape ``(2, B, n)``."""
    clamped = np.minimum(np.maximum(rates, eps), 1.0 - eps)
    return clamped, np.log(clamped), np.log1p(-clamped)


def observe_round(
    state: BatchState,
    positions: NDArray[np.intp],
    sizes: NDArray[np.intp],
    cited: NDArray[np.bool_],
    *,
    ok: NDArray[np.bool_] | None = None,
    abstain_p: NDArray[np.float64] | None = None,
    config: PanningConfig,
    geometry: DecisionRates,
    settle: bool = True,
) -> NDArray[np.bool_]:
    """The Bayesian update of ``state``, in place, by one prompt per run: ``positions``
    and ``cited`` per document (``(B, n)``, -1 = not shown), ``sizes`` shown, ``ok``
    (reading succeeded; None: all) and ``abstain_p`` (the way out's first-token
    probability, NaN: none; read through ``geometry.abstention`` when both are given) per
    run (``(B,)``). Returns the runs updated, ``(B,)``.

    With ``content_free > 0`` every reply so far is weighed again
    (:func:`~.replies.reply_posterior`) when ``settle`` is true; the panner and the
    simulator pass ``settle=False`` for all but a round's last prompt (:func:`settle_round`
    after it), so a round of prompts sent together is weighed once.
    """
    shown = positions >= 0
    cited = cited & shown
    b = positions.shape[0]
    n_cited = np.add.reduce(cited, axis=1)
    read_ok = None if ok is None else np.asarray(ok, dtype=bool)  # None: every run read
    if config.empty_prompts == "skip":
        upd = n_cited > 0 if read_ok is None else read_ok & (n_cited > 0)
    else:
        upd = np.ones(b, dtype=bool) if read_ok is None else read_ok.copy()
    any_read = b > 0 if read_ok is None else bool(read_ok.any())
    if not (upd.any() or (config.adapt_level and any_read)):
        return upd
    rates = geometry.rates_at(positions, sizes)  # (2, B, n): TPR, FPR
    profile_rates = rates
    if config.adapt_level:
        # The level counts the replies that cite something: an empty reply is silent_rate's
        # to explain, and counting it here would read "nothing is relevant" as "this reader
        # cites little". Shares rescaled to the prior mass so the prediction holds under a
        # uniform prior.
        spoke = n_cited > 0 if read_ok is None else read_ok & (n_cited > 0)
        if spoke.any():
            share = _relevant_share(state.log_odds, config.prior_mass)
            t, f = rates
            predicted = np.add.reduce(_where0(shown, share * t + (1.0 - share) * f), axis=1)
            _accumulate(state.observed, n_cited, spoke)
            _accumulate(state.predicted, predicted, spoke)
        rates = rates * state.level[:, None]
    # The tempered log-likelihood ratios of both rates at once, the clamped logs kept for the miss rule.
    temperature = geometry.temperature
    clamped, log_r, log1m = _clamped_logs(rates, geometry.config.eps)
    llr_c = (log_r[0] - log_r[1]) / temperature
    missed = log1m[0] - log1m[1]
    if config.empty_prompts in ("mixture", "by-position"):
        if config.eps != geometry.config.eps:
            clamped, _, log1m = _clamped_logs(rates, config.eps)
            missed = log1m[0] - log1m[1]
        llr_m = empty_reply_misses(
            clamped,
            log1m,
            missed,
            shown,
            n_cited,
            read_ok,
            reply_rates(config)[1],
            temperature,
            by_position=config.empty_prompts == "by-position",
        )
    else:
        llr_m = missed / temperature
    delta = np.where(cited, llr_c, llr_m)
    updated = upd[:, None]
    apply = shown & updated
    reply_delta = _where0(apply, delta)
    a, b_rate, s = mixture_rates(config, state.log_odds.shape[1])
    omega, silent_rate = reply_rates(config)
    fitted = None
    if omega > 0.0:
        spoke = upd & (n_cited > 0)
        # the reply's log-likelihood were every shown document irrelevant (cited at FPR);
        # a reply that cites something is not silent
        base = np.add.reduce(_where0(apply, np.where(cited, log_r[1], log1m[1])), axis=1)
        if config.empty_prompts != "evidence" and silent_rate > 0.0:
            base = base + math.log1p(-silent_rate)
        state.unsettled |= upd
        state.replies.add(
            delta=reply_delta,
            shown=apply,
            cited=cited & apply,
            rates=clamped,
            slots=_slots(positions, sizes),
            spoke=spoke,
            base=base / temperature,
        )
        if settle:
            fitted, state.positional, state.evidence = reply_posterior(
                state.replies,
                state.prior_log_odds,
                content_free=omega,
                false_lead_rate=a,
                blind_rate=b_rate,
                previous=state.positional,
            )
            state.unsettled[:] = False
        else:  # until the round settles: the new reply read, the earlier ones as weighed last
            state.evidence = np.add(state.evidence, reply_delta)
    else:
        state.evidence = np.add(state.evidence, reply_delta)
    if abstain_p is not None and geometry.abstention is not None:
        # fitted on labels, blind spots included: added outside the mixture's bounds
        lam = abstention_evidence(abstain_p, geometry.abstention)
        state.abstained = np.add(
            state.abstained, _where0(apply, abstention_update(state.log_odds, shown, lam))
        )
    flat = None
    profile_evidence = None
    if s > 0.0:  # log L_R and log L_I at the profile's own rates, for the flat-rate hypothesis
        _, log_p, log1m_p = _clamped_logs(profile_rates, geometry.config.eps)
        ll = np.where(cited, log_p, log1m_p) / temperature  # (2, B, n)
        state.relevant = np.add(state.relevant, _where0(apply, ll[0]))
        state.irrelevant = np.add(state.irrelevant, _where0(apply, ll[1]))
        counts, seen = state.counts + (cited & updated), state.times_shown + apply
        flat = flat_evidence(counts, seen, state.irrelevant, temperature=temperature)
        profile_evidence = state.relevant - state.irrelevant
    if fitted is not None and s == 0.0:
        state.log_odds = fitted
    else:
        state.log_odds = np.add(
            state.prior_log_odds,
            mixed_evidence(
                state.evidence,
                false_lead_rate=a,
                blind_rate=b_rate,
                self_citing=s,
                flat=flat,
                profile_evidence=profile_evidence,
            ),
        )
    if state.abstained.any():
        state.log_odds += state.abstained
    state.counts += cited & updated
    state.times_shown += apply
    return upd


def _slots(positions: NDArray[np.intp], sizes: NDArray[np.intp]) -> NDArray[np.intp]:
    """Each document's position read on ``n`` slots by its relative depth (``(B, n)``; -1:
    not shown): a prompt of ``m`` documents puts position ``j`` on slot ``round(j (n - 1)
    / (m - 1))``, so prompts of every size share one set of slots (a profile's own
    positions beyond them, with ``resample_profile=False``, share the last)."""
    n = positions.shape[1]
    m = np.maximum(sizes - 1, 1)[:, None]
    slot = np.minimum(np.rint(np.maximum(positions, 0) * (n - 1) / m).astype(np.intp), n - 1)
    return np.where(positions >= 0, slot, -1)


def suspicion(
    state: BatchState, config: PanningConfig, geometry: DecisionRates, *, row: int | None = None
) -> NDArray[np.float64] | None:
    """:func:`~.beliefs.self_citing_share` of every document, shape ``(B, n)`` (of run ``row`` only:
    ``(n,)``); None when ``config.self_citing`` is 0."""
    a, b, s = mixture_rates(config, state.log_odds.shape[1])
    if s == 0.0:
        return None
    sl = slice(None) if row is None else row
    t = geometry.temperature
    flat = flat_evidence(state.counts[sl], state.times_shown[sl], state.irrelevant[sl], temperature=t)
    return self_citing_share(
        state.prior_log_odds[sl],
        state.evidence[sl],
        flat,
        false_lead_rate=a,
        blind_rate=b,
        self_citing=s,
        profile_evidence=state.relevant[sl] - state.irrelevant[sl],
    )


def suspected_shares(
    state: BatchState, config: PanningConfig, geometry: DecisionRates
) -> NDArray[np.float64] | None:
    """Self-citing shares at least :data:`~.beliefs.TEST_AT` (others 0), shape ``(B, n)``; None when
    none is."""
    share = suspicion(state, config, geometry)
    if share is None or not (share >= TEST_AT).any():
        return None
    share[share < TEST_AT] = 0.0
    return share


def settle_round(state: BatchState, config: PanningConfig, geometry: DecisionRates) -> None:
    """Weigh every reply of ``state`` again (:func:`~.replies.reply_posterior`) and set
    its log-odds, for the runs that read a reply since they last settled: what the last
    ``observe_round`` of a round does with ``settle=True``. A no-op when ``content_free`` is
    0 or nothing was observed."""
    omega = reply_rates(config)[0]
    rows = np.flatnonzero(state.unsettled)
    if omega == 0.0 or not len(state.replies) or rows.size == 0:
        return
    a, b_rate, s = mixture_rates(config, state.log_odds.shape[1])
    every = rows.size == state.unsettled.size
    replies = state.replies if every else state.replies.rows(rows)
    previous = state.positional if every else state.positional[rows]
    fitted, positional, evidence = reply_posterior(
        replies,
        state.prior_log_odds[rows],
        content_free=omega,
        false_lead_rate=a,
        blind_rate=b_rate,
        previous=previous,
    )
    r = positional.shape[1]
    if state.positional.shape[1] < r:
        grown = np.zeros((state.positional.shape[0], r))
        grown[:, : state.positional.shape[1]] = state.positional
        state.positional = grown
    state.positional[rows] = positional
    state.evidence[rows] = evidence
    if s > 0.0:
        t = geometry.temperature
        fitted = state.prior_log_odds[rows] + mixed_evidence(
            evidence,
            false_lead_rate=a,
            blind_rate=b_rate,
            self_citing=s,
            flat=flat_evidence(
                state.counts[rows], state.times_shown[rows], state.irrelevant[rows], temperature=t
            ),
            profile_evidence=state.relevant[rows] - state.irrelevant[rows],
        )
    state.log_odds[rows] = fitted + state.abstained[rows]
    state.unsettled[rows] = False
