"""The held-out calibration scripts: ``benchmarks.probabilities_maps_cv`` (query features,
the choice rule) and ``benchmarks.probabilities_heldout`` (the ECE exactly calibrated
probabilities would show). Numbers derived by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.probabilities_heldout import null_ece
from benchmarks.probabilities_maps_cv import Query, choose, feature, read_queries


def _query(p: list[float], relevant: list[int]) -> Query:
    probs = np.asarray(p)
    y = np.zeros(probs.size)
    y[relevant] = 1.0
    return Query(np.log(probs / (1.0 - probs)), y)


def test_query_features_by_hand() -> None:
    """p = (0.5, 0.2, 0.2): prod(1 - p) = 0.5 * 0.8 * 0.8 = 0.32, so pnone = ln(0.32 / 0.68);
    top = logit(0.5) = 0, second = logit(0.2) = -ln 4, margin = ln 4, mass = ln(0.9)."""
    q = _query([0.5, 0.2, 0.2], [0])
    assert feature(q, "pnone") == pytest.approx(math.log(0.32 / 0.68))
    assert feature(q, "top") == pytest.approx(0.0)
    assert feature(q, "second") == pytest.approx(-math.log(4.0))
    assert feature(q, "margin") == pytest.approx(math.log(4.0))
    assert feature(q, "mass") == pytest.approx(math.log(0.9))


def test_prompt_features_from_a_trace(tmp_path: Path) -> None:
    """Four prompts: one credits nothing, two credit the top document (index 1, the
    highest posterior), one credits document 0: empty 1/4, topshare 2/4. An unlabelled
    trace is skipped."""
    prompt = {"docs": [0, 1, 2], "positions": [0, 1, 2], "span": 3, "failed": False}
    trace = {
        "type": "trace",
        "n": 3,
        "posteriors": [0.2, 0.7, 0.1],
        "rounds": [{"prompts": [{**prompt, "cited": c} for c in ([], [1], [1], [0])]}],
        "relevant": [1],
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(trace) + "\n" + json.dumps({**trace, "relevant": None}) + "\n")
    (q,) = read_queries(path)
    assert q.prompt_features == {"empty": 0.25, "topshare": 0.5}
    assert q.y.tolist() == [0.0, 1.0, 0.0]
    assert q.has_relevant


def _losses(per_query: list[float]) -> np.ndarray:
    return np.column_stack([per_query, [10.0] * len(per_query)])


def test_choice_rule_needs_lower_loss_on_every_model_and_an_interval_below_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A form 0.1 nats per query lower on every query of both models is chosen (its
    per-pair difference is -0.01 in every resample); one lower on one model only is not."""
    platt = _losses([1.0, 2.0, 3.0, 4.0])
    better = {"platt": platt, "twopart-const": _losses([0.9, 1.9, 2.9, 3.9])}
    assert choose([better, better], draws=50, seed=0) == "twopart-const"
    assert (
        "twopart-const     -0.0100 [-0.0100, -0.0100]  lower on every model: yes" in capsys.readouterr().out
    )
    worse = {"platt": platt, "twopart-const": _losses([1.1, 2.1, 3.1, 4.1])}
    assert choose([better, worse], draws=50, seed=0) == "platt"


def test_null_ece_of_certain_probabilities_is_zero() -> None:
    """Probabilities 0 and 1 draw their own labels exactly: every draw's ECE is 0."""
    assert null_ece([("q", np.array([0.0, 1.0, 1.0]), np.zeros(3))], 20, 0) == (0.0, 0.0, 0.0)


def test_null_ece_of_one_half_is_the_binomial_deviation() -> None:
    """Two pairs at 0.5 share one bin; their labels are 0/0, 0/1, 1/0, 1/1 with equal
    chance, so the ECE |0.5 - share| is 0.5, 0, 0, 0.5: mean 0.25."""
    mean, lo, hi = null_ece([("q", np.array([0.5, 0.5]), np.zeros(2))], 4000, 0)
    assert mean == pytest.approx(0.25, abs=0.02)
    assert (lo, hi) == (0.0, 0.5)
