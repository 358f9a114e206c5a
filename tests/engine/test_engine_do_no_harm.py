"""Do no harm: a model that cites nothing must not bury the retriever's best documents.

Silence is evidence as strong as the profile says (issue 42): a reader whose labelled
traces measure it silent in most replies (``silent_rate``) weighs each empty reply little,
while the default rate 0.1 (a reader that usually answers) reads silence as evidence that
what it was shown is not relevant."""

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
# The embedded model on NQ cites nothing: labelled traces measure nearly every reply empty
# whatever the prompt holds (silent_rate in [0, 1): 0.9).
SILENT_RATE = 0.9
MEASURED = PROFILE.model_copy(update={"silent_rate": SILENT_RATE})
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
    res = GoldPanner(Silent(), MEASURED, rounds=rounds, rng=0, **options).run("q", DOCS, prior_probs=PRIOR)
    return res.ranking


def test_the_paper_update_buries_the_retrievers_best_documents() -> None:
    # The finding of issue 11: every empty round pushes down whatever sits at the
    # strongest positions, i.e. the retriever's top documents.
    paper = PanningConfig.paper().to_dict()
    paper.pop("rounds")
    assert 0 not in _run(3, **paper)[:3].tolist()


def test_three_silent_prompts_keep_the_retrievers_top_three() -> None:
    assert _run(3, prompts_per_round=1)[:3].tolist() == [0, 1, 2]


def test_the_default_rounds_of_silence_keep_the_retrievers_top_four() -> None:
    # 2 rounds x 3 prompts: six empty replies, each weighed at the measured silent rate
    assert _run(PanningConfig().rounds)[:4].tolist() == [0, 1, 2, 3]


def test_by_default_eight_silent_rounds_keep_the_retrievers_top_two() -> None:
    assert _run(8)[:2].tolist() == [0, 1]


def test_skip_leaves_beliefs_untouched_by_empty_prompts() -> None:
    res = GoldPanner(Silent(), PROFILE, rounds=4, rng=0, empty_prompts="skip", prompts_per_round=1).run(
        "q", DOCS, prior_probs=PRIOR
    )
    assert res.log_odds.tolist() == res.prior_log_odds.tolist()


def test_mixture_by_hand_for_one_empty_prompt() -> None:
    # Two documents, rates t=(0.8, 0.4), f=(0.1, 0.2), plain likelihood, a reply silent
    # with pi = silent_rate = 0.1 whatever the prompt holds. D = 0.9 * 0.8 = 0.72 (no shown
    # document cited when none is relevant). If document 0 is relevant the prompt is empty
    # with (1-0.8) * 0.8 = 0.16; if document 1: 0.9 * 0.6 = 0.54. Document 0 gets
    # log((0.1 + 0.9 * 0.16) / (0.1 + 0.9 * 0.72)) = log(0.244 / 0.748) = -1.120,
    # document 1 log(0.586 / 0.748) = -0.244.
    cfg = PanningConfig(
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
    want = [math.log(0.244 / 0.748), math.log(0.586 / 0.748)]
    assert st.log_odds[0].tolist() == pytest.approx(want)
    assert want == pytest.approx([-1.120, -0.244], abs=1e-3)
    # pi is the profile's, not estimated from this question's replies: a second empty
    # prompt weighs exactly as much as the first
    observe_round(st, np.array([[0, 1]]), np.array([2]), np.zeros((1, 2), bool), config=cfg, geometry=geo)
    assert st.log_odds[0].tolist() == pytest.approx([2 * w for w in want])


def test_mixture_leaves_prompts_with_citations_to_the_usual_update() -> None:
    cfg = PanningConfig(
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
    cfg = PanningConfig(robust=False, adapt_level=True, empty_prompts="skip", false_leads=0.0, blind_rate=0.0)
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

    # Measured (4,000 trials, rng=1): paper update 0.233; the mixture at this reader's
    # measured silent rate 0.9: 0.919; at the default 0.1 (a reader that usually answers,
    # whose silence is evidence): 0.695; retriever 0.95.
    assert top3(PanningConfig.paper()) < 0.45
    assert top3(PanningConfig(silent_rate=SILENT_RATE)) > 0.85
    assert top3(PanningConfig()) < top3(PanningConfig(silent_rate=SILENT_RATE))
