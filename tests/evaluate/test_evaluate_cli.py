"""``gold-panning evaluate`` and what 0.5's names do for one release: ``bench compare`` runs
it after a one-line notice, the moved benchmarks say where they went, and the old import
path ``gold_panning_integrations.bench.compare`` warns and still works."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from gold_panning_integrations.cli import EXIT_ERROR, build_parser, main
from gold_panning_integrations.cli.commands.bench import MOVED, NOTICE
from gold_panning_integrations.evaluate import compare

REPO = Path(__file__).resolve().parents[2]


def _options(prog: str) -> list[str]:
    sub = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    parser = sub.choices[prog] if " " not in prog else None
    if parser is None:
        outer, inner = prog.split()
        parser = sub.choices[outer]._subparsers._group_actions[0].choices[inner]  # type: ignore[union-attr]
    return sorted(s for a in parser._actions for s in a.option_strings)


def test_evaluate_and_bench_compare_take_the_same_options() -> None:
    assert _options("evaluate") == _options("bench compare")
    assert {"--task", "--methods", "--traces", "--checkpoint", "--out", "--run"} <= set(_options("evaluate"))


def test_evaluate_runs_compares_main() -> None:
    assert build_parser().parse_args(["evaluate"]).func is compare.main


def test_bench_compare_prints_one_notice_then_runs_evaluate(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []

    def fake_main(args: object) -> int:
        seen.append(args.task)
        return 0

    monkeypatch.setattr(compare, "main", fake_main)
    assert main(["bench", "compare", "--task", "nq"]) == 0
    assert seen == ["nq"]
    assert capsys.readouterr().err.splitlines() == [NOTICE]
    assert main(["evaluate", "--task", "nq"]) == 0
    assert seen == ["nq", "nq"]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_benchmark_says_how_to_run_it_from_a_clone(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", name, "--trials", "3", "--help"]) == EXIT_ERROR
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gold-panning bench {name}: error: moved out of the package in 0.6")
    assert lines[0].endswith(f"run `python -m benchmarks {name} --trials 3 --help` (same options)")


def test_the_old_module_is_the_new_one_for_every_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "gold_panning_integrations.bench.compare", raising=False)
    monkeypatch.delitem(sys.modules, "gold_panning_integrations.bench", raising=False)
    with pytest.warns(DeprecationWarning, match="gold_panning_integrations.bench is deprecated") as caught:
        old = importlib.import_module("gold_panning_integrations.bench.compare")
    assert "import gold_panning_integrations.evaluate.compare instead" in str(caught[0].message)
    for name in (*compare.__all__, "Endpoint", "peer_missing", "EMBEDDED_PROFILE"):
        assert getattr(old, name) is getattr(compare, name)
    assert old.__all__ == compare.__all__
