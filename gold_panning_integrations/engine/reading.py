"""What a reader returns for one prompt, and the reader protocol the panner calls.

A *reader* is shown the question and the documents of one round in prompt order
(position 0 is the first document in the prompt) and returns a :class:`Reading`: the
0-based positions it cited plus diagnostics. Readers do all I/O; the engine never does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import FatalReaderError

__all__ = ["Reader", "Reading", "reader_failure"]


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
        documents_cut: Documents of the prompt cut to fit the model's context (their
            end replaced by a marker); 0 when every document was shown whole.
        labels: The labels the documents were shown under, shape ``(m,)``, when they are
            not the ones the panner passed (a reader adapted from one that takes no
            labels shows ``1..m``); None: the panner's. The trace records what was shown.
        cached: Whether the reply came from the reader's reply cache: True (a hit: no
            model call, ``attempts`` 0, no tokens spent), False (a miss: the model was
            asked and its reply stored), None (the reader has no cache).
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
    labels: tuple[int, ...] | None = None
    cached: bool | None = None
    documents_cut: int = 0

    @classmethod
    def failure(cls, error: str, *, attempts: int = 1, raw: str | None = None) -> Reading:
        """A failed reading: no citations, beliefs will be left unchanged."""
        return cls(cited=(), failed=True, error=error, attempts=attempts, raw=raw)


@runtime_checkable
class Reader(Protocol):
    """The one reader protocol: what the panner calls, declared (the engine never
    inspects a signature).

    * ``read(question, documents, *, labels) -> Reading`` for
      :meth:`~gold_panning_integrations.engine.panner.Panner.run`, and/or
      ``async aread(question, documents, *, labels) -> Reading`` for ``arun``.
      ``documents`` are the texts of one prompt, in prompt order; ``labels`` (shape
      ``(m,)``, distinct positive ints) are the names they are shown under:
      ``labels[i]`` names ``documents[i]``. The panner draws them at random for each
      prompt from a space of at least 100 numbers per document
      (:func:`~.rounds.label_range`), so a label says nothing about a position and a
      number a document writes is almost never a label on screen. Whatever labels were
      shown, ``Reading.cited`` holds 0-based *positions* (indices into ``documents``). A
      reader should return ``Reading.failure(...)`` rather than raise for model-side
      problems; the panner turns any other exception into a failed reading, except
      :class:`~gold_panning_integrations.errors.FatalReaderError`, which ends the run at
      once.
    * ``model_name``: the model's name, as recorded in profiles and traces.
    * ``recommended_profile``: the detector profile measured for this model (a bundled
      name, a path or a ``DetectorProfile``), or None;
      :func:`~gold_panning_integrations.profiles.resolve_profile` uses it when the user
      names none.
    * ``max_concurrency``: the most calls in flight through this reader (None: no limit);
      ``1`` means it takes no concurrent calls, and the synchronous path then sends a
      round's prompts one after another.

    The package's readers implement all of it. A user's reader is adapted once, at the
    edge (:func:`gold_panning_integrations.readers.as_reader`): the three attributes
    default to the class name, None and 1, and a ``read``/``aread`` that takes no
    ``labels`` is wrapped (with one warning) to show its documents under ``1..m``.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def recommended_profile(self) -> Any: ...

    @property
    def max_concurrency(self) -> int | None: ...

    def read(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt and return the validated citations."""
        ...

    async def aread(self, question: str, documents: Sequence[Any], *, labels: Sequence[int]) -> Reading:
        """Read one prompt asynchronously and return the validated citations."""
        ...


def reader_failure(err: Exception, log: logging.Logger, what: str = "") -> Reading:
    """The failed :class:`Reading` for an exception a reader raised (logged as a warning
    on ``log``, prefixed ``what``), so that one prompt's failure does not end a run; a
    :class:`~gold_panning_integrations.errors.FatalReaderError` (a permanent failure:
    retrying cannot fix it) is raised again instead, ending the run at once."""
    if isinstance(err, FatalReaderError):
        raise err
    log.warning("%sreader raised %s: %s", what, type(err).__name__, err, exc_info=err)
    return Reading.failure(f"{type(err).__name__}: {err}")
