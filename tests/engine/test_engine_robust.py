"""The robust likelihood: rates 0.95 * rate + 0.025, inverted positions merged."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.engine.rounds import robust_rates


def test_robust_rates_by_hand() -> None:
    t, f = robust_rates([0.9, 0.5, 0.0], [0.1, 0.5, 1.0])
    assert t.tolist() == pytest.approx([0.88, 0.5, 0.5])
    assert f.tolist() == pytest.approx([0.12, 0.5, 0.5])


def test_an_inverted_position_is_merged_to_the_mean() -> None:
    # TPR 0.2 < FPR 0.4 -> 0.215 and 0.405 -> both 0.31.
    t, f = robust_rates([0.2], [0.4])
    assert (float(t[0]), float(f[0])) == pytest.approx((0.31, 0.31))


class CitesFirst:
    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=(0,))


TWO = DetectorProfile(n_positions=2, tpr=[0.9, 0.2], fpr=[0.1, 0.4])


@pytest.mark.parametrize(
    ("robust", "cited", "missed"),
    [(True, math.log(0.88 / 0.12), 0.0), (False, math.log(9.0), math.log(0.8 / 0.6))],
    ids=["robust", "plain"],
)
def test_update_uses_the_robust_rates_only_when_on(robust: bool, cited: float, missed: float) -> None:
    # Position 0 is cited (TPR 0.9, FPR 0.1); position 1 (TPR 0.2 < FPR 0.4) is missed:
    # robust merges it (no evidence), plain reads the miss as evidence FOR relevance.
    res = GoldPanner(
        CitesFirst(),
        TWO,
        rounds=1,
        prior="uniform",
        retriever_prior="none",
        shuffle_top=0,
        robust=robust,
        false_leads=0.0,
        blind_rate=0.0,
        content_free=0.0,
        expected_relevant=1.0,
        prompts_per_round=1,
    ).run("q", ["a", "b"])
    shown = res.rounds[0].windows[0]
    assert res.log_odds[shown[0]] == pytest.approx(cited)
    assert res.log_odds[shown[1]] == pytest.approx(missed)


def test_placement_still_follows_the_profiles_own_diagnosticity() -> None:
    prof = DetectorProfile(n_positions=3, tpr=[0.3, 0.9, 0.5], fpr=[0.1, 0.1, 0.1])
    res = GoldPanner(CitesFirst(), prof, rounds=1, shuffle_top=0, prompts_per_round=1).run(
        "q", ["a", "b", "c"], prior_log_odds=[2.0, 1.0, 0.0]
    )
    pos = dict(zip(res.rounds[0].windows[0], res.rounds[0].positions[0]))
    assert [pos[0], pos[1], pos[2]] == [1, 2, 0]


def test_robust_is_the_default() -> None:
    assert GoldPanner(None, TWO, rounds=4, prompts_per_round=1).config.robust is True
    assert np.isfinite(
        GoldPanner(CitesFirst(), TWO, rounds=2, prompts_per_round=1).run("q", ["a", "b"]).log_odds
    ).all()
