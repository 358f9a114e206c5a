"""Defensive file reading, shared by everything that opens a file the user names:
profiles, calibration checkpoints, traces, collections and run files (:mod:`.ir.files`),
documents files (:mod:`.tasks.haystack`); the JSON-lines checkpoints' reader; and the one
atomic writer (:func:`atomic_text_file`) of every output the package writes.

A file is opened only if it is a regular file (after resolving symlinks) of at most the
size the caller allows: opened non-blocking (a FIFO never hangs), checked with ``fstat``
on the open descriptor (no race between check and read), and never read past
``max_bytes + 1`` bytes (``/dev/zero`` cannot exhaust memory). Every failure is one
exception of the caller's family (``error``), naming the path and what was found there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from .errors import CheckpointError

__all__ = ["atomic_text_file", "check_same_run", "checkpoint_lines", "open_regular_file", "read_regular_file"]

_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular_file(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    what: str = "file",
    error: type[Exception],
) -> tuple[int, int]:
    """Open a file defensively for reading (see the module doc): a regular file only, at
    most ``max_bytes``.

    Returns:
        ``(descriptor, size in bytes)``; the caller closes the descriptor.

    Raises:
        error: Missing, not a regular file, too large, or unreadable; the message names
            the path and says what was found.
    """
    p = Path(path)
    try:
        real = p.resolve(strict=True)
    except FileNotFoundError as err:
        raise error(f"{what} {str(p)!r} does not exist") from err
    except (OSError, RuntimeError) as err:  # RuntimeError: symlink loop on older Pythons
        raise error(f"cannot resolve {what} {str(p)!r}: {getattr(err, 'strerror', None) or err}") from err
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
    except OSError as err:
        raise error(f"cannot read {what} {str(p)!r}: {err.strerror or err}") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _NOT_REGULAR if test(st.st_mode)), "not a regular file")
            shown = f"{str(p)!r}" + (f" (-> {str(real)!r})" if real != p.absolute() else "")
            raise error(f"{what} {shown} is {kind}; pass a regular file")
        if st.st_size > max_bytes:
            raise error(
                f"{what} {str(p)!r} has {st.st_size} bytes, more than the {max_bytes} read; pass the right file"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular_file(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    what: str = "file",
    error: type[Exception],
) -> bytes:
    """Read a whole file defensively (see :func:`open_regular_file`, which raises the same
    errors): at most ``max_bytes + 1`` bytes are ever read."""
    p = Path(path)
    fd, _ = open_regular_file(p, max_bytes=max_bytes, what=what, error=error)
    try:
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            try:
                b = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            except BlockingIOError as err:  # not expected for a regular file
                raise error(f"{what} {str(p)!r} would block; pass a regular file") from err
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > max_bytes:
            raise error(f"{what} {str(p)!r} grew past {max_bytes} bytes while being read")
        return b"".join(chunks)
    except OSError as err:
        raise error(f"cannot read {what} {str(p)!r}: {err.strerror or err}") from err
    finally:
        os.close(fd)


def checkpoint_lines(
    path: Path,
    lines: Iterable[bytes],
    *,
    corrupt: Callable[[int, Exception], Exception],
    torn: str,
    log: logging.Logger,
    errors: tuple[type[Exception], ...] = (ValueError,),
    not_object: str = "not an object",
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Each non-blank line of a checkpoint that is a JSON object, with its 1-based number
    and byte offset, read one line at a time.

    A checkpoint is appended to one line at a time, so a kill during a write leaves at most
    a cut *last* line (bad JSON, or no line end): that line is truncated away (with a
    warning) and its work reruns. A bad line anywhere else means the file is not what the
    caller thinks it is, and is an error.

    Args:
        path: The checkpoint file (truncated when its last line is cut).
        lines: Its lines with their line ends (a binary file, or
            ``raw.splitlines(keepends=True)``).
        corrupt: Builds the error raised for a bad line that is not the last one, from the
            line number and the parse error (raised ``from`` that error).
        torn: Warning logged (with ``path`` as its argument) when the last line is cut.
        log: Logger for that warning.
        errors: Parse errors that make a line bad (a non-object line is a ``ValueError``).
        not_object: Message of the ``ValueError`` for a line that is JSON but not an object.

    Yields:
        ``(line_number, offset, object)``; a cut last line is truncated after the last.
    """
    offset = 0
    cut: tuple[int, int, Exception] | None = None  # (line number, offset, error) of a bad line
    for i, line in enumerate(lines, start=1):
        start, offset = offset, offset + len(line)
        if not line.strip():
            continue
        if cut is not None:  # a bad line followed by more: not a torn last line
            raise corrupt(cut[0], cut[2]) from cut[2]
        try:
            if not line.endswith(b"\n"):
                raise ValueError("no line end")
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(not_object)  # noqa: TRY004 - handled just below
        except errors as err:
            cut = (i, start, err)
            continue
        yield i, start, obj
    if cut is not None:
        log.warning(torn, path)
        with path.open("r+b") as fh:
            fh.truncate(cut[1])


def check_same_run(
    path: Path,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    keys: Iterable[str],
    *,
    what: str,
    advice: str,
    sep: str = ", ",
) -> None:
    """:class:`~.errors.CheckpointError` naming every setting of ``keys`` in which the
    checkpoint's meta line ``old`` differs from this run's ``new``: the checkpoint at
    ``path`` "belongs to another ``what``"; ``advice`` says what to do."""
    diff = [k for k in keys if old.get(k) != new.get(k)]
    if diff:
        shown = sep.join(f"{k}: {old.get(k)!r:.80} in the file vs {new.get(k)!r:.80} now" for k in diff)
        raise CheckpointError(f"checkpoint {str(path)!r} belongs to another {what} ({shown}); {advice}")


@contextlib.contextmanager
def atomic_text_file(path: Path) -> Iterator[IO[str]]:
    """A UTF-8 text file (``\\n`` line ends) written in place of ``path`` only once the
    block completes: a temporary file in the same folder, flushed, fsynced and renamed over
    ``path``, so a reader sees the complete file or the previous state; removed on error."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
