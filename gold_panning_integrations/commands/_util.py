"""Small helpers shared by the CLI sub-commands: progress bar, tables, JSON output."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["Progress", "format_table", "print_json"]


class Progress:
    """A dependency-free progress bar on stderr (silent when stderr is not a terminal
    unless ``force``); ``update(done)`` with the absolute count."""

    def __init__(self, total: int, *, label: str = "", stream: TextIO | None = None, force: bool = False) -> None:
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        frac = min(done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        elapsed = now - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} {elapsed:5.1f}s eta {eta:5.1f}s")
        if done >= self.total:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._last and self.stream:
            self.stream.write("\n")
            self.stream.flush()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned columns."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
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
