"""The maintainer's habits run with the suite: ``ruff check``, ``ruff format --check`` and
``mypy`` on the package and on the lab (``benchmarks/``, which was part of the package
until 0.6; the ``test`` extra installs both tools), so the README's test command is also
the lint and type check. ``mypy`` needs one core for most of a minute: when it is selected,
``conftest.py`` starts it as soon as the suite is collected (:func:`start`), so it runs on
the second core beside the rest of the suite and its test only collects the result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gold_panning_integrations"
LAB = "benchmarks"
MYPY = ["mypy", PACKAGE, LAB]

_started: dict[str, subprocess.Popen[str]] = {}


def start(command: list[str]) -> subprocess.Popen[str]:
    """``python -m command`` from the clone's root, started once per session."""
    key = " ".join(command)
    if key not in _started:
        _started[key] = subprocess.Popen(
            [sys.executable, "-m", *command],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return _started[key]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", PACKAGE, LAB],
        ["ruff", "format", "--check", PACKAGE, LAB],
        MYPY,
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_package_passes(command: list[str]) -> None:
    proc = start(command)
    try:
        out, _ = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, f"{' '.join(command)} failed:\n{out[-6000:]}"
