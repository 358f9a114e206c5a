"""Property-based engine invariants (hypothesis) over random profiles, n, k, priors, citations.

Rates are drawn on a 1/1000 grid plus the exact extremes 0 and 1: calibrated profiles
are measured frequencies, and the grid keeps any non-zero ``TPR - FPR`` at least 0.001,
so that a belief change is never below the resolution of float64 (a difference of one
ulp in a rate would make "never lowers" a statement about rounding, not about the model).

On posteriors: the engine keeps log-odds, which stay finite (each round adds at most
``log((1-eps)/eps)``). The reported posterior ``sigmoid(log_odds)`` is a float64 and
rounds to exactly 1.0 once log-odds exceed about 37 (and underflows towards 0.0 below
about -745), so the invariant checked is: log-odds finite, posteriors within [0, 1], no
NaN. Strictly inside (0, 1) holds for the log-odds, not for their float64 image.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from doubles import flat_positions as _flat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gold_panning_integrations import GoldPanner, PanningResult, Reading
from gold_panning_integrations.engine import (
    assign,
    initial_log_odds,
    log_likelihood_ratios,
    position_order,
    resample_curve,
    sigmoid,
    update_log_odds,
    vote_ranking,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

rate = st.one_of(st.sampled_from([0.0, 1.0]), st.integers(0, 1000).map(lambda i: i / 1000))


@st.composite
def profiles(draw: st.DrawFn, max_m: int = 8) -> tuple[list[float], list[float]]:
    m = draw(st.integers(1, max_m))
    tpr = draw(st.lists(rate, min_size=m, max_size=m))
    fpr = draw(st.lists(rate, min_size=m, max_size=m))
    return tpr, fpr


class Profile:
    """A minimal ProfileLike (skips DetectorProfile validation: any rates in [0, 1])."""

    def __init__(self, tpr: Sequence[float], fpr: Sequence[float]) -> None:
        self.tpr = list(tpr)
        self.fpr = list(fpr)


class RandomReader:
    """Cites each shown position with probability ``p`` from its own seeded stream;
    sometimes fails a round."""

    def __init__(self, seed: int, p: float, fail_every: int | None) -> None:
        self.rng = np.random.default_rng(seed)
        self.p = p
        self.fail_every = fail_every
        self.calls = 0
        self.sizes: list[int] = []

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        self.sizes.append(len(documents))
        if self.fail_every and self.calls % self.fail_every == 0:
            return Reading.failure("scripted failure")
        u = self.rng.random(len(documents))
        return Reading(cited=tuple(int(i) for i in np.flatnonzero(u < self.p)))


def _windows(trace) -> list[tuple[tuple[int, ...], tuple[int, ...], bool]]:  # type: ignore[no-untyped-def]
    """(docs, positions, failed) per prompt of a round, for flat or windowed traces."""
    if hasattr(trace, "windows") and hasattr(trace, "readings"):
        return [
            (tuple(d), tuple(p), r.failed) for d, p, r in zip(trace.windows, trace.positions, trace.readings)
        ]
    return [(trace.shown, _flat(trace.positions), trace.failed)]


scenario = st.fixed_dictionaries(
    {
        "profile": profiles(),
        "n": st.integers(0, 12),
        "k": st.integers(1, 4),
        "budget": st.one_of(st.none(), st.integers(1, 12)),
        "resample": st.booleans(),
        "prior": st.one_of(
            st.none(),
            st.lists(st.floats(-60, 60, allow_nan=False), min_size=12, max_size=12),
        ),
        "policy": st.sampled_from(["belief", "entropy", "random"]),
        "seed": st.integers(0, 2**32 - 1),
        "p": st.sampled_from([0.0, 0.3, 0.7, 1.0]),
        "fail_every": st.one_of(st.none(), st.integers(2, 4)),
        "rounds": st.integers(1, 12),
        "windows": st.booleans(),
        "prune": st.one_of(st.none(), st.sampled_from([0.05, 0.5])),
    }
)


def _resampled(sc: dict) -> bool:
    """Whether the panner resamples the profile: asked for, or needed because the
    profile is shorter than a prompt (without resampling the panner refuses that case,
    which test_engine_positions covers)."""
    tpr, _ = sc["profile"]
    n, budget = sc["n"], sc["budget"]
    shown_max = n if budget is None else min(n, budget)
    return bool(sc["resample"]) or len(tpr) < shown_max


def _rates_for(sc: dict, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The rates the panner uses for a prompt of ``size`` documents."""
    tpr, fpr = sc["profile"]
    if _resampled(sc):
        return resample_curve(tpr, size), resample_curve(fpr, size)
    return np.asarray(tpr, dtype=float), np.asarray(fpr, dtype=float)


def _prior(sc: dict) -> np.ndarray | None:
    return None if sc["prior"] is None else np.asarray(sc["prior"][: sc["n"]])


def _run(sc: dict, **options: object) -> tuple[PanningResult, RandomReader]:
    tpr, fpr = sc["profile"]
    reader = RandomReader(sc["seed"], sc["p"], sc["fail_every"])
    panner = GoldPanner(
        reader,
        profile=Profile(tpr, fpr),
        rounds=sc["rounds"],
        k=sc["k"],
        policy=sc["policy"],
        max_docs_per_prompt=sc["budget"],
        windows=sc["windows"],
        prune_below=sc["prune"],
        resample_profile=_resampled(sc),
        on_failure="fallback",
        retriever_prior="none",  # the properties start from the base rate or the given prior
        expected_relevant=1.0,  # the base rate 1/n (without it, the rank map's flat prior)
        rng=sc["seed"],
        prompts_per_round=1,
        **options,
    )
    res = panner.run("q", [f"d{i}" for i in range(sc["n"])], prior_log_odds=_prior(sc))
    return res, reader


@SETTINGS
@given(sc=scenario)
def test_each_round_is_a_bijection_onto_real_positions(sc: dict) -> None:
    """Each round maps the documents in play injectively onto real positions of each
    prompt; documents beyond the budget sit on dummy positions (not shown), or, with
    ``windows=True``, every document in play is shown exactly once across prompts."""
    res, reader = _run(sc)
    n, budget = sc["n"], sc["budget"]
    cap = n if budget is None else budget
    for t in res.rounds:
        shown = t.shown
        active = getattr(t, "active", n) or n
        # No document twice in a round, and every index a real document.
        assert len(set(shown)) == len(shown)
        assert all(0 <= d < n for d in shown)
        for docs, pos, _ in _windows(t):
            assert 1 <= len(docs) == len(pos) <= cap
            # Real positions used at most once within a prompt, each a real position of
            # the (possibly resampled) profile for that prompt; prompt order ascending.
            tt, ff = _rates_for(sc, len(docs))
            assert len(set(pos)) == len(pos)
            assert all(0 <= j < len(tt) for j in pos)
            assert list(pos) == sorted(pos)
            # The documents take the most diagnostic positions (dummies get the rest).
            assert sorted(pos) == sorted(position_order(tt, ff)[: len(docs)].tolist())
        if sc["windows"]:
            assert len(shown) == active
        else:
            assert len(_windows(t)) == 1
            assert len(shown) == min(active, cap)
        assert active <= n and (sc["prune"] is not None or active == n)
        assert set(t.cited) <= set(shown)
    # The reader saw exactly the prompts in the trace.
    assert reader.sizes == [len(docs) for t in res.rounds for docs, _, _ in _windows(t)]


@SETTINGS
@given(sc=scenario)
def test_beliefs_stay_finite_and_posteriors_in_unit_interval(sc: dict) -> None:
    sc = {**sc, "rounds": 12, "p": 1.0}  # many rounds of citations: drive beliefs far out
    res, _ = _run(sc)
    assert np.all(np.isfinite(res.log_odds))
    for post in [res.posteriors] + [t.posteriors for t in res.rounds]:
        assert not np.any(np.isnan(post))
        assert np.all((post >= 0.0) & (post <= 1.0))
    assert res.ranking.shape == (sc["n"],)
    assert sorted(res.ranking.tolist()) == list(range(sc["n"]))
    assert len(res.selected) == min(sc["k"], sc["n"])


@SETTINGS
@given(sc=scenario)
def test_citation_direction_matches_the_rates(sc: dict) -> None:
    """Per round and document: cited at TPR > FPR never lowers the belief, cited at
    TPR < FPR never raises it; not cited, the reverse; not shown, no change. A property
    of the update read through the profile (``content_free=0``): the reader's check
    weighs every reply again as later ones arrive (tests/engine/test_engine_reader_fit.py).
    An empty reply weighs every document it showed alike, by the prompt's mean rates
    (tests/engine/test_engine_do_no_harm.py), so no position's direction applies to it."""
    res, _ = _run(sc, content_free=0.0)
    n = sc["n"]
    # the base rate's mass is expected_relevant (default 1), never k
    before = sigmoid(initial_log_odds(n, k=1.0, prior="base-rate", prior_log_odds=_prior(sc)))
    for t in res.rounds:
        after = np.asarray(t.posteriors)
        touched: set[int] = set()
        for docs, pos, failed in _windows(t):
            tt, ff = _rates_for(sc, len(docs))
            for d, j in zip(docs, pos):
                touched.add(d)
                if failed:
                    assert after[d] == before[d]
                    continue
                if not set(docs) & set(t.cited):
                    continue  # an empty reply: the prompt's mean, not the position
                cited = d in t.cited
                up, down = tt[j] > ff[j], tt[j] < ff[j]
                if (cited and up) or (not cited and down):
                    assert after[d] >= before[d], (d, j, cited, tt[j], ff[j])
                if (cited and down) or (not cited and up):
                    assert after[d] <= before[d], (d, j, cited, tt[j], ff[j])
                if tt[j] == ff[j]:
                    assert after[d] == before[d]
        for d in set(range(n)) - touched:
            assert after[d] == before[d]  # left out (dummy position): unchanged
        before = after


@SETTINGS
@given(
    tpr_fpr=profiles(max_m=10),
    lo=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=10, max_size=10),
    cited=st.lists(st.booleans(), min_size=10, max_size=10),
    eps=st.sampled_from([1e-6, 1e-3, 0.1]),
)
def test_update_direction_on_log_odds(tpr_fpr, lo, cited, eps) -> None:  # type: ignore[no-untyped-def]
    """The same property on the update function itself, exactly, in log-odds."""
    tpr, fpr = tpr_fpr
    m = len(tpr)
    lo_a = np.asarray(lo[:m])
    c = np.asarray(cited[:m])
    pos = np.arange(m)
    llr_c, llr_m = log_likelihood_ratios(tpr, fpr, eps=eps)
    assert np.all(np.isfinite(llr_c)) and np.all(np.isfinite(llr_m))
    out = update_log_odds(lo_a, pos, c, llr_c, llr_m)
    assert np.all(np.isfinite(out))
    t, f = np.asarray(tpr), np.asarray(fpr)
    up = (c & (t > f)) | (~c & (t < f))
    down = (c & (t < f)) | (~c & (t > f))
    assert np.all(out[up] >= lo_a[up])
    assert np.all(out[down] <= lo_a[down])
    assert np.all(out[t == f] == lo_a[t == f])  # equal rates carry no evidence
    # No single update exceeds the clamp's bound.
    bound = np.log((1 - eps) / eps)
    assert np.all(np.abs(llr_c) <= bound * (1 + 1e-12)) and np.all(np.abs(llr_m) <= bound * (1 + 1e-12))


@SETTINGS
@given(
    scores=st.lists(st.integers(-3, 3).map(float), min_size=0, max_size=15),
    perm_seed=st.integers(0, 1000),
    m=st.integers(1, 15),
)
def test_assign_is_a_greedy_injection(scores: list[float], perm_seed: int, m: int) -> None:
    s = np.asarray(scores, dtype=np.float64)
    n = s.size
    pos_order = np.random.default_rng(perm_seed).permutation(m)
    out = assign(s, pos_order)
    real = out[out >= 0]
    assert len(set(real.tolist())) == real.size == min(n, m)  # each real position at most once
    assert set(real.tolist()) == set(pos_order[: min(n, m)].tolist())  # the most diagnostic ones
    # Higher scores never get a less diagnostic position than lower scores.
    rank_of_pos = {int(p): r for r, p in enumerate(pos_order)}
    r = np.array([rank_of_pos[int(p)] if p >= 0 else m for p in out])
    for i in range(n):
        for j in range(n):
            both_out = r[i] == m and r[j] == m  # both on dummy positions: no order
            if s[i] > s[j]:
                assert r[i] < r[j] or both_out
            if s[i] == s[j] and i < j:  # stable: ties keep input order
                assert r[i] < r[j] or both_out


@SETTINGS
@given(profile=profiles(max_m=12))
def test_position_order_is_a_permutation_sorted_by_diagnosticity(profile) -> None:  # type: ignore[no-untyped-def]
    tpr, fpr = profile
    order = position_order(tpr, fpr)
    assert sorted(order.tolist()) == list(range(len(tpr)))
    d = np.abs(np.asarray(tpr) - np.asarray(fpr))[order]
    assert np.all(np.diff(d) <= 0)


@SETTINGS
@given(counts=st.lists(st.integers(0, 5), min_size=1, max_size=12), seed=st.integers(0, 10_000))
def test_vote_ranking_orders_by_count(counts: list[int], seed: int) -> None:
    c = np.asarray(counts)
    r = vote_ranking(c, rng=np.random.default_rng(seed))
    assert sorted(r.tolist()) == list(range(len(counts)))
    assert np.all(np.diff(c[r]) <= 0)
    assert r.tolist() == vote_ranking(c, rng=np.random.default_rng(seed)).tolist()


@SETTINGS
@given(sc=scenario)
def test_same_seed_same_result(sc: dict) -> None:
    a, _ = _run(sc)
    b, _ = _run(sc)
    assert a.log_odds.tolist() == b.log_odds.tolist()
    assert a.ranking.tolist() == b.ranking.tolist()
    assert a.selected.tolist() == b.selected.tolist()
    assert a.stop_reason == b.stop_reason
    assert [t.shown for t in a.rounds] == [t.shown for t in b.rounds]
    assert [t.cited for t in a.rounds] == [t.cited for t in b.rounds]
