"""Tests of ``python -m benchmarks sim`` (small trial counts) and the lab's command tree."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks import _sim_panels as panels
from benchmarks import sim as bs
from benchmarks._cli import build_parser, main
from gold_panning_integrations.engine.simulator import simulate
from gold_panning_integrations.profiles import bundled_profiles

TRIALS = 200
NS = (20, 50, 100)
"""The scaling panel's sizes here (the command's default adds 200, 500 and 1,000: most of
the panel's time, and no test below reads them)."""
SIGMAS = (0.0, 0.2, 0.5)
ALPHAS = (0.1, 1.0, 100.0)


@pytest.fixture(scope="module")
def results() -> dict:
    """Every panel but latency (its own test), at 200 trials and fewer settings per sweep
    than the command's defaults: the settings the tests below read, and their ends."""
    return bs.run_sim_bench(
        trials=TRIALS,
        seed=3,
        panels=tuple(p for p in bs.PANELS if p != "latency"),
        ns=NS,
        sigmas=SIGMAS,
        alphas=ALPHAS,
    )


# ------------------------------------------------------------------ helpers
def test_noisy_profile_zero_sigma_is_identity_and_clips() -> None:
    t, f = np.array([0.9, 0.5, 0.05]), np.array([0.02, 0.5, 0.98])
    dt, df = bs.noisy_profile(t, f, 0.0, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(dt, t)
    np.testing.assert_array_equal(df, f)
    dt, df = bs.noisy_profile(t, f, 5.0, rng=np.random.default_rng(0))
    assert dt.min() >= 0.0 and dt.max() <= 1.0 and df.min() >= 0.0 and df.max() <= 1.0
    # sigma = 5 clips almost every value to an end of [0, 1]
    assert np.isin(np.concatenate([dt, df]), [0.0, 1.0]).sum() >= 4
    with pytest.raises(ValueError, match="sigma"):
        bs.noisy_profile(t, f, -0.1, rng=np.random.default_rng(0))


def test_heterogeneous_profile_shapes_and_concentration() -> None:
    rng = np.random.default_rng(0)
    t, f = bs.heterogeneous_profile(1000.0, 500, fpr=0.07, rng=rng)
    assert t.shape == f.shape == (500,)
    np.testing.assert_array_equal(f, 0.07)
    # Beta(1000, 1000) has sd 1/sqrt(4 * 2001) = 0.011
    assert abs(t.mean() - 0.5) < 0.01 and t.std() < 0.02
    t, _ = bs.heterogeneous_profile(0.05, 500, rng=rng)
    assert np.mean((t < 0.05) | (t > 0.95)) > 0.7  # spiky: mass near 0 and 1
    with pytest.raises(ValueError, match="alpha"):
        bs.heterogeneous_profile(0.0, 5, rng=rng)


def test_pool_results_of_one_run_is_identity_and_of_halves_matches_moments() -> None:
    t = [0.9, 0.3, 0.8]
    f = [0.05, 0.05, 0.05]
    one = simulate(t, f, n=20, trials=300, policies=("belief", "random"), rng=1)
    pooled = bs.pool_results([one])
    np.testing.assert_allclose(pooled["belief"]["f1"], one.policies["belief"].f1)
    np.testing.assert_allclose(pooled["belief"]["ci95"], one.policies["belief"].ci95)
    # Two runs with hand-checkable means: pooled mean is the trial-weighted mean.
    a = simulate(t, f, n=20, trials=100, policies=("belief",), rng=2)
    b = simulate(t, f, n=20, trials=300, policies=("belief",), rng=3)
    p = bs.pool_results([a, b])["belief"]
    np.testing.assert_allclose(p["f1"], (100 * a.policies["belief"].f1 + 300 * b.policies["belief"].f1) / 400)
    # F1 of k=1 is 0/1 per trial: the variance is m(1-m), so the CI is known in closed form.
    m = np.asarray(p["f1"])
    np.testing.assert_allclose(p["ci95"], 1.96 * np.sqrt(m * (1 - m) / 399), rtol=1e-9)


def test_split_and_scaled_trials() -> None:
    assert panels._split(10, 3) == [4, 3, 3]
    assert panels._split(2, 10) == [1, 1]
    assert panels._scaled_trials(5000, 100) == 5000
    assert panels._scaled_trials(5000, 500) == 2000
    assert panels._scaled_trials(5000, 1000) == 1000
    assert panels._scaled_trials(200, 1000) == 200


def test_efficiency_rows_by_hand() -> None:
    pol = {
        "belief": {"f1": [0.2, 0.5, 0.7, 0.9]},
        "random": {"f1": [0.1, 0.3, 0.5, 0.7]},
        "oracle": {"f1": [1.0, 1.0, 1.0, 1.0]},
    }
    setting = {"k": 1} | bs._with_delta({p: c | {"ci95": [0.0] * 4} for p, c in pol.items()})
    rows = bs.efficiency_rows({"multi_needle": {"settings": [setting]}})
    assert len(rows) == 1
    r = rows[0]
    assert r["setting"] == "k=1" and r["belief_calls"] == 3 and r["psc_calls"] == 4
    assert r["calls_pct"] == pytest.approx(75.0) and r["savings_pct"] == pytest.approx(25.0)
    assert r["belief_area_frac"] == pytest.approx(0.575)
    assert r["psc_area_frac"] == pytest.approx(0.4)
    assert setting["delta_area"] == pytest.approx(0.175)


# ---------------------------------------------------------------- structure
def test_structure_of_the_results(results: dict) -> None:
    for key in ("main", "noise", "heterogeneity", "scaling", "multi_needle", "efficiency"):
        assert key in results
    assert results["rounds"] == 8 and results["trials"] == TRIALS
    assert set(results["main"]["profiles"]) == set(bundled_profiles())
    for s in results["main"]["profiles"].values():
        assert set(s["policies"]) == {"belief", "entropy", "random", "oracle"}
    assert [s["sigma"] for s in results["noise"]["settings"]] == list(SIGMAS)
    assert [s["alpha"] for s in results["heterogeneity"]["settings"]] == list(ALPHAS)
    assert [s["n"] for s in results["scaling"]["settings"]] == list(NS)
    assert [s["k"] for s in results["multi_needle"]["settings"]] == list(bs.DEFAULT_KS)
    settings = (
        list(results["main"]["profiles"].values())
        + results["noise"]["settings"]
        + results["heterogeneity"]["settings"]
        + results["scaling"]["settings"]
        + results["multi_needle"]["settings"]
    )
    for s in settings:
        assert s["trials"] == TRIALS
        assert len(s["delta_f1"]) == len(s["delta_ci95"]) == 8
        for c in s["policies"].values():
            assert len(c["f1"]) == len(c["ci95"]) == 8
            assert all(0.0 <= v <= 1.0 for v in c["f1"])
            assert all(v >= 0.0 for v in c["ci95"])
        # PSC and GP-Belief are not perfect after one round: a real interval
        assert s["policies"]["random"]["ci95"][0] > 0 and s["delta_ci95"][0] > 0
    assert len(results["efficiency"]["rows"]) == len(settings)
    json.dumps(results)  # JSON-ready


def test_noise_panel_shows_every_likelihood(results: dict) -> None:
    nz = results["noise"]
    assert {s["likelihood"] for s in nz["settings"]} == {"robust"}
    assert set(nz["variants"]) == {"plain", "placement-only"}
    for rows in nz["variants"].values():
        assert [s["sigma"] for s in rows] == list(SIGMAS)
    assert set(nz["overestimate"]) == {"robust", "plain"}


def test_noise_free_likelihoods_differ_only_by_the_robust_transform(results: dict) -> None:
    # sigma = 0: plain and placement-only run the very same rates on the same seeds.
    plain, only = results["noise"]["variants"]["plain"][0], results["noise"]["variants"]["placement-only"][0]
    assert plain["policies"]["belief"]["f1"] == only["policies"]["belief"]["f1"]


def test_attack_panel_covers_every_attack_with_and_without_the_shuffle(results: dict) -> None:
    rows = results["attack"]["settings"]
    keys = {(r["scenario"], r["attack"], r["obey"], r["shuffle_top"]) for r in rows}
    assert len(keys) == len(rows) == 2 * len(panels.ATTACKS) * 2
    assert all(set(r["policies"]) == {"belief", "random"} for r in rows)


def test_position_attack_without_shuffle_sinks_gp_belief(results: dict) -> None:
    # Always obeyed, no shuffle: the leader sits first and is confirmed every round; the
    # needle is found only when it leads after round 1 (F1 ~0.01 at N=100).
    row = next(
        r
        for r in results["attack"]["settings"]
        if (r["scenario"], r["attack"], r["obey"], r["shuffle_top"])
        == ("lost-in-the-middle", "position", 1.0, 0)
    )
    assert row["policies"]["belief"]["f1"][-1] < 0.1


def test_latency_panel_by_depth_and_calls() -> None:
    from benchmarks import _sim_latency as lat

    r = bs.run_sim_bench(profiles=["smollm2-135m-kv"], trials=40, seed=5, panels=("latency",))
    rows = r["latency"]["settings"]
    assert {x["reader"] for x in rows} == set(lat.READERS)
    got = sorted((x["reader"], x["method"], x["prompts_per_round"], len(x["f1"])) for x in rows)
    want = sorted(
        [(rd, "gp", b, 8 if b == 1 else lat.DEPTH) for rd in lat.READERS for b in lat.BS]
        + [(rd, "oracle", 1, 8) for rd in lat.READERS]
        + [(rd, "psc", 8, 1) for rd in lat.READERS]
        + [(rd, "gp-rank", b, 1) for rd in lat.READERS for b in lat.ONE_ROUND_BS]
        + [(rd, m, 8, 1) for rd in lat.READERS for m in ("gp-flat", "psc-retriever")]
    )
    assert got == want
    for x in rows:
        assert x["calls"] == [x["prompts_per_round"] * (t + 1) for t in range(len(x["f1"]))]
        assert x["trials"] == 40 and all(0.0 <= v <= 1.0 for v in x["f1"])
    assert r["latency"]["readers"]["repeats"] == {"false_leads": 1.5, "blind_rate": 0.35}
    titles = [t for t, _, _ in lat.latency_tables(r)]
    assert len(titles) == 2 and all("smollm2-135m-kv" in t for t in titles)
    # the panel's seeds are its own: the main panel is unchanged by running it
    a = bs.run_sim_bench(profiles=["smollm2-135m-kv"], trials=30, seed=5, panels=("main",))
    b = bs.run_sim_bench(profiles=["smollm2-135m-kv"], trials=30, seed=5, panels=("main", "latency"))
    assert a["main"] == b["main"]


def test_seeded_runs_are_reproducible_and_panels_independent() -> None:
    a = bs.run_sim_bench(trials=50, seed=7, panels=("multi_needle",), ks=(1,))
    b = bs.run_sim_bench(trials=50, seed=7, panels=("main", "multi_needle"), ks=(1,))
    assert a["multi_needle"] == b["multi_needle"]
    assert "main" not in a and "noise" not in a
    with pytest.raises(ValueError, match="unknown panels"):
        bs.run_sim_bench(trials=5, panels=("bogus",))


# --------------------------------------------------------- qualitative facts
def test_oracle_bounds_belief_at_the_last_round(results: dict) -> None:
    s = results["main"]["profiles"]["lost-in-the-middle"]["policies"]
    assert s["oracle"]["f1"][-1] + s["oracle"]["ci95"][-1] >= s["belief"]["f1"][-1] - s["belief"]["ci95"][-1]
    # and GP-Belief beats PSC at round 4 on the U-shaped profile (~0.8 vs ~0.55)
    assert s["belief"]["f1"][3] - s["random"]["f1"][3] > 0.1


def test_homogeneous_positions_leave_no_advantage(results: dict) -> None:
    by_alpha = {s["alpha"]: s for s in results["heterogeneity"]["settings"]}
    s = by_alpha[100.0]
    assert abs(s["delta_f1"][-1]) <= 2 * s["delta_ci95"][-1] + 0.05
    # with TPR_j in 0.5 +- 0.04 there is little to exploit: far below the spiky case
    assert by_alpha[1.0]["delta_area"] > s["delta_area"] + 0.05


def test_noise_free_decisions_match_the_main_panel(results: dict) -> None:
    zero = results["noise"]["settings"][0]
    assert zero["sigma"] == 0.0 and zero["delta_f1"][-1] > 0.0
    assert zero["policies"]["belief"]["f1"][-1] > zero["policies"]["belief"]["f1"][0]


# ---------------------------------------------------------------------- CLI
@pytest.fixture
def quick_cli(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The command runs every panel, each sweep cut to two settings and 2 random profiles
    per noise/heterogeneity setting instead of 10 (the panels' numbers are the ``results``
    fixture's business; what these tests check is the command: its arguments, output,
    plots and Markdown). Returns the keyword arguments the command passed."""
    real = bs.run_sim_bench
    seen: list[dict] = []

    def quick(**kwargs: object) -> dict:
        seen.append(dict(kwargs))
        cut = {"draws": 2, "ns": (20, 50), "sigmas": (0.0, 0.3), "alphas": (1.0, 100.0), "ks": (1, 3)}
        return real(**kwargs, **cut)  # type: ignore[arg-type]

    monkeypatch.setattr(bs, "run_sim_bench", quick)
    return seen


def test_cli_bench_sim_json(capsys: pytest.CaptureFixture[str], quick_cli: list[dict]) -> None:
    rc = main(["sim", "--json", "--trials", "40", "--seed", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object on one line
    data = json.loads(out)
    for key in (
        "main",
        "noise",
        "heterogeneity",
        "scaling",
        "multi_needle",
        "attack",
        "latency",
        "efficiency",
    ):
        assert key in data
    assert data["command"] == "python -m benchmarks sim --trials 40 --seed 1"
    assert data["trials"] == 40
    assert [(k["trials"], k["seed"], k["update"]) for k in quick_cli] == [(40, 1, "default")]


def test_cli_bench_sim_tables_plots_and_markdown(
    tmp_path, capsys: pytest.CaptureFixture[str], quick_cli: list[dict]
) -> None:
    md = tmp_path / "res.md"
    rc = main(["sim", "--trials", "20", "--plot-dir", str(tmp_path / "plots"), "--markdown", str(md)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "Query efficiency" in out and "GP-Belief" in out
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == sorted(f"{p}.png" for p in (*bs.PANELS, "efficiency"))
    text = md.read_text()
    assert "`python -m benchmarks sim --trials 20 --seed 0`" in text and "| GP-Belief" in text


def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import builtins

    from gold_panning_integrations.errors import MissingExtraError

    real_import = builtins.__import__

    def fake(name: str, *a: object, **k: object):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(MissingExtraError, match=r"gold-panning-integrations\[plot\]"):
        bs.plot_panels({"rounds": 8, "seed": 0, "trials": 1}, tmp_path)


def test_bench_subcommands_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(["sim", "--trials", "3"])
    assert args.trials == 3 and args.func is bs.main
    args = parser.parse_args(["engine", "--no-memory"])
    from benchmarks import engine as be

    assert args.func is be.main


def test_bench_without_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "sim" in capsys.readouterr().out


def test_delta_ci_is_the_root_sum_of_squares(results: dict) -> None:
    s = results["scaling"]["settings"][0]
    b, r = s["policies"]["belief"], s["policies"]["random"]
    assert s["delta_ci95"][2] == pytest.approx(math.hypot(b["ci95"][2], r["ci95"][2]))
    assert s["delta_f1"][2] == pytest.approx(b["f1"][2] - r["f1"][2])


def test_update_paper_runs_the_papers_gp_belief() -> None:
    res = bs.run_sim_bench(trials=20, seed=0, panels=("main",), update="paper")
    assert res["update"] == "paper"
    assert (res["config"]["robust"], res["config"]["shuffle_top"]) == (False, 0)
    assert (res["config"]["empty_prompts"], res["config"]["adapt_level"]) == ("evidence", False)


def test_update_must_be_known() -> None:
    with pytest.raises(ValueError, match="update must be one of default, paper, self-citing, got 'x'"):
        bs.base_config("x")
    # The self-citing hypothesis is off by default; this update turns it on.
    assert (bs.base_config("default").self_citing, bs.base_config("self-citing").self_citing) == (0.0, 0.25)
