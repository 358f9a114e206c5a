"""``gold-panning evaluate``: its options, and that it runs :func:`compare.main`."""

from __future__ import annotations

from gold_panning_integrations.cli import build_parser
from gold_panning_integrations.evaluate import compare


def _options(prog: str) -> list[str]:
    parser = build_parser()._subparsers._group_actions[0].choices[prog]  # type: ignore[union-attr]
    return sorted(s for a in parser._actions for s in a.option_strings)


def test_evaluate_takes_its_options() -> None:
    assert {"--task", "--methods", "--traces", "--checkpoint", "--out", "--run"} <= set(_options("evaluate"))


def test_evaluate_runs_compares_main() -> None:
    assert build_parser().parse_args(["evaluate"]).func is compare.main
