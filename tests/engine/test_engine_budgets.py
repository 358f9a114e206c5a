"""Issue-7 engine features: budgets, stopping rules, windows, pruning, evidence temperature,
the retriever priors. Numbers derived by hand where they can be."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import numpy as np
import pytest
from doubles import GoldPanner

from gold_panning_integrations import DetectorProfile, Reading
from gold_panning_integrations.engine.priors import MAX_PRIOR, rank_prior_probs, score_prior_probs

FLAT2 = DetectorProfile(n_positions=2, tpr=[0.8, 0.8], fpr=[0.2, 0.2])


class Cites:
    """Cites every shown document whose text is in ``targets``; reports tokens."""

    def __init__(self, targets: set[str], tokens_per_doc: int = 10) -> None:
        self.targets = targets
        self.tokens_per_doc = tokens_per_doc
        self.prompts: list[list[str]] = []

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.prompts.append(list(documents))
        cited = tuple(i for i, d in enumerate(documents) if d in self.targets)
        return Reading(cited=cited, prompt_tokens=self.tokens_per_doc * len(documents), completion_tokens=1)

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        await asyncio.sleep(0)
        return self.read(question, documents)


def test_evidence_temperature_divides_the_log_likelihood_ratio() -> None:
    # One round, 2 docs, uniform prior; doc "a" cited: log-odds += log(0.8/0.2) / T.
    for temp in (1.0, 2.0):
        res = GoldPanner(
            Cites({"a"}), profile=FLAT2, rounds=1, prior="uniform", evidence_temperature=temp
        ).run("q", ["a", "b"])
        assert res.log_odds[0] == pytest.approx(math.log(4.0) / temp)
        assert res.log_odds[1] == pytest.approx(math.log(0.2 / 0.8) / temp)


def test_evidence_temperature_is_read_from_the_profile() -> None:
    prof = FLAT2.model_copy(update={"evidence_temperature": 4.0})
    res = GoldPanner(Cites({"a"}), profile=prof, rounds=1, prior="uniform").run("q", ["a", "b"])
    assert res.log_odds[0] == pytest.approx(math.log(4.0) / 4.0)


def test_max_calls_stops_with_its_reason() -> None:
    res = GoldPanner(Cites({"a"}), profile=FLAT2, rounds=5, max_calls=2).run("q", ["a", "b"])
    assert res.calls == 2 and res.stop_reason == "call-budget"


def test_token_budget_counts_reported_tokens() -> None:
    # 2 docs x 10 tokens = 20 per round; a budget of 50 allows 2 rounds (20 + 20 + 20 > 50).
    res = GoldPanner(Cites({"a"}), profile=FLAT2, rounds=5, max_prompt_tokens=50).run("q", ["a", "b"])
    assert res.calls == 2 and res.prompt_tokens == 40 and res.stop_reason == "token-budget"


def test_threshold_stop_uses_the_mean_posterior_of_the_selection() -> None:
    # Base-rate prior 1/2 (n=2, k=1): after one citation doc a is at 0.8 >= 0.75.
    res = GoldPanner(Cites({"a"}), profile=FLAT2, rounds=5, stop_at=0.75).run("q", ["a", "b"])
    assert res.calls == 1 and res.stop_reason == "threshold"
    assert res.posteriors[0] == pytest.approx(0.8)


def test_min_rounds_delays_threshold_stopping() -> None:
    # After round 1 doc a is at 0.8 >= 0.75, but two looks are required; after round 2
    # (another citation: odds 4 * 4 = 16) it stops at 16/17.
    res = GoldPanner(Cites({"a"}), profile=FLAT2, rounds=5, stop_at=0.75, min_rounds=2).run("q", ["a", "b"])
    assert res.calls == 2 and res.stop_reason == "threshold"
    assert res.posteriors[0] == pytest.approx(16 / 17)
    with pytest.raises(ValueError, match="min_rounds"):
        GoldPanner(Cites(set()), profile=FLAT2, min_rounds=0)


def test_min_gain_stops_once_nothing_more_is_expected() -> None:
    prof = DetectorProfile(n_positions=4, tpr=[0.99, 0.9, 0.9, 0.95], fpr=[0.01, 0.01, 0.01, 0.01])
    docs = ["a", "b", "c", "d"]
    res = GoldPanner(Cites({"a"}), profile=prof, rounds=8, min_gain=0.005).run("q", docs)
    # Prior 1/4 (odds 1/3); one citation at position 0 multiplies the odds by 0.99/0.01 = 99:
    # odds 33, posterior 33/34. Another round could only move the selection's mean posterior
    # from 0.971 towards 1 with small probability mass, less than 0.005 in expectation.
    assert res.stop_reason == "converged" and res.calls == 1
    assert int(res.selected[0]) == 0 and res.posteriors[0] == pytest.approx(33 / 34)


def test_budget_without_windows_leaves_the_rest_out_and_unchanged() -> None:
    docs = [f"d{i}" for i in range(6)]
    reader = Cites(set())
    res = GoldPanner(reader, profile=FLAT2, rounds=1, max_docs_per_prompt=2).run("q", docs)
    assert len(reader.prompts[0]) == 2 and res.calls == 1
    shown = set(res.rounds[0].shown)
    for i in range(6):
        if i not in shown:
            assert res.log_odds[i] == pytest.approx(res.prior_log_odds[i])


def test_windows_show_every_document_once_per_round_with_round_robin_by_score() -> None:
    docs = [f"d{i}" for i in range(7)]
    reader = Cites({"d0"})
    res = GoldPanner(reader, profile=FLAT2, rounds=2, max_docs_per_prompt=3, windows=True, k=1).run("q", docs)
    r1 = res.rounds[0]
    assert res.calls == 6 and r1.calls == 3  # ceil(7/3) prompts per round
    assert sorted(r1.shown) == list(range(7))
    # Ties keep input order, dealt round-robin: windows hold {0,3,6}, {1,4}, {2,5}.
    assert [sorted(w) for w in r1.windows] == [[0, 3, 6], [1, 4], [2, 5]]
    assert res.selected.tolist() == [0]


def test_windows_are_sent_concurrently_by_arun() -> None:
    started: list[int] = []
    peak = 0

    class Slow(Cites):
        async def aread(self, question: str, documents: Sequence[str]) -> Reading:
            nonlocal peak
            started.append(1)
            peak = max(peak, len(started))
            await asyncio.sleep(0.01)
            started.pop()
            return self.read(question, documents)

    docs = [f"d{i}" for i in range(6)]
    asyncio.run(
        GoldPanner(Slow({"d1"}), profile=FLAT2, rounds=1, max_docs_per_prompt=2, windows=True).arun("q", docs)
    )
    assert peak == 3


def test_pruning_needs_two_looks_and_never_drops_the_selection() -> None:
    prof = DetectorProfile(n_positions=3, tpr=[0.9, 0.9, 0.9], fpr=[0.05, 0.05, 0.05])
    docs = ["a", "b", "c"]
    reader = Cites({"a"})
    res = GoldPanner(reader, profile=prof, rounds=4, prune_below=0.5, k=1).run("q", docs)
    # Rounds 1-2: all three shown (nobody has two looks yet); then b and c (evidence ratio
    # (0.1/0.95)^2 < 0.5) leave; a, the selection, stays.
    assert [len(p) for p in reader.prompts] == [3, 3, 1, 1]
    assert [r.active for r in res.rounds] == [3, 3, 1, 1]
    assert res.selected.tolist() == [0]


def test_rank_prior_sums_to_k_is_monotone_and_has_a_flat_tail() -> None:
    p = rank_prior_probs(100, k=1, top10_recall=0.7, head_decay=0.85, head_floor=0.0)
    assert p.sum() == pytest.approx(1.0)
    assert p[:10].sum() == pytest.approx(0.7)
    assert np.all(np.diff(p) <= 1e-12)
    np.testing.assert_allclose(p[10:], 0.3 / 90)
    q = rank_prior_probs(5, k=3, top10_recall=0.9)
    assert q.sum() == pytest.approx(3.0) and q.max() <= MAX_PRIOR


def test_score_prior_is_a_softmax_scaled_to_k() -> None:
    p = score_prior_probs([2.0, 0.0], k=1, temperature=1.0)
    assert p[0] == pytest.approx(math.e**2 / (math.e**2 + 1))
    with pytest.raises(ValueError, match="finite"):
        score_prior_probs([1.0, float("nan")])


def test_invalid_budget_options_are_refused() -> None:
    for kw in (
        {"max_prompt_tokens": 0},
        {"min_gain": 0.0},
        {"prune_below": 1.5},
        {"evidence_temperature": 0.0},
    ):
        with pytest.raises(ValueError):
            GoldPanner(Cites(set()), profile=FLAT2, **kw)


def test_rank_prior_below_chance_recall_is_raised_to_chance_so_the_head_still_leads() -> None:
    # n = 15 at the default 0.5: chance puts the needle in the top 10 with 10/15, so the
    # recall is taken as 2/3: head weights (2/3) * 0.85^r / sum(0.85^0..9), tail (1/3) / 5
    # = 1/15 each; head ranks below the tail's weight are lifted to it (monotone), then
    # everything is scaled to sum to k = 1.
    p = rank_prior_probs(15, k=1, top10_recall=0.5, head_decay=0.85, head_floor=0.0)
    g = 0.85 ** np.arange(10)
    w = np.concatenate([np.maximum((2 / 3) * g / g.sum(), 1 / 15), np.full(5, 1 / 15)])
    np.testing.assert_allclose(p, w / w.sum())
    assert p[0] > 1.8 * p[14]  # before: flat, p[0] == p[14] == 1/15
