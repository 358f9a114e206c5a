"""Issue 42's simulator line at test size (``benchmarks.probabilities_learned_base_rate``):
200 labelled training traces, 600 evaluation queries, 0/1/2 relevant of 20."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from benchmarks import probabilities_learned_base_rate as lb
from gold_panning_integrations.calibration.metrics import summarize
from gold_panning_integrations.calibration.traces import LearnResult, learn_profile
from gold_panning_integrations.engine.config import PanningConfig

TRACES = 200
QUERIES = 600


@pytest.fixture(scope="module")
def traces() -> list[dict[str, Any]]:
    return lb.labelled_traces(queries=TRACES, seed=11)


@pytest.fixture(scope="module")
def fit(traces: list[dict[str, Any]]) -> LearnResult:
    return learn_profile(traces, lb.PROFILE)


def test_the_base_rate_is_counted_on_the_labels(traces: list[dict[str, Any]], fit: LearnResult) -> None:
    """The panner was told 3.0; the profile carries the labels' mean instead. Counts
    0/1/2 with p 0.2/0.4/0.4: mean 1.2, variance 0.4 + 1.6 - 1.44 = 0.56, so the mean of
    200 has a standard error sqrt(0.56 / 200) = 0.053; 3 of them is 0.16."""
    counted = sum(len(t["relevant"]) for t in traces) / TRACES
    learned = fit.profile.expected_relevant
    assert learned == pytest.approx(round(counted, 4))
    assert learned is not None and abs(learned - 1.2) <= 3 * math.sqrt(0.56 / TRACES)


def test_a_reader_that_follows_its_rates_is_measured_as_one(fit: LearnResult) -> None:
    """The simulated reader is never silent for its own sake, never blind to a relevant
    document and never leads astray: every learned rate of those is near 0."""
    assert fit.profile.silent_rate is not None and fit.profile.silent_rate <= 0.03
    assert fit.profile.blind_rate is not None and fit.profile.blind_rate <= 0.03
    assert fit.profile.false_leads is not None and fit.profile.false_leads <= 0.03


def test_learned_profile_is_calibrated_whatever_k(fit: LearnResult) -> None:
    """The acceptance floors (ECE <= 0.02, p_none AUROC >= 0.95) at 600 queries; the
    posteriors at k = 1, 4 and 10 are identical (``evaluate`` asserts it)."""
    p, y = lb.evaluate(fit.profile, queries=QUERIES, seed=7, ks=lb.KS)
    assert p.shape == y.shape == (QUERIES, lb.N)
    s = summarize(list(zip(p, y)))
    assert s.ece <= lb.ECE_FLOOR
    assert s.p_none_auroc is not None and s.p_none_auroc >= lb.AUROC_FLOOR


def test_told_the_wrong_base_rate_the_floor_fails(fit: LearnResult) -> None:
    """The check can fail: the same rates told expected_relevant=3 (2.5 times the truth)
    put too little mass on "none" and the ECE leaves the floor."""
    p, y = lb.evaluate(
        fit.profile, queries=QUERIES, seed=7, ks=(4,), config=PanningConfig(expected_relevant=lb.WRONG_MASS)
    )
    s = summarize(list(zip(p, y)))
    assert s.ece > lb.ECE_FLOOR
    assert s.p_none_mean < s.none_share


def test_bootstrap_interval_holds_the_estimate() -> None:
    """Posteriors equal to the truth: ECE 0 and AUROC 1 in every resample."""
    y = np.zeros((40, 5), dtype=bool)
    y[::2, 0] = True
    (e_lo, e_hi), (a_lo, a_hi) = lb.bootstrap(y.astype(np.float64), y, draws=20, seed=0)
    assert (e_lo, e_hi) == (0.0, 0.0)
    assert (a_lo, a_hi) == (1.0, 1.0)
