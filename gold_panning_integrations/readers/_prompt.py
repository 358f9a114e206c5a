"""Prompt rendering, the citation schema, and strict citation parsing.

Every round shows the documents under labels ``1..m`` by prompt position. The model is
asked for ``{"cited": [labels]}``. Parsing is strict: only labels shown this round map
to documents; anything else is dropped and counted, never mapped to another document.
Labels come from positions, never from document text, so a document cannot forge
another document's label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ..errors import CitationParseError

__all__ = [
    "DEFAULT_TEMPLATE",
    "SYSTEM_PROMPT",
    "TRUNCATION_MARKER",
    "Citations",
    "ParsedCitations",
    "PromptTemplate",
    "check_max_chars_per_doc",
    "citation_json_schema",
    "clip_document",
    "extract_json",
    "parse_citations",
    "render_documents",
    "render_prompt",
    "validate_labels",
]

SYSTEM_PROMPT = "You find the documents that answer a question. You reply with JSON only."

DEFAULT_TEMPLATE = (
    "Question: {question}\n\n"
    "Below are {n} documents, each under a number in square brackets.\n\n"
    "{documents}\n\n"
    "Which documents contain the answer to the question? Reply with JSON only, in the form "
    '{{"cited": [numbers]}}, using only numbers from 1 to {n}. '
    'If no document contains the answer, reply {{"cited": []}}.'
)
"""Default user message. Placeholders: ``{question}``, ``{documents}``, ``{n}``."""

PromptTemplate = str | Callable[[str, Sequence[str]], str]
"""A format string with ``{question}``, ``{documents}``, ``{n}``, or a callable
``(question, documents) -> str`` that renders the whole user message."""


class Citations(BaseModel):
    """The structured answer a model gives: the labels of the documents it cites."""

    cited: list[int] = Field(description="Numbers (labels) of the documents that contain the answer.")


def citation_json_schema(*, max_citations: int | None = None) -> dict[str, Any]:
    """JSON schema of :class:`Citations` for ``response_format={"type": "json_schema"}``."""
    items: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
    if max_citations is not None:
        items["maxItems"] = max_citations
    return {
        "type": "object",
        "properties": {"cited": items},
        "required": ["cited"],
        "additionalProperties": False,
    }


TRUNCATION_MARKER = " [...]"
"""Appended to a document cut by ``max_chars_per_doc``, so the model sees it was cut."""


def check_max_chars_per_doc(value: int | None) -> int | None:
    """Validate a ``max_chars_per_doc`` option: None (no limit) or an integer >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"max_chars_per_doc must be an integer >= 1 (characters per document) or None, got {value!r}"
        )
    return value


def clip_document(text: Any, max_chars: int | None = None) -> str:
    """One document as it appears in a prompt: whitespace runs collapsed to one space,
    then, when longer than ``max_chars`` characters, cut there (trailing space
    dropped) and :data:`TRUNCATION_MARKER` appended. The marker does not count
    toward ``max_chars``."""
    s = " ".join(str(text).split())
    if max_chars is None or len(s) <= max_chars:
        return s
    return s[:max_chars].rstrip() + TRUNCATION_MARKER


def render_documents(documents: Sequence[str], *, max_chars_per_doc: int | None = None) -> str:
    """Documents under labels ``[1]..[m]`` in prompt order, separated by blank lines,
    each cut to ``max_chars_per_doc`` characters (see :func:`clip_document`)."""
    return "\n\n".join(
        f"[{i}] {clip_document(d, max_chars_per_doc)}" for i, d in enumerate(documents, start=1)
    )


def render_prompt(
    question: str,
    documents: Sequence[str],
    *,
    template: PromptTemplate | None = None,
    max_chars_per_doc: int | None = None,
) -> str:
    """The user message for one round.

    Args:
        question: The question.
        documents: Texts in prompt order, shape ``(m,)``; labelled ``1..m``.
        template: Replacement template (see :data:`PromptTemplate`). A callable
            template gets the documents as they are (``max_chars_per_doc`` is not applied).
        max_chars_per_doc: Longest document text shown, in characters; longer ones are
            cut and marked with :data:`TRUNCATION_MARKER`. None: no limit. A document
            keeps its label whether or not it was cut.
    """
    if callable(template):
        return template(question, documents)
    tpl = DEFAULT_TEMPLATE if template is None else template
    body = render_documents(documents, max_chars_per_doc=check_max_chars_per_doc(max_chars_per_doc))
    try:
        return tpl.format(question=question, documents=body, n=len(documents))
    except (KeyError, IndexError) as err:
        raise ValueError(
            f"prompt template has an unknown placeholder {err}; use {{question}}, {{documents}}, {{n}} "
            "and double braces for literal ones"
        ) from err


@dataclass(frozen=True)
class ParsedCitations:
    """Validated citations of one model output.

    Attributes:
        cited: 0-based positions of valid, unique labels, ascending.
        invalid: Labels dropped: out of range (0, negative, > m), not integers
            (strings, floats, booleans, null, nested lists), or over the maximum.
        duplicates: Labels dropped because they repeated an earlier valid label.
        answer: A free-text ``answer`` field, when the model gave one.
    """

    cited: tuple[int, ...]
    invalid: int = 0
    duplicates: int = 0
    answer: str | None = None


MAX_SCAN_CHARS = 20_000
"""How far into a non-JSON output :func:`extract_json` looks for an embedded object."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, a fenced block, or an object
    (``{...}``) in surrounding prose (the last one with a ``"cited"`` key, else the first).

    Raises:
        CitationParseError: No JSON value could be decoded.
    """
    if text is None:
        raise CitationParseError("the model returned no text")
    s = str(text).strip()
    if not s:
        raise CitationParseError("the model returned empty text")
    candidates = [s] + [m.group(1).strip() for m in _FENCE.finditer(s)]
    for c in candidates:
        try:
            return json.loads(c)
        except (json.JSONDecodeError, RecursionError):
            pass
    # JSON inside prose: only objects count here (a bare "[2]" in prose is more often a
    # quoted label than an answer). A model that quotes a document's fake JSON before
    # its own answer gives its answer last, so the last object with a "cited" key wins.
    # The scan is bounded: at most MAX_SCAN_CHARS characters and 64 objects.
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = s.find("{")
    while 0 <= i < MAX_SCAN_CHARS and len(found) < 64:
        try:
            value, end = decoder.raw_decode(s, i)
        except (json.JSONDecodeError, RecursionError):
            i = s.find("{", i + 1)
            continue
        found.append(value)
        i = s.find("{", end)
    if found:
        keyed = [v for v in found if isinstance(v, dict) and "cited" in v]
        return keyed[-1] if keyed else found[0]
    snippet = s[:80] + ("..." if len(s) > 80 else "")
    raise CitationParseError(f"no JSON found in the model output: {snippet!r}")


def validate_labels(
    labels: Sequence[Any], n_shown: int, *, max_citations: int | None = None
) -> tuple[tuple[int, ...], int, int]:
    """Map labels ``1..n_shown`` to 0-based positions; count what is dropped.

    Returns:
        ``(cited positions ascending, invalid count, duplicate count)``.
    """
    seen: set[int] = set()
    keep: list[int] = []
    invalid = 0
    dup = 0
    for lab in labels:
        if isinstance(lab, bool) or not isinstance(lab, int):
            invalid += 1
            continue
        if not 1 <= lab <= n_shown:
            invalid += 1
            continue
        if lab in seen:
            dup += 1
            continue
        if max_citations is not None and len(keep) >= max_citations:
            invalid += 1
            continue
        seen.add(lab)
        keep.append(lab - 1)
    return tuple(sorted(keep)), invalid, dup


def parse_citations(
    text: str | Any,
    n_shown: int,
    *,
    max_citations: int | None = None,
    key: str = "cited",
) -> ParsedCitations:
    """Parse a model output into validated citations.

    Accepts ``{"cited": [...]}`` (optionally with an ``"answer"`` string), a bare JSON
    list of labels, or an already-decoded dict/list (structured output), possibly
    inside Markdown fences or prose.

    Raises:
        CitationParseError: Not JSON, or JSON of the wrong shape (missing ``cited``,
            ``cited`` not a list). Individual bad labels never raise: they are counted.
    """
    value = text if isinstance(text, (dict, list)) else extract_json(text)
    answer = None
    if isinstance(value, dict):
        if key not in value:
            keys = ", ".join(repr(k) for k in list(value)[:5])
            raise CitationParseError(f"JSON has no {key!r} key (keys: {keys or 'none'})")
        labels = value[key]
        a = value.get("answer")
        answer = a if isinstance(a, str) else None
    else:
        labels = value
    if not isinstance(labels, list):
        raise CitationParseError(f"{key!r} must be a list of document numbers, got {type(labels).__name__}")
    cited, invalid, dup = validate_labels(labels, n_shown, max_citations=max_citations)
    return ParsedCitations(cited=cited, invalid=invalid, duplicates=dup, answer=answer)
