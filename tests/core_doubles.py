"""Framework-free test doubles for the engine and calibration tests (``doubles.py`` holds
the LangChain/LlamaIndex ones).

Import them (``from core_doubles import GoldPanner``). One definition each: before, the
``GoldPanner`` wrapper lived in four test files and ``MarkedTask`` in two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gold_panning_integrations import GoldPanner as _GoldPanner
from gold_panning_integrations.engine.config import PAPER_UPDATE
from gold_panning_integrations.tasks.base import TaskInstance


def GoldPanner(*args: Any, **kwargs: Any) -> _GoldPanner:
    """The panner with the paper's update (``shuffle_top=0``, ``robust=False``,
    ``empty_prompts="evidence"``, ``adapt_level=False``, no document-level mixture) unless given: these tests pin
    placements and updates by hand from the profile's own rates (the shuffle is tested in
    ``test_engine_labels.py``, the robust likelihood in ``test_engine_robust.py``)."""
    for name, value in PAPER_UPDATE.items():
        kwargs.setdefault(name, value)
    return _GoldPanner(*args, **kwargs)


class MarkedTask:
    """Calibration task: the gold document reads "GOLD", distractors "d<i>" (``i`` drawn
    from ``rng``, so distractors may repeat)."""

    name = "marked"

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        docs = [f"d{int(rng.integers(1000))}" for _ in range(n)]
        docs[gold_position] = "GOLD"
        return TaskInstance("q", docs, (gold_position,), ("GOLD",), task=self.name)
