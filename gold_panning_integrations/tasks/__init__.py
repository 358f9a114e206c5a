"""Task builders for calibration and evaluation: KV needles, FLenQA MonoRel/PIR, NQ.

Every builder has ``name`` and ``make(n, *, gold_position, rng) -> TaskInstance``.
"""

from __future__ import annotations

from pathlib import Path

from .base import TaskBuilder, TaskInstance
from .flenqa import MonoRelTask, PIRTask
from .kv import KVTask
from .nq import NQTask, load_nq

__all__ = ["TASKS", "KVTask", "MonoRelTask", "NQTask", "PIRTask", "TaskBuilder", "TaskInstance", "load_nq", "make_task"]

TASKS = ("kv", "monorel", "pir", "nq")



def make_task(name: str, *, data: str | Path | None = None) -> TaskBuilder:
    """A task builder by name (``kv``, ``monorel``, ``pir``, ``nq``; ``nq`` needs ``data``)."""
    if name == "kv":
        return KVTask()
    if name == "monorel":
        return MonoRelTask()
    if name == "pir":
        return PIRTask()
    if name == "nq":
        if data is None:
            raise ValueError("the nq task reads its questions from a file: pass --data PATH (a JSONL(.gz) file)")
        return NQTask(data)
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
