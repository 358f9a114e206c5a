"""Answer attribution: turn a model's free-text answer into citations.

Small models often cannot cite document numbers but can answer the question. In *answer
mode* the model answers and the documents that contain the answer count as cited, so
position bias shows up in which document the answer comes from and the same profile and
update apply. Whether a document supports an answer is a replaceable matcher
``(answer, document) -> bool``; the default looks for the normalised answer as a token
sequence in the document.

When no document contains the whole answer (small models answer in sentences), the
documents holding its *key span* are credited: the answer without stopwords, split into
runs at the question's words, and the documents sharing the longest run, only when that
span is distinctive (several words, or one with a digit or of five letters or more) and
found in few of the shown documents (:attr:`AnswerAttribution.max_share`).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..engine.records import Reading
from ..errors import CitationParseError
from ._prompt import check_max_chars_per_doc, clip_document, truncate

__all__ = [
    "ANSWER_SYSTEM_PROMPT",
    "ANSWER_TEMPLATE",
    "GENERIC_ANSWERS",
    "WAY_OUT",
    "AnswerAttribution",
    "Matcher",
    "abstain_probability",
    "clean_answer",
    "normalize_tokens",
    "reading_from_answer",
    "render_answer_prompt",
    "token_matcher",
]

Matcher = Callable[[str, str], bool]
"""``(answer, document) -> bool``: does the document support the answer?"""

ANSWER_SYSTEM_PROMPT = "You answer questions using the given documents. Reply with the short answer only."
"""Answer mode keeps plain document lines, not cite mode's marked blocks (docs/security.md:
a document is credited only when it holds the model's answer)."""

ANSWER_TEMPLATE = (
    "Documents:\n{documents}\n\nQuestion: {question}\nAnswer with a few words only. "
    "If none of the documents answers the question, reply: unknown"
)
"""Default user message of answer mode. Placeholders: ``{question}``, ``{documents}``. Its
way out ("reply: unknown", as cite mode's ``{"cited": []}``) makes "nothing here answers"
a reply the model can give: an abstention cites nothing, and the profile's ``silent_rate``
says how much that tells."""

WAY_OUT = "unknown"
"""The word of the answer prompt's way out; :func:`abstain_probability` reads how likely the
model was to start it."""


def abstain_probability(first_token: Mapping[str, float]) -> float | None:
    """How likely the model was to take the way out, from its first token's candidates
    ``{token text: probability}`` (the top few the endpoint returned): the summed
    probability of the tokens that begin :data:`WAY_OUT` with 3 letters or more, case and
    surrounding spaces aside ("unknown", " Unknown", "unk"). None when there are no
    candidates (the endpoint returned none).

    Example: ``{"[": 0.68, "unknown": 0.11, "Unknown": 0.01, "Paris": 0.04}`` -> 0.12.
    """
    if not first_token:
        return None
    total = 0.0
    for token, p in first_token.items():
        word = token.strip().lower()
        if len(word) >= 3 and WAY_OUT.startswith(word):
            total += float(p)
    return min(max(total, 0.0), 1.0)


_GENERIC_TEXT = """
i don t know
i do not know
unknown
none
no
yes
n a
n
no answer
not mentioned
not given
not stated
not provided
not available
there is no answer
cannot answer
i cannot answer
answer
document
"""
GENERIC_ANSWERS: frozenset[str] = frozenset({"", *_GENERIC_TEXT.strip().splitlines()})
"""Normalised answers that support nothing (never attributed to any document)."""

_ARTICLES = frozenset({"a", "an", "the"})
_NON_WORD = re.compile(r"[^\w\s]|_", re.UNICODE)
_PREFIX = re.compile(r"^\s*(?:final\s+)?(?:answer|a)\s*[:\-]\s*", re.IGNORECASE)
_FILLER = frozenset({"is", "are", "was", "were", "s", "of", "in", "it", "answer", "what", "which", "who"})

_STOPWORD_TEXT = """
a an the and or but nor so yet if then than that this these those there here
is are was were be been being am do does did done has have had having will would
shall should can could may might must
of in on at to for from by with about as into onto over under between through
during before after above below up down out off since until while within without
upon per via
it its he she they them their theirs his her hers him we us our you your i me my
who whom whose which what when where why how
not no also only just very too more most much many some any all each both either
neither such same other another own
s t d ll re ve m
answer called named known
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""Filler words dropped from an answer (and skipped in documents) before its key span is
looked for. Normalised forms (lowercase, no punctuation: "it's" is "it s")."""


def normalize_tokens(text: str) -> list[str]:
    """Lowercase, strip accents and punctuation, drop articles; the remaining tokens
    (``"The Röntgen-ray, in 1901!"`` -> ``["rontgen", "ray", "in", "1901"]``)."""
    s = unicodedata.normalize("NFKD", str(text))
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = _NON_WORD.sub(" ", s)
    return [t for t in s.split() if t not in _ARTICLES]


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    m, wanted = len(needle), list(needle)
    return m > 0 and any(list(haystack[i : i + m]) == wanted for i in range(len(haystack) - m + 1))


def token_matcher(answer: str, document: str) -> bool:
    """Default matcher: the normalised answer occurs as a token sequence in the document
    (``"48213"`` does not match ``"148213"``); generic answers match nothing."""
    a = normalize_tokens(answer)
    if " ".join(a) in GENERIC_ANSWERS:
        return False
    return _contains(normalize_tokens(document), a)


def clean_answer(text: str | None) -> str:
    """The answer part of a completion: first non-empty line, without an ``Answer:``
    prefix, surrounding quotes or a trailing full stop."""
    if not text:
        return ""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip().strip("\"'`*").strip()
    return line.rstrip(".").strip()


@dataclass(frozen=True)
class AnswerAttribution:
    """Decides which shown documents support an answer.

    Args:
        matcher: ``(answer, document) -> bool``; default :func:`token_matcher`.
        generic: Normalised answers that never support anything.
        question_residual: When the whole answer matches no document and a question is
            given, credit the documents holding the answer's key span
            (:meth:`key_span_documents`: "Lena Park's access code is 48213" through "48213").
        max_share: Most documents (as a share of those shown, at least one) a key span
            may credit; a span found in more supports nothing.
        require_new_words: With a question given, an answer made only of its words (an
            echo such as "Leo Ford's access code") supports nothing.
    """

    matcher: Matcher = token_matcher
    generic: frozenset[str] = GENERIC_ANSWERS
    question_residual: bool = True
    require_new_words: bool = True
    max_share: float = 0.25

    def is_generic(self, answer: str) -> bool:
        """True for answers that support nothing ("", "I don't know", ...)."""
        return " ".join(normalize_tokens(answer)) in self.generic

    def attribute(
        self, answer: str, documents: Sequence[str], *, question: str | None = None
    ) -> tuple[tuple[int, ...], str]:
        """``(positions, how)``: the documents supporting ``answer`` (0-based, ascending)
        and ``"answer"`` (the whole answer matched), ``"residual"`` (its key span did),
        ``"generic"``, ``"echo"`` or ``"none"``."""
        if self.is_generic(answer):
            return (), "generic"
        if question and self.require_new_words:
            q = set(normalize_tokens(question))
            if all(t in q or t in _FILLER for t in normalize_tokens(answer)):
                return (), "echo"
        hits = tuple(i for i, d in enumerate(documents) if self.matcher(answer, d))
        if hits:
            return hits, "answer"
        if self.question_residual and question:
            hits = self.key_span_documents(answer, documents, question=question)
            if hits:
                return hits, "residual"
        return (), "none"

    def key_span_documents(self, answer: str, documents: Sequence[str], *, question: str) -> tuple[int, ...]:
        """Positions of the documents (as shown, shape ``(m,)``) holding the answer's key
        span (see the module docstring; the question's words are never part of it);
        ``()`` when the span is not distinctive or too common."""
        runs = _answer_runs(answer, question)
        if not runs:
            return ()
        wanted = {t for r in runs for t in r}
        seqs = [[t for t in normalize_tokens(d) if t not in STOPWORDS] for d in documents]
        scores = [_best_run(runs, seq) if wanted.intersection(seq) else (0, ()) for seq in seqs]
        best = max(n for n, _ in scores)
        hits = tuple(i for i, (n, _) in enumerate(scores) if n == best and best > 0)
        limit = max(1, int(self.max_share * len(documents)))
        if not hits or len(hits) > limit:
            return ()  # no span, or one common to many shown documents: says nothing
        span = scores[hits[0]][1]
        if best == 1 and not _distinctive(span[0]):
            return ()
        if all(sum(t in seq for seq in seqs) > limit for t in span):
            return ()  # every word of the span is common among the shown documents
        return hits


def _answer_runs(answer: str, question: str) -> list[list[str]]:
    """The answer's tokens without stopwords, split into runs at the question's words."""
    q = set(normalize_tokens(question))
    runs: list[list[str]] = [[]]
    for t in normalize_tokens(answer):
        if t in q:
            runs.append([])
        elif t not in STOPWORDS:
            runs[-1].append(t)
    return [r for r in runs if r]


def _best_run(runs: Sequence[Sequence[str]], seq: Sequence[str]) -> tuple[int, tuple[str, ...]]:
    """The longest run shared by ``seq`` and any of ``runs`` (length, tokens)."""
    return max((_longest_common_run(r, seq) for r in runs), key=lambda x: x[0])


def _distinctive(token: str) -> bool:
    """A one-word span that can identify a passage: has a digit, or 5+ characters."""
    return any(ch.isdigit() for ch in token) or len(token) >= 5


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> tuple[int, tuple[str, ...]]:
    """Length and tokens of the longest contiguous token run shared by ``a`` and ``b``
    (the earliest in ``a`` of the longest)."""
    match = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return match.size, tuple(a[match.a : match.a + match.size])


def render_answer_prompt(
    question: str,
    documents: Sequence[str],
    *,
    template: str | None = None,
    max_chars_per_doc: int | None = None,
) -> str:
    """The user message of answer mode: the documents (texts in prompt order, shape
    ``(m,)``, one per line, no numbers, each as :func:`._prompt.clip_document` cuts it)
    and the question, in ``template`` (``{question}``, ``{documents}``)."""
    limit = check_max_chars_per_doc(max_chars_per_doc)
    body = "\n".join(f"- {clip_document(d, limit)}" for d in documents)
    tpl = ANSWER_TEMPLATE if template is None else template
    try:
        return tpl.format(question=question, documents=body, n=len(documents))
    except (KeyError, IndexError) as err:
        raise ValueError(
            f"answer template has an unknown placeholder {err}; use {{question}} and {{documents}}"
        ) from err


def reading_from_answer(
    completion: str | None,
    documents: Sequence[str],
    *,
    question: str | None = None,
    attribution: AnswerAttribution | None = None,
    attempts: int = 1,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    extra: dict[str, Any] | None = None,
) -> Reading:
    """A :class:`Reading` citing the documents (as shown, shape ``(m,)``) that support the
    answer in ``completion`` under ``attribution`` (default :class:`AnswerAttribution`;
    ``question`` enables the residual match). An answer that supports no document is a
    reading with no citations, not a failure."""
    att = attribution or AnswerAttribution()
    answer = clean_answer(completion)
    cited, how = att.attribute(answer, documents, question=question)
    info = {"mode": "answer", "attribution": how, **(extra or {})}
    if att.is_generic(answer):
        info["abstained"] = True  # "unknown", "I don't know", nothing: a way out taken
    return Reading(
        cited=cited,
        answer=answer or None,
        raw=truncate(completion),
        attempts=attempts,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        extra=info,
    )


def answer_user_message(
    question: str, documents: Sequence[str], template: Any, max_chars_per_doc: int | None
) -> str:
    """A reader's answer-mode user message: a callable ``template``'s
    ``template(question, documents)``, else :func:`render_answer_prompt`."""
    if callable(template):
        return str(template(question, list(documents)))
    return render_answer_prompt(question, documents, template=template, max_chars_per_doc=max_chars_per_doc)


def reading_from_reply(
    text: str | None,
    documents: Sequence[str],
    *,
    question: str,
    attribution: AnswerAttribution | None,
    extra: dict[str, Any],
    abstain_p: float | None,
) -> Reading:
    """:func:`reading_from_answer` of a reply's ``text`` with the first token's
    ``abstain_p``; CitationParseError (retried) when the model returned no text."""
    if text is None or not text.strip():
        raise CitationParseError("the model returned no text")
    reading = reading_from_answer(text, documents, question=question, attribution=attribution, extra=extra)
    return replace(reading, abstain_p=abstain_p)
