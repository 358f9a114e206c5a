"""GoldPanningRetriever: LangChain contract, metadata, k, callbacks, async, priors, failures."""

from __future__ import annotations

import math
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from doubles import (
    FLAT,
    NEEDLE,
    TWO,
    AsyncOnlyReader,
    AsyncOnlyRetriever,
    BrokenReader,
    ListRetriever,
    ScriptedReader,
    SmallestLabelChatModel,
)
from doubles import make_docs as _docs
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from gold_panning_integrations import (
    AllRoundsFailedError,
    DetectorProfile,
    GoldPanningRetriever,
    SimulatedReader,
)
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, bounded_prior, rank_prior_probs


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class Recorder(BaseCallbackHandler):
    """Records retriever runs (run id, parent) and text events."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, UUID, UUID | None]] = []
        self.texts: list[str] = []

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.starts.append((kw.get("name") or "", run_id, parent_run_id))

    def on_text(self, text: str, **kw: Any) -> None:
        self.texts.append(text)


def _retriever(docs: list[Document], reader: Any, **kw: Any) -> GoldPanningRetriever:
    kw.setdefault("prompts_per_round", 1)  # rounds are calls in these tests
    return GoldPanningRetriever(base_retriever=ListRetriever(docs=docs), reader=reader, **kw)


# ----------------------------------------------------------------- the contract
def test_posterior_and_rank_pinned_by_hand() -> None:
    docs = _docs(2, needle_at=0)
    # The metadata carry the posteriors of the update derived below: the flat base rate of
    # expected_relevant=1 (1/2 each at n = 2) and each reply read through the profile
    # (content_free=0; the default weighing of read and positional replies is tested in tests/engine).
    paper = {"retriever_prior": "none", "expected_relevant": 1.0, "content_free": 0.0}
    # seed=1: the engine's shuffle of the top documents (shuffle_top) keeps input order here.
    r = _retriever(docs, ScriptedReader(), profile=TWO, k=2, rounds=1, seed=1, **paper)
    assert r.pan("q").result.rounds[0].windows == ((0, 1),)
    out = r.invoke("where is the needle?")
    assert [d.metadata["i"] for d in out] == [0, 1]
    # Robust likelihood (the default): rates 0.95 * rate + 0.025, so 0.9/0.1 -> 0.88/0.12:
    # the cited needle's evidence is E = log(22/3). Document-level mixture (the default):
    # n = 2 and one relevant expected (expected_relevant, not k = 2), so one irrelevant
    # document: a = 0.25 / 1, b = 0.1: odds 1 * (0.9 * 22/3 + 0.1) / (0.25 * 22/3 + 0.75)
    # = 6.7 / (31/12) = 80.4/31 -> posterior 80.4/111.4 = 402/557 = 0.721723 (0.88 without
    # the mixture). The filler at position 1 has E = 0 (TPR = FPR): stays 1/2.
    assert out[0].metadata["gold_panning_posterior"] == pytest.approx(402 / 557, abs=1e-12)
    assert out[1].metadata["gold_panning_posterior"] == pytest.approx(0.5, abs=1e-12)
    assert [d.metadata["gold_panning_rank"] for d in out] == [1, 2]
    assert [d.metadata["gold_panning_panned"] for d in out] == [True, True]

    out2 = _retriever(docs, ScriptedReader(), profile=TWO, k=1, rounds=2, seed=1, **paper).invoke("q")
    # k=1, two rounds, the needle cited at position 0 both times: E = 2 log(22/3), e^E =
    # 484/9 (the level scales TPR and FPR alike: a citation's ratio is unchanged). Now
    # n - 1 = 1 irrelevant document, a = min(0.25/1, 0.5) = 0.25, b = 0.1: odds
    # (0.9 * 484/9 + 0.1) / (0.25 * 484/9 + 0.75) = (436.5/9) / (127.75/9) = 1746/511
    # -> posterior 1746/2257 = 0.773593 (484/493 = 0.98 without the mixture: the cap
    # (1-b)/a = 3.6 on the odds is near).
    assert out2[0].metadata["gold_panning_posterior"] == pytest.approx(1746 / 2257, abs=1e-12)


def test_metadata_kept_and_base_documents_not_mutated() -> None:
    docs = _docs(6, needle_at=4)
    before = [dict(d.metadata) for d in docs]
    out = _retriever(docs, ScriptedReader(), k=2, rounds=4).invoke("where is the needle?")
    assert out[0].page_content == NEEDLE
    assert out[0].id == "id4"
    assert out[0].metadata["source"] == "gold"
    assert out[0].metadata["i"] == 4
    assert [d.metadata for d in docs] == before  # the base retriever's documents untouched
    assert all(isinstance(d.metadata["gold_panning_posterior"], float) for d in out)
    assert out[0].metadata["gold_panning_posterior"] > out[1].metadata["gold_panning_posterior"]


def test_k_from_constructor_and_invoke() -> None:
    docs = _docs(6, needle_at=2)
    r = _retriever(docs, ScriptedReader(), k=3)
    assert len(r.invoke("q")) == 3
    assert len(r.invoke("q", k=1)) == 1
    assert r.invoke("q", k=1)[0].page_content == NEEDLE
    assert len(r.invoke("q", k=50)) == 6  # never more than the base returned
    with pytest.raises(ValueError, match="k must be a positive integer"):
        r.invoke("q", k=0)


def test_child_callbacks_and_summary_text() -> None:
    rec = Recorder()
    r = _retriever(_docs(4, needle_at=1), ScriptedReader(), k=2, rounds=2)
    r.invoke("q", config={"callbacks": [rec]})
    assert len(rec.starts) == 2
    (outer_name, outer_id, outer_parent), (inner_name, _inner_id, inner_parent) = rec.starts
    assert outer_parent is None
    assert outer_name == "GoldPanningRetriever"
    assert inner_parent == outer_id
    assert inner_name == "ListRetriever"
    assert len(rec.texts) == 1
    assert rec.texts[0].startswith("gold panning: 2 call(s)")


async def test_async_child_callbacks() -> None:
    rec = Recorder()
    r = GoldPanningRetriever(
        base_retriever=AsyncOnlyRetriever(docs=_docs(4, needle_at=1)), reader=ScriptedReader()
    )
    await r.ainvoke("q", config={"callbacks": [rec]})
    assert rec.starts[1][2] == rec.starts[0][1]
    assert len(rec.texts) == 1


async def test_async_path_uses_aread_and_base_ainvoke() -> None:
    reader = AsyncOnlyReader()
    docs = _docs(5, needle_at=3)
    r = GoldPanningRetriever(
        base_retriever=AsyncOnlyRetriever(docs=docs), reader=reader, k=2, rounds=3, prompts_per_round=1
    )
    out = await r.ainvoke("where is the needle?")
    assert out[0].page_content == NEEDLE
    assert reader.async_calls == 3
    assert reader.sync_calls == 0
    # the same reader on the sync path fails every round: the async result was not a fluke
    with pytest.raises(AllRoundsFailedError, match="must not be called on the async path"):
        _retriever(docs, AsyncOnlyReader(), rounds=2).invoke("q")


def test_empty_base_returns_empty_without_calls() -> None:
    reader = ScriptedReader()
    r = _retriever([], reader)
    assert r.invoke("q") == []
    docs, result = r.pan("q")
    assert docs == []
    assert result.calls == 0
    assert result.stop_reason == "no-documents"
    assert reader.sync_calls == 0


async def test_empty_base_async() -> None:
    r = GoldPanningRetriever(base_retriever=AsyncOnlyRetriever(docs=[]), reader=AsyncOnlyReader())
    assert await r.ainvoke("q") == []


# ---------------------------------------------------------------- full result
def test_pan_returns_result_with_trace() -> None:
    docs = _docs(5, needle_at=2)
    r = _retriever(docs, ScriptedReader(), k=2, rounds=3, seed=0)  # same seed: same placements
    got, result = r.pan("q")
    assert [d.page_content for d in got] == [d.page_content for d in r.invoke("q")]
    assert result.calls == 3
    assert len(result.rounds) == 3
    assert result.posteriors.shape == (5,)
    assert int(result.selected[0]) == 2
    assert [t.cited for t in result.rounds] == [(2,), (2,), (2,)]
    assert got[0].metadata["gold_panning_posterior"] == pytest.approx(float(result.posteriors[2]))


async def test_apan() -> None:
    r = GoldPanningRetriever(
        base_retriever=AsyncOnlyRetriever(docs=_docs(4, needle_at=0)),
        reader=AsyncOnlyReader(),
        rounds=2,
        prompts_per_round=1,
    )
    got, result = await r.apan("q", k=1)
    assert len(got) == 1
    assert result.calls == 2
    assert int(result.selected[0]) == 0


# --------------------------------------------------------------------- priors
def test_rank_prior_is_the_default() -> None:
    # An uninformative profile makes no calls, so the posteriors are the prior itself: the
    # engine's default rank map (pinned in tests/engine/test_engine_priors.py), by hand:
    # sigmoid(-1.3802 - log(1 + r)) for r = 0, 1, 2, the odds e^-1.3802 / (1 + r) = 0.251528,
    # 0.125764, 0.083843: [0.20098, 0.11171, 0.07736], each rank's own probability whatever k
    # or n. Not bounded: the log-odds gap log 3 = 1.099 is below 0.75 of the evidence swing at
    # 3 documents (a = 0.25 / 2, b = 0.1): 0.75 * (log(0.9 / 0.125) - log(0.1 / 0.875)) = 3.107.
    _, result = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=1).pan("q")
    expected = [_sigmoid(-1.3802 - math.log(1 + r)) for r in range(3)]
    assert expected == pytest.approx([0.20098, 0.11171, 0.07736], abs=1e-5)
    assert result.posteriors.tolist() == pytest.approx(expected)
    assert DEFAULT_RANK_MAP.probabilities(3).tolist() == pytest.approx(expected)
    _, k3 = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=3).pan("q")
    assert k3.posteriors.tolist() == pytest.approx(expected)  # k chooses what is returned, not the prior
    # the map's expected count over the 3 documents, the mass the older shape carries
    mass3 = sum(expected)
    assert mass3 == pytest.approx(0.39005, abs=1e-5)
    # prior_top10_recall, set, gives the older shape (rank_prior_probs), with that mass: at 3
    # documents weights 0.8 * 0.6^r / (1 + 0.6 + 0.36) + 0.2 / 3 = [0.47483, 0.31156, 0.21361]
    # (summing to 1; the recall shapes only candidates past the 10th), times mass3
    older = [mass3 * w for w in (0.8 / 1.96 + 0.2 / 3, 0.48 / 1.96 + 0.2 / 3, 0.288 / 1.96 + 0.2 / 3)]
    _, strong = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=1, prior_top10_recall=0.9).pan("q")
    assert strong.posteriors.tolist() == pytest.approx(older)
    assert rank_prior_probs(3, k=mass3, top10_recall=0.9).tolist() == pytest.approx(older)
    # prior_head_decay is passed through: 1.0 is flat inside the top 10 (the same mass)
    _, flat_head = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=1, prior_head_decay=1.0).pan("q")
    assert flat_head.posteriors.tolist() == pytest.approx([mass3 / 3] * 3)
    # unset, it comes from a profile whose labelled traces measured the retriever (no rank map)
    measured = FLAT.model_copy(update={"prior_head_decay": 1.0})
    _, from_profile = _retriever(_docs(3), ScriptedReader(), profile=measured, k=1).pan("q")
    assert from_profile.posteriors.tolist() == pytest.approx([mass3 / 3] * 3)
    _, overridden = _retriever(_docs(3), ScriptedReader(), profile=measured, k=1, prior_head_decay=0.6).pan(
        "q"
    )
    assert overridden.posteriors.tolist() == pytest.approx(older)
    # expected_relevant sets the count among the first 10 (the map's slope kept, its offset
    # moved until the first 10 sum to 1), whatever k and however many are returned
    shifted = DEFAULT_RANK_MAP.with_mass(1.0)
    assert shifted.mass(10) == pytest.approx(1.0) and shifted.log_rank == DEFAULT_RANK_MAP.log_rank
    r = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=3, expected_relevant=1)
    post = [d.metadata["gold_panning_posterior"] for d in r.invoke("q")]
    assert post == pytest.approx(shifted.probabilities(3).tolist())
    # the flat prior: without expected_relevant, the map's chance that none of the 3 is
    # relevant, (1 - 0.20098)(1 - 0.11171)(1 - 0.07736) = 0.65486, spread evenly: 1 - 0.65486^(1/3)
    # = 0.13161 each, whatever k; with it, the base rate min(m/n, 0.5): 1/3 with m=1, 1/2 with m=3
    flat_k3 = _retriever(_docs(3), ScriptedReader(), profile=FLAT, k=3, retriever_prior="none")
    none3 = 1.0 - math.prod(1.0 - p for p in expected) ** (1 / 3)
    assert none3 == pytest.approx(0.13161, abs=1e-5)
    assert [d.metadata["gold_panning_posterior"] for d in flat_k3.invoke("q")] == pytest.approx([none3] * 3)
    flat = _retriever(
        _docs(3), ScriptedReader(), profile=FLAT, k=3, expected_relevant=1, retriever_prior="none"
    )
    assert [d.metadata["gold_panning_posterior"] for d in flat.invoke("q")] == pytest.approx([1 / 3] * 3)
    flat3 = _retriever(
        _docs(3), ScriptedReader(), profile=FLAT, k=3, expected_relevant=3, retriever_prior="none"
    )
    assert [d.metadata["gold_panning_posterior"] for d in flat3.invoke("q")] == pytest.approx([0.5] * 3)


def test_score_prior_from_metadata_and_fallback() -> None:
    docs = _docs(2)
    docs[0].metadata["score"], docs[1].metadata["score"] = 0.0, 2.0
    # The score prior shares out the rank map's expected count over the documents given:
    # with expected_relevant=1 the map whose first 10 sum to 1 (slope -1 kept, offset -0.89266
    # by bisection on sum_r sigmoid(offset - log(1 + r)) = 1 over r < 10), whose first 2 are
    # sigmoid(-0.89266) = 0.29056 and sigmoid(-0.89266 - log 2) = 0.16997: m2 = 0.46054.
    shifted = DEFAULT_RANK_MAP.with_mass(1.0)
    assert shifted.offset == pytest.approx(-0.89266, abs=1e-4)
    m2 = shifted.mass(2)
    assert m2 == pytest.approx(0.29056 + 0.16997, abs=1e-5)
    # scores / std (= 1) -> softmax at temperature 1: e^2/(e^2+1) of m2 for the second document
    r = _retriever(
        docs,
        ScriptedReader(),
        profile=FLAT,
        k=2,
        expected_relevant=1,
        retriever_prior="score",
        prior_temperature=1.0,
    )
    out = r.invoke("q")
    assert [d.metadata["i"] for d in out] == [1, 0]  # the score overrules the base order
    e2 = math.exp(2.0)
    assert [d.metadata["gold_panning_posterior"] for d in out] == pytest.approx(
        [m2 * e2 / (e2 + 1), m2 / (e2 + 1)]
    )
    # at temperature 0.5: e^4/(e^4+1) = 0.982 of m2, 0.45225 (under the 0.95 cap)
    e4 = math.exp(4.0)
    out = _retriever(
        docs,
        ScriptedReader(),
        profile=FLAT,
        k=2,
        expected_relevant=1,
        retriever_prior="score",
        prior_temperature=0.5,
    ).invoke("q")
    assert [d.metadata["gold_panning_posterior"] for d in out] == pytest.approx(
        [m2 * e4 / (e4 + 1), m2 / (e4 + 1)]
    )
    # no temperature given or fitted: 0.5 (log-odds gap logit(0.45225) - logit(0.00828) =
    # 4.59), bounded (not fitted for this retriever) to 0.75 of the evidence swing at n = 2
    # (a = 0.25 / 1, b = 0.1): 0.75 * (log(0.9 / 0.25) - log(0.1 / 0.75)) = 0.75 * (1.281 +
    # 2.015) = 2.472 nats: log-odds (c + 2.472, c) with sigmoids summing to m2: c = -2.8525,
    # [sigmoid(-0.3806), sigmoid(-2.8525)] = [0.4060, 0.0546]
    out = _retriever(
        docs, ScriptedReader(), profile=FLAT, k=2, expected_relevant=1, retriever_prior="score"
    ).invoke("q")
    got = [d.metadata["gold_panning_posterior"] for d in out]
    assert got == pytest.approx([0.4060, 0.0546], abs=1e-4) and sum(got) == pytest.approx(m2)
    # the default prior ("auto") reads scores from 5 documents up: two get the rank prior
    out = _retriever(docs, ScriptedReader(), profile=FLAT, k=2, expected_relevant=1).invoke("q")
    assert [d.metadata["i"] for d in out] == [0, 1]
    # five scored documents: the default prior is the score prior. Scores [2, 2, 1, 1, 1]:
    # std sqrt(0.24), the two ahead by 1/sqrt(0.24) = 2.0412 deviations, 4.0825 at
    # temperature 0.5: weights w = e^4.0825 = 59.3 for the two, 1 for the others
    five = _docs(5)
    for d, score in zip(five, (2.0, 2.0, 1.0, 1.0, 1.0)):
        d.metadata["score"] = score
    # (auto reads scores only with a known temperature: the profile's fitted one here;
    # without one it reads the order: the default rank map's first 5, odds 0.251528 / (1 + r),
    # left as they are by the bound, as at 5 documents its log-odds gap log 5 = 1.609 is below
    # 0.75 of the evidence swing, a = 0.25 / 4, b = 0.1: 0.75 * (log(0.9 / 0.0625) - log(0.1 /
    # 0.9375)) = 3.679)
    order_only = _retriever(five, ScriptedReader(), profile=FLAT, k=5).invoke("q")
    swing5 = math.log(0.9 / 0.0625) - math.log(0.1 / 0.9375)
    rank5 = bounded_prior(DEFAULT_RANK_MAP.probabilities(5), max_gap=0.75 * swing5)
    assert rank5.tolist() == pytest.approx([0.20098, 0.11171, 0.07736, 0.05916, 0.04790], abs=1e-5)
    assert [d.metadata["gold_panning_posterior"] for d in order_only] == pytest.approx(rank5.tolist())
    # a fitted temperature is not bounded; the softmax shares the shifted map's count over 5
    fitted = FLAT.model_copy(update={"prior_temperature": 0.5})
    out = _retriever(five, ScriptedReader(), profile=fitted, k=5, expected_relevant=1).invoke("q")
    w = math.exp(2 / math.sqrt(0.24))
    m5 = shifted.mass(5)
    assert [d.metadata["gold_panning_posterior"] for d in out] == pytest.approx(
        [m5 * w / (2 * w + 3)] * 2 + [m5 / (2 * w + 3)] * 3
    )
    # a missing score falls back to the rank prior
    del docs[1].metadata["score"]
    out = _retriever(
        docs, ScriptedReader(), profile=FLAT, k=2, expected_relevant=1, retriever_prior="score"
    ).invoke("q")
    # (the shifted map's first two, [0.29056, 0.16997]: a gap of log 2 = 0.69 nats, not bounded)
    rank = shifted.probabilities(2).tolist()
    assert rank == pytest.approx([0.29056, 0.16997], abs=1e-5)
    assert [d.metadata["gold_panning_posterior"] for d in out] == pytest.approx(rank)
    # equal scores carry no information: flat, the base rate min(1/2, 0.5) of expected_relevant=1
    docs[1].metadata["score"] = 0.0
    out = _retriever(
        docs, ScriptedReader(), profile=FLAT, k=2, expected_relevant=1, retriever_prior="score"
    ).invoke("q")
    assert [d.metadata["gold_panning_posterior"] for d in out] == pytest.approx([0.5, 0.5])


def test_prior_changes_round_one_placement() -> None:
    # entropy policy places the most uncertain documents on the best positions. Flat
    # prior: all equal, input order. Rank prior with expected_relevant=3 (the default map's
    # slope -1, offset 0.58524 so that its first 10 sum to 3, by bisection on sum_r
    # sigmoid(offset - log(1 + r)) over r < 10): log-odds [0.585, -0.108, -0.513] (0.58524 -
    # log(1 + r)), probabilities [0.64227, 0.47305, 0.37440] over n=3. Not bounded: with 3
    # relevant expected among 3 documents no irrelevant one is left for a false lead (a = 0),
    # so the evidence swing is unbounded. The second document is the most uncertain
    # (|p - 1/2| = 0.027) and takes the most diagnostic position, the first; then the third
    # (0.126); the first document (0.142), the surest, goes last. (With the harmonic map and
    # expected_relevant=2 the first document would sit at 0.497, the most uncertain itself,
    # and the order would not change: [0.49659, 0.33031, 0.24745].)
    prof = DetectorProfile(n_positions=3, tpr=[0.9, 0.6, 0.3], fpr=[0.1, 0.2, 0.2])
    # seed=2: the engine's shuffle of the top documents (shuffle_top) keeps the score order.
    kw: dict[str, Any] = {
        "profile": prof,
        "k": 2,
        "expected_relevant": 3,
        "rounds": 1,
        "policy": "entropy",
        "seed": 2,
    }
    _, flat = _retriever(_docs(3), ScriptedReader(), retriever_prior="none", **kw).pan("q")
    _, ranked = _retriever(_docs(3), ScriptedReader(), **kw).pan("q")
    assert flat.rounds[0].shown == (0, 1, 2)
    mapped = DEFAULT_RANK_MAP.with_mass(3.0).probabilities(3)
    assert mapped.tolist() == pytest.approx([0.64227, 0.47305, 0.37440], abs=1e-5)
    assert ranked.prior_log_odds is not None
    assert ranked.prior_log_odds.tolist() == pytest.approx(np.log(mapped / (1 - mapped)).tolist())
    assert ranked.prior_log_odds.tolist() == pytest.approx(
        [0.58524 - math.log(1 + r) for r in range(3)], abs=1e-4
    )
    assert ranked.rounds[0].shown == (1, 2, 0)


# ------------------------------------------------------------ errors, failure
def test_profile_validated_at_construction() -> None:
    with pytest.raises(ValueError, match="neither a bundled profile"):
        _retriever(_docs(2), ScriptedReader(), profile="no-such-profile")
    with pytest.raises(ValueError, match="profile must be a DetectorProfile"):
        _retriever(_docs(2), ScriptedReader(), profile=42)
    r = _retriever(_docs(2), ScriptedReader(), profile="lost-in-the-middle")
    assert isinstance(r.profile, DetectorProfile)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"rounds": 0}, "rounds"),
        ({"k": 0}, "k must be a positive integer"),
        ({"policy": "oracle"}, "policy"),
        ({"stop_at": 1.5}, "stop_at"),
        ({"prior_top10_recall": 1.0}, "prior_top10_recall"),
        ({"prior_top10_recall": 0.0}, "prior_top10_recall"),
        ({"prior_head_decay": 0.0}, "prior_head_decay"),
        ({"prior_head_decay": 1.5}, "prior_head_decay"),
    ],
)
def test_options_validated(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _retriever(_docs(2), ScriptedReader(), **bad)


def test_every_round_failing_raises_clear_error() -> None:
    r = _retriever(_docs(3), BrokenReader(), rounds=2)
    with pytest.raises(AllRoundsFailedError, match="all 2 panning rounds failed.*model endpoint down"):
        r.invoke("q")


def test_every_round_failing_fallback_is_flagged() -> None:
    docs = _docs(3)
    r = _retriever(docs, BrokenReader(), rounds=2, k=3, on_failure="fallback")
    out, result = r.pan("q")
    assert [d.metadata["i"] for d in out] == [0, 1, 2]  # the base order (rank prior)
    assert [d.metadata["gold_panning_panned"] for d in out] == [False, False, False]
    assert result.stop_reason == "all-rounds-failed"
    assert result.failed_rounds == 2


def test_non_reader_is_a_clear_error() -> None:
    r = _retriever(_docs(2), object())
    with pytest.raises(TypeError, match="as a reader"):
        r.invoke("q")


class ChatRecorder(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.chat_parents: list[UUID | None] = []

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.chat_parents.append(parent_run_id)


def test_langchain_chat_model_as_reader() -> None:
    # The model cites the smallest label shown, whichever document holds it. Seeded: without
    # a seed the labels differ per run, and the citations may spread over documents while
    # the retriever's first (never cited) keeps its rank-prior lead.
    chat = SmallestLabelChatModel()
    rec = ChatRecorder()
    out, result = _retriever(_docs(5), chat, k=2, rounds=3, seed=0).pan("q", config={"callbacks": [rec]})
    assert result.failed_rounds == 0
    assert result.calls == 3
    # Labels are drawn at random each round: the smallest names a random document.
    assert [t.cited for t in result.rounds] == [
        (t.windows[0][t.labels[0].index(min(t.labels[0]))],) for t in result.rounds
    ]
    assert result.citation_counts[out[0].metadata["i"]] >= 1
    # the chat model's runs nest under the retriever run (child callbacks)
    outer_run = rec.starts[0][1]
    assert rec.chat_parents == [outer_run] * 3


async def test_langchain_chat_model_as_reader_async() -> None:
    r = GoldPanningRetriever(
        base_retriever=AsyncOnlyRetriever(docs=_docs(4)),
        reader=SmallestLabelChatModel(),
        rounds=2,
        prompts_per_round=1,
    )
    _, result = await r.apan("q")
    assert result.failed_rounds == 0
    assert [len(t.cited) for t in result.rounds] == [1, 1]


def test_simulated_reader_finds_needle_among_many() -> None:
    docs = _docs(30, needle_at=17)
    reader = SimulatedReader(DetectorProfile.bundled("lost-in-the-middle"), {NEEDLE}, rng=3)
    out = _retriever(docs, reader, k=1, rounds=4, seed=0).invoke("q")
    assert out[0].page_content == NEEDLE


def test_seed_makes_random_policy_reproducible() -> None:
    docs = _docs(8, needle_at=5)
    a = _retriever(docs, ScriptedReader(), policy="random", seed=7, rounds=2).pan("q").result
    b = _retriever(docs, ScriptedReader(), policy="random", seed=7, rounds=2).pan("q").result
    assert [t.shown for t in a.rounds] == [t.shown for t in b.rounds]


# ------------------------------------------------------- the standard suite
class TestGoldPanningRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests' retriever suite, offline on a scripted reader."""

    @property
    def retriever_constructor(self) -> type[GoldPanningRetriever]:
        return GoldPanningRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {
            "base_retriever": ListRetriever(docs=_docs(8, needle_at=5)),
            "reader": ScriptedReader(),
            "k": 4,
            "rounds": 2,
        }

    @property
    def retriever_query_example(self) -> str:
        return "where is the needle?"


def test_stopping_options_reach_the_panner() -> None:
    # A reader that cites the needle every round makes the selection confident at once;
    # min_rounds=3 still forces three looks before stop_at may stop. The reader's check is
    # off (content_free=0) so that one reply counts in full. The needle is first in the base
    # order, at the default rank map's log-odds -1.3802 (rank 1: -1.3802 - log 2 = -2.0733),
    # and shown at the generic profile's first position: TPR 0.92, FPR 0.04, robust 0.95 *
    # rate + 0.025 = 0.899 and 0.063, E = log(0.899 / 0.063) = 2.658, through the false-lead
    # mixture (a = 0.25 / 3, b = 0.1) log((0.9 * 14.27 + 0.1) / (0.0833 * 14.27 + 0.9167)) =
    # log(12.94 / 2.106) = 1.816 nats: one look takes it to sigmoid(0.436) = 0.607, past 0.5
    # (at rank 1 it would stop at sigmoid(-0.257) = 0.436).
    docs = _docs(4, needle_at=0)
    _, once = _retriever(docs, ScriptedReader(), rounds=6, k=1, stop_at=0.5, content_free=0.0).pan("q")
    assert once.calls == 1 and once.stop_reason == "threshold"
    assert float(once.posteriors[0]) == pytest.approx(0.607, abs=1e-3)
    r = _retriever(docs, ScriptedReader(), rounds=6, k=1, stop_at=0.5, min_rounds=3, content_free=0.0)
    _, result = r.pan("q")
    assert result.calls == 3
    assert result.stop_reason == "threshold"
    with pytest.raises(ValueError, match="min_rounds"):
        _retriever(_docs(2), ScriptedReader(), min_rounds=0)


# ------------------------------------------- callbacks wrapper and per-round labels
class ConfigReader:
    """A reader that takes ``config=`` (as the chat-model reader does) and records calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def read(self, question: str, documents: Any, *, config: Any = None, labels: Any = None) -> Any:
        from gold_panning_integrations import Reading

        self.calls.append({"config": config, "labels": labels})
        return Reading(cited=())


class ConfigReaderWithoutLabels:
    def __init__(self) -> None:
        self.calls = 0

    def read(self, question: str, documents: Any, *, config: Any = None) -> Any:
        from gold_panning_integrations import Reading

        self.calls += 1
        return Reading(cited=())


def test_the_runs_callbacks_reach_a_reader_that_takes_config_with_its_labels() -> None:
    # The retriever passes its run's child callbacks per query, as the reader's
    # ``config=`` keyword (reader_options of GoldPanner.run); nothing wraps the reader.
    reader = ConfigReader()
    r = _retriever(_docs(2), reader, rounds=1, prompts_per_round=1)
    r.invoke("q")
    (call,) = reader.calls
    assert len(call["labels"]) == 2 and len(set(call["labels"])) == 2
    callbacks = call["config"]["callbacks"]
    assert type(callbacks).__name__ == "CallbackManager"
    assert r._get_engine().reader is reader  # the user's reader, not a wrapper


def test_config_passes_through_the_adaptation_of_a_reader_without_labels(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reader is adapted to the protocol once, when the engine is built; the run's
    # config= then passes through the adaptation, query after query.
    reader = ConfigReaderWithoutLabels()
    r = _retriever(_docs(1), reader, rounds=1, prompts_per_round=1)
    r.invoke("q")
    r.invoke("q")
    assert reader.calls == 2
    assert caplog.text.count("takes no 'labels' argument") == 1
