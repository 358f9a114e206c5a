"""Every command's help renders, says what each option does, and lists in the README table."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from gold_panning_integrations.cli import COMMANDS, build_parser, command_table_markdown, iter_commands


def _all_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    def walk(p: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        yield p.prog, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    yield from walk(child)

    yield from walk(build_parser())


PARSERS = dict(_all_parsers())


def test_every_command_is_walked() -> None:
    expected = {"gold-panning"} | {f"gold-panning {c}" for c in COMMANDS}
    assert set(PARSERS) == expected


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_help_renders_without_doubled_percent(prog: str) -> None:
    assert "%%" not in PARSERS[prog].format_help()


def test_simulate_help_says_95_percent() -> None:
    assert "95% confidence" in " ".join(PARSERS["gold-panning simulate"].format_help().split())


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_option_has_a_help_text(prog: str) -> None:
    missing = [
        a.option_strings[0] if a.option_strings else a.dest
        for a in PARSERS[prog]._actions
        if not isinstance(a, argparse._SubParsersAction) and not a.help
    ]
    assert missing == []


WITH_PROFILE = sorted(prog for prog, p in PARSERS.items() if "--profile" in p._option_string_actions)


def test_profile_option_is_where_expected() -> None:
    assert "gold-panning calibrate" not in WITH_PROFILE
    assert {"gold-panning run", "gold-panning evaluate"} <= set(WITH_PROFILE)


@pytest.mark.parametrize("prog", WITH_PROFILE)
def test_profile_option_always_takes_a_detector_profile(prog: str) -> None:
    action = PARSERS[prog]._option_string_actions["--profile"]
    assert isinstance(action, argparse._StoreAction)
    assert "profile" in (action.help or "")


def test_command_listing_has_every_command_with_help() -> None:
    rows = dict(iter_commands())
    assert set(rows) == set(PARSERS) - {"gold-panning"}
    assert [name for name, text in rows.items() if not text] == []


def test_markdown_table_has_one_row_per_command() -> None:
    lines = command_table_markdown().splitlines()
    assert len(lines) == 2 + len(PARSERS) - 1
    assert "| `gold-panning evaluate` |" in "\n".join(lines)
