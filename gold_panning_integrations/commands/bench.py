"""``gold-panning bench``: benchmarks, one sub-command per module of
:mod:`gold_panning_integrations.bench`, registered from the static table :data:`BENCHMARKS`.

Building the parser imports none of the benchmark modules: each sub-command's parser is
filled in from its module (``register(subparsers)``, which adds the parser and sets
``func=main``) only when that sub-command is parsed or its help is shown. So a module
with a platform-specific or heavy import (``resource`` is absent on Windows, model
back-ends are slow to import) cannot break ``gold-panning run`` or ``bench --help``, and
a module that fails to import fails loudly when its own sub-command is used, never
silently dropped.

To add a benchmark: write ``gold_panning_integrations/bench/NAME.py`` with ``register``
and ``main(args) -> int``, and add one line to :data:`BENCHMARKS`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["BENCHMARKS", "Benchmark", "LazyParser", "main", "register"]


class Benchmark(NamedTuple):
    """One ``gold-panning bench`` sub-command: its name, the module that implements it,
    and the one-line help shown by ``gold-panning bench --help``."""

    name: str
    module: str
    help: str


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "sim",
        "gold_panning_integrations.bench.sim",
        "the paper's simulated comparison and ablations (no model calls)",
    ),
    Benchmark(
        "engine",
        "gold_panning_integrations.bench.engine",
        "engine and simulator speed and memory, against np.argsort measured in the same run",
    ),
    Benchmark(
        "efficiency",
        "gold_panning_integrations.bench.efficiency",
        "calls, tokens and rounds to reach PSC's final F1, per feature (simulated model)",
    ),
    Benchmark(
        "real",
        "gold_panning_integrations.bench.real",
        "GP-Belief vs GP-Entropy vs PSC with a real model on held-out key-value instances (slow)",
    ),
    Benchmark(
        "real-efficiency",
        "gold_panning_integrations.bench.real_efficiency",
        "efficiency report and posterior calibration on a real model (slow: minutes)",
    ),
    Benchmark(
        "compare",
        "gold_panning_integrations.bench.compare",
        "Gold Panning side by side with LangChain/LlamaIndex rerankers on one endpoint (slow)",
    ),
    Benchmark(
        "latency",
        "gold_panning_integrations.bench.latency",
        "seconds per query beside the peers on a loopback server with a per-call latency (minutes)",
    ),
)
"""Every ``gold-panning bench`` sub-command, in the order ``--help`` lists them."""


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


def register(sub: Any, *, on_load: Any = None) -> None:
    """Add ``bench`` and one lazily filled sub-parser per :data:`BENCHMARKS` entry.

    Args:
        sub: The top-level sub-parsers object.
        on_load: Optional callable given each benchmark's parser right after its module
            added its arguments (the CLI uses it to add the global options).
    """
    p = sub.add_parser(
        "bench",
        help="benchmarks: simulated ablations, engine speed, real-model comparisons",
        description="Benchmarks of Gold Panning; see the sub-commands.",
    )
    inner = p.add_subparsers(dest="bench_command", metavar="BENCH", parser_class=LazyParser)
    for b in BENCHMARKS:
        inner.add_parser(b.name, help=b.help, module=b.module, bench_name=b.name, on_load=on_load)
    p.set_defaults(func=main, _bench_parser=p)


def main(args: argparse.Namespace) -> int:
    """Reached only without a sub-command (each sub-command sets its own ``func``)."""
    args._bench_parser.print_help()
    return 2
