"""How far each reply reads the documents: a reply either follows the documents, as the
profile says a reader does, or follows the positions (numpy only).

A reader the profile does not describe may cite by position: whatever is shown first, or
last. Such a reply says nothing about which document is relevant, and counting it as
evidence makes a confident winner out of position bias. Each reply ``r`` of a question
that cites something is therefore one of two kinds:

* *reading* (probability ``1 - nu``): every shown document is cited independently, at the
  profile's ``t_i`` if relevant, ``f_i`` if not;
* *positional* (probability ``nu``): the reply cites slot ``j`` at a rate ``rho_j`` of its
  own, whatever document sits there, and cites something (a reply that cites nothing is
  always read through the profile's silence, :func:`~.rounds.observe_round`).

``nu`` is the question's own share of positional replies, ``Beta(2 omega, 2 (1 - omega))``
a priori (``omega`` the option ``content_free``), and ``rho_j ~ Beta(kappa m, kappa (1 -
m))`` with ``m = 1 / K`` over the ``K`` slots (a positional reply cites about one slot) and
``kappa = 2`` (:data:`SLOT_STRENGTH`).

:func:`weigh_replies` finds, by a few rounds of expectation-maximisation over the
question's replies (Dawid and Skene's scheme over two kinds of reply rather than over
annotators), the probability ``g_r`` that each reply was positional, judging each reply
by the others (leave one out, so that no reply vouches for itself):

* as read, the reply's probability is ``prod_i (p_i P(c_i | t_i) + (1 - p_i) P(c_i |
  f_i))`` with ``p_i`` each shown document's belief from the *other* replies;
* as positional, ``prod_j rho_j^c (1 - rho_j)^(1 - c) / (1 - prod_j (1 - rho_j))`` with
  ``rho_j`` the slot rates of the *other* positional replies (the posterior mean);
* ``g_r = nu L_pos / (nu L_pos + (1 - nu) L_read)``, ``nu`` the posterior mean of the
  question's share.

A document's evidence is then ``sum_r (1 - g_r) delta_r``: the mean-field posterior of the
mixture, in which a reply counts as far as it read the documents. Different documents
cited at one position, or a document cited only where it sits first, make the positional
kind the better explanation; a document cited wherever it is shown, the reading kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .beliefs import logit, mixed_evidence, sigmoid
from .config import PanningConfig

__all__ = [
    "ABSTAIN_CLIP",
    "EM_ROUNDS",
    "ENUMERATION_BUDGET",
    "SLOT_STRENGTH",
    "Replies",
    "abstention_evidence",
    "abstention_update",
    "empty_reply_misses",
    "evidence_swing",
    "lead_rate",
    "mixture_rates",
    "reply_posterior",
    "reply_rates",
    "self_citing_rate",
    "weigh_replies",
]

SLOT_STRENGTH = 2.0
"""``kappa``: pseudo-sightings behind the slot rates of positional replies."""

EM_ROUNDS = 8
"""Rounds of :func:`weigh_replies`' fixed point (it settles in 3-5 on the scripted readers)."""


@dataclass
class Replies:
    """The replies of ``B`` questions so far, one entry per prompt, stacked on demand.

    Per reply, shape ``(B, n)``: ``delta`` (its evidence per document, tempered; 0 where
    not shown), ``shown``, ``cited``, ``tpr`` and ``fpr`` (the rates it was read at) and
    ``slots`` (each document's slot, -1 not shown); ``spoke`` (``(B,)``): it was read and
    cited something; ``base`` (``(B,)``): its log-likelihood were every shown document
    irrelevant (tempered); ``slot_shown`` and ``slot_cited`` (``(B, n)``): its sightings and
    citations per slot.
    """

    delta: list[NDArray[np.float64]] = field(default_factory=list)
    shown: list[NDArray[np.bool_]] = field(default_factory=list)
    cited: list[NDArray[np.bool_]] = field(default_factory=list)
    tpr: list[NDArray[np.float64]] = field(default_factory=list)
    fpr: list[NDArray[np.float64]] = field(default_factory=list)
    slots: list[NDArray[np.intp]] = field(default_factory=list)
    spoke: list[NDArray[np.bool_]] = field(default_factory=list)
    base: list[NDArray[np.float64]] = field(default_factory=list)
    slot_shown: list[NDArray[np.float64]] = field(default_factory=list)
    slot_cited: list[NDArray[np.float64]] = field(default_factory=list)

    def add(
        self,
        *,
        delta: NDArray[np.float64],
        shown: NDArray[np.bool_],
        cited: NDArray[np.bool_],
        rates: NDArray[np.float64],
        slots: NDArray[np.intp],
        spoke: NDArray[np.bool_],
        base: NDArray[np.float64],
    ) -> None:
        """Keep one prompt per question (``rates``: TPR and FPR stacked, ``(2, B, n)``;
        ``base``, ``(B,)``: the reply's log-likelihood were every shown document irrelevant)."""
        self.delta.append(delta)
        self.shown.append(shown)
        self.cited.append(cited)
        self.tpr.append(rates[0])
        self.fpr.append(rates[1])
        self.slots.append(np.where(shown, slots, -1))
        self.spoke.append(spoke)
        self.base.append(base)
        # sightings and citations per slot (K = n slots), counted once per reply
        b, k = shown.shape
        on_slot = np.zeros((b, k))
        cited_slot = np.zeros((b, k))
        bi, ni = np.nonzero(shown)
        np.add.at(on_slot, (bi, slots[bi, ni]), 1.0)
        hit = cited[bi, ni]
        np.add.at(cited_slot, (bi[hit], slots[bi[hit], ni[hit]]), 1.0)
        self.slot_shown.append(on_slot)
        self.slot_cited.append(cited_slot)

    def __len__(self) -> int:
        return len(self.delta)

    def rows(self, rows: slice | NDArray[np.intp]) -> Replies:
        """These replies of the questions ``rows`` only."""
        return _rows(self, rows)

    def weighted(self, weights: NDArray[np.float64]) -> NDArray[np.float64]:
        """``sum_r weights[:, r] delta_r``, shape ``(B, n)``."""
        d = np.stack(self.delta, axis=1)  # (B, R, n)
        return np.asarray(np.einsum("br,brn->bn", weights, d), dtype=np.float64)


def _bernoulli(cited: NDArray[np.bool_], rate: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log(rate)`` where cited, ``log(1 - rate)`` where not, elementwise."""
    return np.where(cited, np.log(rate), np.log1p(-rate))


def weigh_replies(
    replies: Replies,
    prior_log_odds: NDArray[np.float64],
    *,
    content_free: float,
    false_lead_rate: float,
    blind_rate: float,
    rounds: int = EM_ROUNDS,
) -> NDArray[np.float64]:
    """The probability that each reply followed the positions, shape ``(B, R)`` (0 for a
    reply that cited nothing or was not read), by the module's fixed point.

    ``prior_log_odds`` ``(B, n)``; ``content_free`` is ``omega`` in (0, 1); the beliefs
    behind each reply's "read" likelihood are read through the mixture of
    :func:`~.beliefs.mixed_evidence` at ``false_lead_rate`` and ``blind_rate``.
    """
    spoke = np.stack(replies.spoke, axis=1)  # (B, R)
    b, r_count = spoke.shape
    if not spoke.any():
        return np.zeros((b, r_count))
    delta = np.stack(replies.delta, axis=1)  # (B, R, n)
    shown = np.stack(replies.shown, axis=1)
    cited = np.stack(replies.cited, axis=1)
    tpr = np.stack(replies.tpr, axis=1)
    fpr = np.stack(replies.fpr, axis=1)
    slots = np.stack(replies.slots, axis=1)  # (B, R, n)
    n = delta.shape[2]
    k = n  # slots
    m = 1.0 / max(k, 1)
    shown_s = shown & spoke[:, :, None]
    # per reply and slot: sighted / cited (a slot holds one document per prompt)
    slot_idx = np.where(shown_s, slots, 0)
    onehot_shown = np.zeros((b, r_count, k))
    onehot_cited = np.zeros((b, r_count, k))
    bi, ri, ni = np.nonzero(shown_s)
    np.add.at(onehot_shown, (bi, ri, slot_idx[bi, ri, ni]), 1.0)
    ci = cited[bi, ri, ni]
    np.add.at(onehot_cited, (bi[ci], ri[ci], slot_idx[bi[ci], ri[ci], ni[ci]]), 1.0)
    # as read: each shown document cited at t if relevant, f if not
    like_rel = _bernoulli(cited, tpr)
    like_irr = _bernoulli(cited, fpr)
    a0, b0 = 2.0 * content_free, 2.0 * (1.0 - content_free)
    g = np.where(spoke, 0.5, 0.0)
    prior = prior_log_odds[:, None, :]
    for _ in range(rounds):
        w = 1.0 - g
        total = np.einsum("br,brn->bn", w, delta)
        loo = total[:, None, :] - w[:, :, None] * delta  # evidence from the other replies
        x = prior + mixed_evidence(loo, false_lead_rate=false_lead_rate, blind_rate=blind_rate)
        log_p, log_1mp = -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)  # log p, log(1 - p), finite
        read = np.where(shown_s, np.logaddexp(log_p + like_rel, log_1mp + like_irr), 0.0).sum(axis=2)
        # as positional: slot rates from the other positional replies
        cs = np.einsum("br,brk->bk", g, onehot_cited)
        ss = np.einsum("br,brk->bk", g, onehot_shown)
        rho = (SLOT_STRENGTH * m + cs[:, None, :] - g[:, :, None] * onehot_cited) / (
            SLOT_STRENGTH + ss[:, None, :] - g[:, :, None] * onehot_shown
        )
        rho = np.clip(rho, 1e-9, 1.0 - 1e-9)
        pos = (onehot_cited * np.log(rho) + (onehot_shown - onehot_cited) * np.log1p(-rho)).sum(axis=2)
        none = (onehot_shown * np.log1p(-rho)).sum(axis=2)  # log P(cites nothing)
        pos = pos - np.log(-np.expm1(np.minimum(none, -1e-12)))
        nu = (a0 + g.sum(axis=1)) / (a0 + b0 + spoke.sum(axis=1))  # (B,)
        logit_nu = np.log(nu) - np.log1p(-nu)
        g_new = np.where(spoke, sigmoid(logit_nu[:, None] + pos - read), 0.0)
        if np.max(np.abs(g_new - g)) < 1e-4:
            g = g_new
            break
        g = g_new
    return g


ENUMERATION_BUDGET = 1 << 14
"""Assignments x documents up to which :func:`reply_posterior` sums over every assignment
of kinds to a question's open replies; above it, the fixed point of :func:`weigh_replies`.
The choice never depends on how many questions run at once, so a simulated trial reads its
replies as a user's query does."""


def _rows(replies: Replies, rows: slice | NDArray[np.intp]) -> Replies:
    """``replies`` of the questions ``rows`` only."""
    return Replies(
        *([x[rows] for x in getattr(replies, f.name)] for f in fields(Replies))  # type: ignore[arg-type]
    )


@lru_cache(maxsize=16)
def _assignments(r: int) -> NDArray[np.float64]:
    """Every assignment of two kinds to ``r`` replies, shape ``(2**r, r)``: 1 = positional."""
    return ((np.arange(1 << r)[:, None] >> np.arange(r)[None, :]) & 1).astype(np.float64)


@lru_cache(maxsize=64)
def _rising_table(x: float, size: int) -> NDArray[np.float64]:
    """``log Gamma(x + c) - log Gamma(x)`` for ``c = 0 .. size - 1`` (``-inf`` from ``c = 1``
    at ``x = 0``: a kind with no prior weight)."""
    with np.errstate(divide="ignore"):
        return np.concatenate([[0.0], np.cumsum(np.log(x + np.arange(size - 1, dtype=np.float64)))])


def _rising(x: float, counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log Gamma(x + c) - log Gamma(x)`` for integer counts ``c >= 0`` (any shape)."""
    c = counts.astype(np.intp)
    top = int(c.max(initial=0)) + 1
    table = _rising_table(float(x), 1 << max(top - 1, 15).bit_length())
    return np.asarray(table[c], dtype=np.float64)


SETTLED = 1e-3
"""A reply whose probability of having been positional came within this of 0 or 1 at the
last weighing keeps that kind (:func:`reply_posterior`): only the others are summed over."""


def reply_posterior(
    replies: Replies,
    prior_log_odds: NDArray[np.float64],
    *,
    content_free: float,
    false_lead_rate: float,
    blind_rate: float,
    previous: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(log_odds, positional, evidence)`` of ``B`` questions, shapes ``(B, n)``, ``(B,
    R)``, ``(B, n)``: the posterior log-odds of relevance summed over every assignment of a
    kind to each reply that cited something, the probability that each reply was
    positional, and the expected evidence of each document (its readings' evidence under the
    assignment, weighted by the assignment's posterior).

    Given an assignment, the readings' likelihood is the module's: the reading replies
    through the profile (each document relevant or not on its own, with the mixture of
    :func:`~.beliefs.mixed_evidence`), the positional ones through slot rates integrated
    against their Beta prior, their number against ``nu``'s. ``previous`` (``(B, R')``,
    the last weighing's ``positional`` of the first ``R'`` replies) settles the replies
    within :data:`SETTLED` of a kind. Questions are summed in groups with the same open
    replies (each question's sum is the same alone or in a batch); above
    :data:`ENUMERATION_BUDGET` per question the sum falls back to :func:`weigh_replies`
    (the mean-field fixed point).
    """
    spoke = np.stack(replies.spoke, axis=1)  # (B, R)
    delta = np.stack(replies.delta, axis=1)  # (B, R, n)
    b, r_count, n = delta.shape
    kind = np.where(spoke, np.nan, 0.0)  # each reply's settled kind (1: positional), NaN: open
    if previous is not None and previous.size:
        prev = previous[:, :r_count]
        settled = spoke[:, : prev.shape[1]] & ((prev < SETTLED) | (prev > 1.0 - SETTLED))
        kind[:, : prev.shape[1]] = np.where(settled, np.rint(prev), kind[:, : prev.shape[1]])
    open_ = np.isnan(kind)
    stacked = _Stacked(replies, spoke, delta, np.nan_to_num(kind))
    out_lo = np.empty((b, n))
    out_pos = np.where(open_, 0.0, kind)
    out_ev = np.empty((b, n))
    if b == 1:  # one question (the panner): one group, no grouping to do
        patterns, group = open_, np.zeros(1, dtype=np.intp)
    else:
        patterns, group = np.unique(open_, axis=0, return_inverse=True)
    for g, pattern in enumerate(patterns):
        rows = np.flatnonzero(group.reshape(-1) == g)
        opened = np.flatnonzero(pattern)
        if (1 << opened.size) * n > ENUMERATION_BUDGET:  # too many to sum over: the fixed point
            gamma = weigh_replies(
                _rows(replies, rows),
                prior_log_odds[rows],
                content_free=content_free,
                false_lead_rate=false_lead_rate,
                blind_rate=blind_rate,
            )
            ev = np.einsum("br,brn->bn", 1.0 - gamma, delta[rows])
            out_ev[rows] = ev
            out_lo[rows] = prior_log_odds[rows] + mixed_evidence(
                ev, false_lead_rate=false_lead_rate, blind_rate=blind_rate
            )
            out_pos[rows] = gamma
            continue
        lo, pos, ev = _summed(
            stacked,
            rows,
            opened,
            prior_log_odds[rows],
            content_free=content_free,
            false_lead_rate=false_lead_rate,
            blind_rate=blind_rate,
        )
        out_lo[rows], out_ev[rows] = lo, ev
        out_pos[np.ix_(rows, opened)] = pos
    return out_lo, out_pos, out_ev


@dataclass(frozen=True)
class _Stacked:
    """The replies stacked once per weighing: ``spoke`` ``(B, R)``, ``delta`` ``(B, R, n)``,
    ``kind`` (settled kinds, 0 where open) ``(B, R)``, ``base`` ``(B, R)``, and the slot
    counts ``slot_shown``/``slot_cited`` ``(B, R, K)`` of the replies that cited something."""

    spoke: NDArray[np.bool_]
    delta: NDArray[np.float64]
    kind: NDArray[np.float64]
    base: NDArray[np.float64]
    slot_shown: NDArray[np.float64]
    slot_cited: NDArray[np.float64]

    def __init__(
        self,
        replies: Replies,
        spoke: NDArray[np.bool_],
        delta: NDArray[np.float64],
        kind: NDArray[np.float64],
    ) -> None:
        mask = spoke[:, :, None]
        object.__setattr__(self, "spoke", spoke)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "base", np.where(spoke, np.stack(replies.base, axis=1), 0.0))
        object.__setattr__(self, "slot_shown", np.stack(replies.slot_shown, axis=1) * mask)
        object.__setattr__(self, "slot_cited", np.stack(replies.slot_cited, axis=1) * mask)


def _summed(
    st: _Stacked,
    rows: NDArray[np.intp],
    open_: NDArray[np.intp],
    prior_log_odds: NDArray[np.float64],
    *,
    content_free: float,
    false_lead_rate: float,
    blind_rate: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`reply_posterior` for the questions ``rows``, whose open replies are ``open_``
    (the others keep their kinds): ``(log_odds (G, n), positional of the open replies (G,
    O), evidence (G, n))``."""
    delta, kind, spoke = st.delta[rows], st.kind[rows], st.spoke[rows]
    n = delta.shape[2]
    a = _assignments(open_.size)  # (M, O): 1 = positional
    settled_read = (1.0 - kind) * spoke  # replies that cited something, settled as read (G, R)
    settled_read[:, open_] = 0.0
    fixed_e = np.matmul(settled_read[:, None, :], delta)  # (G, 1, n)
    e = np.matmul(1.0 - a, delta[:, open_, :]) + fixed_e  # (G, M, n): the citing read replies' evidence
    # the empty replies are read too (their evidence the same for every document shown)
    e = e + np.matmul((~spoke).astype(np.float64)[:, None, :], delta)
    # Per document, with u = e^E: pi R1 + (1 - pi) R0 with R1 = (1 - b) u + b and R0 = a u +
    # 1 - a (the mixture of :func:`~.beliefs.mixed_evidence`); the posterior is pi R1 over it.
    pi = sigmoid(prior_log_odds)[:, None, :]
    la, lb = false_lead_rate, blind_rate
    u = np.exp(np.clip(e, -700.0, 700.0))
    r1 = pi * ((1.0 - lb) * u + lb)
    r0 = (1.0 - pi) * (la * u + (1.0 - la))
    den = r1 + r0
    base = st.base[rows]
    lp = np.matmul(base[:, open_], (1.0 - a).T) + np.add.reduce(base * settled_read, axis=1)[:, None]
    lp += np.add.reduce(np.log(den), axis=2)
    # positional replies: slot counts per assignment, rates integrated against Beta(kappa m, kappa (1 - m))
    settled_pos = kind.copy()
    settled_pos[:, open_] = 0.0
    shown_s, cited_s = st.slot_shown[rows], st.slot_cited[rows]
    cs = np.matmul(a, cited_s[:, open_]) + np.matmul(settled_pos[:, None, :], cited_s)
    ss = np.matmul(a, shown_s[:, open_]) + np.matmul(settled_pos[:, None, :], shown_s)
    m = 1.0 / n
    kappa = SLOT_STRENGTH
    lp += np.add.reduce(
        _rising(kappa * m, cs) + _rising(kappa * (1.0 - m), ss - cs) - _rising(kappa, ss), axis=2
    )
    # how many replies were positional, against nu ~ Beta(2 omega, 2 (1 - omega))
    a0, b0 = 2.0 * content_free, 2.0 * (1.0 - content_free)
    pos = np.add.reduce(a, axis=1)[None, :] + np.add.reduce(settled_pos, axis=1)[:, None]  # (G, M)
    said = np.add.reduce(st.spoke[rows], axis=1)[:, None].astype(np.float64)  # (G, 1)
    lp += _rising(a0, pos) + _rising(b0, np.maximum(said - pos, 0.0)) - _rising(a0 + b0, said)
    w = np.exp(lp - lp.max(axis=1, keepdims=True))
    w /= np.add.reduce(w, axis=1, keepdims=True)  # (G, M)
    wv = w[:, None, :]
    yes = r1 / den  # each assignment's posterior, (G, M, n)
    p_yes = np.matmul(wv, yes)[:, 0, :]
    p_no = np.matmul(wv, 1.0 - yes)[:, 0, :]
    log_odds = np.log(np.maximum(p_yes, 1e-300)) - np.log(np.maximum(p_no, 1e-300))
    return log_odds, np.matmul(w, a), np.matmul(wv, e)[:, 0, :]


# ------------------------------------------------------------------------------ empty replies and the way out
def empty_reply_misses(
    clamped: NDArray[np.float64],
    log1m: NDArray[np.float64],
    missed: NDArray[np.float64],
    shown: NDArray[np.bool_],
    n_cited: NDArray[np.int64],
    read_ok: NDArray[np.bool_] | None,
    silent_rate: float,
    temperature: float,
    by_position: bool = False,
) -> NDArray[np.float64]:
    """Miss log-likelihood ratios, shape ``(B, n)``, when a reply is silent with
    probability ``pi = silent_rate`` (the profile's, measured on labelled traces) whatever
    the prompt holds. In an empty prompt, with ``D`` the chance that no shown document is
    cited when none is relevant, every shown document gets ``log((pi + (1-pi) u D) / (pi
    + (1-pi) D))`` with ``u`` the mean of ``(1-t_j) / (1-f_j)`` over the prompt's positions:
    an empty reply says that nothing the reader recognised was shown, not where, so it
    weighs every document it showed alike (read per position, it would sink whatever sat
    where the reader reads best: the retriever's best documents, under ``belief``). Other
    prompts' misses are ``missed``. ``clamped`` rates and their ``log1m``: ``(2, B, n)``;
    ``read_ok``: ``(B,)`` or None (all). ``by_position`` (``empty_prompts="by-position"``):
    each document's own ``(1-t_i) / (1-f_i)`` instead of the mean, as the reader's
    likelihood has it (the rule that learning a profile reads replies by).

    Example: ``pi = 0.1``, one shown document at ``t = 0.8``, ``f = 0.1``: ``D = 0.9``,
    ``log((0.1 + 0.9 * 0.2) / (0.1 + 0.9 * 0.9)) = log(0.28 / 0.91) = -1.179`` (``pi =
    0``: ``log(0.2 / 0.9) = -1.504``, the paper's miss).
    """
    empty = n_cited == 0 if read_ok is None else read_ok & (n_cited == 0)
    if not empty.any() or (by_position and silent_rate == 0.0):
        return missed / temperature  # no empty prompt (or no silence to mix in): the usual miss
    log_d = np.add.reduce(np.where(shown, log1m[1], 0.0), axis=1, keepdims=True)
    d = np.exp(log_d)
    one_minus = 1.0 - clamped
    # Empty if a shown document is the relevant one, wherever it sits: the mean over the
    # prompt's positions, so an empty reply weighs every document it showed alike.
    ratio = np.where(shown, one_minus[0] / one_minus[1], 0.0)
    mean_ratio = np.add.reduce(ratio, axis=1, keepdims=True) / np.maximum(
        np.add.reduce(shown, axis=1, keepdims=True), 1
    )
    p_empty_if = (one_minus[0] / one_minus[1] if by_position else mean_ratio) * d
    pi = silent_rate
    mixed = np.log(pi + (1.0 - pi) * p_empty_if) - np.log(pi + (1.0 - pi) * d)
    return np.where(empty[:, None], mixed, missed) / temperature


ABSTAIN_CLIP = 1e-4
"""Abstention probabilities are read within ``[ABSTAIN_CLIP, 1 - ABSTAIN_CLIP]``."""


def abstention_evidence(abstain_p: ArrayLike, abstention_map: tuple[float, float]) -> NDArray[np.float64]:
    """What a prompt's first-token probability ``p`` of the way out says, in nats: the
    log-likelihood ratio of "a shown document is relevant" against "none is", ``slope *
    logit(p) + offset`` for ``(slope, offset) = abstention_map``, elementwise (any shape;
    ``p`` clipped to ``[1e-4, 1 - 1e-4]``, NaN -> 0: no reading). How it is shared among
    the shown documents: :func:`_abstention_update`.

    Example: ``(slope, offset) = (-0.5, -1.0)``, ``p = 0.8``: ``-0.5 * log 4 - 1 = -1.693``.
    """
    p = np.asarray(abstain_p, dtype=np.float64)
    z = logit(np.clip(p, ABSTAIN_CLIP, 1.0 - ABSTAIN_CLIP))
    return np.where(np.isnan(p), 0.0, abstention_map[0] * z + abstention_map[1])


def abstention_update(
    log_odds: NDArray[np.float64], shown: NDArray[np.bool_], lam: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Each shown document's share of a prompt's abstention evidence, shape ``(B, n)``.

    ``lam`` (``(B,)``, :func:`abstention_evidence`) is the log-likelihood ratio of "a shown
    document is relevant" against "none is". Given document ``i`` relevant, some shown
    document is; given it irrelevant, none is with ``q_i``, the current probability that
    no *other* shown document is relevant (``prod (1 - p_j)``). So ``i``'s log-likelihood
    ratio is ``-log(q_i e^-lam + 1 - q_i)``: ``lam`` when ``i`` is shown alone (``q_i =
    1``), 0 when another document is surely relevant (``q_i = 0``), and never more than
    ``-log(1 - q_i)``: "something here answers" raises every shown document only as far as
    the others leave room.

    Example: two shown documents at ``p = 0.5`` and ``lam = -2``: ``q = 0.5``, ``-log(0.5
    e^2 + 0.5) = -1.4338`` each.
    """
    log_miss = np.log1p(-np.minimum(sigmoid(log_odds), 1.0 - 1e-12))
    log_q = np.add.reduce(np.where(shown, log_miss, 0.0), axis=1, keepdims=True) - np.where(
        shown, log_miss, 0.0
    )
    with np.errstate(divide="ignore"):
        log_1mq = np.log(-np.expm1(log_q))  # log(1 - q), -inf when q = 1
    return -np.logaddexp(log_q - lam[:, None], log_1mq)


# ------------------------------------------------------------------------------ the mixture's rates
def lead_rate(config: PanningConfig, n: int) -> float:
    """``a = min(false_leads / (n - k), 0.5)``, ``k`` the config's focus: the probability
    that one irrelevant document is a false lead."""
    config = _resolved(config)
    irrelevant = n - config.focus
    leads = config.resolved("false_leads")
    if leads == 0.0 or irrelevant <= 0:
        return 0.0
    return min(leads / irrelevant, 0.5)


def _resolved(config: PanningConfig) -> PanningConfig:
    """``config`` resolved against no profile (the defaults) unless it is resolved already:
    the panner and simulate resolve it up front, so this is a flag read there."""
    return config if config.profile_resolved else config.with_profile(None)


def self_citing_rate(config: PanningConfig, n: int) -> float:
    """``s = min(self_citing / (n - k), 0.45)``: the probability that one irrelevant
    document is a self-citing passage (0.45 leaves room beside :func:`lead_rate`).

    0 with ``empty_prompts="skip"``: its looks are conditioned on a citation, so a relevant
    document cited whenever anything is would look flat."""
    irrelevant = n - config.focus
    if config.self_citing == 0.0 or irrelevant <= 0 or config.empty_prompts == "skip":
        return 0.0
    return min(float(config.self_citing) / irrelevant, 0.45)


def evidence_swing(config: PanningConfig, n: int) -> float:
    """The most that consistent evidence can move one document against another, in nats:
    ``log((1 - b) / a) - log(b / (1 - a))``, a document cited in every prompt against one
    never cited (``inf`` when ``a`` or ``b`` is 0: the paper's unbounded update).

    Example: ``a = 0.25 / 7``, ``b = 0.1``: ``log(0.9 / 0.0357) - log(0.1 / 0.9643) = 3.227
    + 2.266 = 5.493``.
    """
    a, b, _ = mixture_rates(config, n)
    if a <= 0.0 or b <= 0.0:
        return math.inf
    return math.log((1.0 - b) / a) - math.log(b / (1.0 - a))


@lru_cache(maxsize=256)
def mixture_rates(config: PanningConfig, n: int) -> tuple[float, float, float]:
    """``(a, b, s)``: false-lead, blind and self-citing rates of ``config`` for ``n`` documents
    (kept per config and ``n``: the update asks at every prompt)."""
    resolved = _resolved(config)
    return lead_rate(resolved, n), resolved.resolved("blind_rate"), self_citing_rate(resolved, n)


@lru_cache(maxsize=256)
def reply_rates(config: PanningConfig) -> tuple[float, float]:
    """``(content_free, silent_rate)`` of ``config``, resolved against no profile when it is
    not resolved yet (kept per config: the update asks at every prompt)."""
    resolved = _resolved(config)
    return resolved.resolved("content_free"), resolved.resolved("silent_rate")
