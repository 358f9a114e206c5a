"""Stop rules as pure functions, "stop before the next round?", shared by the panner and
the batch simulator (whose forms take a leading trial axis)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .beliefs import sigmoid

__all__ = [
    "call_budget_exceeded",
    "gain_too_small",
    "rounds_done",
    "selected_confidence",
    "threshold_reached",
    "token_budget_exceeded",
]


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
