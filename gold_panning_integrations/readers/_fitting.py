"""Fitting a prompt's documents into the model's context.

The room left after the prompt's fixed text and the reply is shared evenly among the
documents (:func:`even_share`); longer ones are cut to the share and end with
:data:`~._prompt.TRUNCATION_MARKER`, and the number cut is reported instead of a call that
fails (docs/usage.md, "Long documents"). Lengths are counted with the model's tokenizer
when there is one, else at :data:`CHARS_PER_TOKEN` characters per token, low on purpose
(BPE tokenizers run at about 4 on English) so that the estimate errs on fitting. The
reader base decides when to fit (:meth:`~._reader_base.BaseReader._fit`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import ReaderError
from ._prompt import TRUNCATION_MARKER

__all__ = [
    "CHARS_PER_TOKEN",
    "MIN_TOKENS_PER_DOCUMENT",
    "CharTokenizer",
    "DocumentsDoNotFitError",
    "Fitted",
    "Tokenizer",
    "even_share",
    "fit_documents",
]

CHARS_PER_TOKEN = 3.0
"""Characters per token assumed when no tokenizer is at hand."""

MIN_TOKENS_PER_DOCUMENT = 16
"""Fewest tokens of its own text a cut document keeps; a smaller share is an error."""


class DocumentsDoNotFitError(ReaderError, ValueError):
    """The context leaves too little room for the prompt's documents (the message says
    how much, and what to change)."""


class Tokenizer(Protocol):
    """What fitting needs of a tokenizer."""

    def count(self, text: str) -> int:
        """Tokens of ``text`` (no begin-of-sequence token)."""

    def head(self, text: str, tokens: int) -> str:
        """The text of the first ``tokens`` tokens of ``text`` (a character cut in two is dropped)."""


class CharTokenizer:
    """The estimate used without a tokenizer: one token per :data:`CHARS_PER_TOKEN`
    characters (the last one partial)."""

    def __init__(self, chars_per_token: float = CHARS_PER_TOKEN) -> None:
        if not chars_per_token > 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token!r}")
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def head(self, text: str, tokens: int) -> str:
        return text[: int(tokens * self.chars_per_token)]


@dataclass(frozen=True)
class Fitted:
    """Documents as they fit: ``texts`` (shape ``(m,)``, whitespace runs collapsed as in
    a prompt; cut ones end with the marker), how many were ``cut``, the ``share`` each
    cut one got (tokens, marker included; None when nothing was cut), the characters
    the cuts ``removed`` from the documents' text (the marker not counted) and the
    positions of the cut ones, ``cut_at`` (ascending, ``len(cut_at) == cut``)."""

    texts: tuple[str, ...]
    cut: int
    share: int | None
    removed: int = 0
    cut_at: tuple[int, ...] = ()


def even_share(lengths: Sequence[int], budget: int) -> int | None:
    """The largest share ``c`` with ``sum(min(l, c) for l in lengths) <= budget``, or None
    when every length fits (water-filling: ``even_share([10, 100, 100], 110) == 50``)."""
    if sum(lengths) <= budget:
        return None
    left = max(budget, 0)
    ordered = sorted(lengths)
    for i, length in enumerate(ordered):
        share = left // (len(ordered) - i)
        if length > share:
            return share
        left -= length
    return left  # pragma: no cover - unreachable: the sum exceeds the budget


def fit_documents(
    documents: Sequence[str],
    budget: int,
    *,
    tokenizer: Tokenizer | None = None,
    marker: str = TRUNCATION_MARKER,
    context: int | None = None,
) -> Fitted:
    """Cut ``documents`` evenly so that together they take at most ``budget`` tokens.

    ``documents`` are texts in prompt order, shape ``(m,)``; ``tokenizer`` None means
    :class:`CharTokenizer`'s estimate; ``marker`` ends a cut document (its tokens count
    toward the share); ``context`` (tokens) is named in the error, DocumentsDoNotFitError,
    raised when a cut document would keep fewer than :data:`MIN_TOKENS_PER_DOCUMENT`.
    """
    tok = tokenizer if tokenizer is not None else CharTokenizer()
    texts = [" ".join(str(d).split()) for d in documents]
    lengths = [tok.count(t) for t in texts]
    share = even_share(lengths, budget)
    if share is None:
        return Fitted(tuple(texts), 0, None)
    keep = share - tok.count(marker)
    if keep < MIN_TOKENS_PER_DOCUMENT:
        raise DocumentsDoNotFitError(
            f"{len(texts)} documents get {max(budget, 0)} tokens of the model's "
            + (f"{context}-token " if context is not None else "")
            + "context together "
            f"(about {max(keep, 0)} each after the cut marker; at least {MIN_TOKENS_PER_DOCUMENT} needed): "
            "show fewer documents per prompt (max_docs_per_prompt=...), shorten the question or the "
            "template, or use a model with a longer context (context_tokens=...)"
        )
    kept = [
        text if length <= share else tok.head(text, keep).rstrip() for text, length in zip(texts, lengths)
    ]
    out = tuple(k if length <= share else k + marker for k, length in zip(kept, lengths))
    removed = sum(len(text) - len(k) for text, k in zip(texts, kept))
    at = tuple(i for i, length in enumerate(lengths) if length > share)
    return Fitted(out, len(at), share, removed, at)
