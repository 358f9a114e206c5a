"""The task-instance type and the builder protocol shared by every task.

A *task builder* makes one question with ``n`` documents, exactly the ones at
``gold_position`` being relevant. Calibration places the gold at each grid position;
evaluation draws the position at random. Builders take an explicit
``numpy.random.Generator``, so an instance is a pure function of ``(n, position, rng)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["TaskBuilder", "TaskInstance", "check_make_args"]


@dataclass(frozen=True)
class TaskInstance:
    """One question over ``n`` documents with known relevant ("gold") documents.

    Attributes:
        question: The question shown to the model.
        documents: The ``n`` document texts in prompt order.
        gold: 0-based indices of the relevant documents (one for every built-in task).
        answers: Accepted answers; answer attribution matches these strings.
        task: Name of the task that made the instance (``kv``, ``monorel``, ...).
        metadata: Task-specific details (the gold fact, the source question id, ...).
    """

    question: str
    documents: list[str]
    gold: tuple[int, ...]
    answers: tuple[str, ...]
    task: str = "unknown"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.gold:
            raise ValueError("a task instance needs at least one gold document")
        for g in self.gold:
            if not 0 <= g < self.n:
                raise ValueError(f"gold index {g} is outside 0..{self.n - 1}")

    @property
    def n(self) -> int:
        """Number of documents."""
        return len(self.documents)

    @property
    def truth(self) -> np.ndarray:
        """Relevance labels, boolean array of shape ``(n,)``."""
        return np.isin(np.arange(self.n), self.gold)


@runtime_checkable
class TaskBuilder(Protocol):
    """Makes task instances with the gold document at a chosen position."""

    @property
    def name(self) -> str:
        """Short task name, recorded in profiles (``kv``, ``monorel``, ``pir``, ``nq``)."""
        ...

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """An instance with ``n`` documents whose gold document sits at ``gold_position``
        (0-based); everything random is drawn from ``rng``."""
        ...


def check_make_args(n: int, gold_position: int, *, max_n: int | None = None, task: str = "task") -> None:
    """Validate the arguments of ``make`` with messages that name the bad value."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if max_n is not None and n > max_n:
        raise ValueError(f"the {task} task can build at most {max_n} documents per instance, got n={n}")
    if not 0 <= gold_position < n:
        raise ValueError(f"gold_position must be in 0..{n - 1} for n={n}, got {gold_position!r}")
