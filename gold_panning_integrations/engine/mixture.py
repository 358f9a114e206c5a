"""The document-level mixture: what a document's citations may come from besides relevance.

The update sums each document's evidence ``E = log(L_R / L_I)``; :func:`mixed_evidence`
reads that sum through a mixture so that no repeated pattern outvotes everything else
(derivation and rationale: docs/security.md, "What the engine does"). Given its relevance,
a document is one of:

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
``a`` is :func:`lead_rate`, ``s`` :func:`self_citing_rate`, ``b = blind_rate``; evidence
temperature ``T`` divides every log-likelihood, the integral included (``B(1 + c/T, 1 +
m/T)``). A document in doubt (share >= :data:`TEST_AT`) is shown at the prompt's lowest-TPR
position, where its next citation tells the hypotheses apart most (:func:`move_suspects`).

Worked example (pinned by the tests): rates ``t = (0.8, 0.2)``, ``f = (0.1, 0.1)``, one
document cited twice at position 1, then missed once at position 0: ``L_R = 0.008``, ``L_I
= 0.009``, ``L_S = B(3, 2) = 1/12``; ``E = -0.118``, ``F = 2.226``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from .config import PanningConfig

__all__ = [
    "SUSPECT_AT",
    "TEST_AT",
    "evidence_swing",
    "flat_evidence",
    "flat_log_likelihood",
    "lead_rate",
    "mixed_evidence",
    "mixture_rates",
    "move_suspects",
    "self_citing_mixture",
    "self_citing_rate",
    "self_citing_share",
]

SUSPECT_AT = 0.5
"""Self-citing share from which a document is *suspected* (:attr:`PanningResult.suspected`)."""

TEST_AT = 0.1
"""Self-citing share from which a document is *in doubt*: shown at its prompt's lowest-TPR
position (:func:`move_suspects`)."""


@lru_cache(maxsize=32)
def _log_beta_table(temperature: float, size: int) -> NDArray[np.float64]:
    """``log B(1 + c/T, 1 + m/T)`` for ``c, m < size``, shape ``(size, size)``."""
    x = np.arange(size) / temperature
    lg = np.array([math.lgamma(1.0 + v) for v in x])
    both = np.array([[math.lgamma(2.0 + a + b) for b in x] for a in x])
    return lg[:, None] + lg[None, :] - both


def flat_log_likelihood(
    cited: NDArray[np.integer], missed: NDArray[np.integer], *, temperature: float = 1.0
) -> NDArray[np.float64]:
    """``log L_S``: the log-likelihood of ``cited`` citations and ``missed`` misses under a
    rate ``rho ~ Uniform(0, 1)`` the same at every position, ``log B(1 + c/T, 1 + m/T)``,
    elementwise (any shape; counts >= 0)."""
    c = np.asarray(cited, dtype=np.intp)
    m = np.asarray(missed, dtype=np.intp)
    top = int(max(c.max(initial=0), m.max(initial=0))) + 1
    size = 1 << max(top - 1, 7).bit_length()  # a power of two >= top: a few tables at most
    return _log_beta_table(float(temperature), size)[c, m]


def flat_evidence(
    cited: NDArray[np.integer],
    shown: NDArray[np.integer],
    irrelevant_log_likelihood: NDArray[np.float64],
    *,
    temperature: float = 1.0,
) -> NDArray[np.float64]:
    """``F = log(L_S / L_I)`` per document, elementwise: ``cited`` and ``shown`` (``>=
    cited``) counts and ``irrelevant_log_likelihood`` (``log L_I``, tempered), one shape."""
    l_s = flat_log_likelihood(cited, np.subtract(shown, cited), temperature=temperature)
    return l_s - np.asarray(irrelevant_log_likelihood, dtype=np.float64)


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


def mixture_rates(config: PanningConfig, n: int) -> tuple[float, float, float]:
    """``(a, b, s)``: false-lead, blind and self-citing rates of ``config`` for ``n`` documents."""
    resolved = _resolved(config)
    return lead_rate(resolved, n), resolved.resolved("blind_rate"), self_citing_rate(resolved, n)


def _terms(
    evidence: NDArray[np.float64],
    flat: NDArray[np.float64],
    profile_evidence: NDArray[np.float64] | None,
    a: float,
    b: float,
    s: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(log((1-b) e^E + b), log(a e^E + 1 - a - s), log sigma)`` with ``sigma = s e^F /
    (a e^E' + 1 - a - s)``, ``E'`` the profile-scale evidence (``E`` when None)."""
    if not (0.0 <= a and 0.0 <= b < 1.0 and 0.0 <= s and a + s < 1.0):
        raise ValueError(f"need 0 <= a, 0 <= b < 1, 0 <= s and a + s < 1; got a={a!r}, b={b!r}, s={s!r}")
    with np.errstate(divide="ignore"):  # -inf for a rate of 0
        la, lb, l1b, lrest, ls = (float(x) for x in np.log([a, b, 1.0 - b, 1.0 - a - s, s]))
    e = np.asarray(evidence, dtype=np.float64)
    rel = np.logaddexp(l1b + e, lb)
    irr = np.logaddexp(la + e, lrest)
    irr_profile = irr if profile_evidence is None else np.logaddexp(la + profile_evidence, lrest)
    return rel, irr, ls + np.asarray(flat, dtype=np.float64) - irr_profile


def self_citing_mixture(
    evidence: NDArray[np.float64],
    flat: NDArray[np.float64],
    *,
    false_lead_rate: float,
    blind_rate: float,
    self_citing: float,
    profile_evidence: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """``log((1 - b) e^E + b) - log(a e^E + 1 - a - s) - log(1 + sigma)``, elementwise,
    with ``sigma = s e^F / (a e^E' + 1 - a - s)``: ``E`` the evidence, ``F`` ``flat``
    (:func:`flat_evidence`), ``E'`` ``profile_evidence`` (the evidence at the profile's own
    rates when ``E`` used level-adapted ones; None: ``E``, and the formula is the module's).
    ``a + s < 1``.

    Module's example with ``a = 0.05``, ``b = 0.3``, ``s = 0.1``: ``log(0.9222 / 1.8203) =
    -0.680``.
    """
    rel, irr, log_sigma = _terms(evidence, flat, profile_evidence, false_lead_rate, blind_rate, self_citing)
    return rel - irr - np.logaddexp(0.0, log_sigma)


def self_citing_share(
    prior_log_odds: NDArray[np.float64],
    evidence: NDArray[np.float64],
    flat: NDArray[np.float64],
    *,
    false_lead_rate: float,
    blind_rate: float,
    self_citing: float,
    profile_evidence: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Posterior probability that each document is a self-citing passage, elementwise:
    ``(1 - pi) s e^F / (pi ((1-b) e^E + b) + (1 - pi) (a e^E + 1 - a - s + s e^F))``,
    ``pi = sigmoid(prior_log_odds)`` (``profile_evidence`` as in
    :func:`self_citing_mixture`); zeros when ``s = 0``. Module's example, ``pi = 0.5``: 0.338.
    """
    if self_citing == 0.0:
        return np.zeros(np.shape(evidence))
    rel, irr, log_sigma = _terms(evidence, flat, profile_evidence, false_lead_rate, blind_rate, self_citing)
    lo = np.asarray(prior_log_odds, dtype=np.float64)
    # log pi - log(1 - pi) = lo: weigh the relevant term by e^lo against the irrelevant ones.
    flat_term = irr + log_sigma
    total = np.logaddexp(lo + rel, irr + np.logaddexp(0.0, log_sigma))
    return np.exp(flat_term - total)


def move_suspects(
    positions: NDArray[np.intp], tpr_at: NDArray[np.float64], suspects: NDArray[np.float64]
) -> NDArray[np.intp]:
    """A copy of ``positions`` (shape ``(B, n)``, -1 = not shown) in which each row's shown
    document with the largest positive ``suspects`` swaps with the row's lowest-TPR
    document (``tpr_at``: decision TPR at each position; ties: the first)."""
    shown = positions >= 0
    score = np.where(shown, suspects, 0.0)
    rows = np.flatnonzero(score.max(axis=1, initial=0.0) > 0.0)
    out = positions.copy()
    if rows.size == 0:
        return out
    who = np.argmax(score[rows], axis=1)
    low = np.argmin(np.where(shown[rows], tpr_at[rows], np.inf), axis=1)
    out[rows, who], out[rows, low] = positions[rows, low], positions[rows, who]
    return out
