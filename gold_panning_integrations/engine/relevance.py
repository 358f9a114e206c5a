"""Acting on relevance probabilities: "nothing relevant here", a threshold, an adaptive k,
and the recalibration map a profile may carry (numpy only).

The panner calls :func:`recalibrate` on its final log-odds, then :func:`select` and
:func:`p_none` on the probabilities it reports. The update scores each document from its
own citations with independent priors, so the probability that no candidate is relevant
is ``prod_i (1 - p_i)`` (a priori ``prod_i (1 - p0_i)``, about ``exp(-m)`` for a prior
mass ``m`` spread thin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .beliefs import logit, sigmoid

__all__ = [
    "MAP_KINDS",
    "RecalibrationMap",
    "p_none",
    "recalibrate",
    "recalibration_of",
    "select",
]

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
