"""GoldPanner with scripted readers: trace, stopping, failures, determinism, mapping."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pytest
from doubles import FnReader, GoldPanner, TextReader
from doubles import flat_positions as _flat

from gold_panning_integrations import (
    AllRoundsFailedError,
    DetectorProfile,
    PanningResult,
    Reading,
    SimulatedReader,
)
from gold_panning_integrations.engine import log_likelihood_ratios, sigmoid

# Three positions: TPR 0.8/0.6/0.3, FPR 0.2/0.3/0.1 -> diagnosticity 0.6/0.3/0.2,
# cited LLR log 4 / log 2 / log 3, missed LLR log(1/4) / log(4/7) / log(7/9).
PROFILE3 = DetectorProfile(n_positions=3, tpr=[0.8, 0.6, 0.3], fpr=[0.2, 0.3, 0.1])
DOCS3 = ["a", "b", "c"]


def _same(a: PanningResult, b: PanningResult) -> None:
    assert a.posteriors.tolist() == b.posteriors.tolist()
    assert a.log_odds.tolist() == b.log_odds.tolist()
    assert a.ranking.tolist() == b.ranking.tolist()
    assert a.selected.tolist() == b.selected.tolist()
    assert a.citation_counts.tolist() == b.citation_counts.tolist()
    assert a.stop_reason == b.stop_reason and a.calls == b.calls
    assert [t.shown for t in a.rounds] == [t.shown for t in b.rounds]
    assert [t.cited for t in a.rounds] == [t.cited for t in b.rounds]
    assert [_flat(t.positions) for t in a.rounds] == [_flat(t.positions) for t in b.rounds]


# ------------------------------------------------------------------ trace
def test_trace_records_every_round_consistently() -> None:
    reader = TextReader({"c"})
    res = GoldPanner(reader, profile=PROFILE3, rounds=3, k=1).run("q", DOCS3)
    assert res.calls == 3 == len(res.rounds) == len(reader.seen)
    assert [t.round for t in res.rounds] == [1, 2, 3]
    for t, seen in zip(res.rounds, reader.seen):
        assert sorted(t.shown) == [0, 1, 2]  # every document shown every round
        assert [DOCS3[i] for i in t.shown] == seen  # shown is the prompt order
        assert sorted(_flat(t.positions)) == [0, 1, 2]
        assert t.cited == (2,)
        assert t.failed is False
        assert isinstance(t.reading, Reading)
        assert t.posteriors.shape == (3,)
        assert t.seconds >= 0.0
    assert res.rounds[-1].posteriors.tolist() == res.posteriors.tolist()
    assert res.posteriors == pytest.approx(sigmoid(res.log_odds), abs=0)
    assert res.citation_counts.tolist() == [0, 0, 3]
    assert res.ranking[0] == 2 and res.selected.tolist() == [2]
    assert res.policy == "belief" and res.k == 1 and res.panned is True
    assert res.failed_rounds == 0 and res.attempts == 3
    summary = res.summary()
    assert summary["calls"] == 3 and summary["selected"] == [2] and len(summary["rounds"]) == 3


def test_trace_replays_to_the_final_log_odds() -> None:
    """Recompute the beliefs from the trace alone (positions + citations) by the model."""
    profile = DetectorProfile(n_positions=5, tpr=[0.9, 0.5, 0.3, 0.4, 0.7], fpr=[0.05, 0.1, 0.1, 0.1, 0.05])
    reader = SimulatedReader(profile, {"d2", "d4"}, rng=11)
    docs = [f"d{i}" for i in range(5)]
    res = GoldPanner(reader, profile=profile, rounds=6, k=2, expected_relevant=2).run("q", docs)
    llr_c, llr_m = log_likelihood_ratios(profile.tpr, profile.fpr)
    lo = np.full(5, math.log(2 / 3))  # base rate expected_relevant/n = 2/5 -> odds 2/3
    for t in res.rounds:
        for d, j in zip(t.shown, _flat(t.positions)):
            lo[d] += llr_c[j] if d in t.cited else llr_m[j]
        assert t.posteriors == pytest.approx(sigmoid(lo), abs=1e-12)
    assert res.log_odds == pytest.approx(lo, abs=1e-12)
    assert res.ranking.tolist() == np.argsort(-lo, kind="stable").tolist()
    assert res.selected.tolist() == res.ranking[:2].tolist()


def test_k_selects_the_top_k_of_the_ranking() -> None:
    reader = TextReader({"b", "d"})
    profile = DetectorProfile(n_positions=4, tpr=[0.9, 0.6, 0.6, 0.8], fpr=[0.1] * 4)
    res = GoldPanner(reader, profile=profile, rounds=3, k=2).run("q", ["a", "b", "c", "d"])
    assert sorted(res.selected.tolist()) == [1, 3]
    assert res.selected.tolist() == res.ranking[:2].tolist()
    assert res.k == 2
    # The k passed to run() overrides the panner's.
    res1 = GoldPanner(reader, profile=profile, rounds=3, k=2).run("q", ["a", "b", "c", "d"], k=1)
    assert res1.k == 1 and len(res1.selected) == 1


def test_k_larger_than_n_selects_everything() -> None:
    res = GoldPanner(TextReader({"a"}), profile=PROFILE3, rounds=2, k=5).run("q", DOCS3)
    assert res.k == 3
    assert sorted(res.selected.tolist()) == [0, 1, 2]
    assert res.selected[0] == 0


def test_zero_documents_make_no_calls() -> None:
    reader = TextReader({"a"})
    res = GoldPanner(reader, profile=PROFILE3, rounds=3).run("q", [])
    assert reader.seen == []
    assert res.calls == 0 and res.rounds == ()
    assert res.stop_reason == "no-documents"
    assert res.panned is False
    assert res.posteriors.shape == (0,) and res.ranking.shape == (0,) and res.selected.shape == (0,)


def test_one_document() -> None:
    reader = TextReader({"only"})
    res = GoldPanner(reader, profile=PROFILE3, rounds=2).run("q", ["only"])
    assert reader.seen == [["only"], ["only"]]
    # One shown document uses the profile's first position (TPR 0.8, FPR 0.2):
    # base rate k/n = 1 is capped at 1/2 (log-odds 0); two citations add 2 log 4.
    assert res.log_odds == pytest.approx([2 * math.log(4)])
    assert res.selected.tolist() == [0]


# ------------------------------------------------------------------ stopping
def test_stop_at_threshold_stops_early() -> None:
    # Gold "c". Round 1 (all tied): c at position 2, cited: log(1/2) + log 3 = log 1.5,
    # p = 0.6 >= 0.55, so panning stops after one call.
    reader = TextReader({"c"})
    res = GoldPanner(reader, profile=PROFILE3, rounds=5, stop_at=0.55, k=1).run("q", DOCS3)
    assert res.calls == 1
    assert res.stop_reason == "threshold"
    assert res.posteriors[2] == pytest.approx(0.6)
    assert res.selected.tolist() == [2]


def test_stop_at_not_reached_runs_all_rounds() -> None:
    # With a higher threshold the first round (p = 0.6) is not enough; the second puts
    # c at position 0 (cited: + log 4 -> odds 6, p = 6/7 = 0.857), still below 0.9;
    # the third adds log 4 again (odds 24, p = 0.96) and stops there.
    res = GoldPanner(TextReader({"c"}), profile=PROFILE3, rounds=5, stop_at=0.9).run("q", DOCS3)
    assert [t.posteriors[2] for t in res.rounds] == pytest.approx([0.6, 6 / 7, 24 / 25])
    assert res.calls == 3 and res.stop_reason == "threshold"
    res2 = GoldPanner(TextReader({"c"}), profile=PROFILE3, rounds=2, stop_at=0.99).run("q", DOCS3)
    assert res2.calls == 2 and res2.stop_reason == "rounds"


def test_max_calls_caps_the_rounds() -> None:
    reader = TextReader({"c"})
    res = GoldPanner(reader, profile=PROFILE3, rounds=5, max_calls=2).run("q", DOCS3)
    assert res.calls == 2 == len(reader.seen)
    assert res.stop_reason == "call-budget"


# ------------------------------------------------------------------ failures
def test_failed_reading_leaves_beliefs_unchanged_and_is_recorded() -> None:
    def fn(i: int, docs: list[str]) -> Reading:
        if i == 0:
            return Reading.failure("model said nothing useful", attempts=3, raw="???")
        return Reading(cited=tuple(j for j, d in enumerate(docs) if d == "c"))

    res = GoldPanner(FnReader(fn), profile=PROFILE3, rounds=2).run("q", DOCS3)
    first = res.rounds[0]
    assert first.failed is True and first.cited == ()
    assert first.reading.error == "model said nothing useful"
    # Base rate 1/3 for every document: unchanged by the failed round.
    assert first.posteriors == pytest.approx([1 / 3] * 3, abs=1e-15)
    assert res.failed_rounds == 1
    assert res.attempts == 4  # 3 retries in round 1 + 1
    assert res.citation_counts.tolist() == [0, 0, 1]
    # Round 2 is then exactly like round 1 of a clean run (all tied, doc i at i):
    # a missed at 0: log(1/2) + log(1/4) -> 1/9; b missed at 1: log(1/2) + log(4/7)
    # = log(2/7) -> 2/9; c cited at 2: log(1/2) + log 3 -> 0.6.
    assert res.posteriors == pytest.approx([1 / 9, 2 / 9, 0.6], abs=1e-12)
    assert res.panned is True and res.stop_reason == "rounds"


def test_a_failed_reading_with_citations_is_still_ignored() -> None:
    res = GoldPanner(
        FnReader(lambda i, d: Reading(cited=(0, 1), failed=True, error="partial")),
        profile=PROFILE3,
        rounds=1,
        on_failure="fallback",
    ).run("q", DOCS3)
    assert res.rounds[0].cited == ()
    assert res.citation_counts.tolist() == [0, 0, 0]
    assert res.posteriors == pytest.approx([1 / 3] * 3)


def test_reader_exception_becomes_a_failed_round(caplog: pytest.LogCaptureFixture) -> None:
    def fn(i: int, docs: list[str]) -> Reading:
        if i == 1:
            raise RuntimeError("connection reset by peer")
        return Reading(cited=tuple(j for j, d in enumerate(docs) if d == "c"))

    with caplog.at_level(logging.WARNING):
        res = GoldPanner(FnReader(fn), profile=PROFILE3, rounds=3).run("q", DOCS3)
    assert [t.failed for t in res.rounds] == [False, True, False]
    err = res.rounds[1].reading.error or ""
    assert "RuntimeError" in err and "connection reset" in err
    assert res.rounds[1].posteriors.tolist() == res.rounds[0].posteriors.tolist()
    assert res.citation_counts.tolist() == [0, 0, 2]
    assert "RuntimeError" in caplog.text


def test_every_round_failing_raises_one_clear_error() -> None:
    def fn(i: int, docs: list[str]) -> Reading:
        raise TimeoutError(f"timeout {i}")

    with pytest.raises(AllRoundsFailedError) as info:
        GoldPanner(FnReader(fn), profile=PROFILE3, rounds=3).run("q", DOCS3)
    assert len(info.value.errors) == 3
    assert "timeout 2" in str(info.value)
    assert "fallback" in str(info.value)  # the message says what to do


def test_every_round_failing_with_fallback_returns_the_prior_order() -> None:
    reader = FnReader(lambda i, d: Reading.failure("down"))
    prior = [0.1, 0.5, 0.3, 0.2]
    res = GoldPanner(reader, profile=PROFILE3, rounds=2, on_failure="fallback").run(
        "q", ["a", "b", "c", "d"], prior_probs=prior
    )
    assert res.panned is False
    assert res.stop_reason == "all-rounds-failed"
    assert res.ranking.tolist() == [1, 2, 3, 0]
    assert res.posteriors == pytest.approx(prior, abs=1e-12)
    assert res.calls == 2 and res.failed_rounds == 2


def test_invalid_positions_from_a_reader_are_dropped_not_mapped() -> None:
    # Defence in depth: a reader that ignores the contract (out of range, negative,
    # duplicate, bool) gets only the valid position 0 used.
    reader = FnReader(lambda i, d: Reading(cited=(0, 0, 3, -1, 7, True)))  # type: ignore[arg-type]
    res = GoldPanner(reader, profile=PROFILE3, rounds=1).run("q", DOCS3)
    t = res.rounds[0]
    assert t.cited == (0,)
    assert t.reading.invalid_labels == 4 and t.reading.duplicate_labels == 1
    assert res.invalid_labels == 4
    assert res.citation_counts.tolist() == [1, 0, 0]


# ------------------------------------------------------------------ uninformative profile
def test_uninformative_profile_makes_no_calls(caplog: pytest.LogCaptureFixture) -> None:
    flat = DetectorProfile(n_positions=3, tpr=[0.4, 0.2, 0.7], fpr=[0.4, 0.2, 0.7])
    reader = TextReader({"a"})
    with caplog.at_level(logging.WARNING):
        res = GoldPanner(reader, profile=flat, rounds=4).run(
            "q", ["a", "b", "c"], prior_log_odds=[-1.0, 2.0, 0.5]
        )
    assert reader.seen == []
    assert res.calls == 0 and res.rounds == ()
    assert res.stop_reason == "uninformative-profile"
    assert res.panned is False
    assert res.ranking.tolist() == [1, 2, 0]
    assert res.log_odds.tolist() == [-1.0, 2.0, 0.5]
    assert "TPR == FPR" in caplog.text


# ------------------------------------------------------------------ determinism, async
@pytest.mark.parametrize("policy", ["belief", "entropy", "random"])
def test_same_seed_same_result(policy: str) -> None:
    profile = DetectorProfile.bundled("lost-in-the-middle")
    docs = [f"doc{i}" for i in range(30)]

    def once() -> PanningResult:
        reader = SimulatedReader(profile, {"doc7"}, rng=5)
        return GoldPanner(reader, profile=profile, rounds=5, policy=policy, rng=9).run("q", docs)

    _same(once(), once())


def test_random_policy_depends_on_the_seed() -> None:
    docs = [f"doc{i}" for i in range(30)]
    profile = DetectorProfile.bundled("lost-in-the-middle")
    a = GoldPanner(TextReader(set()), profile=profile, rounds=1, policy="random", rng=1).run("q", docs)
    b = GoldPanner(TextReader(set()), profile=profile, rounds=1, policy="random", rng=2).run("q", docs)
    assert a.rounds[0].shown != b.rounds[0].shown


def test_run_rng_argument_overrides_the_panner_rng() -> None:
    docs = [f"doc{i}" for i in range(12)]
    panner = GoldPanner(TextReader({"doc3"}), profile="lost-in-the-middle", rounds=3, policy="random", rng=0)
    a = panner.run("q", docs, rng=np.random.default_rng(77))
    b = panner.run("q", docs, rng=np.random.default_rng(77))
    _same(a, b)


async def test_arun_equals_run_for_a_deterministic_reader() -> None:
    docs = [f"doc{i}" for i in range(8)]
    profile = DetectorProfile.bundled("lost-in-the-middle")
    kwargs = {"profile": profile, "rounds": 4, "k": 2, "policy": "belief", "rng": 3}
    sync = GoldPanner(TextReader({"doc2", "doc5"}), **kwargs).run("q", docs)
    asyn = await GoldPanner(TextReader({"doc2", "doc5"}), **kwargs).arun("q", docs)
    _same(sync, asyn)
    assert sorted(sync.selected.tolist()) == [2, 5]


async def test_arun_records_a_raising_reader_as_a_failed_round() -> None:
    class Flaky:
        calls = 0

        async def aread(self, question: str, documents: Sequence[str]) -> Reading:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise ConnectionError("boom")
            return Reading(cited=(0,))

    res = await GoldPanner(Flaky(), profile=PROFILE3, rounds=2).arun("q", DOCS3)
    assert [t.failed for t in res.rounds] == [True, False]


def test_run_needs_a_sync_reader_and_arun_an_async_one() -> None:
    class OnlyAsync:
        async def aread(self, question: str, documents: Sequence[str]) -> Reading:
            return Reading()

    with pytest.raises(TypeError, match="read"):
        GoldPanner(OnlyAsync(), profile=PROFILE3).run("q", DOCS3)
    with pytest.raises(TypeError, match="read"):
        GoldPanner(None, profile=PROFILE3).run("q", DOCS3)


# ------------------------------------------------------------------ oracle
def test_oracle_needs_truth() -> None:
    panner = GoldPanner(TextReader(set()), profile=PROFILE3, policy="oracle")
    with pytest.raises(ValueError, match="truth"):
        panner.run("q", DOCS3)


def test_oracle_places_the_truth_on_the_most_diagnostic_position() -> None:
    reader = TextReader(set())
    res = GoldPanner(reader, profile=PROFILE3, rounds=3, policy="oracle", rng=0).run(
        "q", DOCS3, truth=[False, False, True]
    )
    for t in res.rounds:
        pos = dict(zip(t.shown, _flat(t.positions)))
        assert pos[2] == 0  # position 0 has the largest |TPR - FPR|


def test_truth_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\(3,\)"):
        GoldPanner(TextReader(set()), profile=PROFILE3, policy="oracle").run("q", DOCS3, truth=[True])


# ------------------------------------------------------------------ prompt order and mapping
def test_reader_sees_documents_in_position_order() -> None:
    # Most diagnostic position is the LAST one: |TPR - FPR| = 0.2, 0.4, 0.8.
    profile = DetectorProfile(n_positions=3, tpr=[0.3, 0.5, 0.9], fpr=[0.1] * 3)
    reader = TextReader(set())
    res = GoldPanner(reader, profile=profile, rounds=1).run(
        "q", ["a", "b", "c"], prior_log_odds=[2.0, 1.0, 0.0]
    )
    # a (best) -> position 2 (last in the prompt), b -> 1, c -> 0: prompt c, b, a.
    assert reader.seen == [["c", "b", "a"]]
    assert res.rounds[0].shown == (2, 1, 0)
    assert _flat(res.rounds[0].positions) == (0, 1, 2)


@pytest.mark.parametrize("j", [0, 1, 2, 3])
def test_citing_prompt_position_j_updates_only_the_document_shown_there(j: int) -> None:
    tpr = [0.3, 0.9, 0.5, 0.7]
    fpr = [0.1, 0.05, 0.2, 0.1]
    profile = DetectorProfile(n_positions=4, tpr=tpr, fpr=fpr)
    docs = ["w", "x", "y", "z"]
    prior = np.array([0.5, -0.5, 1.5, 0.0])
    reader = FnReader(lambda i, d: Reading(cited=(j,)))
    res = GoldPanner(reader, profile=profile, rounds=1).run("q", docs, prior_log_odds=prior)
    t = res.rounds[0]
    target = t.shown[j]
    assert reader.seen[0][j] == docs[target]
    assert t.cited == (target,)
    llr_c, llr_m = log_likelihood_ratios(tpr, fpr)
    expected = prior.copy()
    for d, p in zip(t.shown, _flat(t.positions)):
        expected[d] += llr_c[p] if d == target else llr_m[p]
    assert res.log_odds == pytest.approx(expected, abs=1e-12)
    # Every citation LLR is positive and every miss LLR negative here, so exactly one
    # document gained belief: the one at prompt position j.
    gained = np.flatnonzero(res.log_odds > prior)
    assert gained.tolist() == [target]


# ------------------------------------------------------------------ constructor validation
@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"rounds": 0}, "rounds"),
        ({"k": 0}, "k must be"),
        ({"policy": "greedy"}, "greedy"),
        ({"max_docs_per_prompt": 0}, "max_docs_per_prompt"),
        ({"stop_at": 1.0}, "stop_at"),
        ({"max_calls": 0}, "max_calls"),
        ({"on_failure": "ignore"}, "on_failure"),
        ({"prior": "flat"}, "prior"),
    ],
)
def test_constructor_validates_options(kwargs: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        GoldPanner(TextReader(set()), profile=PROFILE3, **kwargs)


def test_profile_of_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="profile"):
        GoldPanner(TextReader(set()), profile=42)


@pytest.mark.parametrize("out", [[0], None])
def test_a_reader_returning_a_non_reading_gets_a_clear_outcome(out: object) -> None:
    reader = FnReader(lambda i, d: out)  # type: ignore[arg-type, return-value]
    panner = GoldPanner(reader, profile=PROFILE3, rounds=1, on_failure="fallback")
    try:
        res = panner.run("q", DOCS3)
    except TypeError as err:  # acceptable: a clear error that names the contract
        assert "Reading" in str(err)
    else:  # also acceptable: a failed round that says why
        assert res.rounds[0].failed and "Reading" in (res.rounds[0].reading.error or "")
