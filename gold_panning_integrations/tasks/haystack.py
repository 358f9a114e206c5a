"""Needle trials from the user's own passages: calibrate on your documents.

Each instance takes ``n`` distinct passages from the user's file and inserts one synthetic
fact (a made-up person's made-up access code) at a sentence boundary of the passage at the
gold position; the others stay as they are, so the profile reflects the user's document
lengths and style. The code occurs in no passage (checked with the answer matcher), so
answer attribution is unambiguous, in cite mode and in answer mode.

Accepted files (UTF-8, a regular file of at most :data:`MAX_DOCS_BYTES`): ``.jsonl`` /
``.jsonl.gz``, a JSON string or an object with ``"text"`` (and optional ``"title"``, shown
as ``"title: text"``) per line; anything else is plain text, passages separated by blank lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..ir.files import text_lines
from ._words import FIRST_NAMES, LAST_NAMES
from .base import TaskInstance, check_make_args

__all__ = ["HaystackTask", "load_passages"]

MAX_DOCS_BYTES = 200 * 1024 * 1024
MIN_PASSAGES = 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def load_passages(path: str | Path) -> list[str]:
    """Passages of a ``.jsonl(.gz)`` or blank-line-separated text file, de-duplicated.

    Raises:
        ValueError: A folder, a missing or non-regular file, not UTF-8, a bad JSONL line,
            or fewer than two passages; the message names the file (and the line).
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(
            f'--docs {str(p)!r} is a folder; pass one file: JSONL with a "text" field per line, '
            "or plain text with passages separated by blank lines"
        )
    lines = text_lines(p, what="documents file", max_bytes=MAX_DOCS_BYTES)  # gzip, UTF-8, no NUL
    passages: list[str] = []
    if p.name.lower().endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        for lineno, line in lines:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as err:
                raise ValueError(f"documents file {str(p)!r} line {lineno} is not JSON ({err})") from err
            if isinstance(obj, str):
                passages.append(obj)
            elif isinstance(obj, dict) and isinstance(obj.get("text"), str):
                title = obj.get("title")
                body = obj["text"]
                passages.append(
                    f"{title.strip()}: {body}" if isinstance(title, str) and title.strip() else body
                )
            else:
                raise ValueError(  # noqa: TRY004 - a malformed line of a file is a bad value
                    f"documents file {str(p)!r} line {lineno} must be a JSON string or an object with a "
                    'string "text" field'
                )
    else:
        passages = re.split(r"\n\s*\n", "\n".join(line for _, line in lines))
    out = [x for x in dict.fromkeys(" ".join(passage.split()) for passage in passages) if x]
    if len(out) < MIN_PASSAGES:
        raise ValueError(
            f"documents file {str(p)!r} holds {len(out)} distinct passage(s); at least {MIN_PASSAGES} are needed "
            "(as many as the documents per prompt, --n, for calibration)"
        )
    return out


class HaystackTask:
    """Builder of needle instances over the user's passages.

    Args:
        path: A passages file (see :func:`load_passages`).
        passages: Already loaded passages (instead of ``path``).
        digits: Digits of the made-up access code (the answer).
    """

    name = "haystack"

    def __init__(
        self, path: str | Path | None = None, *, passages: Sequence[str] | None = None, digits: int = 6
    ) -> None:
        if passages is None:
            if path is None:
                raise ValueError("HaystackTask needs path=... (a passages file) or passages=...")
            passages = load_passages(path)
        if len(passages) < MIN_PASSAGES:
            raise ValueError(f"HaystackTask needs at least {MIN_PASSAGES} passages, got {len(passages)}")
        if not 4 <= digits <= 12:
            raise ValueError(f"digits must be in 4..12, got {digits!r}")
        self.passages = list(passages)
        self.digits = digits

    @property
    def max_n(self) -> int:
        """Largest ``n`` (distinct passages)."""
        return len(self.passages)

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """``n`` distinct passages; the one at ``gold_position`` gets the synthetic fact."""
        from ..readers.answer import token_matcher

        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        idx = rng.choice(len(self.passages), size=n, replace=False)
        docs = [self.passages[int(i)] for i in idx]
        person = f"{FIRST_NAMES[int(rng.integers(len(FIRST_NAMES)))]} {LAST_NAMES[int(rng.integers(len(LAST_NAMES)))]}"
        for _ in range(100):
            code = str(int(rng.integers(10 ** (self.digits - 1), 10**self.digits)))
            if not any(token_matcher(code, d) for d in docs):
                break
        else:  # pragma: no cover - 100 collisions of a 6-digit code: a file of numbers
            raise ValueError("could not draw an access code absent from the passages; use more digits")
        fact = f"{person}'s access code is {code}."
        sentences = _SENTENCE_END.split(docs[gold_position])
        cut = int(rng.integers(len(sentences) + 1))
        docs[gold_position] = " ".join([*sentences[:cut], fact, *sentences[cut:]])
        return TaskInstance(
            question=f"What is {person}'s access code?",
            documents=docs,
            gold=(gold_position,),
            answers=(code,),
            task=self.name,
            metadata={"person": person, "passage_index": int(idx[gold_position]), "sentence": cut},
        )
