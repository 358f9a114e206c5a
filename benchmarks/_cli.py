"""``python -m benchmarks``: the lab's commands, one sub-command per module of
:mod:`benchmarks`, registered from the static table :data:`BENCHMARKS` (0.5's
``python -m benchmarks NAME``, with the same options).

Building the parser imports none of the benchmark modules: each sub-command's parser is
filled in from its module (``register(subparsers)``, which adds the parser and sets
``func=main``) only when that sub-command is parsed or its help is shown. So a module
with a platform-specific or heavy import (``resource`` is absent on Windows, model
back-ends are slow to import) cannot break ``--help`` or the other benchmarks, and a
module that fails to import fails loudly when its own sub-command is used, never
silently dropped. Errors, logging and exit codes are the package CLI's
(:func:`gold_panning_integrations.cli.main`).

To add a benchmark: write ``benchmarks/NAME.py`` with ``register`` and
``main(args) -> int``, and add one line to :data:`BENCHMARKS`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["BENCHMARKS", "PROG", "Benchmark", "LazyParser", "build_parser", "main"]

PROG = "python -m benchmarks"


class Benchmark(NamedTuple):
    """One ``python -m benchmarks`` sub-command: its name, the module that implements it,
    and the one-line help shown by ``python -m benchmarks --help``."""

    name: str
    module: str
    help: str


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "sim",
        "benchmarks.sim",
        "the paper's simulated comparison and ablations (no model calls)",
    ),
    Benchmark(
        "engine",
        "benchmarks.engine",
        "engine and simulator speed and memory, against np.argsort measured in the same run",
    ),
    Benchmark(
        "query-path",
        "benchmarks.query_path",
        "one GoldPanningRetriever.invoke traced: package files, functions, calls, frames at the model call",
    ),
    Benchmark(
        "async-path",
        "benchmarks.async_path",
        "one reader, 8 prompts at once per query on a 0.4 s loopback endpoint: sync, async in one loop, "
        "asyncio.run per query, over HTTP/1.0 and 1.1",
    ),
    Benchmark(
        "efficiency",
        "benchmarks.efficiency",
        "calls, tokens and rounds to reach PSC's final F1, per feature (simulated model)",
    ),
    Benchmark(
        "real",
        "benchmarks.real",
        "GP-Belief vs GP-Entropy vs PSC with a real model on held-out key-value instances (slow)",
    ),
    Benchmark(
        "real-efficiency",
        "benchmarks.real_efficiency",
        "efficiency report and posterior calibration on a real model (slow: minutes)",
    ),
    Benchmark(
        "latency",
        "benchmarks.latency",
        "seconds per query beside the peers on a loopback server with a per-call latency (minutes)",
    ),
    Benchmark(
        "reliability",
        "benchmarks.reliability",
        "a reader against a loopback endpoint that hangs, answers 429 or 500, rate-limits or is cancelled",
    ),
    Benchmark(
        "rerank-throughput",
        "benchmarks.rerank_throughput",
        "gold-panning rerank's questions per second beside the endpoint's capacity, and memory (minutes)",
    ),
    Benchmark(
        "rerank-ray-faults",
        "benchmarks.rerank_ray_faults",
        "rerank on Ray with its endpoint killed and restarted: what survives, the rerun, calls in flight",
    ),
)
"""Every ``python -m benchmarks`` sub-command, in the order ``--help`` lists them."""


class LazyParser(argparse.ArgumentParser):
    """A sub-command parser whose arguments come from ``module.register`` on first use.

    ``module`` is imported when the parser parses arguments or formats its help or
    usage, not when it is created. The module's ``register(subparsers)`` calls
    ``subparsers.add_parser(name, **kwargs)``; that call is answered with this parser
    (its ``description``/``epilog`` taken from ``kwargs``), so modules keep the ordinary
    argparse registration code.
    """

    def __init__(self, *args: Any, module: str, bench_name: str, on_load: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.module = module
        self.bench_name = bench_name
        self.on_load = on_load
        self.loaded = False

    def load(self) -> None:
        """Import the module and let it add its arguments (once)."""
        if self.loaded:
            return
        mod = importlib.import_module(self.module)
        mod.register(_Into(self))
        self.loaded = True
        if self.on_load is not None:
            self.on_load(self)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        self.load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.load()
        return super().format_help()

    def format_usage(self) -> str:
        self.load()
        return super().format_usage()


class _Into:
    """Stands in for the sub-parsers object a module's ``register`` expects."""

    _COPIED = ("description", "epilog", "usage", "formatter_class", "argument_default")

    def __init__(self, parser: LazyParser) -> None:
        self.parser = parser

    def add_parser(self, name: str, **kwargs: Any) -> LazyParser:
        if name != self.parser.bench_name:
            raise RuntimeError(
                f"{self.parser.module}.register added a parser named {name!r}, but the BENCHMARKS table "
                f"lists it as {self.parser.bench_name!r}: make them agree"
            )
        for key in self._COPIED:
            if key in kwargs:
                setattr(self.parser, key, kwargs[key])
        return self.parser


def build_parser() -> argparse.ArgumentParser:
    """``python -m benchmarks`` with one lazily filled sub-parser per :data:`BENCHMARKS`
    entry, each with the package CLI's ``-v``, ``-q`` and ``--debug``."""
    from gold_panning_integrations.cli import _add_global_options

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Gold Panning's lab: the paper's panels, simulations, latency and engine "
        "benchmarks, real-model studies (run from a clone; not installed).",
    )
    _add_global_options(parser, top=True)
    inner = parser.add_subparsers(dest="command", metavar="BENCH", parser_class=LazyParser)
    for b in BENCHMARKS:
        inner.add_parser(
            b.name,
            help=b.help,
            module=b.module,
            bench_name=b.name,
            on_load=lambda p: _add_global_options(p, top=False),
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one benchmark; the exit codes and one-line errors of ``gold-panning``."""
    from gold_panning_integrations.cli import main as cli_main

    return cli_main(argv, parser_factory=build_parser)
