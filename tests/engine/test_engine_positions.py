"""Greedy matching of documents to positions, the asymmetric cases, PSC tie-breaking."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from doubles import GoldPanner, RecordingReader
from doubles import flat_positions as _flat

from gold_panning_integrations import DetectorProfile, Reading
from gold_panning_integrations.engine import (
    assign,
    diagnosticity,
    log_likelihood_ratios,
    position_order,
    shown_order,
    vote_ranking,
)


# ------------------------------------------------------------ position order
def test_positions_are_ordered_by_absolute_diagnosticity_stably() -> None:
    tpr = [0.5, 0.9, 0.3, 0.9, 0.5, 0.1]
    fpr = [0.1, 0.1, 0.3, 0.1, 0.5, 0.7]
    # |TPR - FPR| = 0.4, 0.8, 0.0, 0.8, 0.0, 0.6 (position 5 has TPR < FPR: still
    # diagnostic). Descending, ties in prompt order: 1, 3, 5, 0, 2, 4.
    assert diagnosticity(tpr, fpr) == pytest.approx([0.4, 0.8, 0.0, 0.8, 0.0, 0.6])
    assert position_order(tpr, fpr).tolist() == [1, 3, 5, 0, 2, 4]


def test_all_equal_positions_keep_prompt_order() -> None:
    assert position_order([0.5] * 4, [0.1] * 4).tolist() == [0, 1, 2, 3]


# ------------------------------------------------------------ greedy matching
def test_greedy_matching_pinned_by_hand() -> None:
    scores = np.array([0.2, 0.9, 0.5, 0.9])
    pos_order = np.array([2, 0, 3, 1])
    # Documents by score, ties in input order: 1 (0.9), 3 (0.9), 2 (0.5), 0 (0.2).
    # They take positions 2, 0, 3, 1 in turn: doc1 -> 2, doc3 -> 0, doc2 -> 3, doc0 -> 1.
    assert assign(scores, pos_order).tolist() == [1, 2, 3, 0]


def test_more_documents_than_positions_puts_the_lowest_on_dummy_positions() -> None:
    scores = np.array([0.1, 0.7, 0.3, 0.9, 0.3])
    pos_order = np.array([1, 0, 2])
    # By score: doc3, doc1, doc2, doc4 (tie with doc2, later index), doc0.
    # doc3 -> 1, doc1 -> 0, doc2 -> 2, doc4 and doc0 -> dummy (-1).
    assert assign(scores, pos_order).tolist() == [-1, 0, 2, 1, -1]


def test_more_positions_than_documents_uses_the_most_diagnostic_positions() -> None:
    scores = np.array([0.2, 0.8])
    pos_order = np.array([3, 0, 4, 1, 2])
    # Two documents: doc1 -> 3, doc0 -> 0; positions 4, 1, 2 are left to dummy
    # documents and never rendered.
    assert assign(scores, pos_order).tolist() == [0, 3]


def test_assign_works_on_batches() -> None:
    scores = np.array([[0.1, 0.5, 0.9], [0.9, 0.5, 0.1]])
    pos_order = np.array([2, 0, 1])
    assert assign(scores, pos_order).tolist() == [[1, 0, 2], [2, 0, 1]]


def test_shown_order_is_by_ascending_position() -> None:
    # doc0 at 2, doc1 left out, doc2 at 0, doc3 at 1 -> prompt: doc2, doc3, doc0.
    assert shown_order(np.array([2, -1, 0, 1])).tolist() == [2, 3, 0]
    assert shown_order(np.array([-1, -1])).tolist() == []


# ------------------------------------------------------------ asymmetric cases in the panner
def test_panner_more_documents_than_budget_leaves_the_lowest_out_unchanged() -> None:
    # Profile of 2 positions after resampling; TPR 0.8/0.4, FPR 0.2 -> position 0 first.
    profile = DetectorProfile(n_positions=2, tpr=[0.8, 0.4], fpr=[0.2, 0.2])
    prior = np.array([0.0, 2.0, -1.0, 1.0])
    reader = RecordingReader(cite=(0,))
    res = GoldPanner(reader, profile=profile, rounds=1, max_docs_per_prompt=2).run(
        "q", ["a", "b", "c", "d"], prior_log_odds=prior
    )
    # By belief: doc1 (2.0) -> position 0, doc3 (1.0) -> position 1; docs 0 and 2 left out.
    assert reader.seen == [["b", "d"]]
    trace = res.rounds[0]
    assert trace.shown == (1, 3)
    assert _flat(trace.positions) == (0, 1)
    assert trace.cited == (1,)
    # doc1 cited at 0: + log 4; doc3 missed at 1: + log(0.6/0.8); the rest untouched.
    assert res.log_odds == pytest.approx([0.0, 2.0 + math.log(4), -1.0, 1.0 + math.log(0.6 / 0.8)], abs=1e-12)
    assert res.log_odds[0] == 0.0 and res.log_odds[2] == -1.0  # exactly, not approximately


def test_panner_fewer_documents_than_positions_takes_the_most_diagnostic_ones() -> None:
    # Five positions with |TPR - FPR| = 0.2, 0.8, 0.4, 0.7, 0.1 -> order 1, 3, 2, 0, 4.
    tpr = [0.3, 0.9, 0.5, 0.8, 0.2]
    fpr = [0.1] * 5
    profile = DetectorProfile(n_positions=5, tpr=tpr, fpr=fpr)
    reader = RecordingReader(cite=(0,))
    res = GoldPanner(reader, profile=profile, rounds=1, resample_profile=False).run(
        "q", ["a", "b"], prior_log_odds=[0.0, 1.0]
    )
    # doc1 (higher belief) -> position 1, doc0 -> position 3: prompt order b, a.
    # Only the two real documents are rendered; dummies fill positions 0, 2, 4.
    assert reader.seen == [["b", "a"]]
    assert res.rounds[0].shown == (1, 0)
    assert _flat(res.rounds[0].positions) == (1, 3)
    llr_c, llr_m = log_likelihood_ratios(tpr, fpr)
    # Prompt position 0 is doc1 at profile position 1: cited, + log 9.
    # doc0 at profile position 3 missed: + log(0.2/0.9).
    assert res.log_odds == pytest.approx([llr_m[3], 1.0 + llr_c[1]], abs=1e-12)
    assert llr_c[1] == pytest.approx(math.log(9))


def test_panner_refuses_a_too_short_profile_without_resampling() -> None:
    profile = DetectorProfile(n_positions=2, tpr=[0.8, 0.4], fpr=[0.2, 0.2])
    panner = GoldPanner(RecordingReader(), profile=profile, rounds=1, resample_profile=False)
    with pytest.raises(ValueError, match="resample_profile"):
        panner.run("q", ["a", "b", "c"])


# ------------------------------------------------------------ PSC tie-breaking
def test_vote_ranking_never_reorders_different_counts() -> None:
    counts = np.array([3, 1, 2, 0, 5])
    for seed in range(200):
        assert vote_ranking(counts, rng=np.random.default_rng(seed)).tolist() == [4, 0, 2, 1, 3]


def test_vote_ranking_breaks_ties_uniformly() -> None:
    counts = np.array([1, 1, 1, 0])
    first: Counter[int] = Counter()
    trials = 3000
    for seed in range(trials):
        r = vote_ranking(counts, rng=np.random.default_rng(seed)).tolist()
        assert r[3] == 3  # the uncited document is always last
        assert sorted(r[:3]) == [0, 1, 2]
        first[r[0]] += 1
    # Each tied document should come first 1/3 of the time: 1000 expected, standard
    # deviation sqrt(3000 * 1/3 * 2/3) = 25.8. A band of +-150 is almost 6 sigma.
    for doc in (0, 1, 2):
        assert 850 <= first[doc] <= 1150, first


def test_vote_ranking_ties_are_uniform_over_full_orders() -> None:
    # Three tied documents have 6 orders; each should appear ~1/6 of the time.
    orders: Counter[tuple[int, ...]] = Counter()
    for seed in range(3000):
        orders[tuple(vote_ranking(np.array([2, 2, 2]), rng=np.random.default_rng(seed)).tolist())] += 1
    assert len(orders) == 6
    # Expected 500 each, sd sqrt(3000/6*5/6) = 20.4; +-120 is about 6 sigma.
    assert all(380 <= c <= 620 for c in orders.values()), orders


def test_vote_ranking_is_deterministic_for_a_seed() -> None:
    counts = np.zeros(20)
    a = vote_ranking(counts, rng=np.random.default_rng(42))
    b = vote_ranking(counts, rng=np.random.default_rng(42))
    c = vote_ranking(counts, rng=np.random.default_rng(43))
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()  # 20! orders: a collision would be a broken rng


def test_vote_ranking_batches_rows_independently() -> None:
    counts = np.array([[0, 2, 1], [5, 0, 0]])
    r = vote_ranking(counts, rng=np.random.default_rng(0))
    assert r.shape == (2, 3)
    assert r[0].tolist() == [1, 2, 0]
    assert r[1, 0] == 0 and sorted(r[1, 1:].tolist()) == [1, 2]


def test_psc_panner_ranks_by_citation_count() -> None:
    """The ``random`` policy ranks by votes, not by log-odds.

    A reader that always cites document "b" and, in one round only, also "c": b has
    the most votes and is first; c second; the uncited are ordered by a tie-break.
    """

    class ByText:
        def __init__(self) -> None:
            self.calls = 0

        def read(self, question: str, documents: Sequence[str]) -> Reading:
            self.calls += 1
            want = {"b"} | ({"c"} if self.calls == 1 else set())
            return Reading(cited=tuple(i for i, d in enumerate(documents) if d in want))

    profile = DetectorProfile(n_positions=4, tpr=[0.9, 0.5, 0.5, 0.8], fpr=[0.1] * 4)
    res = GoldPanner(ByText(), profile=profile, rounds=4, policy="random", rng=3, k=1).run(
        "q", ["a", "b", "c", "d"]
    )
    assert res.citation_counts.tolist() == [0, 4, 1, 0]
    assert res.ranking[:2].tolist() == [1, 2]
    assert sorted(res.ranking[2:].tolist()) == [0, 3]
    assert res.selected.tolist() == [1]
