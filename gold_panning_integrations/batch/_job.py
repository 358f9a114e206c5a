"""The local batch job of ``gold-panning rerank``: questions reranked concurrently through
one panner (:func:`~._run.arerank_stream`), each finished question appended to a checkpoint
(:class:`RerankCheckpoint`) at once, and, when every question is done, the outputs written
in input order (:func:`write_outputs`): ``rerank.jsonl``, ``run.trec`` and
``summary.json``.

A job that stops for any reason (Ctrl-C, SIGTERM, SIGKILL, a dead endpoint) is resumed by
running it again with the same folder: the checkpoint's questions are not asked again, and
the outputs equal an uninterrupted run's (the records hold no timings).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from .._io import atomic_text_file, check_same_run, checkpoint_lines
from ..errors import CheckpointError
from ..ir.runfile import write_text_atomic
from ._inputs import Question
from ._run import arerank_stream, default_in_flight

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "JSONL_NAME",
    "RUN_NAME",
    "SUMMARY_NAME",
    "JobResult",
    "QuestionSource",
    "RerankCheckpoint",
    "arerank_job",
    "rerank_job",
    "run_lines",
    "run_scores",
    "write_outputs",
]

logger = logging.getLogger("gold_panning_integrations.rerank")

CHECKPOINT_FORMAT = 1
"""The checkpoint's layout: a meta line, then ``{"type": "question", "index", "fingerprint", "record"}``."""
CHECKPOINT_NAME = "checkpoint.jsonl"
JSONL_NAME = "rerank.jsonl"
RUN_NAME = "run.trec"
SUMMARY_NAME = "summary.json"

_META_KEYS = ("format", "version", "input", "model", "mode", "profile", "config", "seed")
"""What a checkpoint must share with the job resuming it (``version``: an option's meaning
can change between versions)."""


class QuestionSource(Protocol):
    """Questions in input order, re-iterable (:class:`~._inputs.JsonlQuestions`,
    :class:`~._inputs.RunQuestions`, or a list), with their count."""

    def __iter__(self) -> Iterator[Question]: ...

    def __len__(self) -> int: ...


# ================================================================================ checkpoint
class RerankCheckpoint:
    """The job's JSONL checkpoint: a meta line with the job's settings, then one line per
    finished question, appended and flushed as it finishes (a SIGKILL loses at most the
    questions in flight; a line cut by the kill is dropped and its question reruns).

    The file is locked while open (``<path>.lock``; a second job on it fails at once).

    Args:
        path: The checkpoint file (created when absent).
        meta: The job's settings (:data:`_META_KEYS`), checked against an existing file's.

    Raises:
        CheckpointError: Another job holds it, it was made with other settings, or a line
            other than the last is corrupt; the message says what to do.
    """

    def __init__(self, path: str | Path, meta: Mapping[str, Any]) -> None:
        from ..calibration._checkpoint import CheckpointLock

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_file():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} is not a regular file; pass another --out folder"
            )
        self._meta = json.loads(json.dumps({k: meta.get(k) for k in _META_KEYS}))
        advice = "wait for it to finish (a rerun then finds its questions done) or pass another --out folder"
        self._lock = CheckpointLock(self.path, holder="rerank job", advice=advice).acquire()
        self._rows: dict[int, tuple[str, int]] = {}  # index -> (fingerprint, byte offset of its line)
        self._fh: IO[bytes] | None = None
        try:
            old = self._read()
            if old is not None:
                advice = (
                    "rerun with the same input and options, or pass another --out folder (or delete it to "
                    "start over)"
                )
                check_same_run(self.path, old, self._meta, _META_KEYS, what="job", advice=advice, sep="; ")
            self._fh = self.path.open("ab")
            self._size = self._fh.tell()
            if old is None:
                self._append({"type": "meta", **self._meta})
        except BaseException:
            self.close()
            raise

    def _corrupt(self, lineno: int, why: object) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {str(self.path)!r} line {lineno} is corrupt ({why}) and is not the last line; "
            "it was edited or written by another program: delete the folder's checkpoint to start over"
        )

    def _read(self) -> dict[str, Any] | None:
        """Index the existing file's question lines (one pass, flat memory); a cut last
        line is truncated away. Returns its meta line, or None for a new file."""
        if not self.path.exists():
            return None
        meta: dict[str, Any] | None = None
        with self.path.open("rb") as fh:
            for lineno, start, obj in checkpoint_lines(
                self.path,
                fh,
                corrupt=self._corrupt,
                torn="checkpoint %s: dropping a cut last line; that question reruns",
                log=logger,
                errors=(ValueError, RecursionError),
                not_object="not a JSON object",
            ):
                if obj.get("type") == "meta":
                    meta = obj
                elif obj.get("type") == "question":
                    index, fp = obj.get("index"), obj.get("fingerprint")
                    if isinstance(index, bool) or not isinstance(index, int) or not isinstance(fp, str):
                        raise self._corrupt(
                            lineno, "a question line needs an integer index and a fingerprint"
                        )
                    if not isinstance(obj.get("record"), dict):
                        raise self._corrupt(lineno, "a question line needs its record")
                    self._rows[index] = (fp, start)
                else:
                    raise CheckpointError(
                        f"checkpoint {str(self.path)!r} line {lineno} is not a rerank job's line (type "
                        f"{obj.get('type')!r:.40}); pass another --out folder"
                    )
        if meta is None and self._rows:
            raise self._corrupt(1, "no meta line")
        return meta

    def __len__(self) -> int:
        """Questions finished so far."""
        return len(self._rows)

    def done(self, question: Question) -> bool:
        """Whether ``question`` is finished here (one made on another input is an error)."""
        row = self._rows.get(question.index)
        if row is None:
            return False
        if row[0] != question.fingerprint():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} holds question #{question.index} made on other input (now "
                f"{question.qid!r}); rerun with the same input, or pass another --out folder"
            )
        return True

    def _append(self, obj: Mapping[str, Any]) -> int:
        """Write one line at the end (one write, flushed); its byte offset."""
        assert self._fh is not None
        data = (json.dumps(obj) + "\n").encode("utf-8")
        start = self._size
        self._fh.write(data)
        self._fh.flush()
        self._size += len(data)
        return start

    def write(self, question: Question, record: Mapping[str, Any]) -> None:
        """Record ``question`` as finished with its ``record``."""
        fp = question.fingerprint()
        start = self._append(
            {"type": "question", "index": question.index, "fingerprint": fp, "record": record}
        )
        self._rows[question.index] = (fp, start)

    def records(self, count: int) -> Iterator[dict[str, Any]]:
        """The records of questions ``0 .. count - 1``, in input order, read back one at a
        time (flat memory).

        Raises:
            CheckpointError: A question is missing (the job has not finished).
        """
        missing = [i for i in range(count) if i not in self._rows]
        if missing:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} lacks {len(missing)} of {count} questions (first #{missing[0]}); "
                "rerun the job to finish them"
            )
        with self.path.open("rb") as fh:
            for i in range(count):
                fh.seek(self._rows[i][1])
                record: dict[str, Any] = json.loads(fh.readline())["record"]
                yield record

    def close(self) -> None:
        """Close the file and release the lock (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._lock.release()


# =================================================================================== outputs
def run_scores(probabilities: Sequence[float]) -> list[float]:
    """Run-file scores for probabilities listed best first: each probability, lowered by
    the least amount (to the next float below the one before) where it does not fall
    strictly below the one before, so every tool that sorts a run by score (trec_eval,
    ir-measures) reads the engine's order back, ties included (they keep the first
    stage's order)."""
    out: list[float] = []
    for p in probabilities:
        s = float(p)
        if out and s >= out[-1]:
            s = math.nextafter(out[-1], -math.inf)
        out.append(s)
    return out


def run_lines(record: Mapping[str, Any], *, tag: str) -> str:
    """TREC run lines ``qid Q0 docid rank score tag`` of one record, best first; the score
    is the posterior probability (:func:`run_scores`), written exactly (``repr``)."""
    cands = record["candidates"]
    scores = run_scores([c["probability"] for c in cands])
    qid = record["qid"]
    return "".join(f"{qid} Q0 {c['id']} {r} {s!r} {tag}\n" for r, (c, s) in enumerate(zip(cands, scores), 1))


_TOTALS = ("calls", "attempts", "prompt_tokens", "completion_tokens", "cache_hits", "failed_rounds")


def write_outputs(records: Iterable[Mapping[str, Any]], out: str | Path, *, tag: str) -> dict[str, Any]:
    """Write ``rerank.jsonl`` (the records, one a line) and ``run.trec`` (:func:`run_lines`)
    under ``out``, streamed and each atomically; returns the records' totals
    (``questions``, ``not_panned`` and the sums of :data:`_TOTALS`)."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    totals = dict.fromkeys(("questions", "not_panned", *_TOTALS), 0)
    with atomic_text_file(root / JSONL_NAME) as jl, atomic_text_file(root / RUN_NAME) as run:
        for rec in records:
            jl.write(json.dumps(rec) + "\n")
            run.write(run_lines(rec, tag=tag))
            totals["questions"] += 1
            totals["not_panned"] += int(not rec.get("panned", True))
            for k in _TOTALS:
                totals[k] += int(rec.get(k) or 0)
    return totals


# ======================================================================================= job
@dataclass(frozen=True)
class JobResult:
    """What a finished job did.

    Attributes:
        out: The output folder.
        questions: Questions in the input (all in the outputs).
        resumed: Questions taken from the checkpoint of an earlier run.
        ran: Questions reranked by this run.
        seconds: Wall time of this run's reranking.
        totals: The outputs' totals (:func:`write_outputs`).
        files: The files written, relative to ``out``.
    """

    out: Path
    questions: int
    resumed: int
    ran: int
    seconds: float
    totals: Mapping[str, int]
    files: tuple[str, ...]

    @property
    def questions_per_second(self) -> float | None:
        """This run's questions per second (None when it ran none)."""
        return self.ran / self.seconds if self.ran and self.seconds > 0 else None


def job_meta(source: Any, panner: Any, *, seed: int | None) -> dict[str, Any]:
    """The settings a checkpoint records (:data:`_META_KEYS`)."""
    from .. import __version__

    reader = panner.reader
    describe = getattr(source, "describe", None)
    return {
        "format": CHECKPOINT_FORMAT,
        "version": __version__,
        "input": {
            **(describe() if callable(describe) else {"kind": type(source).__name__}),
            "questions": len(source),
        },
        "model": getattr(reader, "model_name", None) or type(reader).__name__,
        "mode": getattr(reader, "mode", None),
        "profile": getattr(panner, "profile_label", None),
        "config": panner.config.to_dict(),
        "seed": seed,
    }


async def arerank_job(
    source: QuestionSource,
    out: str | Path,
    *,
    panner: Any,
    seed: int | None = None,
    in_flight: int | None = None,
    tag: str = "gold-panning",
    progress: Callable[[int], None] | None = None,
) -> JobResult:
    """Rerank every question of ``source`` with ``panner`` (a ``GoldPanner``) into the
    folder ``out``, resuming from its checkpoint (see the module docstring).

    Args:
        source: The questions (:class:`QuestionSource`).
        out: The output folder: ``checkpoint.jsonl`` while it runs, then ``rerank.jsonl``,
            ``run.trec`` and ``summary.json``.
        panner: The panner; its reader's limits (calls in flight, requests and tokens
            per minute) are shared by every question.
        seed: None: each question's stream derived from its text and candidates; an int:
            the stream ``evaluate`` gives the question at the same position
            (:func:`~._run.question_rng`).
        in_flight: Questions reranked at once (default :func:`~._run.default_in_flight`).
        tag: The run file's tag (one word).
        progress: Called with the number of finished questions (resumed ones included).

    Raises:
        CheckpointError: The folder holds another job's checkpoint (see the message).
        AllRoundsFailedError, FatalReaderError: A question failed (after the questions in
            flight finished and were recorded); rerun to resume.
    """
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"--tag must be one word without spaces, got {tag!r}")
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out {str(root)!r} is a file; pass a folder")
    count = len(source)
    ck = RerankCheckpoint(root / CHECKPOINT_NAME, job_meta(source, panner, seed=seed))
    try:
        resumed = len(ck)
        if resumed:
            logger.info("resuming: %d of %d questions are in %s", resumed, count, ck.path)
        done = resumed
        if progress is not None:
            progress(done)

        def on_record(q: Question, record: dict[str, Any]) -> None:
            nonlocal done
            ck.write(q, record)
            done += 1
            if progress is not None:
                progress(done)

        t0 = time.perf_counter()
        ran = await arerank_stream(
            panner,
            source,
            seed=seed,
            in_flight=in_flight or default_in_flight(panner.reader),
            on_record=on_record,
            skip=ck.done,
        )
        seconds = time.perf_counter() - t0
        totals = write_outputs(ck.records(count), root, tag=tag)
    finally:
        ck.close()
    files = (JSONL_NAME, RUN_NAME, SUMMARY_NAME, CHECKPOINT_NAME)
    result = JobResult(root, count, resumed, ran, seconds, totals, files)
    summary = {
        "questions": count,
        "resumed": resumed,
        "ran": ran,
        "seconds": round(seconds, 3),
        "questions_per_second": None
        if result.questions_per_second is None
        else round(result.questions_per_second, 3),
        **totals,
        "seed": seed,
        "tag": tag,
        "files": list(files),
    }
    write_text_atomic(root / SUMMARY_NAME, json.dumps(summary, indent=2) + "\n")
    return result


def rerank_job(source: QuestionSource, out: str | Path, **options: Any) -> JobResult:
    """:func:`arerank_job` run to completion in a new event loop (``asyncio.run``)."""
    return asyncio.run(arerank_job(source, out, **options))
