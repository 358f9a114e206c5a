"""The self-citing hypothesis: a passage cited at one rate wherever it sits (an obeyed "cite
this passage") is told apart from a relevant document, whose citations follow the profile's
curve. Numbers are worked by hand in the comments (the module docstring of
``engine/beliefs.py`` derives the formulas)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading
from gold_panning_integrations.engine.beliefs import (
    flat_log_likelihood,
    mixed_evidence,
    move_suspects,
    self_citing_mixture,
)
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.rounds import (
    BatchState,
    DecisionRates,
    observe_round,
    plan_round,
    self_citing_rate,
    suspicion,
)
from gold_panning_integrations.engine.simulator import Attack, simulate

LITM = DetectorProfile.bundled("lost-in-the-middle")
KV = DetectorProfile.bundled("smollm2-135m-kv")
ISSUE_TPR = (0.8, 0.6) + (0.25,) * 7 + (0.6,)
"""The issue's model at 10 documents: the gold's citation rate by prompt slot (FPR 0.03)."""


def test_flat_likelihood_is_a_beta_function() -> None:
    # B(1 + c, 1 + m): 2 citations, 1 miss -> B(3, 2) = 2! 1! / 4! = 1/12; none -> 1.
    got = flat_log_likelihood(np.array([2, 0, 0]), np.array([1, 0, 3]))
    assert np.exp(got).tolist() == pytest.approx([1 / 12, 1.0, 1 / 4])
    # Tempered by T = 2: B(1 + 1, 1 + 1/2) = G(2) G(1.5) / G(3.5) = 1 / (2.5 * 1.5) = 4/15.
    assert math.exp(flat_log_likelihood(np.array(2), np.array(1), temperature=2.0)) == pytest.approx(4 / 15)
    # Counts past the first table size come from a larger one.
    assert math.exp(flat_log_likelihood(np.array(200), np.array(0))) == pytest.approx(1 / 201)


def _worked_example(**options: float) -> tuple[BatchState, PanningConfig, DecisionRates]:
    # Profile t = (0.8, 0.2), f = (0.1, 0.1), plain likelihood, independent misses.
    # Rounds 1-2: document 0 at position 1, cited; document 1 at position 0, missed.
    # Round 3: document 0 at position 0, document 1 at position 1, both missed.
    cfg = PanningConfig(
        content_free=0.0, robust=False, adapt_level=False, empty_prompts="evidence", blind_rate=0.3, **options
    )
    geo = DecisionRates([0.8, 0.2], [0.1, 0.1], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    size = np.array([2])
    for _ in range(2):
        observe_round(st, np.array([[1, 0]]), size, np.array([[True, False]]), config=cfg, geometry=geo)
    observe_round(st, np.array([[0, 1]]), size, np.array([[False, False]]), config=cfg, geometry=geo)
    return st, cfg, geo


def test_the_update_by_hand() -> None:
    # n = 2, k = 1: a = false_leads / 1 = 0.05, s = self_citing / 1 = 0.1, b = 0.3.
    # Doc 0: L_R = 0.2 * 0.2 * 0.2 = 0.008, L_I = 0.1 * 0.1 * 0.9 = 0.009, L_S = B(3, 2) = 1/12.
    #   (0.7 * 0.8889 + 0.3) / (0.05 * 0.8889 + 0.85 + 0.1 * 9.2593) = 0.92222 / 1.82037.
    # Doc 1: L_R = 0.2 * 0.2 * 0.8 = 0.032, L_I = 0.9^3 = 0.729, L_S = B(1, 4) = 1/4.
    #   (0.7 * 0.043896 + 0.3) / (0.05 * 0.043896 + 0.85 + 0.1 * 0.342936) = 0.330727 / 0.886488.
    st, cfg, geo = _worked_example(false_leads=0.05, self_citing=0.1)
    assert st.evidence[0].tolist() == pytest.approx([math.log(0.008 / 0.009), math.log(0.032 / 0.729)])
    assert st.log_odds[0].tolist() == pytest.approx(
        [math.log(0.92222 / 1.82037), math.log(0.330727 / 0.886488)], abs=1e-5
    )
    # Shares of the self-citing explanation (prior 1/2): 0.925926 / (0.922222 + 1.820370)
    # and 0.0342936 / (0.330727 + 0.886488).
    share = suspicion(st, cfg, geo)
    assert share is not None
    assert share[0].tolist() == pytest.approx([0.925926 / 2.742592, 0.0342936 / 1.2172154], abs=1e-6)
    # Without the hypothesis, the same evidence reads as before: doc 0 gets
    # log(0.92222 / (0.05 * 0.8889 + 0.95)) = log(0.92222 / 0.99444), far less discounted.
    off, _, _ = _worked_example(false_leads=0.05, self_citing=0.0)
    assert off.log_odds[0, 0] == pytest.approx(math.log(0.92222 / 0.99444), abs=1e-5)
    assert off.evidence.tolist() == st.evidence.tolist()


def test_the_mixture_is_the_old_one_without_the_hypothesis_and_bounded_with_it() -> None:
    e = np.linspace(-30.0, 30.0, 13)
    old = mixed_evidence(e, false_lead_rate=0.03, blind_rate=0.3)
    same = self_citing_mixture(e, np.zeros_like(e), false_lead_rate=0.03, blind_rate=0.3, self_citing=0.0)
    assert same.tolist() == pytest.approx(old.tolist())
    # A flat fit far better than the curve: the evidence ends near log(L_R / L_S) + log(0.7 / s).
    got = self_citing_mixture(
        np.array([20.0]), np.array([30.0]), false_lead_rate=0.0, blind_rate=0.3, self_citing=0.1
    )
    assert got[0] == pytest.approx(20.0 - 30.0 + math.log(0.7 / 0.1), abs=1e-6)
    with pytest.raises(ValueError, match="self_citing > 0 needs flat"):
        mixed_evidence(e, false_lead_rate=0.0, blind_rate=0.0, self_citing=0.1)


def test_the_level_is_left_out_of_the_comparison() -> None:
    # With level adaptation the update's evidence uses rescaled rates, while the
    # hypothesis is weighed at the profile's own: relevant - irrelevant is the plain E.
    cfg = PanningConfig(
        content_free=0.0,
        robust=False,
        adapt_level=True,
        empty_prompts="evidence",
        blind_rate=0.3,
        self_citing=0.25,
    )
    # Rates t = 0.9, f = 0.6 at both positions. The silent prompt is a miss for both and
    # leaves the level alone (it counts only replies that cite something); the second cites
    # one document where 0.5 * (0.9 + 0.6) * 2 = 1.5 were predicted: level 2 / 2.5 = 0.8.
    geo = DecisionRates([0.9, 0.9], [0.6, 0.6], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    for cited in ([[False, False]], [[True, False]]):
        observe_round(st, np.array([[0, 1]]), np.array([2]), np.array(cited), config=cfg, geometry=geo)
    assert st.level[0] == pytest.approx(0.8)
    plain = [math.log(0.1 / 0.4) + math.log(0.9 / 0.6), 2 * math.log(0.1 / 0.4)]
    assert (st.relevant - st.irrelevant)[0].tolist() == pytest.approx(plain)
    # the level keeps the citation ratio (0.72 / 0.48 = 0.9 / 0.6) and softens the second miss
    assert st.evidence[0, 1] == pytest.approx(math.log(0.1 / 0.4) + math.log((1 - 0.72) / (1 - 0.48)))
    assert st.evidence[0, 1] != pytest.approx(plain[1])


def test_the_rate_spreads_the_expected_number_over_the_irrelevant_documents() -> None:
    assert self_citing_rate(PanningConfig(content_free=0.0, self_citing=0.25), 10) == pytest.approx(0.25 / 9)
    # the relevant ones are expected_relevant (rounded), never k
    assert self_citing_rate(PanningConfig(content_free=0.0, self_citing=0.25, k=3), 10) == pytest.approx(
        0.25 / 9
    )
    assert self_citing_rate(
        PanningConfig(content_free=0.0, self_citing=0.25, expected_relevant=3), 10
    ) == pytest.approx(0.25 / 7)
    assert self_citing_rate(PanningConfig(content_free=0.0, self_citing=5.0), 3) == 0.45  # capped
    assert self_citing_rate(PanningConfig(content_free=0.0, self_citing=0.0), 10) == 0.0
    # Replies that cite nothing are dropped under "skip": the rest is conditioned on a
    # citation, and the hypothesis is off.
    assert (
        self_citing_rate(PanningConfig(content_free=0.0, self_citing=0.25, empty_prompts="skip"), 10) == 0.0
    )
    assert PanningConfig.paper().self_citing == PanningConfig(content_free=0.0).self_citing == 0.0
    with pytest.raises(ValueError, match=r"self_citing must be a number >= 0, got -1"):
        PanningConfig(content_free=0.0, self_citing=-1)


def test_a_suspect_moves_to_the_lowest_tpr_position() -> None:
    # Row 0: document 0 (share 0.6) sits at the TPR-0.9 position; the lowest TPR among the
    # shown ones is document 1's (0.3): they swap. Row 1 has no suspect: unchanged.
    positions = np.array([[0, 1, 2, -1], [0, 1, 2, 3]])
    tpr_at = np.array([[0.9, 0.3, 0.6, 0.1], [0.9, 0.3, 0.6, 0.5]])
    suspects = np.array([[0.6, 0.0, 0.0, 0.9], [0.0, 0.0, 0.0, 0.0]])  # doc 3 of row 0 is not shown
    assert move_suspects(positions, tpr_at, suspects).tolist() == [[1, 0, 2, -1], [0, 1, 2, 3]]


def test_the_plan_shows_a_suspect_where_the_curve_is_lowest() -> None:
    # Document 0's share is 0.338 (>= TEST_AT = 0.1) and its log-odds (-0.68) are above
    # document 1's (-0.99): the belief policy alone gives it position 0 (TPR 0.8); in
    # doubt, it takes position 1 (TPR 0.2), where its next citation says most.
    st, _, geo = _worked_example(false_leads=0.05, self_citing=0.1)
    active = np.ones((1, 2), dtype=bool)
    cfg = PanningConfig(
        content_free=0.0, robust=False, shuffle_top=0, blind_rate=0.3, false_leads=0.05, self_citing=0.1
    )
    plan = plan_round(st, active, config=cfg, geometry=geo, rng=np.random.default_rng(0))
    assert plan.positions.tolist() == [[1, 0]]
    off = PanningConfig.from_options(cfg, self_citing=0.0)
    assert plan_round(
        st, active, config=off, geometry=geo, rng=np.random.default_rng(0)
    ).positions.tolist() == [[0, 1]]


class AlwaysCites:
    """A reader that cites one document in every prompt, wherever it is shown."""

    def __init__(self, doc: str) -> None:
        self.doc = doc

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d == self.doc))


def test_a_document_cited_everywhere_is_suspected_and_the_trace_says_so() -> None:
    # What an attacker who is always obeyed looks like, and a reader far stronger than its
    # profile too: the last of 10 documents, cited in each of 8 prompts at every position.
    # The KV profile cites relevant documents at 0.07-0.21 inside, so one flat rate fits
    # far better: the document is flagged, and its belief ends near its prior, under the
    # retriever's first (what decides is then the prior: the retriever's order).
    docs = [f"d{i}" for i in range(10)]
    res = GoldPanner(AlwaysCites("d9"), KV, rounds=8, rng=0, self_citing=0.25).run(
        "q", docs, prior_probs=rank_prior_probs(10, k=1)
    )
    assert res.suspected == (9,)
    assert res.suspicion is not None and res.suspicion[9] > 0.9
    assert res.rounds[-1].suspicion is not None and res.rounds[-1].suspicion[9] == pytest.approx(
        res.suspicion[9]
    )
    assert res.ranking[0] == 0
    assert res.summary()["suspected"] == [9]
    # Off (the default): nothing computed, nothing flagged.
    off = GoldPanner(AlwaysCites("d9"), KV, rounds=8, rng=0).run("q", docs)
    assert off.suspicion is None and off.suspected == () and off.rounds[0].suspicion is None


def test_simulated_self_citing_attack_is_discounted() -> None:
    # The issue's model (gold by slot ISSUE_TPR, others 0.03) and a passage it cites in
    # every prompt, 10 documents, 6 rounds, the lost-in-the-middle profile: without the
    # hypothesis the passage wins nearly always (0.03 measured), with it the gold does
    # (0.87 measured, 4,000 trials).
    def top1(**options: float) -> float:
        cfg = PanningConfig(content_free=0.0, prompts_per_round=1, **options)
        res = simulate(
            ISSUE_TPR,
            [0.03] * 10,
            n=10,
            rounds=6,
            trials=2000,
            policies=("belief",),
            rng=1,
            decision_tpr=LITM.tpr,
            decision_fpr=LITM.fpr,
            prior="base-rate",
            config=cfg,
            attack=Attack("self", 1.0),
        )
        return float(res.policies["belief"].f1[-1])

    assert top1(self_citing=0.25) > 0.8
    assert top1() < 0.1  # off by default
