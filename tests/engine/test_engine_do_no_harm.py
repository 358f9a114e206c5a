"""Do no harm: a model that cites nothing must not bury the retriever's best documents.

Silence is evidence (issue 42), and since issue 48 an empty reply weighs every document it
showed alike: it says that nothing the reader recognised was shown, not where. Read per
position, it sank whatever sat where the reader reads best, i.e. the retriever's best
documents under the ``belief`` placement. Every test here runs at the default silent rate
and at every bundled profile's, none picked for the test."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import (
    DetectorProfile,
    GoldPanner,
    PanningConfig,
    Reading,
    bundled_profiles,
    simulate,
)
from gold_panning_integrations.engine.config import DEFAULT_SILENT_RATE
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.rounds import BatchState, DecisionRates, observe_round

PROFILE = DetectorProfile.bundled("smollm2-135m-kv")
DOCS = [f"d{i}" for i in range(10)]
SILENT_RATES = sorted(
    {DEFAULT_SILENT_RATE}
    | {r for r in (DetectorProfile.bundled(name).silent_rate for name in bundled_profiles()) if r is not None}
)
"""The default and every bundled profile's ``silent_rate`` (0.1 and 0.0 today)."""
PRIOR = rank_prior_probs(
    10, k=1, top10_recall=0.5, head_decay=0.85, head_floor=0.0
)  # a weak prior: consecutive ranks 1.18 apart in odds


class Silent:
    """A reader that cites nothing."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading()


def _run(rounds: int, silent_rate: float, **options: object):  # type: ignore[no-untyped-def]
    profile = PROFILE.model_copy(update={"silent_rate": silent_rate})
    return GoldPanner(Silent(), profile, rounds=rounds, rng=0, **options).run("q", DOCS, prior_probs=PRIOR)


def test_the_silent_rates_tested_are_the_default_and_the_bundled_ones() -> None:
    assert SILENT_RATES == [0.0, 0.1]


def test_the_paper_update_buries_the_retrievers_best_documents() -> None:
    # The finding of issue 11: every empty round pushes down whatever sits at the
    # strongest positions, i.e. the retriever's top documents.
    paper = PanningConfig.paper().to_dict()
    for name in ("rounds", "silent_rate"):
        paper.pop(name)
    assert 0 not in _run(3, 0.1, **paper).ranking[:3].tolist()


@pytest.mark.parametrize("silent_rate", SILENT_RATES)
def test_three_silent_prompts_keep_the_retrievers_top_three_and_raise_p_none(silent_rate: float) -> None:
    res = _run(3, silent_rate, prompts_per_round=1)
    assert res.ranking[:3].tolist() == [0, 1, 2]
    assert res.p_none > float(np.prod(1.0 - PRIOR))


@pytest.mark.parametrize("silent_rate", SILENT_RATES)
def test_the_default_rounds_of_silence_keep_the_retrievers_top_four_and_raise_p_none(
    silent_rate: float,
) -> None:
    # 2 rounds x 3 prompts: six empty replies
    res = _run(PanningConfig().rounds, silent_rate)
    assert res.ranking[:4].tolist() == [0, 1, 2, 3]
    assert res.p_none > float(np.prod(1.0 - PRIOR))


@pytest.mark.parametrize("silent_rate", SILENT_RATES)
def test_eight_silent_rounds_keep_the_retrievers_whole_order(silent_rate: float) -> None:
    # every document was shown in every prompt: each took the same evidence
    assert _run(8, silent_rate).ranking.tolist() == list(range(10))


def test_skip_leaves_beliefs_untouched_by_empty_prompts() -> None:
    res = GoldPanner(Silent(), PROFILE, rounds=4, rng=0, empty_prompts="skip", prompts_per_round=1).run(
        "q", DOCS, prior_probs=PRIOR
    )
    assert res.log_odds.tolist() == res.prior_log_odds.tolist()


def test_mixture_by_hand_for_one_empty_prompt() -> None:
    # Two documents, rates t=(0.8, 0.4), f=(0.1, 0.2), plain likelihood, a reply silent
    # with pi = silent_rate = 0.1 whatever the prompt holds. D = 0.9 * 0.8 = 0.72 (no shown
    # document cited when none is relevant). An empty reply says nothing relevant was
    # recognised, not where: both documents take the prompt's mean ratio u = ((1-0.8)/(1-0.1)
    # + (1-0.4)/(1-0.2)) / 2 = (0.2222 + 0.75) / 2 = 0.4861, so each gets
    # log((0.1 + 0.9 * 0.4861 * 0.72) / (0.1 + 0.9 * 0.72)) = log(0.41500 / 0.748) = -0.589.
    # (Read per position, the rule before 0.6, document 0 would get -1.120 and document 1 -0.244:
    # the document at the better position sinks.)
    cfg = PanningConfig(
        content_free=0.0,
        robust=False,
        adapt_level=False,
        empty_prompts="mixture",
        silent_rate=0.1,
        false_leads=0.0,
        blind_rate=0.0,
    )
    geo = DecisionRates([0.8, 0.4], [0.1, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.zeros((1, 2), bool), config=cfg, geometry=geo)
    u = (0.2 / 0.9 + 0.6 / 0.8) / 2
    want = [math.log((0.1 + 0.9 * u * 0.72) / (0.1 + 0.9 * 0.72))] * 2
    assert st.log_odds[0].tolist() == pytest.approx(want)
    assert want == pytest.approx([-0.589, -0.589], abs=1e-3)
    # pi is the profile's, not estimated from this question's replies: a second empty
    # prompt weighs exactly as much as the first
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.zeros((1, 2), bool), config=cfg, geometry=geo)
    assert st.log_odds[0].tolist() == pytest.approx([2 * w for w in want])


def test_mixture_leaves_prompts_with_citations_to_the_usual_update() -> None:
    cfg = PanningConfig(
        content_free=0.0,
        robust=False,
        adapt_level=False,
        empty_prompts="mixture",
        silent_rate=0.1,
        false_leads=0.0,
        blind_rate=0.0,
    )
    geo = DecisionRates([0.8, 0.4], [0.1, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.array([[True, False]]), config=cfg, geometry=geo)
    assert st.log_odds[0].tolist() == pytest.approx([math.log(8.0), math.log(0.6 / 0.8)])


def test_level_adaptation_keeps_citation_ratios_and_softens_misses() -> None:
    # Rates t=(0.9, 0.9), f=(0.5, 0.5); beliefs 1/2 each (rescaled to the prior mass 1).
    # A silent prompt first: not counted (an empty reply is silent_rate's to explain), the
    # level stays 1. Then a prompt citing document 0: predicted 0.5*(0.9+0.5) * 2 = 1.4,
    # observed 1 -> level (1+1)/(1.4+1) = 5/6 for this prompt's rates: the citation ratio
    # 0.9/0.5 is kept, the miss softens from log(0.1/0.5) to log((1-0.75)/(1-0.4167)).
    cfg = PanningConfig(
        content_free=0.0,
        robust=False,
        adapt_level=True,
        empty_prompts="skip",
        false_leads=0.0,
        blind_rate=0.0,
    )
    geo = DecisionRates([0.9, 0.9], [0.5, 0.5], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    pos, size = np.array([[0, 1]]), np.array([2])
    observe_round(st, pos, size, np.zeros((1, 2), bool), config=cfg, geometry=geo)  # skipped, not counted
    assert st.level[0] == 1.0
    assert st.log_odds[0].tolist() == [0.0, 0.0]
    observe_round(st, pos, size, np.array([[True, False]]), config=cfg, geometry=geo)
    s = 2 / 2.4
    assert st.level[0] == pytest.approx(s)
    assert st.log_odds[0].tolist() == pytest.approx([math.log(1.8), math.log((1 - 0.9 * s) / (1 - 0.5 * s))])
    assert math.log((1 - 0.9 * s) / (1 - 0.5 * s)) > math.log(0.1 / 0.5)  # softer than unadapted


def test_simulated_silent_model_keeps_the_retrievers_top_three() -> None:
    # Retriever: the needle is first with 0.8, second 0.1, third 0.05 (top-3 recall 0.95).
    needle = np.array([0.80, 0.10, 0.05] + [0.05 / 7] * 7)
    t, f = np.asarray(PROFILE.tpr), np.asarray(PROFILE.fpr)

    def top3(cfg: PanningConfig) -> float:
        r = simulate(
            0.05 * t,
            0.05 * f,
            n=10,
            rounds=3,
            trials=1000,
            policies=("belief",),
            rng=0,
            decision_tpr=t,
            decision_fpr=f,
            config=cfg,
            prior_probs=PRIOR,
            needle_probs=needle,
            recall_at=3,
        )
        assert r.policies["belief"].recall is not None
        return float(r.policies["belief"].recall[-1])

    # The paper's update sinks the needle at the strongest positions; since issue 48 an
    # empty reply weighs every shown document alike, at every silent rate tested.
    assert top3(PanningConfig.paper()) < 0.45
    for rate in SILENT_RATES:
        assert top3(PanningConfig(silent_rate=rate)) > 0.9
