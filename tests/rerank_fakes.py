"""Questions and a scripted model for ``gold-panning rerank`` tests, behind tests/openai_server.py.

Question ``i`` is ``"what is question i?"`` with ``docs`` passages, the one relevant passage
``"gold passage for question i"`` at position ``i % docs``. The model cites the first shown
relevant passage (``compare_fakes.oracle_model``): its answer is a function of the prompt
alone, so arrival order changes nothing. :func:`question_of` tells which question a request
was about, to count calls per question.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from compare_fakes import oracle_model
from openai_server import Behaviour, RecordedRequest, delay

__all__ = ["GOLD", "model", "question_of", "write_questions"]

GOLD = "gold passage for question"
_QUESTION = re.compile(r"what is question (\d+)\?")


def write_questions(path: Path, count: int, *, docs: int = 10) -> Path:
    """``count`` questions as the JSONL input (ids ``q0`` ...)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(count):
            passages = [f"passage {j} on topic {i}" for j in range(docs - 1)]
            passages.insert(i % docs, f"{GOLD} {i}")
            fh.write(
                json.dumps({"id": f"q{i}", "question": f"what is question {i}?", "passages": passages}) + "\n"
            )
    return path


def model(seconds: float = 0.0) -> Behaviour:
    """The scripted model, answering after ``seconds``."""
    oracle = oracle_model(lambda text: text.startswith(GOLD))
    return delay(seconds, then=oracle) if seconds > 0 else oracle


def question_of(req: RecordedRequest) -> int | None:
    """The question a request asked about (None: not one of ours)."""
    m = _QUESTION.search(req.user_text)
    return int(m.group(1)) if m else None
