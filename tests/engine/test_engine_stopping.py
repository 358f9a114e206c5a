"""The stop rules are pure functions: numbers in, decision out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gold_panning_integrations.engine import stopping


def test_selected_confidence_is_the_mean_posterior_of_the_top_k() -> None:
    lo = np.array([[0.0, math.log(3.0), math.log(9.0)]])  # posteriors 0.5, 0.75, 0.9
    assert stopping.selected_confidence(lo, 2)[0] == pytest.approx((0.75 + 0.9) / 2)


def test_selected_confidence_with_k_above_n_averages_everything() -> None:
    lo = np.array([0.0, math.log(3.0)])
    assert float(stopping.selected_confidence(lo, 5)) == pytest.approx(0.625)


def test_threshold_waits_for_min_rounds() -> None:
    lo = np.array([[math.log(9.0), 0.0]])  # top posterior 0.9
    assert not stopping.threshold_reached(lo, k=1, stop_at=0.8, done=1, min_rounds=2)[0]
    assert stopping.threshold_reached(lo, k=1, stop_at=0.8, done=2, min_rounds=2)[0]


def test_threshold_is_per_trial() -> None:
    lo = np.array([[math.log(9.0)], [0.0]])
    assert stopping.threshold_reached(lo, k=1, stop_at=0.8, done=1, min_rounds=1).tolist() == [True, False]


def test_call_budget_counts_the_planned_prompts() -> None:
    assert stopping.call_budget_exceeded(3, 2, 4)
    assert not stopping.call_budget_exceeded(3, 1, 4)
    assert not stopping.call_budget_exceeded(30, 1, None)


def test_token_budget_extrapolates_tokens_per_shown_document() -> None:
    # 100 tokens for 10 shown documents: 10 per document; 5 more -> 150.
    assert stopping.token_budget_exceeded(100, 10, 5, 149)
    assert not stopping.token_budget_exceeded(100, 10, 5, 150)


def test_token_budget_never_stops_the_first_round() -> None:
    assert not stopping.token_budget_exceeded(0, 0, 100, 1)


def test_gain_rule_needs_min_rounds_and_a_small_gain() -> None:
    assert stopping.gain_too_small(0.001, min_gain=0.005, done=1, min_rounds=1)
    assert not stopping.gain_too_small(0.001, min_gain=0.005, done=0, min_rounds=1)
    assert not stopping.gain_too_small(0.01, min_gain=0.005, done=3, min_rounds=1)
    assert not stopping.gain_too_small(0.0, min_gain=None, done=3, min_rounds=1)


def test_rounds_done() -> None:
    assert stopping.rounds_done(4, 4)
    assert not stopping.rounds_done(3, 4)
