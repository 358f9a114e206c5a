"""The calibration checkpoint on disk: reading a JSONL checkpoint back (one line per
completed trial, each checked field by field; a torn last line is ignored) and the
exclusive lock (``CHECKPOINT.lock``) a run holds on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._io import checkpoint_lines, read_regular_file
from ..errors import CheckpointError

__all__ = ["MAX_CHECKPOINT_BYTES", "CheckpointLock", "read_checkpoint"]

logger = logging.getLogger("gold_panning_integrations.calibration")


MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024
"""Largest checkpoint read (a trial line is ~300 bytes: ~800,000 trials)."""

_TRIAL_FIELDS: dict[str, tuple[type, ...]] = {
    "trial_id": (str,),
    "grid_index": (int,),
    "position": (int,),
    "trial": (int,),
    "cited": (list,),
    "failed": (bool,),
}
_TRIAL_ID = re.compile(r"^p(\d+)-t(\d+)$")


def _check_trial(obj: Mapping[str, Any], path: Path, lineno: int) -> None:
    """A trial line has every field with the right type, else a CheckpointError naming
    the file, the line and the field."""

    def bad(what: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {str(path)!r} line {lineno}: {what}; the file was edited or written by "
            "another program: delete the line (that trial reruns) or the file (everything reruns)"
        )

    for key, types in _TRIAL_FIELDS.items():
        if key not in obj:
            raise bad(f"field {key!r} is missing")
        v = obj[key]
        if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
            raise bad(f"field {key!r} is {type(v).__name__} {v!r:.40}, expected {types[0].__name__}")
    if not _TRIAL_ID.match(obj["trial_id"]):
        raise bad(f"field 'trial_id' is {obj['trial_id']!r:.40}, expected 'pNN-tNNN'")
    for key in ("cited", "gold"):
        if key in obj and (
            not isinstance(obj[key], list)
            or any(isinstance(x, bool) or not isinstance(x, int) for x in obj[key])
        ):
            raise bad(f"field {key!r} must be a list of integer positions, got {obj[key]!r:.60}")
    if "n" in obj and (isinstance(obj["n"], bool) or not isinstance(obj["n"], int)):
        raise bad(f"field 'n' is {type(obj['n']).__name__}, expected int")


def read_checkpoint(path: Path) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """Meta line and trial records of a checkpoint; a corrupt *last* line (a kill during
    a write) is dropped with a warning and truncated away. Lines that parse but lack a
    field or have a wrong type are a :class:`CheckpointError` naming the line."""
    if not os.path.lexists(path):
        return None, {}
    raw = read_regular_file(path, max_bytes=MAX_CHECKPOINT_BYTES, what="checkpoint", error=CheckpointError)
    meta: dict[str, Any] | None = None
    records: dict[str, dict[str, Any]] = {}
    for lineno, _, obj in checkpoint_lines(
        path,
        raw.splitlines(keepends=True),
        corrupt=lambda n, err: CheckpointError(
            f"checkpoint {str(path)!r} line {n} is corrupt ({err}) and is not the last line; "
            "delete the file to start over"
        ),
        torn="checkpoint %s: ignoring a corrupt last line (an interrupted write); that trial will rerun",
        log=logger,
        errors=(ValueError, RecursionError),  # UnicodeDecodeError is a ValueError
    ):
        kind = obj.get("type")
        if kind == "meta":
            meta = obj
        elif kind == "trial":
            _check_trial(obj, path, lineno)
            records[obj["trial_id"]] = obj
        else:
            raise CheckpointError(
                f"checkpoint {str(path)!r} line {lineno}: field 'type' is {kind!r:.40}, expected 'meta' or 'trial'; "
                "is this a calibration checkpoint? Use another --checkpoint path"
            )
    return meta, records


class CheckpointLock:
    """An exclusive, non-blocking ``fcntl`` lock on ``CHECKPOINT.lock``, released on
    :meth:`release` (or when the process ends, even by SIGKILL: the kernel drops it).

    Raises:
        CheckpointError: Another process holds the lock (the message names its pid).
    """

    def __init__(
        self,
        checkpoint: Path,
        *,
        holder: str = "calibration",
        advice: str = "wait for it to finish (then rerun to reuse its trials) or pass another --checkpoint",
    ) -> None:
        self.path = checkpoint.with_name(checkpoint.name + ".lock")
        self.holder, self.advice = holder, advice  # what a second run is told
        self._fd: int | None = None

    def acquire(self) -> CheckpointLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock, say so once
            logger.warning("no fcntl on this platform: checkpoint %s is not locked", self.path)
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise CheckpointError(
                f"cannot create the lock file {str(self.path)!r}: {err.strerror or err}"
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise CheckpointError(
                f"checkpoint {str(self.path)[: -len('.lock')]!r} is in use by another {self.holder} "
                f"(pid {holder}); {self.advice}"
            ) from err
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
