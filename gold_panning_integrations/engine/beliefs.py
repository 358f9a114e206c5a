"""Beliefs in log-odds and the pure functions of them (numpy only): the Bayesian update of
the paper's observation model, the document-level mixture that bounds a document's
evidence, the placement policies' scores, the stop rules, and acting on the relevance
probabilities (p_none, a threshold, an adaptive k, a profile's recalibration map).

**The update.** A document shown at position ``j`` is cited with probability ``TPR_j`` if
relevant, ``FPR_j`` if not; citations independent given relevance and position, one round
adds ``log(TPR_j / FPR_j)`` to its log-odds when cited, ``log((1 - TPR_j) / (1 - FPR_j))``
when shown and not cited, nothing when not shown. Rates are clamped into ``[eps, 1 - eps]``.

**The mixture**: what a document's citations may come from besides relevance. The update
sums each document's evidence ``E = log(L_R / L_I)``; :func:`mixed_evidence` reads that sum
through a mixture so that no repeated pattern outvotes everything else (derivation and
rationale: docs/security.md, "What the engine does"). Given its relevance, a document is
one of:

* relevant (prior ``pi``): a blind spot with probability ``b`` (cited like an irrelevant
  one), otherwise cited at ``TPR_j``;
* not relevant: a false lead with probability ``a`` (cited like a relevant one), a
  *self-citing* passage with probability ``s`` (cited at an unknown rate
  ``rho ~ Uniform(0, 1)`` whatever its position), otherwise cited at ``FPR_j``.

With ``c`` citations and ``m`` misses, ``L_R = prod TPR_j^[cited] (1 - TPR_j)^[missed]``,
``L_I`` the same with ``FPR_j``, and ``L_S = B(1 + c, 1 + m)`` (counts only). With ``F =
log(L_S / L_I)`` (:func:`flat_evidence`) the posterior log-odds of relevance are

    log(pi / (1 - pi)) + log((1 - b) e^E + b) - log(a e^E + (1 - a - s) + s e^F)

(:func:`self_citing_mixture`; ``s = 0`` is :func:`mixed_evidence`), and the self-citing
share is ``(1 - pi) s e^F`` over the sum of the three numerators (:func:`self_citing_share`).
``a`` is :func:`~.rounds.lead_rate`, ``s`` :func:`~.rounds.self_citing_rate`, ``b =
blind_rate`` (a config's rates: :func:`~.rounds.mixture_rates`); evidence temperature ``T``
divides every log-likelihood, the integral included (``B(1 + c/T, 1 + m/T)``). A document
in doubt (share >= :data:`TEST_AT`) is shown at the prompt's lowest-TPR position, where its
next citation tells the hypotheses apart most (:func:`move_suspects`).

Worked example (pinned by the tests): rates ``t = (0.8, 0.2)``, ``f = (0.1, 0.1)``, one
document cited twice at position 1, then missed once at position 0: ``L_R = 0.008``, ``L_I
= 0.009``, ``L_S = B(3, 2) = 1/12``; ``E = -0.118``, ``F = 2.226``.

**Placement policies**: how documents are scored before they are matched to positions
(the option ``policy`` says what each does). Scores are computed on log-odds, which never
saturate: ``belief`` scores the log-odds, ``entropy`` ``-|log-odds|`` (the order of the
binary entropy), ``random`` a uniform permutation (ranked by :func:`vote_ranking`),
``oracle`` the true needles first (the upper bound of any placement).

**Stop rules** as pure functions, "stop before the next round?", shared by the panner and
the batch simulator (whose forms take a leading trial axis).

**Acting on relevance probabilities**: "nothing relevant here", a threshold, an adaptive k,
and the recalibration map a profile may carry. The panner calls :func:`recalibrate` on its
final log-odds, then :func:`select` and :func:`p_none` on the probabilities it reports. The
update scores each document from its own citations with independent priors, so the
probability that no candidate is relevant is ``prod_i (1 - p_i)`` (a priori ``prod_i (1 -
p0_i)``, about ``exp(-m)`` for a prior mass ``m`` spread thin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .self_citing import (
    SUSPECT_AT,
    TEST_AT,
    _terms,
    flat_evidence,
    flat_log_likelihood,
    move_suspects,
    self_citing_mixture,
    self_citing_share,
)

__all__ = [
    "DEFAULT_EPS",
    "MAP_KINDS",
    "POLICIES",
    "SUSPECT_AT",
    "TEST_AT",
    "Policy",
    "PriorSpec",
    "RecalibrationMap",
    "binary_entropy",
    "call_budget_exceeded",
    "clamp_rates",
    "flat_evidence",
    "flat_log_likelihood",
    "gain_too_small",
    "initial_log_odds",
    "log_likelihood_ratios",
    "logit",
    "mixed_evidence",
    "mixture_log_likelihoods",
    "move_suspects",
    "p_none",
    "recalibrate",
    "recalibration_of",
    "rounds_done",
    "score_documents",
    "select",
    "selected_confidence",
    "self_citing_mixture",
    "self_citing_share",
    "sigmoid",
    "threshold_reached",
    "token_budget_exceeded",
    "update_log_odds",
    "vote_ranking",
]


# ------------------------------------------------------------------------------ the update
DEFAULT_EPS = 1e-3
"""Default clamp for rates: the largest single-round update is ``log(0.999/0.001) = 6.9``."""

PriorSpec = Literal["base-rate", "uniform"]


def clamp_rates(
    tpr: ArrayLike, fpr: ArrayLike, *, eps: float = DEFAULT_EPS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(tpr, fpr)`` (each shape ``(m,)``) clamped into ``[eps, 1 - eps]``, ``0 < eps < 0.5``."""
    if not 0.0 < eps < 0.5:
        raise ValueError(f"eps must be in (0, 0.5), got {eps!r}")
    # maximum then minimum is np.clip exactly (NaN stays NaN), without np.clip's wrapper.
    hi = 1.0 - eps
    t = np.minimum(np.maximum(np.asarray(tpr, dtype=np.float64), eps), hi)
    f = np.minimum(np.maximum(np.asarray(fpr, dtype=np.float64), eps), hi)
    return t, f


def log_likelihood_ratios(
    tpr: ArrayLike, fpr: ArrayLike, *, eps: float = DEFAULT_EPS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(log(TPR/FPR), log((1-TPR)/(1-FPR)))`` per position, each shape ``(m,)``, in nats,
    of the clamped rates (:func:`clamp_rates`)."""
    t, f = clamp_rates(tpr, fpr, eps=eps)
    return np.log(t) - np.log(f), np.log1p(-t) - np.log1p(-f)


def sigmoid(x: ArrayLike) -> NDArray[np.float64]:
    """Logistic function, elementwise (any shape); ``exp(-|x|)`` serves both branches, so
    no ``exp`` overflows."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0, e)
    out /= 1.0 + e
    return out


def logit(p: ArrayLike) -> NDArray[np.float64]:
    """Log-odds ``log(p / (1 - p))``, elementwise; ``p`` must lie strictly in (0, 1)."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def initial_log_odds(
    n: int,
    *,
    k: float = 1,
    prior: PriorSpec = "base-rate",
    prior_probs: ArrayLike | None = None,
    prior_log_odds: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Starting log-odds for ``n`` documents.

    ``prior`` is the option of that name (``"base-rate"``: ``min(k/n, 0.5)``, ``k`` the
    expected number of relevant documents; ``"uniform"``: 0.5). ``prior_probs`` (in (0,
    1)) or ``prior_log_odds`` (finite), shape ``(n,)``, override it; give at most one.
    Returns shape ``(n,)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if prior_probs is not None and prior_log_odds is not None:
        raise ValueError("give prior_probs or prior_log_odds, not both")
    if prior_probs is not None:
        p = np.asarray(prior_probs, dtype=np.float64).reshape(-1)
        if p.shape != (n,):
            raise ValueError(f"prior_probs must have shape ({n},), got {p.shape}")
        bad = ~((p > 0.0) & (p < 1.0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"prior_probs must lie strictly between 0 and 1; prior_probs[{i}] = {float(p[i])!r}"
            )
        return logit(p)
    if prior_log_odds is not None:
        lo = np.array(prior_log_odds, dtype=np.float64).reshape(-1)
        if lo.shape != (n,):
            raise ValueError(f"prior_log_odds must have shape ({n},), got {lo.shape}")
        bad = ~np.isfinite(lo)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"prior_log_odds must be finite; prior_log_odds[{i}] = {float(lo[i])!r}")
        return lo
    if prior == "uniform":
        return np.zeros(n, dtype=np.float64)
    if prior == "base-rate":
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        p0 = min(max(k, 1e-6) / n, 0.5)
        return np.full(n, float(logit(p0)), dtype=np.float64)
    raise ValueError(f"prior must be 'base-rate' or 'uniform', got {prior!r}")


def update_log_odds(
    log_odds: NDArray[np.float64],
    doc_positions: NDArray[np.intp],
    cited: NDArray[np.bool_],
    llr_cited: NDArray[np.float64],
    llr_missed: NDArray[np.float64],
) -> NDArray[np.float64]:
    """One Bayesian update in log-odds, a new array: ``log_odds``, ``doc_positions`` (-1:
    not shown, no update) and ``cited`` of shape ``(..., n)``; the ratios of
    :func:`log_likelihood_ratios` per position, shape ``(m,)``."""
    shown = doc_positions >= 0
    pos = np.where(shown, doc_positions, 0)
    delta = np.where(cited, llr_cited[pos], llr_missed[pos])
    return log_odds + np.where(shown, delta, 0.0)


# ------------------------------------------------------------------------------ the mixture
@lru_cache(maxsize=64)
def _mixture_logs(
    a: float, b: float, _a_key: str, _b_key: str
) -> tuple[np.float64, np.float64, np.float64, np.float64]:
    """``(log a, log b, log1p(-a), log1p(-b))`` of the two mixture rates (``-inf`` for a
    rate of 0), cached per pair of rates; the string keys tell ``-0.0`` from ``0.0``."""
    with np.errstate(divide="ignore"):
        la, lb = np.log(a), np.log(b)
    return la, lb, np.log1p(-a), np.log1p(-b)


def mixed_evidence(
    evidence: NDArray[np.float64],
    *,
    false_lead_rate: float,
    blind_rate: float,
    self_citing: float = 0.0,
    flat: NDArray[np.float64] | None = None,
    profile_evidence: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """``log(((1 - b) e^E + b) / (a e^E + 1 - a))`` of the summed evidence ``E``,
    elementwise (any shape): ``E`` when ``a = b = 0``, always between ``log(b / (1 - a))``
    and ``log((1 - b) / a)``. With ``self_citing = s > 0`` it is
    :func:`self_citing_mixture` of ``flat`` (``F``, same shape) and ``profile_evidence``.

    Example: ``E = 3 log 4`` with ``a = b = 0.1`` gives ``log(57.7 / 7.3) = 2.07``, not 4.16.
    """
    e = np.asarray(evidence, dtype=np.float64)
    if self_citing > 0.0:
        if flat is None:
            raise ValueError("self_citing > 0 needs flat, the evidence of the flat-rate hypothesis")
        return self_citing_mixture(
            e,
            flat,
            false_lead_rate=false_lead_rate,
            blind_rate=blind_rate,
            self_citing=self_citing,
            profile_evidence=profile_evidence,
        )
    if false_lead_rate == 0.0 and blind_rate == 0.0:
        return e
    if type(false_lead_rate) is float and type(blind_rate) is float:
        la, lb, l1a, l1b = _mixture_logs(false_lead_rate, blind_rate, str(false_lead_rate), str(blind_rate))
    else:  # not cached: a key must tell -0.0 from 0.0, and a numpy rate keeps its precision
        la, lb, l1a, l1b = _mixture_logs.__wrapped__(false_lead_rate, blind_rate, "", "")
    # Factor e^E (E > 0) or 1 (E < 0) out of both mixtures so that two large numbers are
    # never subtracted: exactly 0 at E = 0, unbounded when the matching rate is 0.
    m = -np.abs(e)
    up = np.logaddexp(l1b, lb + m) - np.logaddexp(la, l1a + m)
    down = np.logaddexp(l1b + m, lb) - np.logaddexp(la + m, l1a)
    out = np.where(e < 0, down, 0.0)  # up where E > 0, down where E < 0, else (0, NaN) 0
    np.copyto(out, up, where=e > 0)
    return out


def mixture_log_likelihoods(
    evidence: NDArray[np.float64],
    *,
    false_lead_rate: float,
    blind_rate: float,
    self_citing: float = 0.0,
    flat: NDArray[np.float64] | None = None,
    profile_evidence: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(log R1, log R0)``, each shape of ``evidence``: a document's readings' likelihood
    if relevant and if not, each over their likelihood at the irrelevant rates, under the
    mixture of the module (``R1 = (1 - b) e^E + b``, ``R0 = a e^E + 1 - a - s + s e^F``).
    ``log R1 - log R0`` is :func:`self_citing_mixture` (:func:`mixed_evidence`)."""
    if self_citing > 0.0 and flat is None:
        raise ValueError("self_citing > 0 needs flat, the evidence of the flat-rate hypothesis")
    if self_citing == 0.0:  # the common case, without the flat-rate term's arrays
        a, b = false_lead_rate, blind_rate
        if not (0.0 <= a < 1.0 and 0.0 <= b < 1.0):
            raise ValueError(f"need 0 <= a < 1 and 0 <= b < 1; got a={a!r}, b={b!r}")
        la, lb = (math.log(x) if x > 0.0 else -math.inf for x in (a, b))
        e = np.asarray(evidence, dtype=np.float64)
        return np.logaddexp(e + math.log1p(-b), lb), np.logaddexp(e + la, math.log1p(-a))
    f = np.zeros(np.shape(evidence)) if flat is None else flat
    rel, irr, log_sigma = _terms(evidence, f, profile_evidence, false_lead_rate, blind_rate, self_citing)
    return rel, irr + np.logaddexp(0.0, log_sigma)


# ------------------------------------------------------------------------------ placement policies
Policy = Literal["belief", "entropy", "random", "oracle"]
POLICIES: tuple[str, ...] = ("belief", "entropy", "random", "oracle")


def binary_entropy(log_odds: NDArray[np.float64]) -> NDArray[np.float64]:
    """Binary entropy in nats of ``sigmoid(log_odds)``, elementwise, stable for any input."""
    a = np.abs(np.asarray(log_odds, dtype=np.float64))
    # H(p) with p = sigmoid(-a) <= 0.5: H = log(1 + e^-a) + a * e^-a / (1 + e^-a)
    ea = np.exp(-a)
    return np.log1p(ea) + a * ea / (1.0 + ea)


def score_documents(
    policy: str,
    log_odds: NDArray[np.float64],
    *,
    rng: np.random.Generator,
    truth: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Placement scores of ``policy``, shape ``(..., n)`` like ``log_odds`` (higher gets a
    more diagnostic position); ``truth`` (same shape) for ``oracle`` only."""
    lo = np.asarray(log_odds, dtype=np.float64)
    if policy == "belief":
        return lo
    if policy == "entropy":
        return -np.abs(lo)
    if policy == "random":
        return rng.random(lo.shape)
    if policy == "oracle":
        if truth is None:
            raise ValueError("policy 'oracle' needs the true labels: it is for simulation only")
        return np.asarray(truth, dtype=np.float64) * 2.0 + rng.random(lo.shape)
    raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")


def vote_ranking(
    citation_counts: NDArray[np.integer] | NDArray[np.floating],
    *,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """PSC's majority-vote ranking of ``citation_counts`` (shape ``(..., n)``): indices,
    most-cited first, ties broken uniformly at random."""
    counts = np.asarray(citation_counts, dtype=np.float64)
    # A jitter in [0, 1) never reorders different integer counts, and orders equal
    # counts by an independent uniform draw: a uniform random tie-break.
    keyed = counts + rng.random(counts.shape)
    return np.argsort(-keyed, axis=-1, kind="stable")


# ------------------------------------------------------------------------------ stop rules
def selected_confidence(log_odds: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Mean posterior of the top ``min(k, n)`` of ``log_odds`` (shape ``(..., n)``): the
    selection's expected precision, shape ``(...)``, 0 where ``n == 0``."""
    lo = np.asarray(log_odds, dtype=np.float64)
    n = lo.shape[-1]
    if n == 0:
        return np.zeros(lo.shape[:-1])
    kk = min(k, n)
    top = -np.sort(-lo, axis=-1)[..., :kk]
    return np.mean(sigmoid(top), axis=-1)


def rounds_done(done: int, rounds: int) -> bool:
    """True once ``done`` rounds reached the maximum ``rounds``."""
    return done >= rounds


def threshold_reached(
    log_odds: NDArray[np.float64], *, k: int, stop_at: float | None, done: int, min_rounds: int
) -> NDArray[np.bool_]:
    """True (per trial) once the selection's mean posterior reaches ``stop_at``, after at
    least ``min_rounds`` rounds. Shape ``(...)`` of ``log_odds`` without its last axis."""
    lo = np.asarray(log_odds, dtype=np.float64)
    if stop_at is None or done < min_rounds:
        return np.zeros(lo.shape[:-1], dtype=bool)
    return selected_confidence(lo, k) >= stop_at


def call_budget_exceeded(calls_so_far: int, planned: int, max_calls: int | None) -> bool:
    """True when sending ``planned`` more prompts would exceed ``max_calls``."""
    return max_calls is not None and calls_so_far + planned > max_calls


def token_budget_exceeded(
    tokens_so_far: int, docs_shown_so_far: int, planned_docs: int, max_prompt_tokens: int | None
) -> bool:
    """True when the next round, at the prompt tokens per shown document seen so far,
    would exceed ``max_prompt_tokens``. Never true before the first round (nothing seen)."""
    if max_prompt_tokens is None or docs_shown_so_far == 0:
        return False
    per_doc = tokens_so_far / docs_shown_so_far
    return tokens_so_far + per_doc * planned_docs > max_prompt_tokens


def gain_too_small(expected_gain: float, *, min_gain: float | None, done: int, min_rounds: int) -> bool:
    """True when another round is expected to raise the selection's confidence by less
    than ``min_gain`` (after ``min_rounds`` rounds)."""
    return min_gain is not None and done >= min_rounds and expected_gain < min_gain


# ------------------------------------------------------------------------------ relevance probabilities
MapKind = Literal["platt", "isotonic"]
MAP_KINDS: tuple[str, ...] = ("platt", "isotonic")

_P_FLOOR = 1e-6  # calibrated probabilities stay in [1e-6, 1 - 1e-6]: finite log-odds


def p_none(posteriors: ArrayLike) -> NDArray[np.float64] | float:
    """Probability that no candidate is relevant: ``prod_i (1 - p_i)`` over the last axis
    of ``posteriors`` (shape ``(..., n)``); a float for a 1-d input (1.0 when empty), else
    shape ``(...)``."""
    p = np.asarray(posteriors, dtype=np.float64)
    out = np.multiply.reduce(1.0 - p, axis=-1)
    return float(out) if p.ndim <= 1 else out


def select(
    posteriors: NDArray[np.float64],
    ranking: NDArray[np.intp],
    *,
    k: int | None,
    min_relevance: float | None = None,
    recall_target: float | None = None,
) -> NDArray[np.intp]:
    """The documents to return, best first, shape ``(s,)``: a prefix of ``ranking``
    (indices best first, shape ``(n,)``) cut by, in turn, ``recall_target`` (the shortest
    prefix whose summed ``posteriors`` reach that share of their sum), ``min_relevance``
    (drops documents below it) and ``k`` (None: no count limit). Each None: no cut.

    Example: posteriors ``[0.6, 0.3, 0.1]`` with ``recall_target=0.8`` give the first two
    (0.9 >= 0.8); with ``min_relevance=0.5`` only the first.
    """
    order = np.asarray(ranking, dtype=np.intp)
    if order.size == 0:
        return order
    p = np.asarray(posteriors, dtype=np.float64)[order]
    if recall_target is not None:
        total = float(p.sum())
        # The first prefix whose sum reaches the target (a tolerance for round-off).
        cut = int(np.searchsorted(np.cumsum(p), recall_target * total - 1e-12 * max(total, 1.0))) + 1
        order, p = order[:cut], p[:cut]
    if min_relevance is not None:
        order = order[p >= min_relevance]
    return order if k is None else order[:k]


@dataclass(frozen=True)
class RecalibrationMap:
    """A monotone map from the engine's posterior log-odds to calibrated probabilities,
    learned from labelled traces (:func:`gold_panning_integrations.calibration.recalibration.fit_map`)
    and stored in a detector profile.

    Attributes:
        kind: ``"platt"``: ``sigmoid(slope * log_odds + intercept)`` (slope > 0);
            ``"isotonic"``: linear interpolation of ``y`` at the raw log-odds between the
            knots ``x`` (constant beyond them).
        slope: Platt slope (> 0).
        intercept: Platt intercept.
        x: Isotonic knots, raw log-odds, strictly increasing, shape ``(K,)``.
        y: Calibrated probabilities at the knots, non-decreasing, in [0, 1], shape ``(K,)``.
    """

    kind: MapKind
    slope: float = 1.0
    intercept: float = 0.0
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        problem = _map_problem(self)
        if problem is not None:
            raise ValueError(problem)
        object.__setattr__(self, "slope", float(self.slope))
        object.__setattr__(self, "intercept", float(self.intercept))
        object.__setattr__(self, "x", tuple(float(v) for v in self.x))
        object.__setattr__(self, "y", tuple(float(v) for v in self.y))

    def probabilities(self, log_odds: ArrayLike) -> NDArray[np.float64]:
        """Calibrated probabilities of ``log_odds`` (any shape), in ``[1e-6, 1 - 1e-6]``."""
        lo = np.asarray(log_odds, dtype=np.float64)
        if self.kind == "platt":
            p = sigmoid(self.slope * lo + self.intercept)
        else:
            p = np.interp(lo, np.asarray(self.x), np.asarray(self.y))
        return np.clip(p, _P_FLOOR, 1.0 - _P_FLOOR)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"kind", "slope", "intercept"}`` or ``{"kind", "x", "y"}``."""
        if self.kind == "platt":
            return {"kind": "platt", "slope": self.slope, "intercept": self.intercept}
        return {"kind": "isotonic", "x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecalibrationMap:
        """The map of :meth:`to_dict`; ValueError naming the bad value otherwise."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a recalibration map must be an object, got {data!r:.60}")  # noqa: TRY004 - a profile's ValueError
        kind = data.get("kind")
        if kind == "platt":
            extra = set(data) - {"kind", "slope", "intercept"}
            if extra:
                raise ValueError(f"a platt recalibration map has no field(s) {sorted(extra)}")
            slope: Any = data.get("slope")  # None or not a number: __post_init__ says which
            intercept: Any = data.get("intercept")
            return cls(kind="platt", slope=slope, intercept=intercept)
        if kind == "isotonic":
            extra = set(data) - {"kind", "x", "y"}
            if extra:
                raise ValueError(f"an isotonic recalibration map has no field(s) {sorted(extra)}")
            xs, ys = data.get("x"), data.get("y")
            if not isinstance(xs, Sequence) or not isinstance(ys, Sequence) or isinstance(xs, str):
                raise ValueError(f"an isotonic recalibration map needs lists x and y, got x={xs!r:.40}")
            return cls(kind="isotonic", x=tuple(xs), y=tuple(ys))
        raise ValueError(f"recalibration map kind must be 'platt' or 'isotonic', got {kind!r:.40}")


def _finite(v: Any) -> bool:
    return (
        isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) and math.isfinite(v)
    )


def _map_problem(m: RecalibrationMap) -> str | None:
    """What is wrong with ``m`` (naming the value), or None."""
    if m.kind == "platt":
        if not _finite(m.slope) or not m.slope > 0:
            return f"recalibration map slope must be a finite number > 0 (a monotone map), got {m.slope!r}"
        if not _finite(m.intercept):
            return f"recalibration map intercept must be a finite number, got {m.intercept!r}"
        return None
    if m.kind != "isotonic":
        return f"recalibration map kind must be 'platt' or 'isotonic', got {m.kind!r}"
    if len(m.x) != len(m.y) or len(m.x) < 2:
        return (
            f"an isotonic recalibration map needs x and y of equal length >= 2, got {len(m.x)} and {len(m.y)}"
        )
    for name, seq in (("x", m.x), ("y", m.y)):
        for i, v in enumerate(seq):
            if not _finite(v):
                return f"recalibration map {name}[{i}] must be a finite number, got {v!r}"
    for i in range(1, len(m.x)):
        if not m.x[i] > m.x[i - 1]:
            return f"recalibration map x must increase strictly: x[{i}] = {m.x[i]!r} after {m.x[i - 1]!r}"
        if m.y[i] < m.y[i - 1]:
            return f"recalibration map y must not decrease (a monotone map): y[{i}] = {m.y[i]!r} after {m.y[i - 1]!r}"
    for i, v in enumerate(m.y):
        if not 0.0 <= v <= 1.0:
            return f"recalibration map y[{i}] must be a probability in [0, 1], got {v!r}"
    return None


def recalibrate(log_odds: ArrayLike, recalibration: RecalibrationMap | None) -> NDArray[np.float64]:
    """The reported log-odds (any shape): ``log_odds`` through ``recalibration`` (a copy
    when None)."""
    lo = np.array(log_odds, dtype=np.float64)
    if recalibration is None:
        return lo
    return logit(recalibration.probabilities(lo))


def recalibration_of(profile: Any) -> RecalibrationMap | None:
    """The profile's ``recalibration_map``, or None when it has none."""
    found = getattr(profile, "recalibration_map", None)
    return found if isinstance(found, RecalibrationMap) else None
