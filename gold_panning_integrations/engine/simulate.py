"""Simulation under the paper's observation model: a reader for tests, a batch simulator.

* :class:`SimulatedReader` cites each shown document independently with its
  position's TPR (relevant) or FPR (irrelevant). It plugs into :class:`GoldPanner`
  like any LLM reader.
* :func:`simulate` runs thousands of trials at once in numpy, for every policy, and
  returns F1 per round with a 95% confidence interval.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .assignment import assign, position_order
from .beliefs import DEFAULT_EPS, PriorSpec, initial_log_odds, log_likelihood_ratios, update_log_odds
from .curves import resample_curve
from .policies import POLICIES, score_documents
from .reading import Reading

__all__ = ["SimulatedReader", "PolicyCurve", "SimulationResult", "simulate"]

_CHUNK_ELEMENTS = 1 << 22  # trials x n per chunk: ~34 MB per float64 array


class SimulatedReader:
    """A reader that follows a detector profile exactly (the paper's observation model).

    Args:
        profile: Object with ``tpr``/``fpr`` sequences; resampled to the number of
            documents shown in each prompt.
        relevant: The relevant documents (a collection tested with ``in``) or a
            predicate ``doc -> bool``.
        rng: Generator or seed for the citations.
    """

    def __init__(
        self,
        profile: Any,
        relevant: Collection[Any] | Callable[[Any], bool],
        *,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        self.tpr = np.asarray(profile.tpr, dtype=np.float64)
        self.fpr = np.asarray(profile.fpr, dtype=np.float64)
        self._is_relevant: Callable[[Any], bool] = (
            relevant if callable(relevant) else (lambda d: d in relevant)  # type: ignore[operator]
        )
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.calls = 0

    def read(self, question: str, documents: Sequence[Any]) -> Reading:
        """Cite each document with its position's TPR or FPR; positions are 0-based."""
        self.calls += 1
        m = len(documents)
        if m == 0:
            return Reading(cited=())
        tpr = resample_curve(self.tpr, m)
        fpr = resample_curve(self.fpr, m)
        rel = np.fromiter((bool(self._is_relevant(d)) for d in documents), dtype=bool, count=m)
        p = np.where(rel, tpr, fpr)
        cited = np.flatnonzero(self.rng.random(m) < p)
        return Reading(cited=tuple(int(c) for c in cited))

    async def aread(self, question: str, documents: Sequence[Any]) -> Reading:
        """Asynchronous :meth:`read` (no I/O, returns at once)."""
        return self.read(question, documents)


@dataclass(frozen=True)
class PolicyCurve:
    """F1 per round for one policy.

    Attributes:
        f1: Mean F1 after each round, shape ``(rounds,)``.
        ci95: Half-width of the 95% confidence interval of the mean, shape
            ``(rounds,)`` (the interval is ``f1 ± ci95``).
        rounds_to_match_random: First round (1-based) at which ``f1`` reaches the
            ``random`` (PSC) policy's final-round F1, or None if it never does or PSC
            was not simulated.
    """

    f1: NDArray[np.float64]
    ci95: NDArray[np.float64]
    rounds_to_match_random: int | None


@dataclass(frozen=True)
class SimulationResult:
    """Output of :func:`simulate`; :meth:`to_json` gives the CLI's JSON format."""

    n: int
    k: int
    rounds: int
    trials: int
    tpr: NDArray[np.float64]
    fpr: NDArray[np.float64]
    policies: dict[str, PolicyCurve]

    def to_json(self) -> dict[str, Any]:
        """``{"n","k","rounds","trials","profile":{"tpr","fpr"},"policies":{...}}``."""
        return {
            "n": self.n,
            "k": self.k,
            "rounds": self.rounds,
            "trials": self.trials,
            "profile": {"tpr": self.tpr.tolist(), "fpr": self.fpr.tolist()},
            "policies": {
                name: {
                    "f1": [float(x) for x in c.f1],
                    "ci95": [float(x) for x in c.ci95],
                    "rounds_to_match_random": c.rounds_to_match_random,
                }
                for name, c in self.policies.items()
            },
        }


def _top_k_hits(keys: NDArray[np.float64], truth: NDArray[np.bool_], k: int) -> NDArray[np.float64]:
    """Fraction of the top-k (by ``keys``, per row) that are relevant: F1 when |truth| = k."""
    if k == 1:
        top = np.argmax(keys, axis=1)[:, None]
    else:
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    return np.take_along_axis(truth, top, axis=1).sum(axis=1) / k


def simulate(
    tpr: ArrayLike,
    fpr: ArrayLike,
    *,
    n: int,
    k: int = 1,
    rounds: int = 8,
    trials: int = 5000,
    policies: Sequence[str] = ("belief", "entropy", "random", "oracle"),
    rng: np.random.Generator | int | None = None,
    decision_tpr: ArrayLike | None = None,
    decision_fpr: ArrayLike | None = None,
    prior: PriorSpec = "uniform",
    eps: float = DEFAULT_EPS,
    chunk_trials: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate panning under the observation model for many trials at once.

    Each trial places ``k`` needles at random among ``n`` documents; the simulated
    model cites with the *true* rates ``(tpr, fpr)``, while the policy places and
    updates with the *decision* rates (the same unless given: used for the
    calibration-noise ablation). Every policy sees the same needles.

    Args:
        tpr: True TPR per position, shape ``(m,)``; resampled to ``n``.
        fpr: True FPR per position, shape ``(m,)``; resampled to ``n``.
        n: Documents per trial (all shown every round).
        k: Needles per trial; F1 of the top-k selection equals the fraction found.
        rounds: Rounds per trial.
        trials: Number of trials.
        policies: Subset of ``belief``, ``entropy``, ``random``, ``oracle``.
        rng: Generator or seed.
        decision_tpr: TPR the policy believes, shape ``(n,)`` after resampling.
        decision_fpr: FPR the policy believes.
        prior: ``"uniform"`` (0.5, the paper) or ``"base-rate"`` (k/n).
        eps: Clamp for the decision rates.
        chunk_trials: Trials per chunk; default keeps each array near 34 MB, so
            5,000 trials at ``n = 1,000`` use well under 2 GB.
        progress: Called with the number of trials finished after each chunk.

    Returns:
        A :class:`SimulationResult`.
    """
    if n < 1 or k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got n={n!r}, k={k!r}")
    if rounds < 1 or trials < 1:
        raise ValueError(f"rounds and trials must be >= 1, got {rounds!r} and {trials!r}")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    t_true = resample_curve(tpr, n)
    f_true = resample_curve(fpr, n)
    t_dec = t_true if decision_tpr is None else resample_curve(decision_tpr, n)
    f_dec = f_true if decision_fpr is None else resample_curve(decision_fpr, n)
    pos_order = position_order(t_dec, f_dec)
    llr_c, llr_m = log_likelihood_ratios(t_dec, f_dec, eps=eps)
    lo0 = initial_log_odds(n, k=k, prior=prior)

    chunk = chunk_trials or max(1, min(trials, _CHUNK_ELEMENTS // n))
    sums = {p: np.zeros(rounds) for p in policies}
    sqs = {p: np.zeros(rounds) for p in policies}
    # Common random numbers: every policy sees the same needles and, for the same
    # document in the same round, the same citation draw. Differences between
    # policies then come from placement alone (identical placements give identical
    # outcomes), which removes most of the noise from the comparison.
    cite_rng, policy_rng = gen.spawn(2)
    done = 0
    while done < trials:
        b = min(chunk, trials - done)
        needle_idx = np.argpartition(cite_rng.random((b, n)), k - 1, axis=1)[:, :k]
        truth = np.zeros((b, n), dtype=bool)
        np.put_along_axis(truth, needle_idx, True, axis=1)
        lo = {p: np.broadcast_to(lo0, (b, n)).copy() for p in policies}
        counts = np.zeros((b, n), dtype=np.float64) if "random" in policies else None
        for t in range(rounds):
            u = cite_rng.random((b, n))
            for pol in policies:
                scores = score_documents(pol, lo[pol], rng=policy_rng, truth=truth)
                pos = assign(scores, pos_order)
                cited = u < np.where(truth, t_true[pos], f_true[pos])
                lo[pol] = update_log_odds(lo[pol], pos, cited, llr_c, llr_m)
                if pol == "random" and counts is not None:
                    counts += cited
                    keys = counts + policy_rng.random((b, n))  # majority vote, random ties
                else:
                    keys = lo[pol]
                hits = _top_k_hits(keys, truth, k)
                sums[pol][t] += hits.sum()
                sqs[pol][t] += np.square(hits).sum()
        done += b
        if progress is not None:
            progress(done)

    curves: dict[str, PolicyCurve] = {}
    means = {p: sums[p] / trials for p in policies}
    target = float(means["random"][-1]) if "random" in means else None
    for pol in policies:
        mean = means[pol]
        var = np.maximum(sqs[pol] / trials - mean**2, 0.0) * trials / max(trials - 1, 1)
        ci = 1.96 * np.sqrt(var / trials)
        match = None
        if target is not None:
            hit = np.flatnonzero(mean >= target - 1e-12)
            match = int(hit[0]) + 1 if hit.size else None
        curves[pol] = PolicyCurve(f1=mean, ci95=ci, rounds_to_match_random=match)
    return SimulationResult(
        n=n, k=k, rounds=rounds, trials=trials, tpr=t_true, fpr=f_true, policies=curves
    )
