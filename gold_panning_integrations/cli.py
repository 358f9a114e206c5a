"""The ``gold-panning`` command: ``run``, ``calibrate``, ``simulate``, ``bench``.

Each sub-command lives in :mod:`gold_panning_integrations.commands` as a module with
``register(subparsers)`` (cheap imports only) and a ``main(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

COMMANDS = ("run", "calibrate", "simulate", "bench")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="gold-panning",
        description="Bayesian reranking that turns LLM position bias into a measuring instrument.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"gold_panning_integrations.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"gold_panning_integrations.commands.{name}":
                raise
            continue
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the CLI turns errors into one clear line
        from .errors import GoldPanningError

        if isinstance(err, (GoldPanningError, ValueError, FileNotFoundError)) and args.verbose == 0:
            print(f"gold-panning {args.command}: error: {err}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
