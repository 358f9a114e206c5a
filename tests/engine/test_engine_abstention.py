"""A reading's first-token probability of the way out (``Reading.abstain_p``) read through
the profile's ``abstention_map``: worked numbers, the update, and what a person would
conclude from scripted readers."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading
from gold_panning_integrations.engine.rounds import (
    BatchState,
    DecisionRates,
    abstention_evidence,
    observe_round,
)

QUESTION = "where is the needle?"
DOCS = [f"passage {i}" for i in range(8)]
MAP = (-1.0, 0.0)  # a prompt adds -logit(p) nats: p = 0.9 -> -2.197, p = 0.1 -> +2.197


def test_abstention_evidence_worked_example() -> None:
    # (slope, offset) = (-0.5, -1.0): p = 0.8 -> -0.5 * log(4) - 1 = -1.6931
    out = abstention_evidence(np.array([0.8, np.nan, 0.0]), (-0.5, -1.0))
    assert out[0] == pytest.approx(-0.5 * math.log(4.0) - 1.0)
    assert out[1] == 0.0  # no reading: nothing added
    # p = 0 is read as 1e-4: -0.5 * log(1e-4 / (1 - 1e-4)) - 1 = 3.6051
    assert out[2] == pytest.approx(-0.5 * math.log(1e-4 / (1 - 1e-4)) - 1.0)


def test_observe_round_adds_the_map_to_every_shown_document_only() -> None:
    config = PanningConfig(empty_prompts="evidence").with_profile(None)
    positions = np.array([[0, -1]])  # document 0 shown first, document 1 not shown
    cited = np.zeros((1, 2), dtype=bool)
    sizes = np.array([1])
    evidence = {}
    for abstention in (None, (-0.5, -1.0)):
        geometry = DecisionRates([0.8], [0.1], config=config, abstention=abstention)
        state = BatchState.start(np.zeros((1, 2)))
        observe_round(
            state, positions, sizes, cited, abstain_p=np.array([0.8]), config=config, geometry=geometry
        )
        evidence[abstention] = state.log_odds[0].copy()
    shift = evidence[(-0.5, -1.0)] - evidence[None]
    assert shift[0] == pytest.approx(-0.5 * math.log(4.0) - 1.0)
    assert shift[1] == 0.0


class Scripted:
    """Cites ``cite`` (a passage's text) whenever shown; every reply's first token gave the
    way out probability ``abstain``."""

    def __init__(self, abstain: Any, cite: str | None = None) -> None:
        self.abstain, self.cite = abstain, cite

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        cited = tuple(i for i, d in enumerate(documents) if d == self.cite)
        return Reading(cited=cited, abstain_p=self.abstain)


def _profile(abstention: tuple[float, float] | None) -> DetectorProfile:
    return DetectorProfile.bundled("lost-in-the-middle").model_copy(update={"abstention_map": abstention})


def _run(reader: Any, abstention: tuple[float, float] | None, **options: Any) -> Any:
    return GoldPanner(reader, _profile(abstention), rng=0, **options).run(QUESTION, DOCS)


def test_a_reader_sure_it_cannot_answer_says_nothing_is_relevant() -> None:
    without = _run(Scripted(0.9), None)
    unsure = _run(Scripted(0.5), MAP)  # logit(0.5) = 0: tells nothing
    sure = _run(Scripted(0.9), MAP)
    assert unsure.p_none == pytest.approx(without.p_none)
    assert sure.p_none > without.p_none + 0.05
    assert sure.posteriors.max() < without.posteriors.max()


def test_a_reader_sure_it_can_answer_lowers_p_none_and_keeps_its_pick_first() -> None:
    without = _run(Scripted(0.1, cite="passage 4"), None)
    sure = _run(Scripted(0.1, cite="passage 4"), MAP)
    assert sure.p_none < without.p_none
    assert int(np.argmax(sure.posteriors)) == 4 == int(np.argmax(without.posteriors))


@pytest.mark.parametrize("k", [1, 4, None])
def test_the_abstention_evidence_does_not_depend_on_k(k: int | None) -> None:
    base = _run(Scripted(0.8, cite="passage 2"), MAP, k=2)
    other = _run(Scripted(0.8, cite="passage 2"), MAP, k=k)
    np.testing.assert_allclose(other.posteriors, base.posteriors)
    assert other.p_none == pytest.approx(base.p_none)


@pytest.mark.parametrize("bad", [1.5, -0.2, float("nan"), "0.9", True])
def test_a_bad_abstain_p_is_ignored_with_a_warning(bad: Any, caplog: pytest.LogCaptureFixture) -> None:
    without = _run(Scripted(None, cite="passage 1"), MAP)
    with caplog.at_level(logging.WARNING):
        got = _run(Scripted(bad, cite="passage 1"), MAP)
    np.testing.assert_allclose(got.posteriors, without.posteriors)
    assert "abstain_p" in caplog.text


def test_the_evidence_is_shared_by_what_the_other_shown_documents_leave_room_for() -> None:
    # Two documents shown at p = 0.5, lam = -2 (slope 0, offset -2): for each, the other is
    # irrelevant with q = 0.5, so -log(0.5 e^2 + 0.5) = -1.4338; the unshown third: 0.
    config = PanningConfig(empty_prompts="evidence").with_profile(None)
    positions, cited, sizes = np.array([[0, 1, -1]]), np.zeros((1, 3), dtype=bool), np.array([2])
    after = {}
    for abstention in (None, (0.0, -2.0)):
        geometry = DecisionRates([0.8, 0.6], [0.1, 0.1], config=config, abstention=abstention)
        state = BatchState.start(np.zeros((1, 3)))
        observe_round(
            state, positions, sizes, cited, abstain_p=np.array([0.3]), config=config, geometry=geometry
        )
        after[abstention] = state.log_odds[0].copy()
    shift = after[(0.0, -2.0)] - after[None]
    np.testing.assert_allclose(shift, [-math.log(0.5 * math.e**2 + 0.5)] * 2 + [0.0])
    assert shift[0] == pytest.approx(-1.4338, abs=1e-4)
