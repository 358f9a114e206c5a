"""``gold-panning bench``: kept for 0.6 so that 0.5's commands say where they went; removed
in 0.7. ``bench compare`` prints a deprecation notice on stderr, then runs ``evaluate``; the
benchmarks that moved to the repository's ``benchmarks/`` (:data:`MOVED`) each fail in one
line that says how to run them from a clone.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MOVED", "NOTICE", "main", "register"]

MOVED: tuple[str, ...] = ("sim", "engine", "efficiency", "real", "real-efficiency", "latency")
"""0.5's ``bench`` sub-commands that now run from a clone as ``python -m benchmarks NAME``."""

NOTICE = (
    "gold-panning bench compare: deprecated: use `gold-panning evaluate` (same options); "
    "`bench compare` is removed in 0.7"
)
"""The one line ``bench compare`` writes to stderr before it runs ``evaluate``."""


class _BenchParser(argparse.ArgumentParser):
    """A ``bench`` sub-command's parser; a moved benchmark's accepts any arguments (they
    are only repeated in the line that says where the benchmark went)."""

    def __init__(self, *args: Any, moved: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.moved = moved

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        if self.moved is None:
            return super().parse_known_args(args, namespace)
        ns = namespace if namespace is not None else argparse.Namespace()
        ns.moved_args = list(args or ())
        ns.func = _moved
        return ns, []


def register(sub: Any, *, on_load: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """Add ``bench`` with ``compare`` (deprecated ``evaluate``) and one line per moved benchmark;
    ``on_load`` is given the ``compare`` parser once its arguments are added."""
    from ...evaluate.compare import register as add_evaluate

    p = sub.add_parser(
        "bench",
        help="deprecated (removed in 0.7): `bench compare` is `evaluate`; the benchmarks moved to "
        "the repository's benchmarks/",
        description="Deprecated: `gold-panning bench compare` is `gold-panning evaluate`; the other "
        "benchmarks run from a clone of the repository as `python -m benchmarks NAME` (same options).",
    )
    inner = p.add_subparsers(dest="bench_command", metavar="BENCH", parser_class=_BenchParser)
    compare = add_evaluate(inner, name="compare", help="deprecated: `gold-panning evaluate` (same options)")
    compare.set_defaults(func=_compare)
    if on_load is not None:
        on_load(compare)
    for name in MOVED:
        inner.add_parser(
            name, help=f"moved: from a clone, `python -m benchmarks {name}`", moved=name, add_help=False
        )
    p.set_defaults(func=main, _bench_parser=p)


def _compare(args: argparse.Namespace) -> int:
    from ...evaluate.compare import main as evaluate

    sys.stderr.write(NOTICE + "\n")
    return evaluate(args)


def _moved(args: argparse.Namespace) -> int:
    given = "".join(" " + shlex.quote(a) for a in args.moved_args)
    sys.stderr.write(
        f"gold-panning bench {args.bench_command}: error: moved out of the package in 0.6, to the "
        f"repository's benchmarks/ folder: from a clone, run `python -m benchmarks {args.bench_command}"
        f"{given}` (same options)\n"
    )
    return 2


def main(args: argparse.Namespace) -> int:
    """Reached only without a sub-command (each sub-command sets its own ``func``)."""
    args._bench_parser.print_help()
    return 2
