"""What ``gold-panning rerank`` reranks: :class:`Question` (one question with its
candidates in first-stage order), read from a JSONL file of questions with their passages
(:class:`JsonlQuestions`, streamed) or a first-stage TREC run file with the queries and the
corpus (:class:`RunQuestions`). Every bad line is a :class:`~..errors.CollectionError`
naming the file and the line, found before any model call.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CollectionError
from ..ir.collection import _is_id, _rag_passages, read_queries, run_candidates
from ..ir.files import _where, json_object, text_lines

__all__ = [
    "DEFAULT_DEPTH",
    "JsonlQuestions",
    "Question",
    "RunQuestions",
    "fingerprint_pairs",
    "input_fingerprint",
    "question_from_object",
]

DEFAULT_DEPTH = 20
"""Candidates reranked per question unless ``depth`` says otherwise (as ``evaluate``'s ``--depth``)."""


@dataclass(frozen=True)
class Question:
    """One question with its candidates in the first stage's order.

    Attributes:
        index: The question's position in the input, from 0 (with a seed, it seeds the
            question's random stream, as ``evaluate`` seeds an instance).
        qid: The question's id (in the run file written).
        question: The question's text.
        doc_ids: The candidates' ids, shape ``(n,)``.
        documents: The candidates' texts, shape ``(n,)``.
        scores: The first stage's score of each candidate, shape ``(n,)``, read by the
            default ``retriever_prior="auto"``; None when it gave none (the rank is used).
    """

    index: int
    qid: str
    question: str
    doc_ids: tuple[str, ...]
    documents: tuple[str, ...]
    scores: tuple[float, ...] | None = None

    def fingerprint(self) -> str:
        """A short hash of everything that decides the question's result (id, position,
        text, candidates' ids, texts and scores): a checkpoint row is reused only for it."""
        h = hashlib.sha256(f"{self.index}\x00{self.qid}\x00{self.question}".encode("utf-8", "surrogatepass"))
        for part in (*self.doc_ids, *self.documents, *(repr(s) for s in self.scores or ())):
            h.update(b"\x00" + part.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:16]

    def as_row(self) -> dict[str, Any]:
        """The question as a plain dict (a Ray Dataset row; :meth:`from_row` reads it back)."""
        return {
            "index": self.index,
            "qid": self.qid,
            "question": self.question,
            "doc_ids": list(self.doc_ids),
            "documents": list(self.documents),
            "scores": None if self.scores is None else list(self.scores),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Question:
        """The question of a dict made by :meth:`as_row`."""
        scores = row.get("scores")
        return cls(
            index=int(row["index"]),
            qid=str(row["qid"]),
            question=str(row["question"]),
            doc_ids=tuple(str(d) for d in row["doc_ids"]),
            documents=tuple(str(d) for d in row["documents"]),
            scores=None if scores is None else tuple(float(s) for s in scores),
        )


def input_fingerprint(questions: Iterable[Question]) -> tuple[int, str]:
    """``(count, SHA-256)`` of the questions' fingerprints in input order (by index): the
    same input gives the same hash whatever order the questions are read in (a Ray
    Dataset's rows come in any order)."""
    return fingerprint_pairs((q.index, q.fingerprint()) for q in questions)


def fingerprint_pairs(pairs: Iterable[tuple[int, str]]) -> tuple[int, str]:
    """:func:`input_fingerprint` of the questions' ``(index, fingerprint)`` pairs.

    Raises:
        ValueError: Two questions share an index (each needs its own position).
    """
    fps = sorted(pairs)
    h = hashlib.sha256()
    last = None
    for index, fp in fps:
        if index == last:
            raise ValueError(
                f"two questions have index {index}; each question needs its own position in the input"
            )
        last = index
        h.update(f"{index}:{fp}\n".encode("ascii"))
    return len(fps), h.hexdigest()


def _passage_scores(passages: list[Any], where: str) -> tuple[float, ...] | None:
    """The passages' ``"score"`` fields: every passage an object with a finite number, or
    none has one (None)."""
    has = [isinstance(p, dict) and "score" in p for p in passages]
    if not any(has):
        return None
    if not all(has):
        raise CollectionError(
            f'{where}: some passages have a "score" and some do not; give every passage of a question '
            "a score (the first stage's) or none"
        )
    scores = []
    for i, p in enumerate(passages):
        s = p["score"]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            raise CollectionError(
                f'{where}: passage {i} has a "score" that is not a finite number: {s!r:.40}'
            )
        scores.append(float(s))
    return tuple(scores)


def question_from_object(
    obj: Mapping[str, Any], *, index: int, where: str, default_id: str, depth: int | None = DEFAULT_DEPTH
) -> Question:
    """One question of the JSONL input, ``{"id", "question", "passages"}``.

    ``passages`` holds texts or objects ``{"text", "id"?, "title"?, "score"?}`` in the
    first stage's order, read as ``gold-panning evaluate --task rag`` reads them (ids
    ``<id>-p<i>`` where none is given; a title shown as ``"title: text"``), cut to
    ``depth`` (None: all). ``default_id`` is the id of a question without one; ``where``
    starts error messages.

    Raises:
        CollectionError: A missing or mistyped field, no passage, a repeated passage id, or
            scores on some passages only.
    """
    question, passages = obj.get("question"), obj.get("passages")
    qid = obj.get("id", default_id)
    if not isinstance(question, str) or not question.strip() or not isinstance(passages, list):
        raise CollectionError(
            f'{where} needs "question" (text) and "passages" (a list of texts or {{"id", "text"}} objects), '
            'e.g. {"id": "q1", "question": "...", "passages": ["...", "..."]}'
        )
    if not _is_id(qid) or not str(qid).strip() or any(ch.isspace() for ch in str(qid)):
        raise CollectionError(
            f'{where}: "id" must be a string or an integer without white space, got {qid!r:.40}'
        )
    if not passages:
        raise CollectionError(
            f"{where}: question {qid!r} has no candidate passages; drop the line or add them"
        )
    texts: dict[str, str] = {}
    ids = _rag_passages(passages, str(qid), where, texts)
    scores = _passage_scores(passages, where)
    if depth is not None:
        ids, scores = ids[:depth], None if scores is None else scores[:depth]
    return Question(
        index=index,
        qid=str(qid),
        question=" ".join(question.split()),
        doc_ids=tuple(ids),
        documents=tuple(texts[d] for d in ids),
        scores=scores,
    )


class JsonlQuestions:
    """The questions of a JSONL file, one ``{"id", "question", "passages"}`` per line
    (:func:`question_from_object`), streamed: iterating reads the file again, one line at
    a time, so a file of any length reranks in flat memory.

    Constructing it reads the file once to check every line, count the questions and take
    their :func:`input_fingerprint` (:attr:`fingerprint`; a bad line fails before any model
    call).
    """

    what = "questions file"

    def __init__(self, path: str | Path, *, depth: int | None = DEFAULT_DEPTH) -> None:
        if depth is not None and depth < 1:
            raise ValueError(f"--depth must be >= 1, got {depth!r}")
        self.path = Path(path)
        self.depth = depth
        seen: set[str] = set()

        def checked() -> Iterator[Question]:
            for q in self._read():
                if q.qid in seen:
                    raise CollectionError(
                        f"{_where(self.what, self.path)} repeats the question id {q.qid!r}; ids must be unique"
                    )
                seen.add(q.qid)
                yield q

        count, self.fingerprint = input_fingerprint(checked())
        if not count:
            raise CollectionError(f"{_where(self.what, self.path)} holds no question")
        self.count = count
        self.left_out: dict[str, str] = {}

    def _read(self) -> Iterator[Question]:
        index = 0
        for lineno, line in text_lines(self.path, what=self.what):
            if not line.strip():
                continue
            where = _where(self.what, self.path, lineno)
            obj = json_object(line, what=self.what, path=self.path, lineno=lineno)
            yield question_from_object(
                obj, index=index, where=where, default_id=f"q{lineno}", depth=self.depth
            )
            index += 1

    def __iter__(self) -> Iterator[Question]:
        return self._read()

    def __len__(self) -> int:
        return self.count


class RunQuestions:
    """The questions of a first-stage TREC run file (``qid Q0 docid rank score tag``): each
    query's top ``depth`` documents by score, with the query's text from ``queries`` (BEIR
    ``queries.jsonl``, ``qid<TAB>text`` or TREC ``<top>`` topics) and the documents' texts
    from ``corpus`` (BEIR ``corpus.jsonl`` or ``docid<TAB>[title<TAB>]text``, streamed:
    only the candidates are kept), in the queries file's order, as ``evaluate`` orders a
    collection's queries. Queries the run does not rank are left out (:attr:`left_out`).

    Raises:
        CollectionError: A bad line (named), a run query the queries file lacks, a
            candidate the corpus lacks, or no query left.
    """

    def __init__(
        self,
        run: str | Path,
        *,
        queries: str | Path,
        corpus: str | Path,
        depth: int = DEFAULT_DEPTH,
    ) -> None:
        if depth < 1:
            raise ValueError(f"--depth must be >= 1, got {depth!r}")
        texts = read_queries(queries, what="queries file")
        first, docs = run_candidates(run, corpus=corpus, depth=depth)
        unknown = [q for q in first.candidates if q not in texts]
        if unknown:
            q = unknown[0]
            line = first.lines[(q, first.candidates[q][0])]
            raise CollectionError(
                f"{_where('run file', first.path, line)} ranks query {q!r}, which is not in queries file "
                f"{str(queries)!r}; pass the queries the run was made for"
            )
        self.depth = depth
        self.left_out = {q: "not ranked by the run file" for q in texts if q not in first.candidates}
        self.questions = [
            Question(
                index=i,
                qid=q,
                question=texts[q],
                doc_ids=first.candidates[q],
                documents=tuple(docs[d] for d in first.candidates[q]),
                scores=first.scores[q],
            )
            for i, q in enumerate(q for q in texts if q in first.candidates)
        ]
        self.count, self.fingerprint = input_fingerprint(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __len__(self) -> int:
        return self.count
