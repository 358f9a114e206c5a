"""Console output shared by the CLI sub-commands and the benchmarks: a progress bar,
plain-text tables, one-line JSON, how a report names a profile, and SIGTERM turned into
an interrupt (:class:`Terminated`)."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from typing_extensions import Self

__all__ = [
    "Progress",
    "Terminated",
    "format_table",
    "print_json",
    "progress_quiet",
    "sigterm_interrupts",
]

_quiet = False


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process gets SIGTERM while a command runs
    (:func:`sigterm_interrupts`): it unwinds like Ctrl-C (``finally`` blocks close
    checkpoints and stop servers), and the CLI exits with 143 (128 + SIGTERM)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def raise_terminated(signum: int, frame: Any) -> None:
    """A signal handler raising :class:`Terminated`."""
    raise Terminated(signum)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only: elsewhere
    Python cannot install a handler, and the default action stays)."""
    try:
        old = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def progress_quiet(quiet: bool) -> Iterator[None]:
    """Within the block, progress bars are silent when ``quiet`` (the CLI's ``--quiet``)."""
    global _quiet
    before, _quiet = _quiet, bool(quiet)
    try:
        yield
    finally:
        _quiet = before


class Progress:
    """A tqdm progress bar on stderr driven by absolute counts.

    Silent when ``--quiet`` is in force (:func:`progress_quiet`) or when the stream is not
    a terminal (a log file or a pipe gets no bar), unless ``force``. ``update(done)``
    takes the number of finished items (not an increment) so it can be passed as a
    ``progress`` callback; the bar closes itself when ``done`` reaches ``total``.

    Args:
        total: Number of items; may be corrected later through the ``total`` attribute.
        label: Text in front of the bar.
        stream: Where to draw (default ``sys.stderr``).
        force: Draw even when the stream is not a terminal (still silent with ``--quiet``).
    """

    def __init__(
        self, total: int, *, label: str = "", stream: TextIO | None = None, force: bool = False
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = not _quiet and (force or bool(isatty and isatty()))
        self._bar: Any = None
        self._total = max(int(total), 1)
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self._total,
                desc=label or None,
                file=self.stream,
                dynamic_ncols=True,
                leave=True,
                unit="it",
            )

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = max(int(value), 1)
        if self._bar is not None:
            self._bar.total = self._total
            self._bar.refresh()

    def update(self, done: int, *_: Any) -> None:
        """Show ``done`` finished items (extra positional arguments, e.g. a total, are ignored)."""
        if self._bar is None:
            return
        step = int(done) - self._bar.n
        if step > 0:
            self._bar.update(step)
        if done >= self._total:
            self.close()

    def close(self) -> None:
        """End the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned columns.

    Raises:
        ValueError: A row does not have one cell per header.
    """
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    for i, r in enumerate(cells[1:], start=1):
        if len(r) != len(headers):
            raise ValueError(f"table row {i} has {len(r)} cells for {len(headers)} headers")
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.3f}"
    return "-" if c is None else str(c)


def print_json(obj: Any, stream: TextIO | None = None) -> None:
    """Print one JSON object on one line."""
    (stream or sys.stdout).write(json.dumps(obj) + "\n")
