"""Belief-trajectory plot: written, valid PNG, clear errors."""

from __future__ import annotations

from pathlib import Path

import matplotlib  # noqa: F401  (the test extra installs it)
import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, SimulatedReader
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP
from gold_panning_integrations.plots import plot_belief_trajectories


def _result():
    p = DetectorProfile.bundled("lost-in-the-middle")
    docs = [f"d{i}" for i in range(12)]
    return GoldPanner(
        SimulatedReader(p, {"d7"}, rng=3), profile=p, rounds=4, retriever_prior="none", rng=0
    ).run("q", docs)


def test_prior_log_odds_is_the_base_rate() -> None:
    res = _result()
    assert res.prior_log_odds is not None
    # the flat base-rate prior (retriever_prior="none"): the default rank map's chance that
    # none of the 12 is relevant, spread evenly: 1 - prod_r (1 - p_r)^(1/12) each
    p = DEFAULT_RANK_MAP.probabilities(12)
    flat = 1.0 - float(np.prod(1.0 - p)) ** (1 / 12)
    np.testing.assert_allclose(res.prior_log_odds, np.log(flat) - np.log1p(-flat))


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot_belief_trajectories(_result(), tmp_path / "t.png", highlight=[7])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_rounds_says_why(tmp_path: Path) -> None:
    res = GoldPanner(SimulatedReader(DetectorProfile.bundled("lost-in-the-middle"), set()), rounds=1).run(
        "q", []
    )
    with pytest.raises(ValueError, match="no rounds"):
        plot_belief_trajectories(res, tmp_path / "t.png")
