"""The probability is a measurement (issue 42): what a document's posterior says does not
depend on how many documents were asked for (``k`` only selects), and silence is evidence.
Also the worked examples of :func:`~gold_panning_integrations.engine.priors.bounded_prior`
and :func:`~gold_panning_integrations.engine.rounds.evidence_swing`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading, bundled_profiles
from gold_panning_integrations.engine.priors import BOUND_SHARE, MAX_PRIOR, bounded_prior
from gold_panning_integrations.engine.rounds import evidence_swing

QUESTION = "where is the needle?"
DOCS = [f"passage {i}" for i in range(8)]
KS: list[int | None] = [1, 2, 4, 8, None]


class Silent:
    """Cites nothing, whatever it is shown."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading()


class CitesFour:
    """Cites passage #4 in every prompt that shows it, nothing else."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d == "passage 4"))


def _runs(reader: object, profile: str) -> dict[int | None, object]:
    """One run per k: the same question, documents, reader, profile and seed."""
    return {
        k: GoldPanner(reader, DetectorProfile.bundled(profile), k=k, rng=0).run(QUESTION, DOCS)  # type: ignore[arg-type]
        for k in KS
    }


@pytest.mark.parametrize("reader", [Silent(), CitesFour()], ids=["silent", "cites-4"])
def test_posteriors_and_p_none_do_not_depend_on_k(reader: object) -> None:
    runs = _runs(reader, "lost-in-the-middle")
    first = runs[1]
    for k, res in runs.items():
        # bit for bit: no probability reads k
        assert res.posteriors.tolist() == first.posteriors.tolist(), k  # type: ignore[attr-defined]
        assert res.p_none == first.p_none, k  # type: ignore[attr-defined]
        assert res.ranking.tolist() == first.ranking.tolist(), k  # type: ignore[attr-defined]
        # k only chooses how many come back (None: no count limit)
        assert len(res.selected) == (8 if k is None else k), k  # type: ignore[attr-defined]
        assert res.selected.tolist() == first.ranking[: len(res.selected)].tolist(), k  # type: ignore[attr-defined]


@pytest.mark.parametrize("profile", ["lost-in-the-middle", *bundled_profiles()])
def test_the_cited_passage_is_first_at_every_k_under_every_profile(profile: str) -> None:
    runs = _runs(CitesFour(), profile)
    for k, res in runs.items():
        assert int(res.ranking[0]) == 4, (profile, k)  # type: ignore[attr-defined]
        assert int(res.selected[0]) == 4, (profile, k)  # type: ignore[attr-defined]
        assert res.posteriors.tolist() == runs[1].posteriors.tolist(), (profile, k)  # type: ignore[attr-defined]


def test_a_silent_reader_says_nothing_is_relevant() -> None:
    # 8 candidates, the defaults (2 rounds x 3 prompts, silent_rate 0.1, prior mass 1):
    # six empty replies, each a miss for every shown document as far as a silence rate of
    # 0.1 does not explain it, leave p_none = prod(1 - p_i) >= 0.8, so a relevance floor
    # of 0.5 returns nothing.
    res = GoldPanner(Silent(), DetectorProfile.bundled("lost-in-the-middle"), rng=0).run(QUESTION, DOCS)
    assert res.p_none >= 0.8
    assert res.p_none == pytest.approx(float(np.prod(1.0 - res.posteriors)))
    floored = GoldPanner(Silent(), DetectorProfile.bundled("lost-in-the-middle"), rng=0, min_relevance=0.5)
    assert floored.run(QUESTION, DOCS).selected.tolist() == []


def test_bounded_prior_worked_example() -> None:
    # [0.9, 0.1]: log-odds gap 2 log 9 = 4.394 > 2.197 = log 9 (a 9:1 odds ratio). Pulled
    # to log-odds (c + log 9, c) and shifted so the two sum to 1 as before: by symmetry
    # c = -log(9) / 2, i.e. sigmoid(+-1.0986) = [0.75, 0.25].
    got = bounded_prior([0.9, 0.1], max_gap=math.log(9))
    assert got.tolist() == pytest.approx([0.75, 0.25], abs=1e-9)
    # within the bound, or an unbounded gap: unchanged (a copy)
    same = np.array([0.6, 0.4])
    out = bounded_prior(same, max_gap=2.0)
    assert out.tolist() == [0.6, 0.4] and out is not same
    assert bounded_prior([0.9, 0.1], max_gap=math.inf).tolist() == [0.9, 0.1]
    # order kept and mass kept: three documents summing to 1, gap brought to 1 nat
    p = bounded_prior([0.7, 0.2, 0.1], max_gap=1.0)
    lo = np.log(p / (1 - p))
    assert float(lo[0] - lo[2]) == pytest.approx(1.0, abs=1e-9)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    assert p[0] > p[1] > p[2] and p.max() <= MAX_PRIOR


def test_evidence_swing_worked_example() -> None:
    # Defaults at 8 candidates: a = false_leads / (n - focus) = 0.25 / 7, b = blind_rate
    # = 0.1: log(0.9 / 0.0357) - log(0.1 / 0.9643) = 3.227 + 2.266 = 5.493 nats, and the
    # rank prior (not fitted for the retriever) is bounded at 0.75 of it: 4.120.
    swing = evidence_swing(PanningConfig(), 8)
    assert swing == pytest.approx(math.log(0.9 / (0.25 / 7)) - math.log(0.1 / (1 - 0.25 / 7)))
    assert swing == pytest.approx(5.493, abs=1e-3)
    assert BOUND_SHARE * swing == pytest.approx(4.120, abs=1e-3)
    # k does not enter: the same at any k; expected_relevant does (focus 3: a = 0.25 / 5)
    assert evidence_swing(PanningConfig(k=1), 8) == evidence_swing(PanningConfig(k=8), 8) == swing
    three = evidence_swing(PanningConfig(expected_relevant=3), 8)
    assert three == pytest.approx(math.log(0.9 / 0.05) - math.log(0.1 / 0.95))
    # a rate of 0 is the paper's unbounded update
    assert evidence_swing(PanningConfig(false_leads=0.0), 8) == math.inf
    assert evidence_swing(PanningConfig.paper(), 8) == math.inf
