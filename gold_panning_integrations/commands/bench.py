"""``gold-panning bench``: benchmarks, one sub-command per module of
:mod:`gold_panning_integrations.bench`.

``bench sim`` (the paper's simulated ablations) and ``bench engine`` (speed and memory)
ship here; ``bench real`` and ``bench efficiency`` are registered when the modules
``gold_panning_integrations/bench/real.py`` / ``efficiency.py`` exist and define
``register(subparsers)``. A module's ``register`` adds its parser and sets
``func=main``; keep its top-level imports cheap (numpy and the engine are fine, model
back-ends are not).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

__all__ = ["SUBCOMMANDS", "register", "main"]

SUBCOMMANDS: tuple[str, ...] = ("sim", "real", "engine", "efficiency", "real_efficiency", "compare")
"""Modules of :mod:`gold_panning_integrations.bench` tried in this order."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks: simulated ablations, engine speed (and real models when available)",
        description="Benchmarks of Gold Panning; see the sub-commands.",
    )
    inner = p.add_subparsers(dest="bench_command", metavar="BENCH")
    for name in SUBCOMMANDS:
        module = f"gold_panning_integrations.bench.{name}"
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue
        reg = getattr(mod, "register", None)
        if callable(reg):
            reg(inner)
    p.set_defaults(func=main, _bench_parser=p)


def main(args: argparse.Namespace) -> int:
    """Reached only without a sub-command (each sub-command sets its own ``func``)."""
    args._bench_parser.print_help()
    return 2
