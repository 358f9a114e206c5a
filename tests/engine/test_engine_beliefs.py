"""Beliefs in log-odds: the Bayesian update pinned by hand, clamping, priors, stability;
the stop rules, pure functions of them (numbers in, decision out).

The observation model: a document shown at position j adds log(TPR_j / FPR_j) to its
log-odds when cited and log((1 - TPR_j) / (1 - FPR_j)) when shown and not cited.
Every expected number below is derived in the comments next to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.engine import (
    binary_entropy,
    initial_log_odds,
    log_likelihood_ratios,
    sigmoid,
    update_log_odds,
)
from gold_panning_integrations.engine.beliefs import (
    DEFAULT_EPS,
    call_budget_exceeded,
    clamp_rates,
    gain_too_small,
    logit,
    rounds_done,
    selected_confidence,
    threshold_reached,
    token_budget_exceeded,
)

# A three-position profile used throughout:
#   position:      0     1     2
#   TPR:          0.8   0.6   0.3
#   FPR:          0.2   0.3   0.1
#   |TPR - FPR|:  0.6   0.3   0.2   -> most to least diagnostic: 0, 1, 2
#   cited LLR:    log(0.8/0.2) = log 4,  log(0.6/0.3) = log 2,  log(0.3/0.1) = log 3
#   missed LLR:   log(0.2/0.8) = log 1/4, log(0.4/0.7) = log 4/7, log(0.7/0.9) = log 7/9
TPR = [0.8, 0.6, 0.3]
FPR = [0.2, 0.3, 0.1]


class ScriptedReader:
    """Cites a fixed list of prompt positions per call and records what it was shown."""

    def __init__(self, script: Sequence[Sequence[int]]) -> None:
        self.script = [tuple(s) for s in script]
        self.seen: list[list[str]] = []

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.seen.append(list(documents))
        return Reading(cited=self.script[len(self.seen) - 1])


def test_log_likelihood_ratios_match_the_hand_values() -> None:
    llr_c, llr_m = log_likelihood_ratios(TPR, FPR)
    assert llr_c == pytest.approx([math.log(4), math.log(2), math.log(3)], rel=1e-12)
    assert llr_m == pytest.approx([math.log(1 / 4), math.log(4 / 7), math.log(7 / 9)], rel=1e-12)


def test_two_round_update_with_update_log_odds_by_hand() -> None:
    llr_c, llr_m = log_likelihood_ratios(TPR, FPR)
    # Four documents starting at the uniform prior 0.5 (log-odds 0).
    lo = np.zeros(4)
    # Round 1: docs 0,1,2 at positions 0,1,2; doc 3 on a dummy position (-1).
    # Doc 1 cited.
    #   doc0: 0 + log(1/4)            doc1: 0 + log 2
    #   doc2: 0 + log(7/9)            doc3: unchanged (0)
    lo = update_log_odds(lo, np.array([0, 1, 2, -1]), np.array([False, True, False, False]), llr_c, llr_m)
    assert lo == pytest.approx([math.log(1 / 4), math.log(2), math.log(7 / 9), 0.0], abs=1e-12)
    # Round 2: doc1 -> 0, doc3 -> 1, doc2 -> 2, doc0 left out. Docs 1 and 2 cited.
    #   doc0: log(1/4)                       (not shown)
    #   doc1: log 2 + log 4 = log 8          (cited at 0)
    #   doc2: log(7/9) + log 3 = log(7/3)    (cited at 2)
    #   doc3: 0 + log(4/7)                   (missed at 1)
    lo = update_log_odds(lo, np.array([-1, 0, 2, 1]), np.array([False, True, True, False]), llr_c, llr_m)
    assert lo == pytest.approx([math.log(1 / 4), math.log(8), math.log(7 / 3), math.log(4 / 7)], abs=1e-12)
    # Posteriors o/(1+o): 1/5, 8/9, 7/10, 4/11.
    assert sigmoid(lo) == pytest.approx([1 / 5, 8 / 9, 7 / 10, 4 / 11], abs=1e-12)


def test_a_cited_flag_on_a_document_left_out_changes_nothing() -> None:
    llr_c, llr_m = log_likelihood_ratios(TPR, FPR)
    lo = np.array([0.3, -0.7])
    out = update_log_odds(lo, np.array([-1, -1]), np.array([True, False]), llr_c, llr_m)
    assert out.tolist() == lo.tolist()
    assert out is not lo  # a new array: the caller's state is not mutated


def test_update_log_odds_works_on_batches() -> None:
    llr_c, llr_m = log_likelihood_ratios(TPR, FPR)
    lo = np.zeros((2, 3))
    pos = np.array([[0, 1, 2], [2, 1, 0]])
    cited = np.array([[True, False, False], [True, False, False]])
    out = update_log_odds(lo, pos, cited, llr_c, llr_m)
    # Row 0: doc0 cited at 0 (log 4), doc1 missed at 1 (log 4/7), doc2 missed at 2 (log 7/9).
    # Row 1: doc0 cited at 2 (log 3), doc1 missed at 1, doc2 missed at 0 (log 1/4).
    assert out[0] == pytest.approx([math.log(4), math.log(4 / 7), math.log(7 / 9)], abs=1e-12)
    assert out[1] == pytest.approx([math.log(3), math.log(4 / 7), math.log(1 / 4)], abs=1e-12)


def test_two_round_panner_run_pinned_by_hand() -> None:
    """GoldPanner end to end, base-rate prior, three documents, k = 1.

    Prior: k/n = 1/3, log-odds log((1/3)/(2/3)) = log(1/2).

    Round 1: all scores tie, so the stable order puts doc i on position i; the prompt is
    [a, b, c]. The reader cites prompt position 1 (doc 1).
      doc0: log(1/2) + log(1/4) = log(1/8)   -> p = 1/9
      doc1: log(1/2) + log 2    = 0          -> p = 1/2
      doc2: log(1/2) + log(7/9) = log(7/18)  -> p = 7/25
    Round 2: beliefs order doc1 > doc2 > doc0, so doc1 -> position 0, doc2 -> 1,
    doc0 -> 2; the prompt is [b, c, a]. The reader cites prompt positions 0 and 2
    (docs 1 and 0).
      doc0: log(1/8) + log 3      = log(3/8)  -> p = 3/11  (cited at position 2)
      doc1: 0 + log 4             = log 4     -> p = 4/5   (cited at position 0)
      doc2: log(7/18) + log(4/7)  = log(2/9)  -> p = 2/11  (missed at position 1)
    """
    profile = DetectorProfile(n_positions=3, tpr=TPR, fpr=FPR)
    reader = ScriptedReader([(1,), (0, 2)])
    res = GoldPanner(
        reader,
        profile=profile,
        rounds=2,
        k=1,
        retriever_prior="none",
        shuffle_top=0,
        robust=False,
        empty_prompts="evidence",
        adapt_level=False,
        false_leads=0.0,
        blind_rate=0.0,
        content_free=0.0,
        expected_relevant=1.0,
        prompts_per_round=1,
    ).run("q", ["a", "b", "c"])

    assert reader.seen == [["a", "b", "c"], ["b", "c", "a"]]
    assert res.rounds[0].shown == (0, 1, 2)
    assert res.rounds[1].shown == (1, 2, 0)
    assert res.rounds[0].cited == (1,)
    assert res.rounds[1].cited == (0, 1)
    assert res.rounds[0].posteriors == pytest.approx([1 / 9, 1 / 2, 7 / 25], abs=1e-12)
    assert res.log_odds == pytest.approx([math.log(3 / 8), math.log(4), math.log(2 / 9)], abs=1e-12)
    assert res.posteriors == pytest.approx([3 / 11, 4 / 5, 2 / 11], abs=1e-12)
    assert res.ranking.tolist() == [1, 0, 2]
    assert res.selected.tolist() == [1]
    assert res.citation_counts.tolist() == [1, 2, 0]
    assert res.calls == 2
    assert res.stop_reason == "rounds"
    assert res.panned is True


def test_two_round_panner_run_with_uniform_prior_shifts_log_odds_by_log2() -> None:
    # Same script from 0.5 (log-odds 0 instead of log(1/2)): the same placements
    # (all ties in round 1; the same order in round 2) and every log-odds log 2 higher.
    profile = DetectorProfile(n_positions=3, tpr=TPR, fpr=FPR)
    reader = ScriptedReader([(1,), (0, 2)])
    res = GoldPanner(
        reader,
        profile=profile,
        rounds=2,
        prior="uniform",
        retriever_prior="none",
        shuffle_top=0,
        robust=False,
        empty_prompts="evidence",
        adapt_level=False,
        false_leads=0.0,
        blind_rate=0.0,
        content_free=0.0,
        expected_relevant=1.0,
        prompts_per_round=1,
    ).run("q", ["a", "b", "c"])
    assert res.log_odds == pytest.approx([math.log(3 / 4), math.log(8), math.log(4 / 9)], abs=1e-12)
    # Odds 3/4, 8, 4/9 -> probabilities 3/7, 8/9, 4/13.
    assert res.posteriors == pytest.approx([3 / 7, 8 / 9, 4 / 13], abs=1e-12)


# ---------------------------------------------------------------- clamping
def test_rates_of_zero_and_one_are_clamped_to_finite_log_ratios() -> None:
    eps = DEFAULT_EPS
    big = math.log((1 - eps) / eps)  # log(999) = 6.9068 for eps = 1e-3
    assert big == pytest.approx(6.906754778648554)
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        llr_c, llr_m = log_likelihood_ratios([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0])
    assert np.all(np.isfinite(llr_c)) and np.all(np.isfinite(llr_m))
    # TPR 1, FPR 0: citation log((1-eps)/eps), miss log(eps/(1-eps)).
    # TPR 0, FPR 1: the mirror image. TPR == FPR (both 1 or both 0): no evidence.
    assert llr_c == pytest.approx([big, -big, 0.0, 0.0], abs=1e-12)
    assert llr_m == pytest.approx([-big, big, 0.0, 0.0], abs=1e-12)


def test_clamp_uses_the_given_eps_and_validates_it() -> None:
    t, f = clamp_rates([1.0, 0.0, 0.5], [0.0, 1.0, 0.5], eps=0.01)
    assert t.tolist() == [0.99, 0.01, 0.5]
    assert f.tolist() == [0.01, 0.99, 0.5]
    llr_c, _ = log_likelihood_ratios([1.0], [0.0], eps=0.01)
    assert llr_c[0] == pytest.approx(math.log(99))
    for bad in (0.0, 0.5, -0.1, 1.0):
        with pytest.raises(ValueError, match="eps"):
            clamp_rates([0.5], [0.5], eps=bad)


def test_update_with_extreme_rates_stays_finite_over_many_rounds() -> None:
    llr_c, llr_m = log_likelihood_ratios([1.0, 0.0], [0.0, 1.0])
    lo = np.zeros(2)
    for _ in range(1000):
        lo = update_log_odds(lo, np.array([0, 1]), np.array([True, True]), llr_c, llr_m)
    # Each round adds +log(999) to doc 0 and -log(999) to doc 1: exact sums.
    assert lo == pytest.approx([1000 * math.log(999), -1000 * math.log(999)], rel=1e-9)
    p = sigmoid(lo)
    assert not np.any(np.isnan(p))
    assert p.tolist() == [1.0, 0.0]  # saturated in float64, but never NaN


# ---------------------------------------------------------------- priors
def test_base_rate_prior_is_k_over_n() -> None:
    # n = 4, k = 1: p = 1/4, log-odds log(1/3).
    assert initial_log_odds(4, k=1) == pytest.approx([math.log(1 / 3)] * 4)
    # n = 10, k = 2: p = 1/5, log-odds log(1/4).
    assert initial_log_odds(10, k=2, prior="base-rate") == pytest.approx([math.log(1 / 4)] * 10)
    # k/n above 1/2 is capped at 1/2 (log-odds 0): e.g. k = 3 of n = 4.
    assert initial_log_odds(4, k=3).tolist() == [0.0] * 4
    # k > n (fewer documents than wanted) also starts at 1/2.
    assert initial_log_odds(2, k=5).tolist() == [0.0, 0.0]


def test_uniform_prior_is_one_half() -> None:
    assert initial_log_odds(5, k=1, prior="uniform").tolist() == [0.0] * 5


def test_no_documents_gives_an_empty_prior() -> None:
    for prior in ("base-rate", "uniform"):
        out = initial_log_odds(0, k=1, prior=prior)  # type: ignore[arg-type]
        assert out.shape == (0,)


def test_explicit_prior_probabilities_and_log_odds() -> None:
    # p = 0.2, 0.5, 0.9 -> log-odds log(1/4), 0, log 9; they override `prior`.
    out = initial_log_odds(3, k=1, prior="uniform", prior_probs=[0.2, 0.5, 0.9])
    assert out == pytest.approx([math.log(1 / 4), 0.0, math.log(9)], abs=1e-12)
    src = np.array([1.5, -2.0])
    lo = initial_log_odds(2, prior_log_odds=src)
    assert lo.tolist() == [1.5, -2.0]
    lo[0] = 99.0
    assert src[0] == 1.5  # the caller's array is copied, never aliased


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"prior_probs": [0.1, 0.2], "prior_log_odds": [0.0, 0.0]}, "not both"),
        ({"prior_probs": [0.1, 0.2, 0.3]}, r"shape \(2,\)"),
        # The value may print as ``0.0`` or numpy 2's ``np.float64(0.0)``.
        ({"prior_probs": [0.1, 0.0]}, r"prior_probs\[1\] = (np\.float64\()?0\.0"),
        ({"prior_probs": [1.0, 0.5]}, r"prior_probs\[0\] = (np\.float64\()?1\.0"),
        ({"prior_probs": [0.5, float("nan")]}, r"prior_probs\[1\] = (np\.float64\()?nan"),
        ({"prior_log_odds": [0.0]}, r"shape \(2,\)"),
        ({"prior_log_odds": [0.0, float("inf")]}, r"prior_log_odds\[1\] = (np\.float64\()?inf"),
        ({"prior_log_odds": [float("nan"), 0.0]}, r"prior_log_odds\[0\] = (np\.float64\()?nan"),
        ({"prior": "flat"}, "'flat'"),
    ],
)
def test_prior_validation_names_the_bad_value(kwargs: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        initial_log_odds(2, k=1, **kwargs)


def test_negative_n_is_refused() -> None:
    with pytest.raises(ValueError, match="-1"):
        initial_log_odds(-1)


def test_panner_passes_prior_errors_through() -> None:
    profile = DetectorProfile(n_positions=3, tpr=TPR, fpr=FPR)
    panner = GoldPanner(ScriptedReader([()]), profile=profile, rounds=1, prompts_per_round=1)
    with pytest.raises(ValueError, match=r"prior_probs\[0\]"):
        panner.run("q", ["a", "b"], prior_probs=[0.0, 0.5])


# ---------------------------------------------------------------- stability
def test_sigmoid_is_stable_at_extremes() -> None:
    x = np.array([-1000.0, -745.0, -40.0, 0.0, 40.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = sigmoid(x)
    assert not np.any(np.isnan(p))
    assert p[0] == 0.0  # exp(-1000) underflows to exactly 0
    assert p[1] == pytest.approx(math.exp(-745.0), rel=1e-6) and p[1] > 0.0  # subnormal, not 0
    assert p[2] == pytest.approx(math.exp(-40.0) / (1 + math.exp(-40.0)), rel=1e-12)
    assert p[3] == 0.5
    assert p[4] == pytest.approx(1.0 / (1.0 + math.exp(-40.0)), rel=1e-15)
    assert p[5] == 1.0
    assert sigmoid(np.zeros((2, 3))).shape == (2, 3)


def test_logit_inverts_sigmoid_and_is_stable_for_tiny_probabilities() -> None:
    # Above x ~ 10 the round trip loses digits because 1 - p cancels in float64; that
    # is a property of representing p, not of logit, so the check stops there.
    x = np.linspace(-30, 10, 81)
    assert logit(sigmoid(x)) == pytest.approx(x, abs=1e-9)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        lo = logit(np.array([1e-300, 0.5, 1 - 1e-12]))
    assert lo[0] == pytest.approx(math.log(1e-300), rel=1e-12)
    assert lo[1] == 0.0
    assert lo[2] == pytest.approx(math.log((1 - 1e-12) / 1e-12), rel=1e-4)


def test_binary_entropy_equals_the_textbook_formula() -> None:
    x = np.linspace(-20, 20, 81)
    p = 1.0 / (1.0 + np.exp(-x))
    textbook = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    assert binary_entropy(x) == pytest.approx(textbook, abs=1e-9)
    assert binary_entropy(np.array([0.0]))[0] == pytest.approx(math.log(2), rel=1e-15)
    # Symmetric in log-odds and decreasing in |log-odds|.
    assert binary_entropy(x) == pytest.approx(binary_entropy(-x), abs=0)
    half = binary_entropy(x[40:])
    assert np.all(np.diff(half) < 0)


def test_binary_entropy_is_finite_at_extremes() -> None:
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h = binary_entropy(np.array([-1000.0, 1000.0, -1e308, 1e308]))
    assert np.all(np.isfinite(h))
    assert h.tolist() == [0.0, 0.0, 0.0, 0.0]


# ------------------------------------------------------------ stop rules: numbers in, decision out
def test_selected_confidence_is_the_mean_posterior_of_the_top_k() -> None:
    lo = np.array([[0.0, math.log(3.0), math.log(9.0)]])  # posteriors 0.5, 0.75, 0.9
    assert selected_confidence(lo, 2)[0] == pytest.approx((0.75 + 0.9) / 2)


def test_selected_confidence_with_k_above_n_averages_everything() -> None:
    lo = np.array([0.0, math.log(3.0)])
    assert float(selected_confidence(lo, 5)) == pytest.approx(0.625)


def test_threshold_waits_for_min_rounds() -> None:
    lo = np.array([[math.log(9.0), 0.0]])  # top posterior 0.9
    assert not threshold_reached(lo, k=1, stop_at=0.8, done=1, min_rounds=2)[0]
    assert threshold_reached(lo, k=1, stop_at=0.8, done=2, min_rounds=2)[0]


def test_threshold_is_per_trial() -> None:
    lo = np.array([[math.log(9.0)], [0.0]])
    assert threshold_reached(lo, k=1, stop_at=0.8, done=1, min_rounds=1).tolist() == [True, False]


def test_call_budget_counts_the_planned_prompts() -> None:
    assert call_budget_exceeded(3, 2, 4)
    assert not call_budget_exceeded(3, 1, 4)
    assert not call_budget_exceeded(30, 1, None)


def test_token_budget_extrapolates_tokens_per_shown_document() -> None:
    # 100 tokens for 10 shown documents: 10 per document; 5 more -> 150.
    assert token_budget_exceeded(100, 10, 5, 149)
    assert not token_budget_exceeded(100, 10, 5, 150)


def test_token_budget_never_stops_the_first_round() -> None:
    assert not token_budget_exceeded(0, 0, 100, 1)


def test_gain_rule_needs_min_rounds_and_a_small_gain() -> None:
    assert gain_too_small(0.001, min_gain=0.005, done=1, min_rounds=1)
    assert not gain_too_small(0.001, min_gain=0.005, done=0, min_rounds=1)
    assert not gain_too_small(0.01, min_gain=0.005, done=3, min_rounds=1)
    assert not gain_too_small(0.0, min_gain=None, done=3, min_rounds=1)


def test_rounds_done() -> None:
    assert rounds_done(4, 4)
    assert not rounds_done(3, 4)
