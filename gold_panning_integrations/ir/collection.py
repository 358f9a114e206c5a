"""Test collections in the formats the field uses: BEIR folders (:func:`load_beir`), TREC
topics/qrels/corpus files (:func:`load_trec`) and RAG JSONL (:func:`load_rag_jsonl`), as
docs/bench-compare-collections.md ("Input formats") describes them.

A BEIR or TREC collection takes a first-stage run file (:func:`read_run`): its top
``depth`` documents per query are the candidates, and only those are kept from the
streamed corpus; without one, the first stage is BM25 (:mod:`.first_stage`). A query is
evaluated when the qrels give it a document of grade > 0 (others are in
:attr:`Collection.left_out`). Every bad line is a :class:`~..errors.CollectionError`
naming the file and the line.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from ..errors import CollectionError
from .files import MAX_CORPUS_BYTES, _where, json_object, text_lines

__all__ = [
    "FIXTURE",
    "FORMATS",
    "MAX_BM25_DOCUMENTS",
    "Collection",
    "Run",
    "fixture_path",
    "load_beir",
    "load_collection",
    "load_rag_jsonl",
    "load_trec",
    "read_corpus",
    "read_qrels",
    "read_queries",
    "read_run",
    "run_candidates",
]

logger = logging.getLogger(__name__)

FIXTURE = "nq-test-beir"
"""The BEIR-format folder that ships in the package (``_data/nq-test-beir``): held-out NQ
questions with their gold passages (see its ``NOTICE.md``)."""
FORMATS = ("beir", "trec", "rag")
"""Collection formats, as ``gold-panning evaluate --task`` names them."""
MAX_BM25_DOCUMENTS = 1_000_000
"""Largest corpus kept in memory for the BM25 first stage; pass a run file for more."""

_QRELS_HEADER = re.compile(r"^\s*query[-_]?id\b", re.IGNORECASE)
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _is_id(value: object) -> bool:
    """Whether a JSON value can be an id: a string or an integer (not a bool)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


_K = TypeVar("_K")
_V = TypeVar("_V")


def _frozen(d: Mapping[_K, _V]) -> Mapping[_K, _V]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class Run:
    """A first stage's candidates, read from a run file.

    Attributes:
        path: The run file.
        candidates: Query id -> document ids, best first, at most ``depth`` each.
        lines: ``(query id, document id)`` -> the line that named it (for messages).
        scores: Query id -> the run's score of each candidate, in the order of
            :attr:`candidates` (the panning prior ``retriever_prior="auto"`` reads them).
    """

    path: Path
    candidates: Mapping[str, tuple[str, ...]]
    lines: Mapping[tuple[str, str], int]
    scores: Mapping[str, tuple[float, ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Collection:
    """Queries, graded judgements and document texts of a test collection.

    Attributes:
        name: A short description for reports (format, location, split).
        queries: Query id -> text of every evaluated query, in file order.
        qrels: Query id -> document id -> grade, for the evaluated queries (every judged
            document: recall and nDCG's ideal ranking count those no first stage returns).
        documents: Document id -> the text rankers are shown (``"title: text"`` when
            there is a title). With a run file only the run's candidates are kept.
        candidates: Query id -> document ids in first-stage order (a run file, or the
            passages of a RAG line), or ``None`` when the first stage is BM25 over
            :attr:`documents`.
        candidate_scores: Query id -> the run file's score of each candidate, in the
            order of :attr:`candidates`; ``None`` when the first stage gives no scores
            (a RAG line) or is BM25 (:func:`~.first_stage.first_stage` scores it).
        origin: Query id -> where its judgements are (``"qrels file 'x' line 3"``).
        left_out: Query id -> why it is not evaluated (no document of grade > 0).
        first_stage: ``"bm25"``, ``"run: PATH"`` or ``"rag: PATH"``.
    """

    name: str
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]
    documents: Mapping[str, str]
    candidates: Mapping[str, tuple[str, ...]] | None = None
    origin: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    left_out: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    first_stage: str = "bm25"
    candidate_scores: Mapping[str, tuple[float, ...]] | None = None

    def __post_init__(self) -> None:
        """Every mapping held as a read-only copy."""
        for f in fields(self):
            if isinstance(value := getattr(self, f.name), Mapping):
                object.__setattr__(self, f.name, _frozen(value))


def fixture_path() -> Path:
    """Path of the BEIR-format fixture that ships in the package (:data:`FIXTURE`)."""
    return Path(str(resources.files("gold_panning_integrations._data").joinpath(FIXTURE)))


# ====================================================================== single files
def read_qrels(
    path: str | Path, *, what: str = "qrels file"
) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Judgements of a BEIR (``query-id corpus-id score``, a header line allowed) or TREC
    (``qid iteration docid relevance``) qrels file, whichever the first line is; a repeated
    ``(query, document)`` keeps the last grade (logged).

    Returns:
        ``(qrels, first_line)``: query id -> document id -> grade, and query id -> the
        line of its first judgement.

    Raises:
        CollectionError: A line with a missing or extra field, a grade that is not an
            integer, or no judgement at all; the message names the file and the line.
    """
    p = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    first: dict[str, int] = {}
    width = 0
    repeats = 0
    for lineno, line in text_lines(p, what=what):
        parts = line.split()
        if not parts:
            continue
        if width == 0 and lineno == 1 and _QRELS_HEADER.match(line):
            continue
        if width == 0:
            if len(parts) not in (3, 4):
                raise CollectionError(
                    f"{_where(what, p, lineno)} has {len(parts)} field(s); a qrels line is 'query-id corpus-id score' "
                    "(BEIR) or 'query-id iteration doc-id relevance' (TREC)"
                )
            width = len(parts)
        if len(parts) != width:
            form = "'query-id corpus-id score'" if width == 3 else "'query-id iteration doc-id relevance'"
            raise CollectionError(
                f"{_where(what, p, lineno)} has {len(parts)} field(s) where the file's lines have {width} ({form}); "
                "a field is missing or extra"
            )
        qid, docid, grade_text = parts[0], parts[-2], parts[-1]
        try:
            grade = int(grade_text)
        except ValueError as err:
            raise CollectionError(
                f"{_where(what, p, lineno)}: relevance {grade_text!r} is not an integer"
            ) from err
        judged = qrels.setdefault(qid, {})
        repeats += docid in judged
        judged[docid] = grade
        first.setdefault(qid, lineno)
    if not qrels:
        raise CollectionError(f"{_where(what, p)} holds no judgements")
    if repeats:
        logger.warning(
            "%s: %d repeated (query, document) judgements; the last grade of each is kept", p, repeats
        )
    return qrels, first


def _topics_sgml(p: Path, what: str) -> dict[str, str]:
    text = "\n".join(line for _, line in text_lines(p, what=what))
    out: dict[str, str] = {}
    for m in re.finditer(r"<top>(.*?)</top>", text, re.DOTALL | re.IGNORECASE):
        block = m.group(1)
        lineno = text.count("\n", 0, m.start()) + 1
        num = re.search(r"<num>\s*(?:Number:)?\s*(\S+)", block, re.IGNORECASE)
        title = re.search(
            r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<desc>|<narr>|<num>|\Z)", block, re.DOTALL | re.IGNORECASE
        )
        if num is None or title is None or not title.group(1).strip():
            raise CollectionError(
                f"{_where(what, p, lineno)}: a <top> block needs <num> and a non-empty <title>"
            )
        out[num.group(1)] = " ".join(title.group(1).split())
    if not out:
        raise CollectionError(f"{_where(what, p)} holds no <top> block")
    return out


def read_queries(path: str | Path, *, what: str = "queries file") -> dict[str, str]:
    """Query id -> text from BEIR ``queries.jsonl`` (name ending ``.jsonl``/``.jsonl.gz``),
    TREC ``<top>`` SGML (first non-blank line starting ``<top>``) or ``qid<TAB>text`` lines.

    Raises:
        CollectionError: A line that is not a query record, a repeated id, or no query.
    """
    p = Path(path)
    jsonl = p.name.lower().endswith((".jsonl", ".jsonl.gz"))
    if not jsonl:
        with contextlib.closing(text_lines(p, what=what)) as lines:
            first = next((line for _, line in lines if line.strip()), "")
        if first.lstrip().lower().startswith("<top"):
            return _topics_sgml(p, what)
    out: dict[str, str] = {}
    for lineno, line in text_lines(p, what=what):
        if not line.strip():
            continue
        if jsonl:
            obj = json_object(line, what=what, path=p, lineno=lineno)
            qid, text = obj.get("_id"), obj.get("text")
            if not _is_id(qid) or not isinstance(text, str):
                raise CollectionError(
                    f'{_where(what, p, lineno)} needs a string or integer "_id" and a string "text"'
                )
        else:
            qid, tab, text = line.partition("\t")
            if not tab or not qid.strip():
                raise CollectionError(f"{_where(what, p, lineno)} is not 'query-id<TAB>text'")
            qid = qid.strip()
        _add(out, str(qid), " ".join(text.split()), p, what, lineno)
    if not out:
        raise CollectionError(f"{_where(what, p)} holds no query")
    return out


def _check_id(key: str, where: str) -> str:
    """``key`` when it can name a query or document in a TREC run (one word)."""
    if not key or any(ch.isspace() for ch in key):
        raise CollectionError(
            f"{where}: the id {key!r} is empty or holds white space, which a TREC run cannot write"
        )
    return key


def _add(out: dict[str, str], key: str, value: str, p: Path, what: str, lineno: int) -> None:
    _check_id(key, _where(what, p, lineno))
    if key in out:
        raise CollectionError(f"{_where(what, p, lineno)} repeats the id {key!r}; ids must be unique")
    out[key] = value


def _shown(title: str, text: str) -> str:
    title, text = " ".join(title.split()), " ".join(text.split())
    return f"{title}: {text}" if title else text


def read_corpus(
    path: str | Path, *, wanted: set[str] | None = None, what: str = "corpus file"
) -> dict[str, str]:
    """Document id -> text shown to rankers (``"title: text"``), from BEIR ``corpus.jsonl``
    (``.jsonl``/``.jsonl.gz``) or ``docid<TAB>[title<TAB>]text`` lines, streamed: with
    ``wanted`` only those documents are kept; without, at most :data:`MAX_BM25_DOCUMENTS`.

    Raises:
        CollectionError: A line that is not a document record, a repeated id, no document
            at all, or more than :data:`MAX_BM25_DOCUMENTS` without ``wanted``.
    """
    p = Path(path)
    jsonl = p.name.lower().endswith((".jsonl", ".jsonl.gz"))
    out: dict[str, str] = {}
    seen = 0
    for lineno, line in text_lines(p, what=what, max_bytes=MAX_CORPUS_BYTES):
        if not line.strip():
            continue
        if jsonl:
            obj = json_object(line, what=what, path=p, lineno=lineno)
            docid, title, text = obj.get("_id"), obj.get("title") or "", obj.get("text")
            if not _is_id(docid) or not isinstance(text, str) or not isinstance(title, str):
                raise CollectionError(
                    f'{_where(what, p, lineno)} needs a string or integer "_id", a string "text" and an optional '
                    'string "title"'
                )
            key = str(docid)
        else:
            parts = line.split("\t")
            if len(parts) not in (2, 3) or not parts[0].strip():
                raise CollectionError(
                    f"{_where(what, p, lineno)} is not 'doc-id<TAB>text' or 'doc-id<TAB>title<TAB>text'"
                )
            key = parts[0].strip()
            title, text = (parts[1], parts[2]) if len(parts) == 3 else ("", parts[1])
        seen += 1
        if wanted is not None and key not in wanted:
            continue
        if wanted is None and len(out) >= MAX_BM25_DOCUMENTS:
            raise CollectionError(
                f"{_where(what, p)} holds more than {MAX_BM25_DOCUMENTS:,} documents, too many for the in-memory BM25 "
                "first stage; pass a first-stage run file (--run), e.g. BM25 top-100 from pyserini"
            )
        _add(out, key, _shown(title, text), p, what, lineno)
    if seen == 0:
        raise CollectionError(f"{_where(what, p)} holds no documents")
    return out


def read_run(path: str | Path, *, depth: int, queries: set[str] | None = None) -> Run:
    """The top ``depth`` documents per query of a TREC run file (``qid Q0 docid rank
    score tag``), best score first (ties: lower rank, then earlier line). Only queries in
    ``queries`` are kept when given.

    Raises:
        CollectionError: A line without exactly six fields, a rank or score that is not a
            number, or a document listed twice for one query; names the file and line.
    """
    p = Path(path)
    what = "run file"
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth!r}")
    rows: dict[str, list[tuple[float, float, int, str]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in text_lines(p, what=what):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise CollectionError(
                f"{_where(what, p, lineno)} has {len(parts)} field(s); a run line is 'query-id Q0 doc-id rank score tag'"
            )
        qid, _, docid, rank_text, score_text, _ = parts
        try:
            rank, score = float(rank_text), float(score_text)
        except ValueError as err:
            raise CollectionError(
                f"{_where(what, p, lineno)}: rank {rank_text!r} or score {score_text!r} is not a number"
            ) from err
        if math.isnan(score):
            raise CollectionError(f"{_where(what, p, lineno)}: score is NaN")
        if (qid, docid) in seen:
            raise CollectionError(
                f"{_where(what, p, lineno)} lists document {docid!r} for query {qid!r} again (first at line "
                f"{seen[(qid, docid)]})"
            )
        seen[(qid, docid)] = lineno
        if queries is None or qid in queries:
            rows.setdefault(qid, []).append((-score, rank, lineno, docid))
    if not seen:
        raise CollectionError(f"{_where(what, p)} holds no run line")
    best = {q: sorted(r)[:depth] for q, r in rows.items()}
    cands = {q: tuple(d for *_, d in r) for q, r in best.items()}
    scores = {q: tuple(-neg for neg, *_ in r) for q, r in best.items()}
    lines = {(q, d): seen[(q, d)] for q, ds in cands.items() for d in ds}
    return Run(p, _frozen(cands), _frozen(lines), _frozen(scores))


def run_candidates(
    run: str | Path, *, corpus: str | Path, depth: int, queries: set[str] | None = None
) -> tuple[Run, dict[str, str]]:
    """A run file's candidates (:func:`read_run`) and their texts, only theirs kept from
    the streamed ``corpus`` (:func:`read_corpus`).

    Raises:
        CollectionError: As :func:`read_run` and :func:`read_corpus`, or a candidate the
            corpus lacks (naming the run file's line).
    """
    r = read_run(run, depth=depth, queries=queries)
    docs = read_corpus(corpus, wanted={d for ds in r.candidates.values() for d in ds})
    absent = [(q, d) for q, ds in r.candidates.items() for d in ds if d not in docs]
    if absent:
        q, d = min(absent, key=lambda qd: r.lines[qd])
        raise CollectionError(
            f"{_where('run file', r.path, r.lines[(q, d)])} names document {d!r}, which is not in corpus "
            f"file {str(corpus)!r}; pass the corpus the run was made on"
        )
    return r, docs


# ====================================================================== collections
def _judged(
    qrels_path: Path, queries_path: Path, queries_what: str
) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, str], dict[str, str]]:
    """``(queries, qrels, origin, left_out)`` of the evaluated queries (judged, with a
    document of grade > 0) of a qrels and a queries file, in queries-file order."""
    qrels, first = read_qrels(qrels_path)
    queries = read_queries(queries_path, what=queries_what)
    missing = [q for q in qrels if q not in queries]
    if missing:
        q = missing[0]
        raise CollectionError(
            f"{_where('qrels file', qrels_path, first[q])} judges query {q!r}, which is not in "
            f"{_where(queries_what, queries_path)}; pass the matching queries file"
        )
    left_out = {q: "no document of grade > 0 in the qrels" for q in qrels if max(qrels[q].values()) <= 0}
    kept = [q for q in queries if q in qrels and q not in left_out]
    if not kept:
        raise CollectionError(f"{_where('qrels file', qrels_path)} gives no query a document of grade > 0")
    origin = {q: _where("qrels file", qrels_path, first[q]) for q in kept}
    return {q: queries[q] for q in kept}, {q: qrels[q] for q in kept}, origin, left_out


def _with_first_stage(
    name: str,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    origin: dict[str, str],
    left_out: dict[str, str],
    *,
    corpus: Path,
    run: str | Path | None,
    depth: int,
) -> Collection:
    cands: dict[str, tuple[str, ...]] | None = None
    scores: dict[str, tuple[float, ...]] | None = None
    if run is None:
        docs, first_stage = read_corpus(corpus), "bm25"
    else:
        r, docs = run_candidates(run, corpus=corpus, depth=depth, queries=set(queries))
        missing = [q for q in queries if q not in r.candidates]
        if missing:
            q = missing[0]
            raise CollectionError(
                f"query {q!r} ({origin[q]}) has no candidates in run file {str(r.path)!r}; the first stage must "
                "return documents for every judged query (or remove the query's judgements)"
            )
        cands, first_stage = {q: r.candidates[q] for q in queries}, f"run: {r.path}"
        scores = {q: r.scores[q] for q in queries}
    return Collection(name, queries, qrels, docs, cands, origin, left_out, first_stage, scores)


def load_beir(
    folder: str | Path | None = None, *, split: str = "test", run: str | Path | None = None, depth: int = 20
) -> Collection:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``); the
    shipped fixture (:func:`fixture_path`) when ``folder`` is None. ``run``: a first-stage
    run file (its top ``depth`` per query), else the first stage is BM25.

    Raises:
        CollectionError: A missing file (the message lists what a BEIR folder holds) or a
            bad line (named).
    """
    root = fixture_path() if folder is None else Path(folder)
    if not root.is_dir():
        raise CollectionError(
            f"BEIR folder {str(root)!r} is not a folder; pass one holding corpus.jsonl, queries.jsonl and "
            "qrels/<split>.tsv (e.g. unzipped from the BEIR release)"
        )
    if not _SPLIT_NAME.match(split):
        raise ValueError(f"--split must be a qrels file name such as test or dev, got {split!r}")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        have = sorted(x.stem for x in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        hint = f"its splits: {', '.join(have)} (--split)" if have else "a BEIR folder holds qrels/<split>.tsv"
        raise CollectionError(f"BEIR folder {str(root)!r} has no qrels/{split}.tsv; {hint}")
    judged = _judged(qrels_path, root / "queries.jsonl", "queries file")
    name = f"BEIR {'fixture ' + FIXTURE if folder is None else str(root)} ({split})"
    return _with_first_stage(name, *judged, corpus=root / "corpus.jsonl", run=run, depth=depth)


def load_trec(
    *,
    topics: str | Path,
    qrels: str | Path,
    corpus: str | Path,
    run: str | Path | None = None,
    depth: int = 20,
) -> Collection:
    """TREC-style files: ``topics``, ``qrels``, ``corpus`` and optionally a first-stage
    ``run`` (see the module docstring for the accepted forms).

    Raises:
        CollectionError: A bad line (named), or qrels judging a query the topics lack.
    """
    judged = _judged(Path(qrels), Path(topics), "topics file")
    name = f"TREC {Path(topics).name} / {Path(qrels).name}"
    return _with_first_stage(name, *judged, corpus=Path(corpus), run=run, depth=depth)


def _rag_relevant(obj: object, ids: list[str], where: str) -> dict[str, int]:
    """``relevant`` of a RAG line -> document id -> grade."""
    items: list[tuple[object, object]]
    if isinstance(obj, list):
        items = [(x, 1) for x in obj]
    elif isinstance(obj, dict):
        items = list(obj.items())
    else:
        raise CollectionError(
            f'{where}: "relevant" must be a list of passage indices or ids, or an object of grades'
        )
    out: dict[str, int] = {}
    for key, grade in items:
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise CollectionError(
                f"{where}: the grade of relevant passage {key!r} is {grade!r}, not an integer"
            )
        index = key if isinstance(key, int) and not isinstance(key, bool) else None
        if isinstance(key, str) and key.isdigit() and isinstance(obj, dict) and key not in ids:
            index = int(key)  # an object's keys are strings: "0" is an index unless a passage id
        if index is not None:
            if not 0 <= index < len(ids):
                raise CollectionError(f"{where}: relevant passage index {index} is outside 0..{len(ids) - 1}")
            out[ids[index]] = grade
        elif isinstance(key, str) and key in ids:
            out[key] = grade
        else:
            raise CollectionError(
                f"{where}: relevant passage {key!r} is neither an index nor the id of one of its passages"
            )
    return out


def _rag_passages(passages: list[object], qid: str, where: str, docs: dict[str, str]) -> list[str]:
    """The ids of a RAG line's passages, in order; their texts are added to ``docs``."""
    ids: list[str] = []
    for i, item in enumerate(passages):
        if isinstance(item, str):
            pid, text = f"{qid}-p{i}", item
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            raw_id = item.get("id", f"{qid}-p{i}")
            if not _is_id(raw_id):
                raise CollectionError(f'{where}: passage {i} has an "id" that is not a string or an integer')
            title = item.get("title") or ""
            pid, text = str(raw_id), _shown(title if isinstance(title, str) else "", item["text"])
        else:
            raise CollectionError(f'{where}: passage {i} must be text or an object with a string "text"')
        _check_id(pid, where)
        if pid in ids:
            raise CollectionError(f"{where}: passage id {pid!r} appears twice")
        text = " ".join(text.split())
        if docs.get(pid, text) != text:
            raise CollectionError(f"{where}: passage id {pid!r} names another text than on an earlier line")
        docs[pid] = text
        ids.append(pid)
    return ids


def load_rag_jsonl(path: str | Path, *, depth: int = 20) -> Collection:
    """One labelled question per line (see the module docstring); the passages, in their
    order and cut to ``depth``, are the first stage.

    Raises:
        CollectionError: A line that is not such a record, a question without passages,
            a relevant passage that is not among them, or a repeated question id.
    """
    p = Path(path)
    what = "RAG JSONL file"
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    docs: dict[str, str] = {}
    cands: dict[str, tuple[str, ...]] = {}
    origin: dict[str, str] = {}
    left_out: dict[str, str] = {}
    for lineno, line in text_lines(p, what=what):
        if not line.strip():
            continue
        where = _where(what, p, lineno)
        obj = json_object(line, what=what, path=p, lineno=lineno)
        question, passages = obj.get("question"), obj.get("passages")
        qid = obj.get("id", f"q{lineno}")
        if not isinstance(question, str) or not question.strip() or not isinstance(passages, list):
            raise CollectionError(
                f'{where} needs "question" (text), "passages" (a list) and "relevant", e.g. {{"question": "...", '
                '"passages": ["...", "..."], "relevant": [0]}'
            )
        if not _is_id(qid):
            raise CollectionError(f'{where}: "id" must be a string or an integer')
        qid = _check_id(str(qid), where)
        if qid in queries or qid in left_out:
            raise CollectionError(f"{where} repeats the question id {qid!r}; ids must be unique")
        if not passages:
            raise CollectionError(
                f"{where}: question {qid!r} has no candidate passages; drop the line or add its passages"
            )
        ids = _rag_passages(passages, qid, where, docs)
        grades = _rag_relevant(obj.get("relevant", []), ids, where)
        if not any(g > 0 for g in grades.values()):
            left_out[qid] = "no relevant passage"
            continue
        queries[qid] = " ".join(question.split())
        qrels[qid] = grades
        cands[qid] = tuple(ids[:depth])
        origin[qid] = where
    if not queries:
        raise CollectionError(
            f"{_where(what, p)} holds no question with a relevant passage"
            + (' (every line\'s "relevant" is empty)' if left_out else "")
        )
    return Collection(f"RAG JSONL {p}", queries, qrels, docs, cands, origin, left_out, f"rag: {p}")


def load_collection(
    task: str,
    *,
    data: str | Path | None = None,
    split: str = "test",
    topics: str | Path | None = None,
    qrels: str | Path | None = None,
    corpus: str | Path | None = None,
    run: str | Path | None = None,
    depth: int = 20,
) -> Collection:
    """The collection of ``gold-panning evaluate --task beir|trec|rag``, after checking that the
    options given belong to that format (:data:`FORMATS`).

    * ``beir``: ``data`` a BEIR folder (default: the shipped fixture), ``split`` its qrels
      file, optionally a ``run`` file as the first stage;
    * ``trec``: ``topics``, ``qrels`` and ``corpus`` files, optionally a ``run`` file;
    * ``rag``: ``data`` a RAG JSONL file (its passages are the first stage).
    """
    trec_files = {"--topics": topics, "--qrels": qrels, "--corpus": corpus}
    given = [k for k, v in trec_files.items() if v is not None]
    if task == "beir":
        if given:
            raise ValueError(f"{', '.join(given)} belong to --task trec; a BEIR folder is given with --data")
        return load_beir(data, split=split, run=run, depth=depth)
    if split != "test":
        raise ValueError(f"--split applies to the shipped NQ sample and BEIR folders, not to --task {task}")
    if task == "trec":
        missing = [k for k, v in trec_files.items() if v is None]
        if missing or data is not None:
            raise ValueError(
                "--task trec needs --topics, --qrels and --corpus files (and optionally --run), not --data"
                + (f"; missing {', '.join(missing)}" if missing else "")
            )
        assert topics is not None and qrels is not None and corpus is not None
        return load_trec(topics=topics, qrels=qrels, corpus=corpus, run=run, depth=depth)
    if task == "rag":
        if data is None or given or run is not None:
            raise ValueError(
                "--task rag needs --data FILE.jsonl (one labelled question per line) and no "
                "--topics/--qrels/--corpus/--run: its passages are the first stage"
            )
        return load_rag_jsonl(data, depth=depth)
    raise ValueError(f"--task {task} is not a collection; choose one of {', '.join(FORMATS)}")
