"""NQ multi-document QA read from a JSONL(.gz) file in the "Lost in the Middle" format.

Each line: ``{"question": str, "answers": [str], "ctxs": [{"title", "text", "isgold", ...}]}``.
An instance is one question's gold passage plus ``n - 1`` gold passages of other
questions (distractors). Distractors that contain one of the question's answers are
skipped, so answer attribution stays unambiguous. The data is read from the path given,
never bundled (e.g. ``../shared/data/nq-open-oracle.jsonl.gz``).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base import TaskInstance, check_make_args

__all__ = ["NQItem", "NQTask", "load_nq"]


@dataclass(frozen=True)
class NQItem:
    """One question with its gold passage (``"title: text"``) and accepted answers."""

    question: str
    passage: str
    answers: tuple[str, ...]


def load_nq(path: str | Path) -> list[NQItem]:
    """Read questions and gold passages from a ``.jsonl`` or ``.jsonl.gz`` file.

    Raises:
        FileNotFoundError: The file does not exist (the message says where to get it).
        ValueError: A line is not JSON or lacks the needed fields (names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"NQ data file not found: {str(p)!r}. Pass --data with a path to a JSONL(.gz) file in the "
            "'Lost in the Middle' format, e.g. qa_data/nq-open-oracle.jsonl.gz from nelson-liu/lost-in-the-middle"
        )
    opener: Any = gzip.open if p.suffix == ".gz" else open
    items: list[NQItem] = []
    with opener(p, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                ctxs = obj["ctxs"]
                gold = next((c for c in ctxs if c.get("isgold")), ctxs[0] if ctxs else None)
                if gold is None:
                    continue
                answers = tuple(str(a) for a in obj["answers"] if str(a).strip())
                question = str(obj["question"])
            except (ValueError, KeyError, TypeError, IndexError) as err:
                raise ValueError(
                    f"{str(p)!r} line {lineno} is not a question record with 'question', 'answers' and "
                    f"'ctxs' ({type(err).__name__}: {err})"
                ) from err
            title = str(gold.get("title") or "").strip()
            text = " ".join(str(gold.get("text") or "").split())
            items.append(NQItem(question, f"{title}: {text}" if title else text, answers))
    if len(items) < 2:
        raise ValueError(f"{str(p)!r} holds {len(items)} usable questions; at least 2 are needed")
    return items


class NQTask:
    """Builder of NQ multi-document instances.

    Args:
        path: JSONL(.gz) file in the "Lost in the Middle" format.
        items: Already loaded items (instead of ``path``).
    """

    name = "nq"

    def __init__(self, path: str | Path | None = None, *, items: list[NQItem] | None = None) -> None:
        if items is None:
            if path is None:
                raise ValueError("NQTask needs path=... (a JSONL(.gz) file) or items=...")
            items = load_nq(path)
        self.items = items

    @property
    def max_n(self) -> int:
        """Largest ``n`` (one passage per question)."""
        return len(self.items)

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """A random question's gold passage at ``gold_position`` among ``n - 1`` other
        questions' gold passages that do not contain its answers."""
        from ..readers.answer import token_matcher

        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        qi = int(rng.integers(len(self.items)))
        item = self.items[qi]
        order = rng.permutation(len(self.items))
        distractors: list[str] = []
        skipped = 0
        for j in order:
            if len(distractors) == n - 1:
                break
            if int(j) == qi:
                continue
            text = self.items[int(j)].passage
            if any(token_matcher(a, text) for a in item.answers) or text == item.passage:
                skipped += 1
                continue
            distractors.append(text)
        if len(distractors) < n - 1:
            raise ValueError(f"only {len(distractors)} usable distractors for n={n}; use a smaller n")
        docs = distractors[:gold_position] + [item.passage] + distractors[gold_position:]
        return TaskInstance(
            question=item.question,
            documents=docs,
            gold=(gold_position,),
            answers=item.answers,
            task=self.name,
            metadata={"question_index": qi, "skipped_distractors": skipped},
        )
