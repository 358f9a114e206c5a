"""The self-citing part of the mixture (numpy only): a passage cited at one rate whatever its
position (:mod:`.beliefs` has the mixture and the worked example), the evidence of that
flat-rate hypothesis, and where a suspected passage is shown next. Used only with
``self_citing > 0``."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SUSPECT_AT",
    "TEST_AT",
    "flat_evidence",
    "flat_log_likelihood",
    "move_suspects",
    "self_citing_mixture",
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
