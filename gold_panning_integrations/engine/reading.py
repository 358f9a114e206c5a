"""What a reader returns for one prompt, and the reader protocol the panner calls.

A *reader* is shown the question and the documents of one round in prompt order
(position 0 is the first document in the prompt) and returns a :class:`Reading`: the
0-based positions it cited plus diagnostics. Readers do all I/O; the engine never does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Reading", "Reader", "AsyncReader"]


@dataclass(frozen=True)
class Reading:
    """The outcome of asking the model about one prompt.

    Attributes:
        cited: 0-based positions (indices into the documents as shown) that the model
            cited, validated: in range, unique, sorted. Never contains a position that
            was not shown.
        failed: True when no usable answer was obtained (after retries). The panner
            leaves beliefs unchanged for a failed reading and records it.
        error: Why the reading failed (or a warning), for the trace.
        answer: The model's free-text answer, when the reader produced one.
        raw: The raw model output (possibly truncated), for debugging.
        invalid_labels: Labels dropped because they were out of range, not integers,
            or otherwise unknown. Counted, never mapped to another document.
        duplicate_labels: Labels dropped because they repeated an earlier one.
        attempts: Model calls made for this reading, retries included.
        prompt_tokens: Prompt tokens reported by the provider (None if not reported).
        completion_tokens: Completion tokens reported by the provider (None if not).
        extra: Free-form reader-specific diagnostics.
    """

    cited: tuple[int, ...] = ()
    failed: bool = False
    error: str | None = None
    answer: str | None = None
    raw: str | None = None
    invalid_labels: int = 0
    duplicate_labels: int = 0
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failure(cls, error: str, *, attempts: int = 1, raw: str | None = None) -> Reading:
        """A failed reading: no citations, beliefs will be left unchanged."""
        return cls(cited=(), failed=True, error=error, attempts=attempts, raw=raw)


@runtime_checkable
class Reader(Protocol):
    """Synchronous reader: ``read(question, documents, *, labels=None) -> Reading``.

    ``labels`` (shape ``(m,)``, distinct positive ints) are the names the documents are
    shown under this round, in prompt order: ``labels[i]`` names ``documents[i]``. The
    panner draws them at random for each prompt from a space of at least 100 numbers per
    document (:func:`~.rounds.label_range`), so a label says nothing about a position and
    a number a document writes is almost never a label on screen. ``None`` means
    ``1..m``. Whatever labels
    were shown, ``Reading.cited`` holds 0-based *positions* (indices into
    ``documents``). A reader that raises
    :class:`~gold_panning_integrations.errors.FatalReaderError` ends the run at once.

    ``documents`` are the texts of this round's prompt, in prompt order. A reader
    should return ``Reading.failure(...)`` rather than raise for model-side problems
    (bad output, exhausted retries); the panner also converts unexpected exceptions of
    type :class:`~gold_panning_integrations.errors.ReaderError` into failed rounds.
    """

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Read one prompt and return the validated citations."""
        ...


@runtime_checkable
class AsyncReader(Protocol):
    """Asynchronous reader: ``await aread(question, documents) -> Reading``."""

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Read one prompt asynchronously and return the validated citations."""
        ...
