"""The profile's ``score_map``: a retriever's scores read with their level, so that a query
whose candidates all score low starts with a high ``p_none``. Worked numbers, the fallback
off the fitted scale, the fit, and what a person would conclude from a silent reader."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.calibration.traces import (
    MIN_SCORE_MAP_QUERIES,
    fit_score_map,
    fit_score_map_on,
    learn_profile,
    trace_record,
)
from gold_panning_integrations.engine import priors
from gold_panning_integrations.engine.priors import ScoreMap, retriever_prior_probs, score_prior_probs
from gold_panning_integrations.errors import ProfileError
from gold_panning_integrations.profiles import load_profile

# logit p = 1 * score - 1 * log(1 + rank) - 2, for top scores in [0, 10]
MAP = ScoreMap(score=1.0, log_rank=-1.0, offset=-2.0, low=0.0, high=10.0)


def test_worked_numbers() -> None:
    # rank 0, score 3: sigmoid(3 - 0 - 2) = sigmoid(1) = 0.73106; rank 1, score 2:
    # sigmoid(2 - log 2 - 2) = 1 / (1 + 2) = 1/3; rank 2, score -20: floored at 1e-6.
    p = MAP.probabilities([3.0, 2.0, -20.0])
    assert p is not None
    assert p == pytest.approx([1.0 / (1.0 + math.exp(-1.0)), 1.0 / 3.0, 1e-6])
    # A high score is capped like every prior: never above MAX_PRIOR.
    assert MAP.probabilities([9.0]) == pytest.approx([priors.MAX_PRIOR])


def test_scores_off_the_fitted_scale_are_declined() -> None:
    assert MAP.probabilities([10.5, 1.0]) is None  # top above high
    assert MAP.probabilities([-0.5, -1.0]) is None  # top below low (the tail may be)
    assert MAP.probabilities([]) is None
    assert MAP.covers([10.0, -50.0])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"score": 1, "log_rank": 0, "offset": 0, "low": 0}, "missing \\['high'\\]"),
        ({"score": 1, "log_rank": 0, "offset": 0, "low": 0, "high": 1, "slope": 2}, "unknown \\['slope'\\]"),
        ({"score": float("nan"), "log_rank": 0, "offset": 0, "low": 0, "high": 1}, "score must be a finite"),
        ({"score": True, "log_rank": 0, "offset": 0, "low": 0, "high": 1}, "score must be a finite"),
        ({"score": 1, "log_rank": 0, "offset": 0, "low": 2, "high": 1}, "must not exceed"),
        ([1, 2, 3], "must be an object"),
    ],
)
def test_a_bad_map_is_refused_by_name(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoreMap.from_dict(data)


def test_the_map_round_trips_through_a_profile_file(tmp_path: Path) -> None:
    profile = DetectorProfile.bundled("lost-in-the-middle").model_copy(update={"score_map": MAP.to_dict()})
    loaded = load_profile(profile.save(tmp_path / "p.json"))
    assert loaded.score_map == MAP.to_dict()
    data = json.loads((tmp_path / "p.json").read_text())
    data["score_map"]["low"] = "low"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="score_map"):
        load_profile(tmp_path / "bad.json")


def test_the_map_sets_the_prior_and_its_mass_without_a_temperature() -> None:
    scores = [3.0, 2.0, 1.0, 0.5, 0.0]
    p = retriever_prior_probs(5, k=1, mode="auto", top10_recall=0.5, scores=scores, score_map=MAP)
    assert p is not None
    assert p == pytest.approx(MAP.probabilities(scores))
    # The same order with every score 2 lower: each prior lower, so p_none starts higher.
    low = retriever_prior_probs(
        5, k=1, mode="auto", top10_recall=0.5, scores=[s - 2 for s in scores], score_map=MAP
    )
    assert low is not None
    assert np.all(low < p)
    assert np.prod(1 - low) > np.prod(1 - p)


def test_with_a_temperature_the_softmax_shares_the_maps_mass() -> None:
    scores = np.array([3.0, 2.0, 1.0, 0.5, 0.0])
    p = retriever_prior_probs(
        5, k=4, mode="auto", top10_recall=0.5, scores=scores, temperature=0.5, score_map=MAP
    )
    mapped = MAP.probabilities(scores)
    assert p is not None and mapped is not None
    assert p.sum() == pytest.approx(mapped.sum())  # the map's mass, not k = 4
    assert p == pytest.approx(
        score_prior_probs(scores / scores.std(), k=float(mapped.sum()), temperature=0.5)
    )


def test_off_scale_scores_fall_back_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(priors, "_warned_off_scale", False)
    cosine = [0.91, 0.85, 0.8, 0.7, 0.6]  # a cosine similarity read through a map fitted on scores 2..10
    shifted = ScoreMap(score=1.0, log_rank=-1.0, offset=-2.0, low=2.0, high=10.0)
    with caplog.at_level(logging.WARNING, logger=priors.__name__):
        got = retriever_prior_probs(5, k=1, mode="auto", top10_recall=0.5, scores=cosine, score_map=shifted)
        retriever_prior_probs(5, k=1, mode="auto", top10_recall=0.5, scores=cosine, score_map=shifted)
    rank = retriever_prior_probs(5, k=1, mode="auto", top10_recall=0.5, scores=cosine)
    assert got is not None and rank is not None
    assert got == pytest.approx(rank)  # as without the map: the rank prior
    warnings = [r for r in caplog.records if "another retriever's scale" in r.getMessage()]
    assert len(warnings) == 1


class Silent:
    """Cites nothing, ever."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=())


def test_a_silent_reader_over_weak_candidates_says_nothing_is_here() -> None:
    profile = DetectorProfile.bundled("lost-in-the-middle").model_copy(update={"score_map": MAP.to_dict()})
    docs = [f"passage {i}" for i in range(8)]
    strong = [6.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 0.0]
    weak = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    results = {
        name: GoldPanner(Silent(), profile, rng=0).run("q?", docs, scores=s)
        for name, s in (("strong", strong), ("weak", weak))
    }
    assert results["weak"].p_none > results["strong"].p_none
    mapped = MAP.probabilities(weak)
    assert mapped is not None
    prior_none = float(np.prod(1.0 - mapped))  # 0.466: the first candidate alone is at sigmoid(-1) = 0.27
    assert prior_none == pytest.approx(0.4656, abs=1e-4)
    assert results["weak"].p_none >= 0.85 > prior_none  # silence took it from a coin toss to a no
    for k in (1, 4, None):  # the number reported does not depend on k
        again = GoldPanner(Silent(), profile, k=k, rng=0).run("q?", docs, scores=weak)
        assert again.posteriors.tolist() == results["weak"].posteriors.tolist()


def test_the_options_temperature_asks_for_the_softmax_instead() -> None:
    profile = DetectorProfile.bundled("lost-in-the-middle").model_copy(update={"score_map": MAP.to_dict()})
    assert GoldPanner(Silent(), profile).score_map == MAP
    assert GoldPanner(Silent(), profile, prior_temperature=0.5).score_map is None


def _synthetic(queries: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for _ in range(queries):
        s = np.sort(rng.normal(5.0, 2.0, 10))[::-1]
        z = 0.8 * s - 1.0 * np.log1p(np.arange(10)) - 5.0
        scores.append(s)
        labels.append((rng.random(10) < 1.0 / (1.0 + np.exp(-z))).astype(float))
    return scores, labels


def test_the_fit_recovers_a_known_map() -> None:
    scores, labels = _synthetic(400, seed=0)
    fitted = fit_score_map_on(scores, labels)
    assert fitted is not None
    m, how = fitted
    # 4,000 candidates: within a few standard errors of (0.8, -1.0, -5.0)
    assert m.score == pytest.approx(0.8, abs=0.12)
    assert m.log_rank == pytest.approx(-1.0, abs=0.25)
    assert m.offset == pytest.approx(-5.0, abs=0.7)
    assert (m.low, m.high) == (min(s[0] for s in scores), max(s[0] for s in scores))
    assert how["queries"] == 400 and how["candidates"] == 4000


def test_too_few_queries_or_one_kind_fit_nothing() -> None:
    scores, labels = _synthetic(MIN_SCORE_MAP_QUERIES - 1, seed=1)
    assert fit_score_map_on(scores, labels) is None
    scores, labels = _synthetic(50, seed=1)
    assert fit_score_map_on(scores, [np.zeros(10)] * 50) is None
    with pytest.raises(ValueError, match="finite"):
        fit_score_map_on([np.array([1.0, np.nan])] * 30, [np.zeros(2)] * 30)


def test_traces_record_the_scores_and_calibrate_fits_the_map_from_them() -> None:
    profile = DetectorProfile.bundled("lost-in-the-middle")
    scores, labels = _synthetic(30, seed=2)
    panner = GoldPanner(Silent(), profile, rng=0, rounds=1, prompts_per_round=1)
    traces = []
    for s, y in zip(scores, labels):
        result = panner.run("q?", [f"d{i}" for i in range(10)], scores=list(s))
        record = trace_record(result, relevant=np.flatnonzero(y).tolist())
        assert record["scores"] == pytest.approx(list(s))
        traces.append(record)
    direct = fit_score_map_on(scores, labels)
    from_traces = fit_score_map(traces)
    assert direct is not None and from_traces is not None
    assert from_traces[0] == direct[0]
    learned = learn_profile(traces, profile).profile
    assert learned.score_map == direct[0].to_dict()
    # A result without scores (or with a missing one) records none.
    unscored = trace_record(panner.run("q?", ["a", "b"], scores=[1.0, None]))
    assert "scores" not in unscored


def test_calibrate_from_traces_fits_and_prints_the_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.cli import main as cli_main

    profile = DetectorProfile.bundled("lost-in-the-middle")
    scores, labels = _synthetic(30, seed=3)
    panner = GoldPanner(Silent(), profile, rng=0, rounds=1, prompts_per_round=1)
    path = tmp_path / "labelled.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                trace_record(
                    panner.run("q?", [f"d{i}" for i in range(10)], scores=list(s)),
                    relevant=np.flatnonzero(y).tolist(),
                )
            )
            + "\n"
            for s, y in zip(scores, labels)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "mine.json"
    assert (
        cli_main(
            ["calibrate", "--from-traces", str(path), "--prior", "lost-in-the-middle", "--out", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    fitted = fit_score_map_on(scores, labels)
    assert fitted is not None
    assert load_profile(out).score_map == fitted[0].to_dict()
    assert f"score_map: log-odds {fitted[0].score:.3f} per unit of score" in printed
    assert "fitted on 300 candidates of 30 labelled queries" in printed
