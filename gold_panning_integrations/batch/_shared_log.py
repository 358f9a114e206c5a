"""A rerank checkpoint that many processes append to: :class:`SharedCheckpoint`, what each
Ray worker (:mod:`.ray`) holds on the job's checkpoint file, on storage every worker shares.

The file is the local command's (:class:`~._job.RerankCheckpoint`): its ledger line, written
by the driver, then one question line per finished question. A worker appends each line
under a lock file beside it (``<checkpoint>.append.lock``, through ``filelock``, which Ray
brings), opening the file for that one write and closing it, so the line is on the shared
storage when the lock is released; a line cut by a kill (no line end) is dropped by the
next writer before it appends. A worker reads what others appended since it last looked
(:meth:`SharedCheckpoint.refresh`), so a batch that Ray runs again (a retried task, an
actor restarted after a crash) finds the questions already finished and does not ask them
again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._inputs import Question
from ._job import question_line
from ._ledger import is_provisional

__all__ = ["SharedCheckpoint"]

logger = logging.getLogger(__name__)

_BACK = 1 << 16
"""Bytes read back at a time when looking for the last line end of a cut file."""


class SharedCheckpoint:
    """A worker's view of the job's checkpoint at ``path`` (written by the driver first):
    which questions are done (:meth:`record`), and appending finished ones (:meth:`append`).

    Args:
        path: The checkpoint file, on storage every worker shares (supporting file locks:
            a local disk on one machine, NFS).
        keep_fallbacks: Count fallback records as done (else their questions are asked again).
    """

    def __init__(self, path: str | Path, *, keep_fallbacks: bool = False) -> None:
        from filelock import FileLock

        self.path = Path(path)
        self.keep_fallbacks = keep_fallbacks
        self._lock = FileLock(str(self.path) + ".append.lock")
        self._rows: dict[int, tuple[str, int, bool]] = {}  # index -> (fingerprint, offset, provisional)
        self._scanned = 0

    def refresh(self) -> None:
        """Read the question lines appended since the last look (a line still being written,
        without its line end, is read next time)."""
        with self.path.open("rb") as fh:
            fh.seek(self._scanned)
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                start = self._scanned
                self._scanned += len(line)
                try:
                    obj = json.loads(line)
                except ValueError:
                    logger.warning(
                        "checkpoint %s: an unreadable line at byte %d is skipped", self.path, start
                    )
                    continue
                if (
                    isinstance(obj, dict)
                    and obj.get("type") == "question"
                    and isinstance(obj.get("record"), dict)
                ):
                    self._rows[int(obj["index"])] = (
                        str(obj["fingerprint"]),
                        start,
                        is_provisional(obj["record"]),
                    )

    def record(self, question: Question) -> dict[str, Any] | None:
        """The record of ``question`` when it is done here (recorded on the same input, and
        not a fallback unless ``keep_fallbacks``), else None."""
        row = self._rows.get(question.index)
        if row is None or row[0] != question.fingerprint() or (row[2] and not self.keep_fallbacks):
            return None
        with self.path.open("rb") as fh:
            fh.seek(row[1])
            record: dict[str, Any] = json.loads(fh.readline())["record"]
        return record

    def append(self, question: Question, record: Mapping[str, Any]) -> None:
        """Append ``question``'s line under the lock (a cut last line dropped first)."""
        data = question_line(question, record)
        with self._lock, self.path.open("r+b") as fh:
            end = fh.seek(0, os.SEEK_END)
            keep = _last_line_end(fh, end)
            if keep != end:
                logger.warning("checkpoint %s: dropping a cut last line; that question reruns", self.path)
                fh.truncate(keep)
            start = fh.seek(keep)
            fh.write(data)
            fh.flush()
        self._rows[question.index] = (question.fingerprint(), start, is_provisional(record))


def _last_line_end(fh: Any, end: int) -> int:
    """The offset just after the file's last ``\\n`` (0: none), reading back from ``end``."""
    pos = end
    while pos > 0:
        step = min(_BACK, pos)
        fh.seek(pos - step)
        chunk = fh.read(step)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return pos - step + at + 1
        pos -= step
    return 0
