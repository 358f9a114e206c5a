"""The maintainer's habits run with the suite: ``ruff check``, ``ruff format --check`` and
``mypy`` on the package and on the lab (``benchmarks/``, which was part of the package
until 0.6; the ``test`` extra installs both tools), so the README's test command is also
the lint and type check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gold_panning_integrations"
LAB = "benchmarks"


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", PACKAGE, LAB],
        ["ruff", "format", "--check", PACKAGE, LAB],
        ["mypy", PACKAGE, LAB],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_package_passes(command: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"
