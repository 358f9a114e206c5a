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
from gold_panning_integrations.engine.priors import rank_prior_probs, retriever_prior_probs

DOCS = ["first", "second", "third"]
# The default rank prior at 3 documents, by hand: weights 0.8 * 0.6^r / (1 + 0.6 + 0.36)
# + 0.2 / 3 = [0.47483, 0.31156, 0.21361], already summing to 1.
RANK3 = [0.8 / 1.96 + 0.2 / 3, 0.48 / 1.96 + 0.2 / 3, 0.288 / 1.96 + 0.2 / 3]


def _posteriors(**options: object) -> list[float]:
    scores = options.pop("scores", None)
    res = GoldPanner(ScriptedReader(), FLAT, rounds=2, **options).run("q", DOCS, scores=scores)  # type: ignore[arg-type]
    assert res.calls == 0
    return res.posteriors.tolist()


def test_goldpanner_starts_from_the_rank_prior_over_the_documents_order() -> None:
    assert _posteriors() == pytest.approx(RANK3)
    assert rank_prior_probs(3, k=1).tolist() == pytest.approx(RANK3)


def test_retriever_prior_none_is_the_old_flat_start() -> None:
    assert _posteriors(retriever_prior="none") == pytest.approx([1 / 3] * 3)  # base rate k/n
    assert _posteriors(retriever_prior="none", prior="uniform") == pytest.approx([0.5] * 3)
    # k chooses what is returned, not the prior: its mass is expected_relevant (default 1)
    assert _posteriors(retriever_prior="none", k=3) == pytest.approx([1 / 3] * 3)
    assert _posteriors(retriever_prior="none", expected_relevant=3) == pytest.approx(
        [0.5] * 3
    )  # min(3/3, 0.5)


def test_expected_relevant_sets_the_mass_not_k() -> None:
    assert _posteriors(retriever_prior="none", k=3, expected_relevant=1) == pytest.approx([1 / 3] * 3)
    assert _posteriors(k=3, expected_relevant=1) == pytest.approx(RANK3)


def test_prior_head_decay_from_the_options_and_from_the_profile() -> None:
    # 1.0 is flat inside the top 10
    assert _posteriors(prior_head_decay=1.0) == pytest.approx([1 / 3] * 3)
    fitted = FLAT.model_copy(update={"prior_head_decay": 1.0})
    res = GoldPanner(ScriptedReader(), fitted, rounds=1).run("q", DOCS)
    assert res.posteriors.tolist() == pytest.approx([1 / 3] * 3)
    res = GoldPanner(ScriptedReader(), fitted, rounds=1, prior_head_decay=0.6).run("q", DOCS)
    assert res.posteriors.tolist() == pytest.approx(RANK3)


def test_score_prior_from_the_scores_passed_to_run() -> None:
    # scores [0, 2, 0]: std = 2 * sqrt(2) / 3, so the standardised scores are
    # [0, 3/sqrt(2), 0]; softmax: e^(3/sqrt 2) / (e^(3/sqrt 2) + 2) for the second.
    e = math.exp(3 / math.sqrt(2))
    got = _posteriors(retriever_prior="score", scores=[0.0, 2.0, 0.0], prior_temperature=1.0)
    assert got == pytest.approx([1 / (e + 2), e / (e + 2), 1 / (e + 2)])
    # temperature 0.5 doubles the exponent: e^(3 sqrt 2) / (e^(3 sqrt 2) + 2) = 0.972 for
    # the second, over the cap of 0.95; the excess 0.022 goes to the other two.
    got = _posteriors(retriever_prior="score", scores=[0.0, 2.0, 0.0], prior_temperature=0.5)
    assert got == pytest.approx([0.025, 0.95, 0.025])
    # No temperature given or fitted in the profile: "score" uses 0.5 but, not fitted for
    # this retriever, the prior is bounded. Its log-odds gap logit(0.95) - logit(0.025) =
    # 2.944 + 3.664 = 6.608 shrinks to 0.75 of the evidence swing at 3 documents (a = 0.25 /
    # 2 = 0.125, b = 0.1): 0.75 * (log(0.9 / 0.125) - log(0.1 / 0.875)) = 0.75 * (1.974 +
    # 2.169) = 3.107; log-odds (c, c + 3.107, c) with 2 sigmoid(c) + sigmoid(c + 3.107) = 1:
    # c = -1.975, i.e. [0.1219, 0.7563, 0.1219].
    got = _posteriors(retriever_prior="score", scores=[0.0, 2.0, 0.0])
    assert got == pytest.approx([0.1219, 0.7563, 0.1219], abs=1e-4)
    # all equal: flat (the base rate)
    assert _posteriors(retriever_prior="score", scores=[1.0, 1.0, 1.0]) == pytest.approx([1 / 3] * 3)


def test_auto_prior_reads_scores_where_every_document_has_one(caplog: pytest.LogCaptureFixture) -> None:
    # the default: with a temperature known (the option, or the profile's fitted one) the
    # score prior with scores of 5 documents or more, the rank prior otherwise, and no
    # warning either way (a retriever that gives no scores is no mistake)
    five = ["a", "b", "c", "d", "e"]
    fitted = FLAT.model_copy(update={"prior_temperature": 0.5})
    # scores [4, 0, 0, 0, 0]: std 1.6, z = [2.5, 0, 0, 0, 0], at 0.5: e^5 / (e^5 + 4) = 0.9737,
    # capped at 0.95, the excess 0.0237 split evenly: 0.0125 each
    peaked = [0.95, 0.0125, 0.0125, 0.0125, 0.0125]
    rank5 = rank_prior_probs(5, k=1).tolist()
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
    rank5 = rank_prior_probs(5, k=1).tolist()
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
    assert res.posteriors[0] == pytest.approx(res.posteriors[1]) and res.posteriors[0] > rank5[0]


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
    assert retriever_prior_probs(3, k=1, mode="rank", top10_recall=0.5).tolist() == pytest.approx(RANK3)  # type: ignore[union-attr]
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
        ({"prior_top10_recall": 1.0}, r"prior_top10_recall must be a number in \(0, 1\), got 1\.0"),
        ({"prior_head_decay": 1.5}, r"prior_head_decay must be a number in \(0, 1\] or None, got 1\.5"),
        ({"expected_relevant": 0}, r"expected_relevant must be a number > 0 or None, got 0"),
        ({"prior_temperature": 0.0}, r"prior_temperature must be a number > 0 or None, got 0\.0"),
    ):
        with pytest.raises(ValueError, match=pattern):
            PanningConfig(**bad)  # type: ignore[arg-type]
    assert PanningConfig(prior_head_decay=1.0).prior_head_decay == 1.0  # (0, 1] is closed at 1
