"""The simulator: issue-2 acceptance (fewer trials, robust margins), CLI JSON, options."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, SimulatedReader, simulate
from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.engine import SimulationResult

PROFILE = DetectorProfile.bundled("lost-in-the-middle")


@pytest.fixture(scope="module")
def acceptance() -> SimulationResult:
    # The setting (N=100, k=1, T=8, paper prior 0.5) at 2,000 trials instead of
    # 5,000 to keep the suite fast; margins below use the 95% half-widths.
    return simulate(PROFILE.tpr, PROFILE.fpr, n=100, k=1, rounds=8, trials=2000, rng=0, prior="uniform")


def test_acceptance_belief_beats_psc_from_round_two(acceptance: SimulationResult) -> None:
    b, r = acceptance.policies["belief"], acceptance.policies["random"]
    for t in range(1, 8):
        # Strictly better with non-overlapping intervals (measured gaps 0.14-0.27).
        assert b.f1[t] - b.ci95[t] > r.f1[t] + r.ci95[t], (t + 1, b.f1[t], r.f1[t])


def test_acceptance_belief_at_least_entropy(acceptance: SimulationResult) -> None:
    b, e = acceptance.policies["belief"], acceptance.policies["entropy"]
    for t in range(8):
        assert b.f1[t] >= e.f1[t] - (b.ci95[t] + e.ci95[t]), (t + 1, b.f1[t], e.f1[t])
    # And clearly better in the middle rounds (measured 0.70 vs 0.37 at round 3).
    assert b.f1[2] > e.f1[2] + 0.2


def test_acceptance_belief_reaches_psc_final_f1_by_round_five(acceptance: SimulationResult) -> None:
    b, r = acceptance.policies["belief"], acceptance.policies["random"]
    assert b.rounds_to_match_random is not None and b.rounds_to_match_random <= 5
    assert b.f1[4] >= r.f1[7]
    # rounds_to_match_random is the first round whose F1 reaches PSC's final F1.
    first = int(np.flatnonzero(b.f1 >= r.f1[-1])[0]) + 1
    assert b.rounds_to_match_random == first


def test_acceptance_oracle_bounds_every_policy(acceptance: SimulationResult) -> None:
    o = acceptance.policies["oracle"]
    for name, c in acceptance.policies.items():
        for t in range(8):
            assert o.f1[t] + o.ci95[t] + c.ci95[t] >= c.f1[t], (name, t + 1)


def test_acceptance_holds_on_another_seed() -> None:
    res = simulate(
        PROFILE.tpr, PROFILE.fpr, n=100, k=1, rounds=8, trials=2000, rng=12345, policies=("belief", "random")
    )
    b, r = res.policies["belief"], res.policies["random"]
    assert np.all(b.f1[1:] > r.f1[1:])
    assert b.rounds_to_match_random is not None and b.rounds_to_match_random <= 5


def test_result_shapes_and_json() -> None:
    res = simulate(PROFILE.tpr, PROFILE.fpr, n=20, k=2, rounds=3, trials=50, rng=1)
    assert (res.n, res.k, res.rounds, res.trials) == (20, 2, 3, 50)
    assert res.tpr.shape == (20,) and res.fpr.shape == (20,)
    assert res.tpr[0] == PROFILE.tpr[0] and res.tpr[-1] == PROFILE.tpr[-1]  # resampled by depth
    js = res.to_json()
    assert set(js) == {"n", "k", "rounds", "trials", "profile", "policies"}
    assert set(js["policies"]) == {"belief", "entropy", "random", "oracle"}
    for c in js["policies"].values():
        assert len(c["f1"]) == 3 and len(c["ci95"]) == 3
        assert all(0.0 <= x <= 1.0 for x in c["f1"]) and all(x >= 0.0 for x in c["ci95"])
    json.dumps(js)  # plain Python types only


def test_k_greater_than_one() -> None:
    k, trials = 3, 400
    res = simulate(
        PROFILE.tpr, PROFILE.fpr, n=30, k=k, rounds=4, trials=trials, rng=2, policies=("belief", "random")
    )
    for c in res.policies.values():
        # With exactly k needles, F1 of the top-k is hits/k per trial: the sum over
        # trials is a whole number of hits.
        hits = c.f1 * trials * k
        assert hits == pytest.approx(np.round(hits), abs=1e-6)
    b, r = res.policies["belief"], res.policies["random"]
    assert b.f1[-1] > r.f1[-1]
    assert b.f1[-1] > 0.5


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        simulate(PROFILE.tpr, PROFILE.fpr, n=3, k=4, trials=1)
    with pytest.raises(ValueError, match="unknown policies"):
        simulate(PROFILE.tpr, PROFILE.fpr, n=3, policies=("greedy",), trials=1)
    with pytest.raises(ValueError, match="trials"):
        simulate(PROFILE.tpr, PROFILE.fpr, n=3, trials=0)


def test_decision_profile_differs_from_the_true_one() -> None:
    # The model cites by the true (informative) profile, but the policy believes a
    # flat one (TPR == FPR = 0.5): every log-likelihood ratio is 0, beliefs never move,
    # and GP-Belief's pick (the first of n tied documents) is right 1/n of the time.
    # PSC's vote count does not use the decision rates, so it still learns.
    n, trials = 50, 1000
    flat = np.full(n, 0.5)
    res = simulate(
        PROFILE.tpr,
        PROFILE.fpr,
        n=n,
        rounds=4,
        trials=trials,
        rng=3,
        policies=("belief", "random"),
        decision_tpr=flat,
        decision_fpr=flat,
    )
    # 1/50 = 0.02; with 1,000 trials the sd is 0.0044, so 0.06 is ~9 sd away.
    assert np.all(res.policies["belief"].f1 < 0.06)
    assert res.policies["random"].f1[-1] > 0.4
    # The reported profile is the true one (what the simulated model used).
    assert res.tpr == pytest.approx(np.asarray(PROFILE.resample(n).tpr))


def test_decision_equal_to_truth_changes_nothing() -> None:
    kw = {"n": 40, "rounds": 3, "trials": 300, "policies": ("belief", "entropy")}
    a = simulate(PROFILE.tpr, PROFILE.fpr, rng=4, **kw)  # type: ignore[arg-type]
    b = simulate(PROFILE.tpr, PROFILE.fpr, rng=4, decision_tpr=PROFILE.tpr, decision_fpr=PROFILE.fpr, **kw)  # type: ignore[arg-type]
    for p in ("belief", "entropy"):
        assert a.policies[p].f1.tolist() == b.policies[p].f1.tolist()


def test_same_seed_same_curves() -> None:
    kw = {"n": 30, "rounds": 3, "trials": 200}
    a = simulate(PROFILE.tpr, PROFILE.fpr, rng=9, **kw)  # type: ignore[arg-type]
    b = simulate(PROFILE.tpr, PROFILE.fpr, rng=9, **kw)  # type: ignore[arg-type]
    assert a.to_json() == b.to_json()


def test_chunking_gives_the_same_shape_and_reports_progress() -> None:
    seen: list[int] = []
    kw = {"n": 25, "rounds": 3, "trials": 50, "rng": 5}
    chunked = simulate(PROFILE.tpr, PROFILE.fpr, chunk_trials=7, progress=seen.append, **kw)  # type: ignore[arg-type]
    whole = simulate(PROFILE.tpr, PROFILE.fpr, chunk_trials=50, **kw)  # type: ignore[arg-type]
    default = simulate(PROFILE.tpr, PROFILE.fpr, **kw)  # type: ignore[arg-type]
    assert seen == [7, 14, 21, 28, 35, 42, 49, 50]
    assert set(chunked.policies) == set(whole.policies)
    for p in whole.policies:
        assert chunked.policies[p].f1.shape == whole.policies[p].f1.shape == (3,)
        assert chunked.policies[p].ci95.shape == (3,)
        # One chunk of all trials is what the default does for a small problem.
        assert whole.policies[p].f1.tolist() == default.policies[p].f1.tolist()


# ------------------------------------------------------------------ SimulatedReader
def test_simulated_reader_cites_at_the_profile_rates() -> None:
    profile = DetectorProfile(n_positions=4, tpr=[0.9, 0.2, 0.5, 0.7], fpr=[0.3, 0.05, 0.1, 0.0])
    docs = ["gold", "x", "y", "z"]
    reader = SimulatedReader(profile, {"gold"}, rng=0)
    calls = 4000
    counts = np.zeros(4)
    for _ in range(calls):
        for c in reader.read("q", docs).cited:
            counts[c] += 1
    freq = counts / calls
    # Position 0 holds the relevant document (TPR 0.9); the others are irrelevant
    # (FPR 0.05, 0.1, 0.0). sd <= sqrt(0.25/4000) = 0.008; tolerance 0.03.
    assert freq == pytest.approx([0.9, 0.05, 0.1, 0.0], abs=0.03)
    assert counts[3] == 0  # FPR exactly 0 never cites
    assert reader.calls == calls


def test_simulated_reader_accepts_a_predicate_and_empty_prompts() -> None:
    profile = DetectorProfile(n_positions=2, tpr=[1.0, 1.0], fpr=[0.0, 0.0])
    reader = SimulatedReader(profile, lambda d: d.startswith("g"), rng=0)
    assert reader.read("q", ["a", "gold", "b"]).cited == (1,)
    assert reader.read("q", []).cited == ()


# ------------------------------------------------------------------ CLI
def _cli(capsys: pytest.CaptureFixture[str], args: Sequence[str]) -> tuple[int, str, str]:
    code = cli_main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(
        capsys,
        [
            "--profile",
            "lost-in-the-middle",
            "--n",
            "20",
            "--k",
            "1",
            "--rounds",
            "3",
            "--trials",
            "200",
            "--policies",
            "belief,random",
            "--seed",
            "0",
            "--json",
        ],
    )
    assert code == 0
    data = json.loads(out)  # exactly one JSON object on stdout
    assert {"n", "k", "rounds", "trials", "profile", "policies"} <= set(data)
    assert (data["n"], data["k"], data["rounds"], data["trials"]) == (20, 1, 3, 200)
    assert len(data["profile"]["tpr"]) == 20 and len(data["profile"]["fpr"]) == 20
    assert set(data["policies"]) == {"belief", "random"}
    for c in data["policies"].values():
        assert len(c["f1"]) == 3 and len(c["ci95"]) == 3
        m = c["rounds_to_match_random"]
        assert m is None or (isinstance(m, int) and 1 <= m <= 3)
    # PSC reaches its own final F1 no later than its final round.
    assert isinstance(data["policies"]["random"]["rounds_to_match_random"], int)
    # The JSON equals the library's result for the same arguments.
    lib = simulate(
        PROFILE.tpr,
        PROFILE.fpr,
        n=20,
        k=1,
        rounds=3,
        trials=200,
        rng=0,
        policies=("belief", "random"),
        prior="uniform",
    )
    assert data == json.loads(json.dumps(lib.to_json()))


def test_cli_simulate_profile_path_and_k(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = DetectorProfile(n_positions=3, tpr=[0.9, 0.4, 0.7], fpr=[0.05, 0.05, 0.05]).save(
        tmp_path / "p.json"
    )
    code, out, _ = _cli(
        capsys, ["--profile", str(path), "--n", "12", "--k", "2", "--rounds", "2", "--trials", "50", "--json"]
    )
    assert code == 0
    data = json.loads(out)
    assert data["k"] == 2
    assert data["profile"]["tpr"][0] == 0.9 and data["profile"]["tpr"][-1] == 0.7


def test_cli_simulate_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, ["--n", "10", "--rounds", "2", "--trials", "30"])
    assert code == 0
    assert "round" in out and "belief" in out and "random" in out
    assert "first round reaching" in out


def test_cli_simulate_bad_profile_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, ["--profile", "no-such-profile", "--trials", "5", "--json"])
    assert code == 2  # cli.EXIT_ERROR
    assert out == ""
    assert "no-such-profile" in err and "Traceback" not in err
