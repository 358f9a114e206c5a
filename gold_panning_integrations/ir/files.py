"""Reading collection files defensively, line by line (:func:`text_lines`): a regular file
only, of bounded size (also after gzip decompression), bounded lines, strict UTF-8 and no
NUL bytes; each problem is one :class:`~..errors.CollectionError` naming the file and the
line, so a bad input stops the run before any model call.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

from .._io import open_regular_file
from ..errors import CollectionError

__all__ = ["MAX_CORPUS_BYTES", "MAX_FILE_BYTES", "MAX_LINE_BYTES", "json_object", "text_lines"]

MAX_FILE_BYTES = 1 << 30
"""Largest queries, qrels, run or RAG JSONL file read (1 GiB)."""
MAX_CORPUS_BYTES = 32 << 30
"""Largest corpus file read (32 GiB, streamed)."""
MAX_LINE_BYTES = 16 << 20
"""Longest line read (16 MiB), so a file without line breaks cannot exhaust memory."""


def _where(what: str, path: Path, lineno: int | None = None) -> str:
    return f"{what} {str(path)!r}" + (f" line {lineno}" if lineno is not None else "")


def text_lines(
    path: str | Path, *, what: str, max_bytes: int | None = None
) -> Generator[tuple[int, str], None, None]:
    """Each line of a UTF-8 text file with its 1-based number, without the line end; a
    name ending in ``.gz`` is decompressed.

    ``what`` names the file in messages (``"qrels file"``); ``max_bytes`` bounds its size, on
    disk and decompressed (default :data:`MAX_FILE_BYTES`).

    Raises:
        CollectionError: Missing, not a regular file, larger than ``max_bytes``, not
            valid gzip, a line longer than :data:`MAX_LINE_BYTES`, not UTF-8, or a NUL
            byte; the message names the file (and the line).
    """
    p = Path(path)
    gz = p.name.lower().endswith(".gz")
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    fd, _ = open_regular_file(p, max_bytes=max_bytes, what=what, error=CollectionError)
    total = lineno = 0
    try:
        with os.fdopen(fd, "rb") as raw_fh, gzip.GzipFile(fileobj=raw_fh) if gz else raw_fh as fh:
            while True:
                try:
                    raw = fh.readline(MAX_LINE_BYTES + 1)
                except (OSError, EOFError, zlib.error) as err:
                    raise CollectionError(
                        f"{_where(what, p)} cannot be read after line {lineno} ({err}); is it a complete "
                        + ("gzip file?" if gz else "file?")
                    ) from err
                if not raw:
                    return
                lineno += 1
                total += len(raw)
                if total > max_bytes:
                    raise CollectionError(
                        f"{_where(what, p)} holds more than {max_bytes} bytes; pass the right file"
                    )
                if len(raw) > MAX_LINE_BYTES:
                    raise CollectionError(
                        f"{_where(what, p, lineno)} is longer than {MAX_LINE_BYTES} bytes; is this a text file "
                        "with one record per line?"
                    )
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise CollectionError(
                        f"{_where(what, p, lineno)} is not UTF-8 (invalid byte at column {err.start + 1}); "
                        "convert the file to UTF-8"
                    ) from err
                if "\x00" in text:
                    raise CollectionError(
                        f"{_where(what, p, lineno)} holds a NUL byte: the file looks binary, not text"
                    )
                yield lineno, text.rstrip("\r\n")
    except OSError as err:  # closing a torn gzip stream
        raise CollectionError(f"cannot read {_where(what, p)}: {err}") from err


def json_object(line: str, *, what: str, path: str | Path, lineno: int) -> dict[str, Any]:
    """One JSONL line as an object.

    Raises:
        CollectionError: The line is not JSON (a torn or cut line), too deeply nested, or
            not an object; the message names the file and the line.
    """
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as err:
        raise CollectionError(
            f"{_where(what, Path(path), lineno)} is not JSON ({type(err).__name__}: {err}); a torn or cut line? "
            "fix or remove it"
        ) from err
    if not isinstance(obj, dict):
        raise CollectionError(
            f"{_where(what, Path(path), lineno)} is a JSON {type(obj).__name__}, not an object"
        )
    return obj
