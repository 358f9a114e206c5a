"""One exception family for the package.

Every error a user can trigger derives from :class:`GoldPanningError`, and where a
standard base class fits (``ValueError`` for bad input, ``ImportError`` for a missing
extra) it derives from that too, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "AllRoundsFailedError",
    "CheckpointError",
    "CitationParseError",
    "CollectionError",
    "FatalReaderError",
    "GoldPanningError",
    "InvalidInputError",
    "MissingExtraError",
    "ProfileError",
    "ReaderError",
    "TransientReaderError",
]


class GoldPanningError(Exception):
    """Base class of every error raised by gold-panning-integrations."""


class ProfileError(GoldPanningError, ValueError):
    """A detector profile is invalid: the message names the field and the bad value."""


class ReaderError(GoldPanningError):
    """A reader could not obtain a usable answer from its model."""


class CitationParseError(ReaderError, ValueError):
    """The model's output could not be parsed into citations (non-JSON, wrong shape)."""


class TransientReaderError(ReaderError):
    """A failure worth retrying: rate limit, timeout, 5xx, dropped connection.

    ``retry_after`` (seconds) is set when the server said how long to wait.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FatalReaderError(ReaderError):
    """A failure that retrying cannot fix (authentication, unknown model or URL, closed
    port, missing extra, bad request). The panner does not turn it into a failed round:
    it ends the run at once, so a permanent error is reported once, not once per round.

    ``status_code`` is the HTTP status when there was one.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class AllRoundsFailedError(ReaderError):
    """Every panning round failed, so no evidence was gathered.

    Pass ``on_failure="fallback"`` to get the input order back, flagged as not panned,
    instead of this error. ``errors`` holds one message per failed round.
    """

    def __init__(self, message: str, *, errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class MissingExtraError(GoldPanningError, ImportError):
    """An optional dependency is missing; the message gives the ``pip install`` line."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the optional package {package!r}. Install it with: "
            f'pip install "gold-panning-integrations[{extra}]"'
        )
        self.package = package
        self.extra = extra


class CheckpointError(GoldPanningError, ValueError):
    """A checkpoint file cannot be used for this calibration run (wrong settings, corrupt
    lines, locked by another run); the message says which file and what to do."""


class CollectionError(GoldPanningError, ValueError):
    """A collection file (corpus, queries, qrels, run file, RAG JSONL) cannot be used: the
    message names the file and, where there is one, the line, and says what to do."""


class InvalidInputError(GoldPanningError, ValueError, TypeError):
    """An argument or a base retriever's output is not what the API expects (``k=1.5``,
    a retriever that returns strings or ``None``); the message says what was expected
    and what came. Both a ``ValueError`` and a ``TypeError``, so either ``except`` works."""
