"""Helpers of the CLI sub-commands only: the check that a user-given path is a regular
file. Console output (progress bar, tables, JSON) lives in :mod:`..._console`, shared with
the benchmarks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["MAX_INPUT_BYTES", "regular_file"]

MAX_INPUT_BYTES = 512 * 2**20
"""Default size cap of an input file named on the command line (512 MiB)."""


def regular_file(path: str | os.PathLike[str], *, what: str, max_bytes: int = MAX_INPUT_BYTES) -> Path:
    """Check that ``path`` names a regular file of at most ``max_bytes`` and return it.

    Symlinks are followed; a folder, a FIFO, a device (``/dev/zero``) or a socket is
    refused before anything is opened, so reading it can neither hang nor run without
    bound. ``what`` names the file in messages (e.g. ``"--docs"``).

    Raises:
        FileNotFoundError: Nothing exists at ``path``.
        IsADirectoryError: ``path`` is a folder (the message says to name a file in it).
        ValueError: ``path`` is not a regular file, or is larger than ``max_bytes``.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{what}: no such file: {str(p)!r}") from err
    except OSError as err:
        raise type(err)(f"{what}: cannot read {str(p)!r}: {err.strerror or err}") from err
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(
            f"{what}: {str(p)!r} is a folder; pass a file (e.g. {str(p / 'docs.jsonl')!r})"
        )
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what}: {str(p)!r} is not a regular file (a pipe, device or socket); pass a file")
    if st.st_size > max_bytes:
        raise ValueError(
            f"{what}: {str(p)!r} is {st.st_size:,} bytes, more than the {max_bytes:,}-byte limit"
        )
    return p
