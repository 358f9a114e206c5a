"""JSON-lines checkpoints: read the object lines, drop a torn last line.

A checkpoint is appended to one line at a time, so a kill during a write leaves at most
a cut *last* line: that line is truncated away (with a warning) and its work reruns. A bad
line anywhere else means the file is not what the caller thinks it is, and is an error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["checkpoint_lines"]


def checkpoint_lines(
    path: Path,
    raw: bytes,
    *,
    corrupt: Callable[[int, Exception], Exception],
    torn: str,
    log: logging.Logger,
    errors: tuple[type[Exception], ...] = (ValueError,),
    not_object: str = "not an object",
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a checkpoint that is a JSON object, with its 1-based number.

    Args:
        path: The checkpoint file ``raw`` was read from (truncated when its last line is cut).
        raw: The file's bytes.
        corrupt: Builds the error raised for a bad line that is not the last one, from the
            line number and the parse error (raised ``from`` that error).
        torn: Warning logged (with ``path`` as its argument) when the last line is cut.
        log: Logger for that warning.
        errors: Parse errors that make a line bad (a non-object line is a ``ValueError``).
        not_object: Message of the ``ValueError`` for a line that is JSON but not an object.

    Yields:
        ``(line_number, object)``; a cut last line ends the iteration after the truncation.
    """
    lines = raw.split(b"\n")
    offset = 0
    for i, line in enumerate(lines):
        start = offset
        offset += len(line) + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(not_object)  # noqa: TRY004 - handled just below
        except errors as err:
            if b"".join(lines[i + 1 :]).strip():
                raise corrupt(i + 1, err) from err
            log.warning(torn, path)
            with path.open("r+b") as fh:
                fh.truncate(start)
            return
        yield i + 1, obj
