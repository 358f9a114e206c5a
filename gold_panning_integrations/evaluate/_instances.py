"""What ``gold-panning evaluate`` ranks: one query with its candidates, from a built-in task
(:func:`make_instances`: one relevant document, ids made up for the run files) or a test
collection (:func:`collection_instances`: the collection's ids and graded judgements).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._streams import query_k
from ..ir.collection import FORMATS, Collection
from ..ir.first_stage import first_stage

__all__ = [
    "BUILTIN_TASKS",
    "COLLECTION_TASKS",
    "SPLITS",
    "TASKS",
    "CompareInstance",
    "GPKChoice",
    "choose_gp_k",
    "collection_instances",
    "complete_ranking",
    "instance_qrels",
    "make_instances",
    "query_k",
]


@dataclass(frozen=True)
class CompareInstance:
    """One question with its documents in the base order (retriever or input order).

    Attributes:
        question: The question.
        documents: ``n`` document texts in the base order (the first stage's).
        gold: 0-based indices of the relevant documents.
        answers: Accepted answers (recorded; answer attribution matches documents, not these).
        task: Task name.
        index: Position of the instance in its run (seeds the panners' generators).
        qid: Query id in run files; ``""`` means ``"<task>-<index>"``.
        doc_ids: Document ids in run files, shape ``(n,)``; ``()`` means ``d0 .. d{n-1}``.
        scores: The first stage's score of each document, shape ``(n,)``; ``()`` when it
            gave none (the panning methods' ``retriever_prior="auto"`` then uses the rank).
    """

    question: str
    documents: list[str]
    gold: tuple[int, ...]
    answers: tuple[str, ...] = ()
    task: str = "kv"
    index: int = 0
    qid: str = ""
    doc_ids: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()

    @property
    def query_id(self) -> str:
        """The query's id in run files."""
        return self.qid or f"{self.task}-{self.index}"

    @property
    def document_ids(self) -> tuple[str, ...]:
        """The documents' ids in run files, in the base order."""
        return self.doc_ids or tuple(f"d{i}" for i in range(len(self.documents)))

    def fingerprint(self) -> str:
        """A short hash of the question and its candidates (ids and texts): a checkpoint
        row is reused only for the instance it was made on."""
        h = hashlib.sha256(self.query_id.encode())
        for part in (self.question, *self.document_ids, *self.documents):
            h.update(b"\x00" + part.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:16]


def complete_ranking(returned: Sequence[int], n: int, *, top_n: int) -> list[int]:
    """A permutation of ``range(n)``: the first ``top_n`` (``>= 1``) distinct in-range
    indices a method returned (best first), then the others in base (first-stage) order."""
    head = list(dict.fromkeys(int(i) for i in returned if 0 <= i < n))[:top_n]
    taken = set(head)
    return head + [i for i in range(n) if i not in taken]


def instance_qrels(
    instances: Sequence[CompareInstance], collection: Collection | None = None
) -> dict[str, dict[str, int]]:
    """Judgements of the instances' queries: the collection's (every judged document),
    or grade 1 for each ``gold`` document of a built-in task."""
    if collection is not None:
        return {i.query_id: dict(collection.qrels[i.query_id]) for i in instances}
    return {i.query_id: {i.document_ids[g]: 1 for g in i.gold} for i in instances}


@dataclass(frozen=True)
class GPKChoice:
    """The ``k`` the panning methods run with, and how it was chosen (for the report)."""

    k: int
    how: str


def choose_gp_k(
    requested: int | None,
    instances: Sequence[CompareInstance],
    *,
    collection: Collection | None = None,
) -> GPKChoice:
    """``k`` for the panners: ``requested`` (``--gp-k N``), else 1 on a built-in task, else
    the median number of relevant documents among a query's first-stage candidates, rounded
    half up, within ``1 .. n - 1`` for the largest ``n`` (per query: :func:`query_k`). The
    median reads the evaluated queries' labels; pass ``--gp-k`` for a run that uses none.
    """
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--gp-k must be >= 1 or auto, got {requested!r}")
        return GPKChoice(requested, f"--gp-k {requested}")
    if collection is None:
        return GPKChoice(1, "1: one relevant document per query by construction")
    counts = [len(i.gold) for i in instances]
    if not counts:
        return GPKChoice(1, "1: no query")
    med = statistics.median(counts)
    rounded = int(np.floor(med + 0.5))
    cap = max(max(len(i.documents) for i in instances) - 1, 1)
    k = max(1, min(rounded, cap))
    how = (
        f"{k}: median relevant documents per query among the first-stage candidates "
        f"({med:g}; range {min(counts)}-{max(counts)} over {len(counts)} queries)"
    ) + (f", kept within 1..{cap}" if k != rounded else "")
    return GPKChoice(k, how)


def collection_instances(
    collection: Collection,
    *,
    depth: int,
    instances: int | None,
    seed: int,
    relevance_level: int = 1,
    stemmer: str | None = None,
    task: str = "beir",
) -> tuple[list[CompareInstance], dict[str, str]]:
    """``instances`` of ``collection``'s evaluated queries drawn with ``seed`` (all by
    default), each with at most ``depth`` first-stage candidates; ``task`` names the format.

    Returns:
        ``(instances, without)``: the instances in file order, and query id -> why a
        drawn query has no candidates (left out).
    """
    qids = list(collection.queries)
    if instances is not None and instances < len(qids):
        if instances < 1:
            raise ValueError(f"--instances must be >= 1, got {instances!r}")
        pick = np.random.default_rng(seed).choice(len(qids), size=instances, replace=False)
        qids = [qids[int(i)] for i in sorted(pick)]  # in file order
    cands, without, scores = first_stage(collection, qids, depth=depth, stemmer=stemmer)
    out: list[CompareInstance] = []
    for q in (q for q in qids if q in cands):
        judged: Mapping[str, int] = collection.qrels[q]
        gold = tuple(i for i, d in enumerate(cands[q]) if judged.get(d, 0) >= relevance_level)
        docs = [collection.documents[d] for d in cands[q]]
        out.append(
            CompareInstance(
                collection.queries[q],
                docs,
                gold,
                task=task,
                index=len(out),
                qid=q,
                doc_ids=cands[q],
                scores=scores.get(q, ()),
            )
        )
    if not out:
        raise ValueError(
            f"no query of {collection.name} has first-stage candidates: " + next(iter(without.values()), "")
        )
    return out, without


BUILTIN_TASKS = ("kv", "nq", "litm-kv")
COLLECTION_TASKS = FORMATS
"""Test collections in the field's formats (:mod:`..ir.collection`)."""
TASKS = BUILTIN_TASKS + COLLECTION_TASKS
SPLITS = ("test", "calibration")


# ==================================================================================== tasks
def make_instances(
    task: str, *, n: int, instances: int, seed: int, data: str | Path | None = None, split: str = "test"
) -> list[CompareInstance]:
    """The evaluation instances of ``task`` (:data:`BUILTIN_TASKS`), a pure function of its
    arguments.

    * ``kv``: synthetic one-sentence key-value facts (:class:`~..tasks.kv.KVTask`), the
      gold at a uniform random position; base order = input order.
    * ``nq``: an NQ question, its gold passage and the ``n - 1`` passages BM25 ranks
      highest for the question (without the answer); base order = BM25's order.
    * ``litm-kv``: Lost-in-the-Middle key-value retrieval (UUID keys and values), ``n``
      pairs of one record, the queried pair at a uniform random position.

    ``split`` picks the shipped NQ sample's questions: ``test`` (held out) or
    ``calibration`` (for measuring a reader); other tasks and ``data`` files have none.
    """
    if task in COLLECTION_TASKS:
        raise ValueError(f"--task {task} is a collection: load it with ir.collection.load_collection()")
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split != "test" and (task != "nq" or data is not None):
        raise ValueError(
            "--split calibration applies to the shipped NQ sample only (--task nq without --data)"
        )
    if n < 2:
        raise ValueError(f"--n must be >= 2 documents, got {n!r}")
    if instances < 1:
        raise ValueError(f"--instances must be >= 1, got {instances!r}")
    rng = np.random.default_rng(seed)
    if task == "kv":
        out = _kv_instances(n=n, instances=instances, rng=rng)
    elif task == "nq" and data is not None:
        out = _nq_instances(data, n=n, instances=instances, rng=rng)
    elif task == "nq":
        out = _nq_sample_instances(n=n, instances=instances, rng=rng, split=split)
    elif task == "litm-kv":
        out = _litm_kv_instances(_litm_kv_records(data), n=n, instances=instances, rng=rng)
    else:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return [replace(inst, index=i) for i, inst in enumerate(out)]


def _kv_instances(*, n: int, instances: int, rng: np.random.Generator) -> list[CompareInstance]:
    from ..tasks.kv import KVTask

    kv = KVTask()
    out = []
    for _ in range(instances):
        inst = kv.make(n, gold_position=int(rng.integers(n)), rng=rng)
        out.append(CompareInstance(inst.question, list(inst.documents), inst.gold, inst.answers, "kv"))
    return out


def _nq_sample_instances(
    *, n: int, instances: int, rng: np.random.Generator, split: str = "test"
) -> list[CompareInstance]:
    """Questions of the shipped NQ sample's ``split``: the gold passage and its ``n - 1``
    BM25-retrieved distractors, in the order BM25 over all shipped passages ranks them."""
    from ..tasks import BM25, load_sample

    sample = load_sample("nq")
    if n - 1 > min(len(q.distractors) for q in sample.questions):
        raise ValueError(
            f"the shipped NQ sample has {len(sample.questions[0].distractors)} distractors per question; use --n <= 21"
        )
    bm25 = BM25([p.content for p in sample.passages])
    test = sample.split(split)
    out = []
    for qi in rng.choice(len(test), size=min(instances, len(test)), replace=False):
        q = test[int(qi)]
        ids = [q.gold, *q.distractors[: n - 1]]
        s = bm25.scores(q.question)
        ids.sort(key=lambda j: (-float(s[j]), j != q.gold))
        docs = [sample.passages[j].content for j in ids]
        scores = tuple(float(s[j]) for j in ids)
        out.append(
            CompareInstance(q.question, docs, (ids.index(q.gold),), tuple(q.answers), "nq", scores=scores)
        )
    return out


def _litm_kv_records(data: str | Path | None) -> list[dict[str, Any]]:
    """Lost-in-the-Middle kv-retrieval records: the shipped sample, or the ``--data`` file."""
    if data is None:
        from ..tasks import load_sample

        return [
            {"key": ex.key, "value": ex.value, "ordered_kv_records": [list(r) for r in ex.records]}
            for ex in load_sample("kv").examples
        ]
    path = Path(data)
    if not path.is_file():
        raise FileNotFoundError(
            f"kv-retrieval data not found: {str(path)!r}; pass --data PATH to kv-retrieval-75_keys.jsonl.gz "
            "(nelson-liu/lost-in-the-middle)"
        )
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _litm_kv_instances(
    records: Sequence[Mapping[str, Any]], *, n: int, instances: int, rng: np.random.Generator
) -> list[CompareInstance]:
    out = []
    picks = rng.choice(len(records), size=min(instances, len(records)), replace=False)
    for r in picks:
        rec = records[int(r)]
        key, value = str(rec["key"]), str(rec["value"])
        others = [(str(k), str(v)) for k, v in rec["ordered_kv_records"] if str(k) != key]
        if len(others) < n - 1:
            raise ValueError(
                f"a kv-retrieval record has {len(others) + 1} pairs; use --n <= {len(others) + 1}"
            )
        chosen = [others[int(i)] for i in rng.choice(len(others), size=n - 1, replace=False)]
        g = int(rng.integers(n))
        chosen.insert(g, (key, value))
        docs = [f'"{k}": "{v}"' for k, v in chosen]
        question = f'What is the value associated with the key "{key}"?'
        out.append(CompareInstance(question, docs, (g,), (value,), "litm-kv"))
    return out


def _nq_instances(
    data: str | Path, *, n: int, instances: int, rng: np.random.Generator
) -> list[CompareInstance]:
    """The NQ questions of ``data`` (Lost-in-the-Middle format): gold passage + the ``n - 1``
    passages BM25 ranks highest for the question among the other questions' gold passages
    (those containing an answer, and repeats, skipped), in BM25 order."""
    from ..ir.bm25 import BM25
    from ..readers.answer import token_matcher
    from ..tasks.nq import load_nq

    items = load_nq(data)
    passages = [it.passage for it in items]
    bm25 = BM25(passages)
    out = []
    for qi in rng.choice(len(items), size=min(instances, len(items)), replace=False):
        item = items[int(qi)]
        s = bm25.scores(item.question)
        chosen: list[int] = []
        seen = {item.passage}
        for j in bm25.rank(item.question):
            if len(chosen) == n - 1:
                break
            # questions can share a passage; one that holds an answer is no distractor
            if (
                int(j) == int(qi)
                or passages[j] in seen
                or any(token_matcher(a, passages[j]) for a in item.answers)
            ):
                continue
            chosen.append(int(j))
            seen.add(passages[j])
        ids = sorted([int(qi), *chosen], key=lambda j: (-s[j], j != int(qi)))
        docs = [passages[j] for j in ids]
        scores = tuple(float(s[j]) for j in ids)
        out.append(
            CompareInstance(
                item.question, docs, (ids.index(int(qi)),), tuple(item.answers), "nq", scores=scores
            )
        )
    return out
