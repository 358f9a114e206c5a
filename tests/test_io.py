"""``_io``: the defensive file reader every user-named file goes through (profiles,
checkpoints, traces, collections, documents files); the error family is the caller's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gold_panning_integrations import _io


class _Mine(Exception):
    pass


def test_reads_a_regular_file_whole(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_bytes(b"abc\n")
    assert _io.read_regular_file(p, max_bytes=4, what="notes", error=_Mine) == b"abc\n"


def test_open_returns_the_descriptor_and_the_size(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_bytes(b"12345")
    fd, size = _io.open_regular_file(p, max_bytes=5, error=_Mine)
    try:
        assert (size, os.read(fd, 10)) == (5, b"12345")
    finally:
        os.close(fd)


def test_one_byte_over_the_limit_is_refused_in_the_callers_family(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_bytes(b"abcde")
    with pytest.raises(_Mine, match=r"notes '.*f\.txt' has 5 bytes, more than the 4 read"):
        _io.read_regular_file(p, max_bytes=4, what="notes", error=_Mine)


def test_missing_directory_and_fifo_say_what_was_found(tmp_path: Path) -> None:
    with pytest.raises(_Mine, match="notes '.*nope' does not exist"):
        _io.read_regular_file(tmp_path / "nope", max_bytes=10, what="notes", error=_Mine)
    with pytest.raises(_Mine, match="is a directory; pass a regular file"):
        _io.read_regular_file(tmp_path, max_bytes=10, what="notes", error=_Mine)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        with pytest.raises(_Mine, match=r"is a FIFO \(named pipe\)"):
            _io.read_regular_file(fifo, max_bytes=10, what="notes", error=_Mine)
