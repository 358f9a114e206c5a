"""The retriever prior is an engine option: every entry point (GoldPanner, the adapters, the
CLI) starts from it. Pinned through the uninformative FLAT profile, with which the engine
makes no call, so the posteriors are the prior itself."""

from __future__ import annotations

import asyncio
import logging
import math

import numpy as np
import pytest
from doubles import FLAT, ScriptedReader

from gold_panning_integrations import GoldPanner, PanningConfig
from gold_panning_integrations.engine.priors import (
    DEFAULT_RANK_MAP,
    bounded_prior,
    retriever_prior_probs,
)

DOCS = ["first", "second", "third"]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# The default rank map (harmonic), by hand: sigmoid(-1.3802 - log(1 + r)), i.e. odds
# e^-1.3802 / (1 + r) = 0.251528 / (1 + r): for r = 0, 1, 2 the odds 0.251528, 0.125764,
# 0.083843, so p = 0.20098, 0.11171, 0.07736. Each rank's own probability, whatever the
# number of candidates: 3 documents start where the first 3 of 10 do. (Not bounded: the
# log-odds gap log 3 = 1.099 is below 0.75 of the evidence swing, 3.107 at 3 documents.)
RANK3 = [_sigmoid(-1.3802 - math.log(1 + r)) for r in range(3)]
# the flat prior with the same chance that none is relevant: 1 - (prod (1 - p_r))^(1/3);
# prod = 0.79902 * 0.88829 * 0.92264 = 0.65486, its cube root 0.86839, so 0.13161 each
FLAT3 = [1.0 - math.prod(1.0 - p for p in RANK3) ** (1 / 3)] * 3


# At 5 documents the map's log-odds gap, log 5 = 1.609, is below 0.75 of the evidence swing
# (a = 0.25 / 4, b = 0.1: log(0.9 / 0.0625) - log(0.1 / 0.9375) = 4.905; 0.75 of it 3.679):
# bounding leaves the map's probabilities as they are (the bound is applied as the engine does).
RANK5 = bounded_prior(
    DEFAULT_RANK_MAP.probabilities(5), max_gap=0.75 * (math.log(0.9 / 0.0625) - math.log(0.1 / 0.9375))
).tolist()


def _posteriors(**options: object) -> list[float]:
    scores = options.pop("scores", None)
    res = GoldPanner(ScriptedReader(), FLAT, rounds=2, **options).run("q", DOCS, scores=scores)  # type: ignore[arg-type]
    assert res.calls == 0
    return res.posteriors.tolist()


def test_the_hand_numbers() -> None:
    assert RANK3 == pytest.approx([0.20098, 0.11171, 0.07736], abs=1e-5)
    assert FLAT3[0] == pytest.approx(0.13161, abs=1e-5)
    # the harmonic odds at rank 3 and 4 (0.251528 / 4 and / 5): unbounded at 5 documents
    assert RANK5 == pytest.approx(RANK3 + [0.062882 / 1.062882, 0.050306 / 1.050306], abs=1e-5)


def test_goldpanner_starts_from_the_rank_map_over_the_documents_order() -> None:
    assert _posteriors() == pytest.approx(RANK3)
    assert DEFAULT_RANK_MAP.probabilities(3).tolist() == pytest.approx(RANK3, abs=1e-5)


def test_one_candidate_is_not_near_certain() -> None:
    # one candidate starts at the first rank's probability, not at a mass of 1 spread over it
    res = GoldPanner(ScriptedReader(), FLAT, rounds=1).run("q", ["only"])
    assert res.posteriors.tolist() == pytest.approx([RANK3[0]])


def test_retriever_prior_none_is_flat_with_the_rank_maps_p_none() -> None:
    assert _posteriors(retriever_prior="none") == pytest.approx(FLAT3)
    assert _posteriors(retriever_prior="none", prior="uniform") == pytest.approx([0.5] * 3)
    # k chooses what is returned, not the prior
    assert _posteriors(retriever_prior="none", k=3) == pytest.approx(FLAT3)
    # a mass set by the option: the base rate min(m/n, 0.5) of the documents given
    assert _posteriors(retriever_prior="none", expected_relevant=1) == pytest.approx([1 / 3] * 3)
    assert _posteriors(retriever_prior="none", expected_relevant=3) == pytest.approx([0.5] * 3)


def test_expected_relevant_sets_the_rank_maps_count_among_the_first_ten_not_k() -> None:
    # expected_relevant=1: the map's offset moves until its first 10 sum to 1, slope kept
    shifted = DEFAULT_RANK_MAP.with_mass(1.0)
    assert shifted.mass(10) == pytest.approx(1.0, abs=1e-9) and shifted.log_rank == DEFAULT_RANK_MAP.log_rank
    assert _posteriors(k=3, expected_relevant=1) == pytest.approx(shifted.probabilities(3).tolist())
    assert _posteriors(k=3, expected_relevant=1) == _posteriors(k=1, expected_relevant=1)


def test_prior_head_decay_gives_the_older_shape_with_the_maps_count() -> None:
    # 1.0 is flat inside the top 10: the map's expected count over 3 documents, shared evenly
    mass3 = sum(RANK3)
    assert _posteriors(prior_head_decay=1.0) == pytest.approx([mass3 / 3] * 3)
    # a profile learned before the rank map (prior_head_decay, no rank_map) keeps its shape
    fitted = FLAT.model_copy(update={"prior_head_decay": 1.0})
    res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", DOCS)
    assert res.posteriors.tolist() == pytest.approx([mass3 / 3] * 3)
    # a profile with a rank map reads the map, its older prior_head_decay aside
    mapped = fitted.model_copy(update={"rank_map": {"log_rank": -1.0, "offset": 0.0}})
    res = GoldPanner(ScriptedReader(), mapped, rounds=1).run("q", DOCS)
    assert res.posteriors.tolist() == pytest.approx([0.5, _sigmoid(-math.log(2)), _sigmoid(-math.log(3))])


def test_score_prior_from_the_scores_passed_to_run() -> None:
    # scores [0, 2, 0]: std = 2 * sqrt(2) / 3, so the standardised scores are
    # [0, 3/sqrt(2), 0]; softmax: e^(3/sqrt 2) / (e^(3/sqrt 2) + 2) for the second, times the
    # rank map's expected count over 3 documents (0.20098 + 0.11171 + 0.07736 = 0.39005).
    e = math.exp(3 / math.sqrt(2))
    mass3 = sum(RANK3)
    got = _posteriors(retriever_prior="score", scores=[0.0, 2.0, 0.0], prior_temperature=1.0)
    assert got == pytest.approx([mass3 / (e + 2), mass3 * e / (e + 2), mass3 / (e + 2)])
    # all equal: flat
    assert _posteriors(retriever_prior="score", scores=[1.0, 1.0, 1.0]) == pytest.approx(FLAT3)


def test_auto_prior_reads_scores_where_every_document_has_one(caplog: pytest.LogCaptureFixture) -> None:
    # the default: with a temperature known (the option, or the profile's fitted one) the
    # score prior with scores of 5 documents or more, the rank prior otherwise, and no
    # warning either way (a retriever that gives no scores is no mistake)
    five = ["a", "b", "c", "d", "e"]
    fitted = FLAT.model_copy(update={"prior_temperature": 0.5})
    # scores [4, 0, 0, 0, 0]: std 1.6, z = [2.5, 0, 0, 0, 0], at 0.5: e^5 / (e^5 + 4) = 0.9737
    rank5 = RANK5
    mass5 = float(DEFAULT_RANK_MAP.mass(5))
    # the softmax shares the map's expected count over 5 documents: 0.9737 * mass5 for the first
    soft = math.exp(5.0) / (math.exp(5.0) + 4)
    peaked = [mass5 * soft] + [mass5 * (1 - soft) / 4] * 4
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.engine.priors"):
        res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", five, scores=[4.0, 0.0, 0.0, 0.0, 0.0])
        assert res.posteriors.tolist() == pytest.approx(peaked)
        res = GoldPanner(ScriptedReader(), FLAT, rounds=1, prior_temperature=0.5).run(
            "q", five, scores=[4.0, 0.0, 0.0, 0.0, 0.0]
        )
        assert res.posteriors.tolist() == pytest.approx(peaked)
        # no temperature known: a score's scale is the retriever's, so auto reads the order
        res = GoldPanner(ScriptedReader(), FLAT, rounds=1).run("q", five, scores=[4.0, 0.0, 0.0, 0.0, 0.0])
        assert res.posteriors.tolist() == pytest.approx(rank5)
        assert _posteriors(scores=[2.0, 0.0, 0.0], prior_temperature=0.5) == pytest.approx(RANK3)  # 3: rank
        assert _posteriors() == pytest.approx(RANK3)
        res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", five, scores=[1.0, None, 0.0, 0.0, 0.0])
        assert res.posteriors.tolist() == pytest.approx(rank5)
        res = GoldPanner(ScriptedReader(), fitted, rounds=1, retriever_prior="rank").run(
            "q", five, scores=[4.0, 0.0, 0.0, 0.0, 0.0]
        )
        assert res.posteriors.tolist() == pytest.approx(rank5)
    assert [r for r in caplog.records if r.name == "gold_panning_integrations.engine.priors"] == []


def test_auto_prior_refuses_scores_that_rise_along_the_order(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Distances (lower is better) or an order the scores did not make: read as similarities
    # they would put the retriever's last document first, so "auto" keeps the rank prior
    # and says so once; "score" uses them as asked. (auto reads scores only with a known
    # temperature: the profile's fitted one here.)
    from gold_panning_integrations.engine import priors

    monkeypatch.setattr(priors, "_warned_unordered", False)
    five = ["a", "b", "c", "d", "e"]
    distances = [0.1, 0.2, 0.3, 0.4, 0.9]
    rank5 = RANK5
    fitted = FLAT.model_copy(update={"prior_temperature": 0.5})
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.engine.priors"):
        for _ in range(2):
            res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", five, scores=distances)
            assert res.posteriors.tolist() == pytest.approx(rank5)
    warned = [r.getMessage() for r in caplog.records if r.name == "gold_panning_integrations.engine.priors"]
    assert len(warned) == 1 and "do not decrease along their order" in warned[0]
    res = GoldPanner(ScriptedReader(), FLAT, rounds=1, retriever_prior="score").run(
        "q", five, scores=distances
    )
    assert int(np.argmax(res.posteriors)) == 4
    # ties keep the scores: [3, 3, 1, 1, 1] does not rise
    res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", five, scores=[3.0, 3.0, 1.0, 1.0, 1.0])
    # (the rank prior would put the first above the second)
    assert res.posteriors[0] == pytest.approx(res.posteriors[1]) and rank5[0] > rank5[1]


def test_score_prior_without_scores_falls_back_to_the_rank_prior(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.engine.priors"):
        assert _posteriors(retriever_prior="score") == pytest.approx(RANK3)
        assert _posteriors(retriever_prior="score", scores=[1.0, None, 0.0]) == pytest.approx(RANK3)
    assert caplog.text.count("using the rank prior instead") == 2


def test_scores_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match=r"scores must have one entry per document \(3\), got 2"):
        GoldPanner(ScriptedReader(), FLAT).run("q", DOCS, scores=[1.0, 2.0])


def test_given_priors_replace_the_retriever_prior() -> None:
    res = GoldPanner(ScriptedReader(), FLAT).run("q", DOCS, prior_probs=[0.2, 0.3, 0.4])
    assert res.posteriors.tolist() == pytest.approx([0.2, 0.3, 0.4])
    res = GoldPanner(ScriptedReader(), FLAT).run("q", DOCS, prior_log_odds=[0.0, 0.0, 0.0])
    assert res.posteriors.tolist() == pytest.approx([0.5] * 3)


def test_the_async_path_applies_the_same_prior() -> None:
    res = asyncio.run(GoldPanner(ScriptedReader(), FLAT).arun("q", DOCS))
    assert res.posteriors.tolist() == pytest.approx(RANK3)
    assert res.prior_log_odds is not None
    np.testing.assert_allclose(res.prior_log_odds, np.log(np.array(RANK3) / (1 - np.array(RANK3))), atol=1e-5)


def test_retriever_prior_probs_modes() -> None:
    assert retriever_prior_probs(3, k=1, mode="none", top10_recall=0.5) is None
    assert retriever_prior_probs(0, k=1, mode="rank", top10_recall=0.5) is None
    # without a rank map: the older shape with the mass k over the documents given
    legacy = [0.8 / 1.96 + 0.2 / 3, 0.48 / 1.96 + 0.2 / 3, 0.288 / 1.96 + 0.2 / 3]
    assert retriever_prior_probs(3, k=1, mode="rank", top10_recall=0.5).tolist() == pytest.approx(legacy)  # type: ignore[union-attr]
    assert retriever_prior_probs(
        3, k=1, mode="rank", top10_recall=0.5, rank_map=DEFAULT_RANK_MAP
    ).tolist() == (  # type: ignore[union-attr]
        pytest.approx(RANK3, abs=1e-5)
    )
    with pytest.raises(
        ValueError, match="retriever_prior must be 'auto', 'rank', 'score' or 'none', got 'bm25'"
    ):
        retriever_prior_probs(3, k=1, mode="bm25", top10_recall=0.5)


def test_the_prior_options_are_checked_like_every_option() -> None:
    for bad, pattern in (
        (
            {"retriever_prior": "bm25"},
            r"retriever_prior must be 'auto', 'rank', 'score' or 'none', got 'bm25'",
        ),
        ({"prior_top10_recall": 1.0}, r"prior_top10_recall must be a number in \(0, 1\) or None, got 1\.0"),
        ({"prior_head_decay": 1.5}, r"prior_head_decay must be a number in \(0, 1\] or None, got 1\.5"),
        ({"expected_relevant": 0}, r"expected_relevant must be a number > 0 or None, got 0"),
        ({"prior_temperature": 0.0}, r"prior_temperature must be a number > 0 or None, got 0\.0"),
    ):
        with pytest.raises(ValueError, match=pattern):
            PanningConfig(**bad)  # type: ignore[arg-type]
    assert PanningConfig(prior_head_decay=1.0).prior_head_decay == 1.0  # (0, 1] is closed at 1
