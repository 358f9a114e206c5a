"""The recalibration map: learned from labelled traces, stored in the profile.

A monotone map fitted on labelled traces (:func:`fit_map`: ``platt``, logistic regression
on the log-odds; ``isotonic``, pool-adjacent-violators, any monotone shape) turns the
engine's posterior log-odds into probabilities; the panner applies it to every probability
it reports (:class:`~gold_panning_integrations.engine.beliefs.RecalibrationMap`). Traces
panned with another profile are replayed through the new one first (:func:`replay_log_odds`).
:func:`cross_validate` scores the maps on held-out queries; docs/probabilities.md has the
numbers that chose the default and the rationale.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import isotonic_regression, minimize

from ..engine.beliefs import MAP_KINDS, RecalibrationMap, logit, sigmoid
from ..engine.config import PanningConfig
from ..engine.rounds import BatchState, DecisionRates, observe_round, settle_round
from .metrics import adaptive_ece, brier, ece

__all__ = [
    "DEFAULT_MAP",
    "cross_validate",
    "fit_isotonic",
    "fit_map",
    "fit_platt",
    "labelled_queries",
    "replay_log_odds",
]

logger = logging.getLogger(__name__)

DEFAULT_MAP = "platt"
"""The map ``calibrate --from-traces`` fits unless told otherwise."""

_CLIP = 1e-6


def _check(log_odds: ArrayLike, relevant: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    lo = np.asarray(log_odds, dtype=np.float64).reshape(-1)
    y = np.asarray(relevant, dtype=np.float64).reshape(-1)
    if lo.shape != y.shape or lo.size == 0:
        raise ValueError(f"need as many labels as log-odds, at least one: got {lo.size} and {y.size}")
    if not np.all(np.isfinite(lo)):
        raise ValueError("log-odds must be finite")
    return lo, y


def fit_platt(log_odds: ArrayLike, relevant: ArrayLike, *, ridge: float = 1.0) -> RecalibrationMap:
    """Platt scaling: ``P(relevant) = sigmoid(a * log_odds + b)`` by maximum likelihood,
    ``a = exp(s) > 0`` (the map stays monotone), with a ridge of ``ridge`` pseudo-pairs'
    weight pulling ``(s, b)`` toward the identity ``(0, 0)`` so that a few or separable
    pairs give a finite map.

    Args:
        log_odds: The engine's posterior log-odds per judged pair, shape ``(m,)``.
        relevant: Whether each pair is relevant, shape ``(m,)``.
    """
    lo, y = _check(log_odds, relevant)

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        a, b = np.exp(theta[0]), theta[1]
        z = a * lo + b
        # log loss: log(1 + e^z) - y z, stable; gradient (sigmoid(z) - y) dz.
        nll = np.logaddexp(0.0, z) - y * z
        r = sigmoid(z) - y
        grad = np.array([float(np.sum(r * lo) * a), float(np.sum(r))])
        value = float(nll.sum()) + 0.5 * ridge * float(theta @ theta)
        return value, grad + ridge * theta

    res = minimize(loss, np.zeros(2), jac=True, method="L-BFGS-B")
    return RecalibrationMap(kind="platt", slope=float(np.exp(res.x[0])), intercept=float(res.x[1]))


def fit_isotonic(log_odds: ArrayLike, relevant: ArrayLike, *, pseudo: float = 1.0) -> RecalibrationMap:
    """Isotonic regression of relevance on the log-odds (pool adjacent violators), each
    block's rate shrunk by ``pseudo`` pairs toward the overall rate (no 0 or 1 from a
    handful of pairs), as knots at each block's first and last log-odds.

    Args:
        log_odds: The engine's posterior log-odds per judged pair, shape ``(m,)``.
        relevant: Whether each pair is relevant, shape ``(m,)``.
    """
    lo, y = _check(log_odds, relevant)
    xs, inverse = np.unique(np.round(lo, 6), return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    ys = np.bincount(inverse, weights=y) / w
    fit = isotonic_regression(ys, weights=w, increasing=True)
    base = float(y.mean())
    knots_x: list[float] = []
    knots_y: list[float] = []
    values = fit.x
    for start, stop in zip(fit.blocks[:-1], fit.blocks[1:]):
        count = float(w[start:stop].sum())
        rate = (float(values[start]) * count + pseudo * base) / (count + pseudo)
        for x in (xs[start], xs[stop - 1]):
            if not knots_x or x > knots_x[-1]:
                knots_x.append(float(x))
                knots_y.append(rate)
    knots_y = np.maximum.accumulate(np.asarray(knots_y)).tolist()  # shrinkage may bend it
    if len(knots_x) < 2:  # one distinct value: a flat map around it
        knots_x, knots_y = [knots_x[0] - 1.0, knots_x[0] + 1.0], [knots_y[0], knots_y[0]]
    return RecalibrationMap(kind="isotonic", x=tuple(knots_x), y=tuple(knots_y))


def fit_map(log_odds: ArrayLike, relevant: ArrayLike, *, kind: str = DEFAULT_MAP) -> RecalibrationMap:
    """The map of ``kind`` (``platt`` or ``isotonic``) fitted on judged pairs."""
    if kind == "platt":
        return fit_platt(log_odds, relevant)
    if kind == "isotonic":
        return fit_isotonic(log_odds, relevant)
    raise ValueError(f"recalibration map kind must be one of {', '.join(MAP_KINDS)}, got {kind!r}")


def replay_log_odds(
    trace: Mapping[str, Any], profile: Any, *, config: PanningConfig | None = None
) -> NDArray[np.float64]:
    """A trace's final log-odds under ``profile``: its prior, then every prompt that did
    not fail, in order, through the engine's update (:func:`~..engine.rounds.observe_round`,
    with ``config``'s update options: the defaults unless given, with the trace's ``k``).

    Args:
        trace: One record of :func:`~gold_panning_integrations.calibration.traces.read_traces`.
        profile: Anything with ``tpr``/``fpr`` (and optionally the learned values).

    Returns:
        Log-odds, shape ``(n,)``.
    """
    n = int(trace["n"])
    cfg = (config or PanningConfig()).with_profile(profile)
    cfg = PanningConfig.from_options(cfg, k=max(1, min(int(trace.get("k") or 1), max(n, 1))))
    prior = trace.get("prior_log_odds")
    lo0 = np.zeros(n) if prior is None else np.asarray(prior, dtype=np.float64)
    state = BatchState.start(lo0[None, :])
    geometry = DecisionRates(
        profile.tpr,
        profile.fpr,
        config=cfg,
        temperature=float(cfg.evidence_temperature or 1.0),
        abstention=getattr(profile, "abstention_map", None),
    )
    for r in trace.get("rounds", ()):
        for p in r["prompts"]:
            if p.get("failed") or not p["docs"]:
                continue
            positions = np.full((1, n), -1, dtype=np.intp)
            positions[0, p["docs"]] = p["positions"]
            cited = np.zeros((1, n), dtype=bool)
            cited[0, p["cited"]] = True
            sizes = np.array([int(p["span"])], dtype=np.intp)
            a = p.get("abstain_p")
            abstain = None if a is None else np.array([float(a)])
            observe_round(
                state, positions, sizes, cited, abstain_p=abstain, config=cfg, geometry=geometry, settle=False
            )
        settle_round(state, cfg, geometry)  # a round's prompts are weighed together, as the panner does
    return state.log_odds[0].copy()


def labelled_queries(
    traces: Iterable[Mapping[str, Any]], *, profile: Any = None, config: PanningConfig | None = None
) -> list[tuple[NDArray[np.float64], NDArray[np.bool_]]]:
    """``(log_odds, relevant)`` per labelled trace (those with ``relevant``), each shape
    ``(n,)``: replayed through ``profile`` when given (:func:`replay_log_odds`), else the
    trace's own posteriors before any map (``raw_posteriors`` when it has them)."""
    out = []
    for t in traces:
        if t.get("relevant") is None or not t["n"]:
            continue
        if profile is not None:
            lo = replay_log_odds(t, profile, config=config)
        else:
            raw = t.get("raw_posteriors") or t["posteriors"]
            lo = logit(np.clip(np.asarray(raw, dtype=np.float64), _CLIP, 1.0 - _CLIP))
        rel = np.zeros(int(t["n"]), dtype=bool)
        rel[list(t["relevant"])] = True
        out.append((lo, rel))
    return out


def cross_validate(
    queries: Sequence[tuple[ArrayLike, ArrayLike]],
    *,
    kinds: Sequence[str] = ("identity", *MAP_KINDS),
    folds: int = 5,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Held-out calibration of each map kind: queries split into ``folds`` at random
    (seeded), each fold scored with the map fitted on the others.

    Returns:
        Per kind (``identity`` is no map): ``ece`` (10 equal-width bins),
        ``adaptive_ece`` (10 equal-count bins) and ``brier`` over every held-out pair.
    """
    if len(queries) < folds:
        raise ValueError(f"need at least {folds} labelled queries to cross-validate, got {len(queries)}")
    order = np.random.default_rng(seed).permutation(len(queries))
    parts = np.array_split(order, folds)
    probs: dict[str, list[NDArray[np.float64]]] = {k: [] for k in kinds}
    labels: list[NDArray[np.float64]] = []

    def pooled(rows: NDArray[np.intp], column: int) -> NDArray[np.float64]:
        return np.concatenate([np.asarray(queries[i][column], dtype=np.float64) for i in rows])

    for f in range(folds):
        train = np.concatenate([parts[g] for g in range(folds) if g != f])
        x_tr, y_tr, x_te = pooled(train, 0), pooled(train, 1), pooled(parts[f], 0)
        labels.append(pooled(parts[f], 1))
        for kind in kinds:
            if kind == "identity":
                probs[kind].append(sigmoid(x_te))
            else:
                probs[kind].append(fit_map(x_tr, y_tr, kind=kind).probabilities(x_te))
    y = np.concatenate(labels)
    scores = {"ece": ece, "adaptive_ece": adaptive_ece, "brier": brier}
    return {
        kind: {name: fn(np.concatenate(ps), y) for name, fn in scores.items()} for kind, ps in probs.items()
    }
