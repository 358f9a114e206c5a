"""Task builders for calibration and evaluation, and the real data samples that ship.

Every builder has ``name`` and ``make(n, *, gold_position, rng) -> TaskInstance``:
``kv`` (synthetic one-sentence key-value facts), ``monorel`` and ``pir`` (FLenQA-style),
``nq`` (Natural Questions passages with BM25-retrieved distractors, from the shipped
sample by default) and ``kv-retrieval`` (the "Lost in the Middle" UUID key-value data,
from the shipped sample). :func:`load_sample` gives the shipped samples as typed records;
:class:`BM25` (bm25s, :mod:`gold_panning_integrations.ir.bm25`) built the NQ sample.
"""

from __future__ import annotations

from pathlib import Path

from ..ir.bm25 import BM25
from .base import TaskBuilder, TaskInstance
from .flenqa import MonoRelTask, PIRTask
from .kv import KVRetrievalTask, KVTask
from .nq import NQTask, load_nq
from .samples import KVExample, KVSample, NQPassage, NQQuestion, NQSample, load_sample

__all__ = [
    "BM25",
    "CALIBRATION_SPLIT",
    "TASKS",
    "KVExample",
    "KVRetrievalTask",
    "KVSample",
    "KVTask",
    "MonoRelTask",
    "NQPassage",
    "NQQuestion",
    "NQSample",
    "NQTask",
    "PIRTask",
    "TaskBuilder",
    "TaskInstance",
    "load_nq",
    "load_sample",
    "make_task",
]

TASKS = ("kv", "monorel", "pir", "nq", "kv-retrieval")

CALIBRATION_SPLIT = "calibration"
"""Split of the shipped NQ sample that :func:`make_task` uses; ``test`` stays held out."""


def make_task(name: str, *, data: str | Path | None = None) -> TaskBuilder:
    """A task builder by name (one of :data:`TASKS`).

    ``nq`` without ``data`` uses the ``calibration`` split of the shipped NQ sample
    (BM25-retrieved distractors, so ``n <= 21``); with ``data`` (a JSONL(.gz) file in the
    "Lost in the Middle" format, e.g. ``../shared/data/nq-open-oracle.jsonl.gz``) all its
    questions with random distractors. ``kv-retrieval`` uses the shipped kv sample.
    """
    if data is not None and name != "nq":
        raise ValueError(f"--data applies to the nq task only, not {name!r}")
    if name == "nq":
        return NQTask(data) if data is not None else NQTask(split=CALIBRATION_SPLIT)
    builders = {"kv": KVTask, "monorel": MonoRelTask, "pir": PIRTask, "kv-retrieval": KVRetrievalTask}
    if name in builders:
        return builders[name]()
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
