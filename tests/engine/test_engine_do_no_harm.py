"""Do no harm: a model that cites nothing must not bury the retriever's best documents."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading, simulate
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.rounds import BatchState, DecisionRates, observe_round

PROFILE = DetectorProfile.bundled("smollm2-135m-kv")
DOCS = [f"d{i}" for i in range(10)]
PRIOR = rank_prior_probs(
    10, k=1, top10_recall=0.5, head_decay=0.85, head_floor=0.0
)  # the 0.2 default shape: weak


class Silent:
    """The embedded model on NQ, as measured: it cites nothing."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading()


def _run(rounds: int, **options: object) -> np.ndarray:
    res = GoldPanner(Silent(), PROFILE, rounds=rounds, rng=0, **options).run("q", DOCS, prior_probs=PRIOR)
    return res.ranking


def test_the_paper_update_buries_the_retrievers_best_documents() -> None:
    # The finding of issue 11: every empty round pushes down whatever sits at the
    # strongest positions, i.e. the retriever's top documents.
    paper = PanningConfig.paper().to_dict()
    paper.pop("rounds")
    assert 0 not in _run(3, **paper)[:3].tolist()


def test_three_silent_prompts_keep_the_retrievers_top_three() -> None:
    assert _run(3, prompts_per_round=1)[:3].tolist() == [0, 1, 2]


def test_the_default_rounds_of_silence_keep_the_retrievers_top_two() -> None:
    # 2 rounds x 3 prompts: six empty replies swap the retriever's third and fourth
    assert _run(PanningConfig().rounds)[:4].tolist() == [0, 1, 3, 2]


def test_by_default_eight_silent_rounds_keep_the_retrievers_top_two() -> None:
    assert _run(8)[:2].tolist() == [0, 1]


def test_skip_leaves_beliefs_untouched_by_empty_prompts() -> None:
    res = GoldPanner(Silent(), PROFILE, rounds=4, rng=0, empty_prompts="skip", prompts_per_round=1).run(
        "q", DOCS, prior_probs=PRIOR
    )
    assert res.log_odds.tolist() == res.prior_log_odds.tolist()


def test_mixture_by_hand_for_one_empty_prompt() -> None:
    # Two documents, beliefs 1/2 each (k=1: rescaled to 1/2 each), rates t=(0.8, 0.4),
    # f=(0.1, 0.2), plain likelihood. D = 0.9 * 0.8 = 0.72. If document 0 is relevant the
    # prompt is empty with (1-0.8) * 0.8 = 0.16; if document 1: 0.9 * 0.6 = 0.54.
    # Expected empty = 0.5 * 0.16 + 0.5 * 0.54 = 0.35; seen 1 -> pi = 0.65 / (1 - 0.35 + 1).
    cfg = PanningConfig(
        robust=False, adapt_level=False, empty_prompts="mixture", false_leads=0.0, blind_rate=0.0
    )
    geo = DecisionRates([0.8, 0.4], [0.1, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.zeros((1, 2), bool), config=cfg, geometry=geo)
    pi = 0.65 / 1.65
    assert st.silence[0] == pytest.approx(pi)
    want0 = math.log(pi + (1 - pi) * 0.16) - math.log(pi + (1 - pi) * 0.72)
    want1 = math.log(pi + (1 - pi) * 0.54) - math.log(pi + (1 - pi) * 0.72)
    assert st.log_odds[0].tolist() == pytest.approx([want0, want1])


def test_mixture_leaves_prompts_with_citations_to_the_usual_update() -> None:
    cfg = PanningConfig(
        robust=False, adapt_level=False, empty_prompts="mixture", false_leads=0.0, blind_rate=0.0
    )
    geo = DecisionRates([0.8, 0.4], [0.1, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.array([[True, False]]), config=cfg, geometry=geo)
    assert st.log_odds[0].tolist() == pytest.approx([math.log(8.0), math.log(0.6 / 0.8)])


def test_level_adaptation_keeps_citation_ratios_and_softens_misses() -> None:
    # Predicted citations 0.5*(0.8+0.1) + 0.5*(0.4+0.2) = 0.75 (beliefs 1/2 rescaled to
    # k=1); observed 1 -> level min(1, 2/1.75) = 1: no change. Silent prompt first: observed
    # 0, predicted 0.75 -> level 1/1.75 for the second prompt's rates.
    cfg = PanningConfig(robust=False, adapt_level=True, empty_prompts="skip", false_leads=0.0, blind_rate=0.0)
    geo = DecisionRates([0.8, 0.4], [0.1, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 2)))
    pos, size = np.array([[0, 1]]), np.array([2])
    observe_round(st, pos, size, np.zeros((1, 2), bool), config=cfg, geometry=geo)  # skipped, but counted
    assert st.level[0] == pytest.approx(1 / 1.75)
    observe_round(st, pos, size, np.array([[True, False]]), config=cfg, geometry=geo)
    # second prompt: predicted 0.75 again, observed 1 -> level (1+1)/(1.5+1) = 0.8
    s = 0.8
    assert st.log_odds[0].tolist() == pytest.approx([math.log(8.0), math.log((1 - 0.4 * s) / (1 - 0.2 * s))])


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

    # Measured (4,000 trials): paper update 0.318, default 0.909, retriever 0.95.
    assert top3(PanningConfig.paper()) < 0.45
    assert top3(PanningConfig()) > 0.85
