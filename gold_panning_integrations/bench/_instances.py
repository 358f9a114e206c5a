"""What ``bench compare`` ranks: one query with its candidates, from a built-in task or a
test collection, with the judgements every method is scored against.

A built-in task's instance has one relevant document (its ``gold``) and ids made up for
the run files (``kv-0``, ``d3``); a collection's instance carries the collection's query
and document ids, its candidates in first-stage order and the documents of grade >=
``relevance_level`` among them as ``gold``. :func:`instance_qrels` gives the judgements
(a collection's own, also of documents no first stage returned).
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..ir.collection import Collection
from ..ir.first_stage import first_stage

__all__ = [
    "CompareInstance",
    "GPKChoice",
    "choose_gp_k",
    "collection_instances",
    "complete_ranking",
    "instance_qrels",
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
    """

    question: str
    documents: list[str]
    gold: tuple[int, ...]
    answers: tuple[str, ...] = ()
    task: str = "kv"
    index: int = 0
    qid: str = ""
    doc_ids: tuple[str, ...] = ()

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
    """A full ranking of ``n`` documents: the first ``top_n`` distinct valid indices a
    method returned, then the others in base (first-stage) order.

    Args:
        returned: Indices a method returned, best first (out-of-range and repeated ones
            are dropped; a method that raised returned none).
        n: Number of candidates.
        top_n: How many of the returned documents count, ``>= 1``.

    Returns:
        A permutation of ``range(n)``.
    """
    head: list[int] = []
    for i in returned:
        if len(head) == top_n:
            break
        if 0 <= i < n and i not in head:
            head.append(int(i))
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
    """``k`` for the panners: ``requested`` (``--gp-k N``), else 1 on a built-in task (one
    gold per instance), else the median number of relevant documents (``gold``) among a
    query's first-stage candidates, rounded half up and kept within ``1 .. n - 1`` for the
    largest ``n`` (a query with fewer candidates pans with ``min(k, n - 1)``,
    :func:`query_k`).

    The median reads the labels of the evaluated queries: it is one number for the whole
    run, but pass ``--gp-k`` for a run that uses no label at all.
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
    cap = max(max(len(i.documents) for i in instances) - 1, 1)
    k = max(1, min(int(np.floor(med + 0.5)), cap))
    how = (f"{k}: median relevant documents per query among the first-stage candidates "
           f"({med:g}; range {min(counts)}-{max(counts)} over {len(counts)} queries)")
    if k != int(np.floor(med + 0.5)):
        how += f", kept within 1..{cap}"
    return GPKChoice(k, how)


def query_k(k: int, n: int) -> int:
    """The ``k`` a query with ``n`` candidates pans with: ``k``, at most ``n - 1``, at least 1."""
    return max(1, min(k, n - 1))


def _chosen(qids: Sequence[str], instances: int | None, seed: int) -> list[str]:
    """``instances`` of ``qids`` drawn with ``seed`` (all when None or enough), in file order."""
    if instances is None or instances >= len(qids):
        return list(qids)
    if instances < 1:
        raise ValueError(f"--instances must be >= 1, got {instances!r}")
    pick = np.random.default_rng(seed).choice(len(qids), size=instances, replace=False)
    return [qids[int(i)] for i in sorted(pick)]


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
    """The evaluated queries of ``collection`` as instances (first-stage candidates, at
    most ``depth``), ``instances`` of them drawn with ``seed`` (all by default); ``task``
    names the format in the instances.

    Returns:
        ``(instances, without)``: the instances in file order, and query id -> why a
        drawn query has no candidates (left out).
    """
    if relevance_level < 1:
        raise ValueError(f"--relevance-level must be >= 1, got {relevance_level!r}")
    qids = _chosen(list(collection.queries), instances, seed)
    cands, without = first_stage(collection, qids, depth=depth, stemmer=stemmer)
    out: list[CompareInstance] = []
    for q in qids:
        if q not in cands:
            continue
        ids = cands[q]
        judged: Mapping[str, int] = collection.qrels[q]
        gold = tuple(i for i, d in enumerate(ids) if judged.get(d, 0) >= relevance_level)
        out.append(CompareInstance(
            collection.queries[q], [collection.documents[d] for d in ids], gold, task=task,
            index=len(out), qid=q, doc_ids=ids,
        ))
    if not out:
        raise ValueError(f"no query of {collection.name} has first-stage candidates: " + next(iter(without.values()), ""))
    return out, without
