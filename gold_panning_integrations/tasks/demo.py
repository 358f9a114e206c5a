"""The data sets of ``gold-panning run --demo``: a synthetic key-value instance, and held-out
NQ questions of the shipped sample with their passages in BM25 order."""

from __future__ import annotations

import numpy as np

from ..errors import MissingExtraError
from ..ir.bm25 import BM25
from .base import TaskInstance
from .kv import KVTask
from .nq import NQTask
from .samples import load_sample

__all__ = ["DEMOS", "DEMO_NQ_DOCS", "DEMO_NQ_QUESTIONS", "DEMO_SEED", "demo_instance", "demo_nq_instances"]

DEMO_SEED = 7
DEMO_N = 10
DEMO_NQ_N = 5
DEMO_NQ_QUESTIONS = 5
"""Held-out questions ``run --demo nq`` pans."""
DEMO_NQ_DOCS = 10
"""Passages per question in ``run --demo nq``: the gold and the best BM25 distractors, in BM25 order."""
DEMOS = ("kv", "nq")


def demo_instance(name: str) -> TaskInstance:
    """The ``--demo`` task instance: ``kv`` (synthetic, 10 documents) or ``nq`` (a real question
    of the shipped sample's held-out ``test`` split, 5 passages); fixed by :data:`DEMO_SEED`."""
    if name not in DEMOS:
        raise ValueError(f"unknown demo {name!r}; choose one of {', '.join(DEMOS)}")
    rng = np.random.default_rng(DEMO_SEED)
    task, n = (KVTask(), DEMO_N) if name == "kv" else (NQTask(split="test"), DEMO_NQ_N)
    return task.make(n, gold_position=int(rng.integers(n)), rng=rng)


def demo_nq_instances(count: int = DEMO_NQ_QUESTIONS, *, n: int = DEMO_NQ_DOCS) -> list[TaskInstance]:
    """``count`` questions of the shipped NQ sample's held-out ``test`` split (drawn with
    :data:`DEMO_SEED`), each with ``n`` passages: the gold and its ``n - 1`` best
    distractors, in the order BM25 over all shipped passages ranks them (the gold first on
    a tie). ``metadata["question_id"]`` names the question, ``metadata["scores"]`` holds
    BM25's score of each passage in that order (what a retriever hands the integrations).

    Raises:
        MissingExtraError: ``bm25s`` is not installed.
    """
    sample = load_sample("nq")
    test = sample.split("test")
    if not 1 <= count <= len(test):
        raise ValueError(f"count must be in 1..{len(test)}, got {count!r}")
    if not 2 <= n <= 1 + min(len(q.distractors) for q in test):
        raise ValueError(f"n must be in 2..{1 + min(len(q.distractors) for q in test)}, got {n!r}")
    try:
        bm25 = BM25([p.content for p in sample.passages])
    except MissingExtraError as err:
        raise MissingExtraError("bm25s", "examples", "run --demo nq (BM25 orders the passages)") from err
    rng = np.random.default_rng(DEMO_SEED)
    out = []
    for qi in rng.choice(len(test), size=count, replace=False):
        q = test[int(qi)]
        scores = bm25.scores(q.question)
        ids = sorted([q.gold, *q.distractors[: n - 1]], key=lambda j: (-float(scores[j]), j != q.gold))
        docs = [sample.passages[j].content for j in ids]
        meta = {"question_id": q.id, "scores": [float(scores[j]) for j in ids]}
        out.append(TaskInstance(q.question, docs, (ids.index(q.gold),), tuple(q.answers), "nq", meta))
    return out
