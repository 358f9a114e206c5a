"""What the way out's probability adds on the simulator (``benchmarks.abstention_sim``):
with a reader whose hesitation tells, it lifts ``p_none``'s AUROC and keeps the
probabilities calibrated; with one whose hesitation tells nothing, the learned map is near
0 and changes nothing that matters."""

from __future__ import annotations

import pytest

from benchmarks import abstention_sim as sim


def _measure(*extra: str) -> tuple[object, dict[str, dict[str, float]]]:
    return sim.measure(sim.parser().parse_args(["--traces", "200", "--queries", "300", *extra]))


def test_a_telling_hesitation_pays() -> None:
    # A reader with no blind spots whose first token leans to "unknown" exactly when
    # nothing it was shown answers (log-odds -2 against +1.5, sd 1.5, 6 prompts).
    learned, rows = _measure("--blind", "0", "--seen", "-2", "--unseen", "1.5")
    slope = learned.abstention_map[0]  # type: ignore[attr-defined]
    assert slope < -0.5
    without, with_ = rows["citations only"], rows["citations + abstain_p"]
    assert with_["p_none_auroc"] >= max(without["p_none_auroc"] + 0.02, 0.99)
    assert with_["ece"] <= 0.02
    assert with_["top1"] >= without["top1"] - 0.03


def test_a_hesitation_that_tells_nothing_costs_nothing() -> None:
    learned, rows = _measure("--seen", "0", "--unseen", "0")
    slope = learned.abstention_map[0]  # type: ignore[attr-defined]
    assert abs(slope) < 0.1
    without, with_ = rows["citations only"], rows["citations + abstain_p"]
    assert with_["p_none_auroc"] == pytest.approx(without["p_none_auroc"], abs=0.02)
    assert with_["ece"] <= without["ece"] + 0.005
