"""NQ multi-document QA in the "Lost in the Middle" format.

By default from the shipped sample (``load_sample("nq")``): each question's gold passage
among the top ``n - 1`` of its 20 BM25-retrieved distractors, as the paper's MDQA
construction does. A JSONL(.gz) file in the "Lost in the Middle" format (``{"question",
"answers", "ctxs": [{"title", "text", "isgold"}]}`` per line) gives random distractors
instead (gold passages of other questions, those holding one of the answers skipped, so
answer attribution stays unambiguous).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base import TaskInstance, check_make_args
from .samples import NQSample, load_sample

__all__ = ["DISTRACTOR_MODES", "NQItem", "NQTask", "load_nq"]


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


DISTRACTOR_MODES = ("retrieved", "random")


class NQTask:
    """Builder of NQ multi-document instances.

    Args:
        path: Optional larger source: a JSONL(.gz) file in the "Lost in the Middle" format.
        items: Already loaded items (instead of ``path``).
        sample: An :class:`~.samples.NQSample`; the shipped one when neither ``path`` nor
            ``items`` is given.
        split: With a sample, the questions of one split (``"calibration"`` or ``"test"``);
            ``None`` uses all.
        distractors: ``"retrieved"`` (a sample's BM25 distractors, best first; the default
            with a sample; ``n <= 21``) or ``"random"`` (gold passages of other questions in
            random order; the only mode for ``path``/``items``).
    """

    name = "nq"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        items: list[NQItem] | None = None,
        sample: NQSample | None = None,
        split: str | None = None,
        distractors: str | None = None,
    ) -> None:
        self._retrieved: list[list[str]] | None = None
        if items is None and path is None:
            smp = sample if sample is not None else load_sample("nq")
            questions = smp.split(split)
            items = [NQItem(q.question, smp.gold_passage(q).content, q.answers) for q in questions]
            self._retrieved = [[p.content for p in smp.distractor_passages(q)] for q in questions]
            pool = [p.content for p in smp.passages]
            mode = distractors or "retrieved"
        else:
            if sample is not None or split is not None:
                raise ValueError(
                    "sample= and split= apply to the shipped sample; do not combine them with path/items"
                )
            if items is None:
                assert path is not None
                items = load_nq(path)
            pool = [it.passage for it in items]
            mode = distractors or "random"
            if mode == "retrieved":
                raise ValueError(
                    "distractors='retrieved' needs a sample with retrieved distractors (omit path/items); "
                    "a JSONL source gives distractors='random'"
                )
        if mode not in DISTRACTOR_MODES:
            raise ValueError(
                f"unknown distractors mode {mode!r}; choose one of {', '.join(DISTRACTOR_MODES)}"
            )
        self.items = items
        self.distractors = mode
        self._pool = pool

    @property
    def max_n(self) -> int:
        """Largest ``n``: 1 + the retrieved distractors per question, or the passage pool size."""
        if self.distractors == "retrieved":
            assert self._retrieved is not None
            return 1 + min(len(r) for r in self._retrieved)
        return len(self._pool)

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """A random question's gold passage at ``gold_position`` among ``n - 1`` distractors
        that do not contain its answers (retrieved: the best ``n - 1`` in BM25 order)."""
        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        qi = int(rng.integers(len(self.items)))
        item = self.items[qi]
        if self.distractors == "retrieved":
            assert self._retrieved is not None
            chosen = self._retrieved[qi][: n - 1]
            skipped = 0
        else:
            chosen, skipped = self._random_distractors(item, n - 1, rng)
        docs = chosen[:gold_position] + [item.passage] + chosen[gold_position:]
        return TaskInstance(
            question=item.question,
            documents=docs,
            gold=(gold_position,),
            answers=item.answers,
            task=self.name,
            metadata={"question_index": qi, "skipped_distractors": skipped, "distractors": self.distractors},
        )

    def _random_distractors(self, item: NQItem, k: int, rng: np.random.Generator) -> tuple[list[str], int]:
        from ..readers.answer import token_matcher

        out: list[str] = []
        skipped = 0
        for j in rng.permutation(len(self._pool)):
            if len(out) == k:
                break
            text = self._pool[int(j)]
            if text == item.passage or any(token_matcher(a, text) for a in item.answers):
                skipped += 1
                continue
            out.append(text)
        if len(out) < k:
            raise ValueError(f"only {len(out)} usable distractors for n={k + 1}; use a smaller n")
        return out, skipped
