"""A profile learned from unlabelled traffic (issue 48): EM over the latent relevance."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.calibration.traces import trace_record
from gold_panning_integrations.calibration.unlabelled import (
    MIN_UNLABELLED_QUERIES,
    NotEnoughTracesError,
    TrafficLearner,
    learn_unlabelled,
)
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP

GENERIC = DetectorProfile.bundled("lost-in-the-middle")
DOCS = [f"Passage number {i} about subject {i}." for i in range(10)]


class Perfect:
    """Cites every relevant passage shown, nothing else."""

    def __init__(self, relevant: set[str]) -> None:
        self.relevant = relevant

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d in self.relevant))


def _traffic(
    profile: object, queries: int, seed: int
) -> tuple[list[dict[str, object]], list[tuple[object, np.ndarray]]]:
    """``queries`` questions, each passage relevant with the default rank map's probability."""
    p = DEFAULT_RANK_MAP.probabilities(10)
    records, out = [], []
    for i in range(queries):
        mask = np.random.default_rng(seed + i).random(10) < p
        res = GoldPanner(Perfect({d for d, m in zip(DOCS, mask) if m}), profile).run(f"q{seed + i}?", DOCS)
        records.append(trace_record(res))
        out.append((res, mask))
    return records, out


def test_too_few_queries_are_refused_with_the_number_needed() -> None:
    records, _ = _traffic(GENERIC, 3, 0)
    with pytest.raises(
        NotEnoughTracesError, match=rf"at least {MIN_UNLABELLED_QUERIES} queries; these hold 3"
    ):
        learn_unlabelled(records, GENERIC)


def test_a_perfect_readers_rates_are_learned_without_labels() -> None:
    records, _ = _traffic(GENERIC, 60, 100)
    fit = learn_unlabelled(records, GENERIC)
    grid = fit.profile.grid_positions or []
    # The generic profile said 0.25-0.92; the reader cites what is relevant wherever shown
    # (where relevant passages were seen often enough to tell: the start's pseudo-sighting
    # and Jeffreys' half weigh on the others)
    seen = [g for g, s in zip(grid, fit.relevant_sightings) if s >= 5]
    assert len(seen) >= 3 and min(fit.profile.tpr[g] for g in seen) > 0.8
    assert max(fit.profile.fpr[g] for g in grid) < 0.05
    assert fit.tpr_se.shape == (len(grid),) and np.all(fit.tpr_se > 0)
    assert fit.profile.extra["learned_without_labels"]["queries"] == 60
    # and the probabilities it gives on new questions are confident and right
    _, out = _traffic(fit.profile, 40, 10_000)
    some = [(r, m) for r, m in out if m.any()]
    assert np.mean([r.posteriors.max() for r, _ in some]) >= 0.9  # type: ignore[attr-defined]
    assert all(m[r.ranking[0]] for r, m in some)  # type: ignore[attr-defined]


def test_labels_are_not_read() -> None:
    records, out = _traffic(GENERIC, MIN_UNLABELLED_QUERIES, 200)
    labelled = [dict(r, relevant=[int(i) for i in np.flatnonzero(m)]) for r, (_, m) in zip(records, out)]
    a = learn_unlabelled(records, GENERIC, iterations=5).profile
    b = learn_unlabelled(labelled, GENERIC, iterations=5).profile
    assert a.tpr == b.tpr and a.fpr == b.fpr and a.rank_map == b.rank_map


def test_a_panner_learns_from_its_own_traffic_when_asked() -> None:
    panner = GoldPanner(None, GENERIC)
    learner = panner.learn_from_traffic(every=5)
    assert isinstance(learner, TrafficLearner)
    p = DEFAULT_RANK_MAP.probabilities(10)
    for i in range(MIN_UNLABELLED_QUERIES + 5):
        mask = np.random.default_rng(300 + i).random(10) < p
        panner.reader = Perfect({d for d, m in zip(DOCS, mask) if m})
        panner.run(f"q{i}?", DOCS)
    # refitted at the 40th query and the 45th
    assert len(learner.fits) == 2 and learner.queries == MIN_UNLABELLED_QUERIES + 5
    assert panner.profile is learner.fits[-1].profile
    assert panner.profile_label.startswith("learned from")


def test_the_traffic_learner_checks_its_options() -> None:
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        TrafficLearner(GENERIC, every=0)
    with pytest.raises(ValueError, match=f"window must be an int >= {MIN_UNLABELLED_QUERIES}"):
        TrafficLearner(GENERIC, window=3)
