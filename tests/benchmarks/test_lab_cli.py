"""``python -m benchmarks``: static table, lazy sub-parsers, and the benchmark commands
(0.5's ``gold-panning bench``, run from a clone)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import benchmarks as lab_pkg
from benchmarks import _cli as lab_cli
from benchmarks import engine as bench_engine
from benchmarks._cli import build_parser
from benchmarks._cli import main as lab_main
from benchmarks.real_efficiency import format_report, report_rounds
from gold_panning_integrations.cli import EXIT_ERROR

REPO = Path(__file__).resolve().parents[2]
ENGINE = "benchmarks.engine"


# ------------------------------------------------------------ registration
def test_table_lists_every_bench_module() -> None:
    """Every public module of benchmarks/ with a ``register`` is a sub-command;
    ``_``-prefixed ones are helpers; the studies and the sample builder run as modules
    (``python -m benchmarks.calibration_sim``, ``python -m benchmarks.build_samples``, ...)."""
    public = [p for p in Path(lab_pkg.__file__).parent.glob("*.py") if not p.stem.startswith("_")]
    commands = sorted(p.stem.replace("_", "-") for p in public if "\ndef register(" in p.read_text())
    assert sorted(b.name for b in lab_cli.BENCHMARKS) == commands
    scripts = {p.stem for p in public} - {c.replace("-", "_") for c in commands}
    assert scripts == {
        "abstention_profiles",
        "abstention_sim",
        "build_samples",
        "calibration_sim",
        "probabilities_check",
        "probabilities_heldout",
        "probabilities_learned_base_rate",
        "probabilities_maps_cv",
        "probabilities_nq_collection",
        "probabilities_runs",
        "nq_score_prior",
        "nq_strata",
        "replay_ndcg",
        "replay_options",
        "score_map_replay",
        "score_prior_fit",
        "scripted_readers",
        "unknown_reader",
    }


POSIX_ONLY = ("resource", "fcntl", "termios", "pwd", "grp", "tty", "pty")


def test_building_the_parser_imports_no_benchmark_and_no_posix_only_module() -> None:
    """As on Windows: the POSIX-only modules cannot be imported; every help renders, and
    building the parser imports no benchmark module."""
    code = (
        "import sys\n"
        f"for m in {POSIX_ONLY!r}: sys.modules[m] = None\n"
        "from benchmarks._cli import build_parser\n"
        "p = build_parser()\n"
        "p.format_help()\n"
        "print(sorted(m for m in sys.modules if m.startswith('benchmarks.') and m != 'benchmarks._cli'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.stderr == ""
    assert out.stdout.strip() == "[]"


def test_python_dash_m_benchmarks_runs_from_the_clone_root() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "engine", "--help"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m benchmarks engine ")


def test_parser_builds_and_bench_engine_runs_without_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    """`resource` does not exist on Windows: nothing but the RSS figure may need it."""
    monkeypatch.setitem(sys.modules, "resource", None)
    monkeypatch.delitem(sys.modules, ENGINE)
    monkeypatch.delattr(lab_pkg, "engine")
    args = build_parser().parse_args(["engine", "--no-memory"])
    fresh = sys.modules[ENGINE]
    assert args.func is fresh.main
    assert fresh.peak_rss_mb() is None


def test_peak_rss_is_measured_where_resource_exists() -> None:
    pytest.importorskip("resource")
    rss = bench_engine.peak_rss_mb()
    assert rss is not None
    assert rss > 1.0


def test_each_table_entry_loads_with_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    for b in lab_cli.BENCHMARKS:
        with pytest.raises(SystemExit) as exc:
            lab_main([b.name, "--help"])
        assert exc.value.code == 0
        assert f"usage: python -m benchmarks {b.name} " in capsys.readouterr().out


def test_every_option_of_every_benchmark_has_a_help_text() -> None:
    parser = build_parser()
    for b in lab_cli.BENCHMARKS:
        p = parser._subparsers._group_actions[0].choices[b.name]  # type: ignore[union-attr]
        p.format_help()
        assert [a.dest for a in p._actions if not a.help] == [], b.name


def test_a_broken_benchmark_module_fails_only_its_own_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    real = lab_cli.importlib.import_module

    def broken(name: str, *a: object, **k: object):
        if name == "benchmarks.real":
            raise ModuleNotFoundError("No module named 'llama_cpp'", name="llama_cpp")
        return real(name, *a, **k)

    monkeypatch.setattr(lab_cli.importlib, "import_module", broken)
    parser = build_parser()
    assert parser.parse_args(["sim", "--trials", "3"]).trials == 3
    with pytest.raises(ModuleNotFoundError, match="llama_cpp"):
        parser.parse_args(["real"])


def test_module_registering_another_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("fake_bench")
    fake.register = lambda sub: sub.add_parser("other")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_bench", fake)
    p = lab_cli.LazyParser(prog="python -m benchmarks fake", module="fake_bench", bench_name="fake")
    with pytest.raises(RuntimeError, match="BENCHMARKS table lists it as 'fake'"):
        p.parse_args([])


def test_module_description_reaches_the_lazy_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        lab_main(["engine", "--help"])
    assert "Time one engine round" in capsys.readouterr().out


def test_global_options_reach_each_benchmark() -> None:
    assert build_parser().parse_args(["-q", "engine"]).quiet is True
    assert build_parser().parse_args(["engine", "-q"]).quiet is True
    assert build_parser().parse_args(["engine"]).verbose == 0


def test_no_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_main([]) == 2
    assert "python -m benchmarks" in capsys.readouterr().out


# ------------------------------------------------------------ bench engine
def test_engine_profile_option_is_now_cprofile(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["engine", "--cprofile"])
    assert args.cprofile is True
    with pytest.raises(SystemExit):
        build_parser().parse_args(["engine", "--profile"])
    assert "unrecognized arguments: --profile" in capsys.readouterr().err


def test_engine_report_without_resource_says_n_a() -> None:
    res = {
        "engine": [],
        "simulator": {
            "trials": 1,
            "n": 2,
            "rounds": 3,
            "policies": 3,
            "seconds": 0.5,
            "trial_rounds_per_second": 6.0,
            "ratio": 5.0,
            "argsort_seconds": 0.1,
        },
        "memory": {"trials": 1, "n": 2, "traced_peak_mb": 3.0, "maxrss_mb": None, "seconds": 0.2},
        "targets": {},
        "cprofile": None,
    }
    assert "process peak RSS n/a" in bench_engine.format_engine_report(res)


def test_run_engine_bench_small() -> None:
    res = bench_engine.run_engine_bench(ns=(50,), sim_trials=20, memory=False, cprofile=False)
    row = res["engine"][0]
    assert row["n"] == 50
    assert row["panner_vs_argsort"] > 0  # a timing: its value is the benchmark's business, not a test's
    assert res["cprofile"] is None


# ------------------------------------------------------------ bench real-efficiency
def test_report_rounds() -> None:
    assert report_rounds(1) == [0]
    assert report_rounds(3) == [0, 1, 2]
    assert report_rounds(4) == [0, 1, 2, 3]
    assert report_rounds(8) == [0, 1, 2, 3, 7]


def test_real_efficiency_with_two_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """Fewer than 4 rounds raised IndexError in the report table."""
    code = lab_main(
        [
            "real-efficiency",
            "--reader",
            "simulated",
            "--n",
            "6",
            "--instances",
            "2",
            "--rounds",
            "2",
            "--profile",
            "lost-in-the-middle",
        ]
    )
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("variant"))
    assert code == 0
    assert header.split() == ["variant", "F1", "r1", "r2", "calls", "prompt", "tok"]


def test_real_efficiency_json_has_one_f1_per_round(capsys: pytest.CaptureFixture[str]) -> None:
    code = lab_main(
        [
            "real-efficiency",
            "--reader",
            "simulated",
            "--n",
            "6",
            "--instances",
            "2",
            "--rounds",
            "3",
            "--profile",
            "lost-in-the-middle",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert [len(v["f1"]) for v in data["results"][0]["variants"].values()] == [3, 3, 3, 3]


def test_format_report_with_one_round() -> None:
    variant = {
        "f1": [0.5],
        "calls_mean": 1.0,
        "prompt_tokens_mean": 0.0,
        "rounds_to_match_psc": 1,
        "calls_vs_psc": 1.0,
        "tokens_vs_psc": 1.0,
        "reaches_psc_f1": True,
    }
    res = {
        "n": 6,
        "instances": 2,
        "rounds": 1,
        "top10": 0.7,
        "model_calls": 8,
        "cache_hits": 0,
        "seconds": 0.1,
        "variants": {
            v: dict(variant) for v in ("psc", "gp-belief (paper)", "ours", "ours + stop@0.9 + prune")
        },
        "calibration": {
            "ece_before": 0.1,
            "ece_after": 0.1,
            "evidence_temperature": 1.0,
            "fit_instances": 1,
            "test_instances": 1,
        },
    }
    assert "F1 r1" in format_report(res)


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--instances", "0"], ["--n", "1"], ["--n", "20,x"]])
def test_real_efficiency_rejects_bad_sizes(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_main(["real-efficiency", "--reader", "simulated", *bad]) == EXIT_ERROR
    assert bad[0] in capsys.readouterr().err


class _FakeClock:
    """A clock that only moves when the timed functions say so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_time_pair_interleaves_and_takes_the_median_paired_ratio() -> None:
    clock = _FakeClock()
    costs = iter([3.0] * 2 + [1.0, 9.0, 1.0])  # fn: warm-up, sizing, then three timed batches

    def fn() -> None:
        clock.now += next(costs)

    def ref() -> None:
        clock.now += 1.0

    res = bench_engine.time_pair(fn, ref, repeat=3, min_batch_seconds=0.5, clock=clock)
    # fn batches 1, 9, 1 against ref batches 1, 1, 1: median 1, ratio median 1 (not 11/3)
    assert res == {"fn": 1.0, "ref": 1.0, "ratio": 1.0}


def test_time_pair_sizes_the_reference_batches_separately() -> None:
    clock = _FakeClock()
    calls = {"ref": 0}

    def fn() -> None:
        clock.now += 1.0

    def ref() -> None:
        calls["ref"] += 1
        clock.now += 0.25

    res = bench_engine.time_pair(
        fn, ref, repeat=2, min_batch_seconds=0.0, ref_min_batch_seconds=1.0, clock=clock
    )
    # ref batch doubles 1 -> 2 -> 4 calls (4 x 0.25 s >= 1 s): 1 warm-up + 1 + 2 + 4 sizing + 2 x 4 timed
    assert calls["ref"] == 16
    assert res["ratio"] == 4.0


# ------------------------------------------------------------ errors in one line
def test_lab_subcommand_errors_name_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_main(["sim", "--trials", "0"]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith("python -m benchmarks sim: error: --trials must be >= 1")


def test_benchmark_module_that_cannot_import_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = lab_cli.importlib.import_module

    def broken(name: str, *a: object, **k: object):
        if name == "benchmarks.real":
            raise ModuleNotFoundError("No module named 'some_backend'", name="some_backend")
        return real(name, *a, **k)

    monkeypatch.setattr(lab_cli.importlib, "import_module", broken)
    code = lab_main(["real", "--instances", "1"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_ERROR
    assert len(lines) == 1
    assert "No module named 'some_backend'" in lines[0]
