"""The document-level mixture: false leads and blind spots bound a document's total evidence.

A real reader's mistakes repeat: on the embedded model over NQ, 7 of 171 distractors drew
3 or more of 6 citations (0.4 expected if every reading were independent), and the gold
passage drew none in 10 of 19 questions. The paper's update adds the same evidence at
every repeat, so one plausible wrong passage, or one question the model cannot answer,
outvotes the retriever.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.rounds import (
    BatchState,
    DecisionRates,
    lead_rate,
    mixed_evidence,
    observe_round,
)

KV = DetectorProfile.bundled("smollm2-135m-kv")
DOCS = [f"d{i}" for i in range(10)]


def test_mixed_evidence_by_hand() -> None:
    # E = 3 log 4, a = b = 0.1: log((0.9 * 64 + 0.1) / (0.1 * 64 + 0.9)) = log(57.7 / 7.3).
    got = mixed_evidence(np.array([3 * math.log(4.0)]), false_lead_rate=0.1, blind_rate=0.1)
    assert got[0] == pytest.approx(math.log(57.7 / 7.3))


def test_mixed_evidence_is_bounded_by_the_two_rates() -> None:
    e = np.array([-1e6, -50.0, 50.0, 1e6])
    got = mixed_evidence(e, false_lead_rate=0.05, blind_rate=0.3)
    assert got[0] == pytest.approx(math.log(0.3 / 0.95))
    assert got[3] == pytest.approx(math.log(0.7 / 0.05))
    assert np.all(np.isfinite(got))


def test_mixed_evidence_is_the_identity_without_the_mixture_and_zero_at_zero() -> None:
    e = np.array([-3.0, 0.0, 2.5])
    assert mixed_evidence(e, false_lead_rate=0.0, blind_rate=0.0).tolist() == e.tolist()
    assert mixed_evidence(np.zeros(3), false_lead_rate=0.2, blind_rate=0.3).tolist() == [0.0, 0.0, 0.0]


def test_mixed_evidence_is_monotone_and_keeps_the_sign() -> None:
    e = np.linspace(-10.0, 10.0, 2001)
    got = mixed_evidence(e, false_lead_rate=0.03, blind_rate=0.3)
    assert np.all(np.diff(got) > 0)
    assert np.array_equal(np.sign(got), np.sign(e))
    far = mixed_evidence(np.linspace(-800.0, 800.0, 4001), false_lead_rate=0.03, blind_rate=0.3)
    assert np.all(np.diff(far) >= 0)  # saturated, never reversed


def test_one_rate_of_zero_leaves_that_side_unbounded() -> None:
    # a = 0: log(0.9 e^E + 0.1) for E = 2 is log(0.9 * 7.389 + 0.1) = log(6.750).
    got = mixed_evidence(np.array([2.0, 1e6]), false_lead_rate=0.0, blind_rate=0.1)
    assert got[0] == pytest.approx(math.log(0.9 * math.exp(2.0) + 0.1))
    assert got[1] == pytest.approx(1e6 + math.log(0.9))


def test_lead_rate_spreads_the_expected_number_over_the_irrelevant_documents() -> None:
    assert lead_rate(PanningConfig(content_free=0.0, false_leads=0.25), 10) == pytest.approx(0.25 / 9)
    # the relevant ones are expected_relevant (rounded), never k: k only selects
    assert lead_rate(PanningConfig(content_free=0.0, false_leads=0.25, k=3), 10) == pytest.approx(0.25 / 9)
    assert lead_rate(
        PanningConfig(content_free=0.0, false_leads=0.25, expected_relevant=3), 10
    ) == pytest.approx(0.25 / 7)
    assert lead_rate(PanningConfig(content_free=0.0, false_leads=10.0), 5) == 0.5  # capped
    assert lead_rate(PanningConfig(content_free=0.0, false_leads=0.25), 1) == 0.0  # nothing irrelevant
    assert lead_rate(PanningConfig(content_free=0.0, false_leads=0.0), 10) == 0.0


def test_observe_round_applies_the_mixture_to_the_summed_evidence() -> None:
    # Three documents, rates t = (0.8, 0.4, 0.4), f = (0.1, 0.2, 0.2), plain likelihood.
    # Two rounds: document 0 cited at position 0, documents 1 and 2 missed.
    # a = 0.5 / (3 - 1) = 0.25, b = 0.2.
    # Doc 0: E = 2 log 8 = log 64 -> log((0.8 * 64 + 0.2) / (0.25 * 64 + 0.75)) = log(51.4 / 16.75).
    # Docs 1, 2: E = 2 log(0.6 / 0.8) = log 0.5625
    #   -> log((0.8 * 0.5625 + 0.2) / (0.25 * 0.5625 + 0.75)) = log(0.65 / 0.890625).
    cfg = PanningConfig(
        content_free=0.0,
        robust=False,
        adapt_level=False,
        empty_prompts="evidence",
        false_leads=0.5,
        blind_rate=0.2,
    )
    geo = DecisionRates([0.8, 0.4, 0.4], [0.1, 0.2, 0.2], config=cfg)
    st = BatchState.start(np.zeros((1, 3)))
    pos, size, cited = np.array([[0, 1, 2]]), np.array([3]), np.array([[True, False, False]])
    for _ in range(2):
        observe_round(st, pos, size, cited, config=cfg, geometry=geo)
    assert st.evidence[0].tolist() == pytest.approx([math.log(64.0), math.log(0.5625), math.log(0.5625)])
    want = [math.log(51.4 / 16.75), math.log(0.65 / 0.890625), math.log(0.65 / 0.890625)]
    assert st.log_odds[0].tolist() == pytest.approx(want)


class AlwaysCites:
    """A reader that cites one document wherever it is shown (a plausible wrong answer
    the model keeps giving, or the one it gets right)."""

    def __init__(self, doc: str) -> None:
        self.doc = doc

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d == self.doc))


def _ranking(reader: AlwaysCites, config: PanningConfig) -> list[int]:
    prior = rank_prior_probs(10, k=1)
    res = GoldPanner(reader, KV, config=config, rng=0).run("q", DOCS, prior_probs=prior)
    return [int(i) for i in res.ranking]


def test_a_false_lead_cited_every_round_does_not_bury_the_retrievers_first_two() -> None:
    # The retriever's first document is the needle; the model keeps citing its 6th.
    ranking = _ranking(AlwaysCites("d5"), PanningConfig(content_free=0.0, rounds=8))
    assert ranking[:3].count(0) == 1
    assert 1 in ranking[:3]
    # The paper's update, on the same reader: the retriever's first falls out of the top 3.
    paper = _ranking(AlwaysCites("d5"), PanningConfig.paper(rounds=8))
    assert paper[0] == 5
    assert 0 not in paper[:3]


def test_a_reader_that_answers_still_lifts_the_retrievers_last_document() -> None:
    # The model cites the retriever's last document every round: it rises from 10th to
    # the top 3 (the retriever's first keeps its place above it only by the prior).
    ranking = _ranking(AlwaysCites("d9"), PanningConfig(content_free=0.0, rounds=8))
    assert 9 in ranking[:3]


def test_paper_config_turns_every_extension_off() -> None:
    cfg = PanningConfig.paper(rounds=6)
    assert (cfg.robust, cfg.shuffle_top, cfg.empty_prompts, cfg.adapt_level) == (False, 0, "evidence", False)
    assert (cfg.false_leads, cfg.blind_rate, cfg.rounds) == (0.0, 0.0, 6)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("false_leads", -0.1, "false_leads must be a number >= 0 or None, got -0.1"),
        ("false_leads", float("nan"), "false_leads must be a number >= 0 or None, got nan"),
        ("blind_rate", 1.0, r"blind_rate must be a number in \[0, 1\) or None, got 1.0"),
        ("blind_rate", True, r"blind_rate must be a number in \[0, 1\) or None, got True"),
    ],
)
def test_bad_mixture_options_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PanningConfig(content_free=0.0, **{field: value})  # type: ignore[arg-type]


def test_profile_measured_mixture_is_used_unless_set() -> None:
    from types import SimpleNamespace

    from gold_panning_integrations.engine.config import DEFAULT_BLIND_RATE, DEFAULT_FALSE_LEADS

    measured = SimpleNamespace(blind_rate=0.7, false_leads=0.1)
    cfg = PanningConfig(content_free=0.0).with_profile(measured)
    assert (cfg.blind_rate, cfg.false_leads) == (0.7, 0.1)
    assert PanningConfig(content_free=0.0, blind_rate=0.2).with_profile(measured).blind_rate == 0.2
    assert PanningConfig.paper().with_profile(measured).blind_rate == 0.0  # explicit 0 wins
    plain = PanningConfig(content_free=0.0).with_profile(SimpleNamespace())
    assert (plain.blind_rate, plain.false_leads) == (DEFAULT_BLIND_RATE, DEFAULT_FALSE_LEADS) == (0.1, 0.25)
    assert PanningConfig(content_free=0.0).with_profile(None).blind_rate == 0.1
    # None on the profile: not measured, so the default
    assert PanningConfig(content_free=0.0).with_profile(SimpleNamespace(blind_rate=None)).blind_rate == 0.1
    # the prior's mass and the silent rate: the profile's, else 1 and 0.1
    assert (plain.expected_relevant, plain.silent_rate) == (1.0, 0.1)
    counted = PanningConfig(content_free=0.0).with_profile(
        SimpleNamespace(expected_relevant=1.6, silent_rate=0.3)
    )
    assert (counted.expected_relevant, counted.silent_rate, counted.focus) == (1.6, 0.3, 2)
    # the profile's other learned values are read the same way
    learned = PanningConfig(content_free=0.0).with_profile(
        SimpleNamespace(prior_head_decay=0.05, evidence_temperature=2.0)
    )
    assert (learned.prior_head_decay, learned.evidence_temperature) == (0.05, 2.0)
    assert (plain.prior_head_decay, plain.evidence_temperature) == (0.6, 1.0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"blind_rate": 1.5}, r"the profile's blind_rate must be a number in \[0, 1\)"),
        ({"false_leads": -1}, r"the profile's false_leads must be a number >= 0"),
        (
            {"blind_rate": float("nan")},
            r"the profile's blind_rate must be a number in \[0, 1\) or None, got nan",
        ),
        ({"false_leads": "a lot"}, r"false_leads must be a number >= 0 or None, got 'a lot'"),
        (
            {"prior_head_decay": 0.0},
            r"the profile's prior_head_decay must be a number in \(0, 1\] or None, got 0\.0",
        ),
    ],
)
def test_a_profile_with_a_bad_mixture_is_refused_by_name(values: dict[str, object], message: str) -> None:
    from types import SimpleNamespace

    with pytest.raises(ValueError, match=message):
        PanningConfig(content_free=0.0).with_profile(SimpleNamespace(**values))


def test_lead_rate_of_an_unresolved_config_uses_the_default() -> None:
    assert lead_rate(PanningConfig(content_free=0.0), 11) == pytest.approx(0.25 / 10)
