"""The local batch job of ``gold-panning rerank``: questions reranked concurrently through
one panner (:func:`~._run.arerank_stream`), each finished question appended to a checkpoint
(:class:`RerankCheckpoint`) at once, and, when every question is done, the outputs written
in input order (:func:`write_outputs`): ``rerank.jsonl``, ``run.trec`` and
``summary.json``.

A job that stops for any reason (Ctrl-C, SIGTERM, SIGKILL, a dead endpoint) is resumed by
running it again with the same folder: the checkpoint's questions are not asked again, and
the outputs equal an uninterrupted run's (the records hold no timings). The checkpoint's
first line is the job's ledger (:mod:`._ledger`): a rerun with any setting a record depends
on changed is refused, naming each; ``restart`` sets the file aside and starts anew. A
fallback record (the endpoint failed) is provisional: a rerun asks it again unless
``keep_fallbacks``.
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

from .._io import atomic_text_file, checkpoint_lines
from ..errors import CheckpointError
from ..ir.runfile import write_text_atomic
from ._inputs import Question, input_fingerprint
from ._ledger import CHECKPOINT_FORMAT, LEDGER_KEYS, is_provisional, job_ledger, ledger_differences
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
    "question_line",
    "rerank_job",
    "run_lines",
    "run_scores",
    "write_outputs",
]

logger = logging.getLogger("gold_panning_integrations.rerank")

CHECKPOINT_NAME = "checkpoint.jsonl"
JSONL_NAME = "rerank.jsonl"
RUN_NAME = "run.trec"
SUMMARY_NAME = "summary.json"


class QuestionSource(Protocol):
    """Questions in input order, re-iterable (:class:`~._inputs.JsonlQuestions`,
    :class:`~._inputs.RunQuestions`, or a list), with their count (and, when it has one,
    their ``fingerprint``: :func:`~._inputs.input_fingerprint`)."""

    def __iter__(self) -> Iterator[Question]: ...

    def __len__(self) -> int: ...


# ================================================================================ checkpoint
def question_line(question: Question, record: Mapping[str, Any]) -> bytes:
    """The checkpoint line of a finished ``question`` with its ``record`` (UTF-8, ``\\n``)."""
    line = {
        "type": "question",
        "index": question.index,
        "fingerprint": question.fingerprint(),
        "record": record,
    }
    return (json.dumps(line) + "\n").encode("utf-8")


class RerankCheckpoint:
    """The job's JSONL checkpoint: its ledger on the first line (:mod:`._ledger`), then one
    line per finished question, appended and flushed as it finishes (a SIGKILL loses at most
    the questions in flight; a line cut by the kill is dropped and its question reruns). A
    question recorded twice (a fallback asked again) counts by its last line.

    The file is locked while open (``<path>.lock``; a second job on it fails at once).

    Args:
        path: The checkpoint file (created when absent).
        meta: The job's ledger (:func:`~._ledger.job_ledger`), checked against the file's.
        restart: Set an existing file aside (renamed ``<name>.<UTC time>.replaced``, never
            deleted) and start anew.
        keep_fallbacks: Count fallback records (:func:`~._ledger.is_provisional`) as done;
            by default their questions are asked again.
        hint: How the refusal names the way to start anew (the CLI's flag).

    Raises:
        CheckpointError: Another job holds it, it was made with other settings (the message
            names each, old -> new, and the way to start anew), or a line other than the
            last is corrupt.
    """

    def __init__(
        self,
        path: str | Path,
        meta: Mapping[str, Any],
        *,
        restart: bool = False,
        keep_fallbacks: bool = False,
        hint: str = "restart=True",
    ) -> None:
        from ..calibration._checkpoint import CheckpointLock

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_file():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} is not a regular file; pass another --out folder"
            )
        self._meta = json.loads(json.dumps({k: meta.get(k) for k in LEDGER_KEYS}))
        self.keep_fallbacks = keep_fallbacks
        advice = "wait for it to finish (a rerun then finds its questions done) or pass another --out folder"
        self._lock = CheckpointLock(self.path, holder="rerank job", advice=advice).acquire()
        self._rows: dict[int, tuple[str, int, bool]] = {}  # index -> (fingerprint, offset, provisional)
        self._fh: IO[bytes] | None = None
        self.set_aside: Path | None = None
        try:
            if restart and self.path.exists():
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                self.set_aside = self.path.with_name(f"{self.path.name}.{stamp}.replaced")
                self.path.rename(self.set_aside)
                logger.info("--restart: %s set aside as %s", self.path, self.set_aside)
            old = self._read()
            if old is not None:
                self._check_ledger(old, hint)
            self._fh = self.path.open("ab")
            self._size = self._fh.tell()
            if old is None:
                self._append({"type": "meta", **self._meta})
        except BaseException:
            self.close()
            raise

    def _check_ledger(self, old: Mapping[str, Any], hint: str) -> None:
        differ = ledger_differences(old, self._meta)
        if differ:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} holds records made with other settings, which this run "
                f"would mix with its own; {len(differ)} setting(s) differ (in the file -> now): "
                + "; ".join(differ)
                + f". Rerun with the file's settings to resume it, or pass {hint} to set the file aside "
                "(kept, renamed) and ask every question anew, or pass another --out folder"
            )

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
                    index, fp, record = obj.get("index"), obj.get("fingerprint"), obj.get("record")
                    if isinstance(index, bool) or not isinstance(index, int) or not isinstance(fp, str):
                        raise self._corrupt(
                            lineno, "a question line needs an integer index and a fingerprint"
                        )
                    if not isinstance(record, dict):
                        raise self._corrupt(lineno, "a question line needs its record")
                    self._rows[index] = (fp, start, is_provisional(record))
                else:
                    raise CheckpointError(
                        f"checkpoint {str(self.path)!r} line {lineno} is not a rerank job's line (type "
                        f"{obj.get('type')!r:.40}); pass another --out folder"
                    )
        if meta is None and self._rows:
            raise self._corrupt(1, "no meta line")
        return meta

    def __len__(self) -> int:
        """Questions done: recorded, fallbacks only with ``keep_fallbacks``."""
        return sum(1 for _, _, provisional in self._rows.values() if self.keep_fallbacks or not provisional)

    @property
    def fallbacks(self) -> int:
        """Questions whose record is a fallback (:func:`~._ledger.is_provisional`)."""
        return sum(1 for _, _, provisional in self._rows.values() if provisional)

    def done(self, question: Question) -> bool:
        """Whether ``question`` is done here: recorded, and not a fallback unless
        ``keep_fallbacks`` (one made on another input is an error)."""
        row = self._rows.get(question.index)
        if row is None:
            return False
        if row[0] != question.fingerprint():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} holds question #{question.index} made on other input (now "
                f"{question.qid!r}); rerun with the same input, or pass another --out folder"
            )
        return self.keep_fallbacks or not row[2]

    def done_at(self, index: int, fingerprint: str) -> bool:
        """:meth:`done` for the question at ``index`` with ``fingerprint`` (the Ray path's
        rows, before they are questions); one made on other input is an error."""
        row = self._rows.get(index)
        if row is None:
            return False
        if row[0] != fingerprint:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} holds question #{index} made on other input; rerun with "
                "the same input, or pass another checkpoint folder"
            )
        return self.keep_fallbacks or not row[2]

    def _append(self, obj: Mapping[str, Any] | bytes) -> int:
        """Write one line at the end (one write, flushed); its byte offset."""
        assert self._fh is not None
        data = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode("utf-8")
        start = self._size
        self._fh.write(data)
        self._fh.flush()
        self._size += len(data)
        return start

    def write(self, question: Question, record: Mapping[str, Any]) -> None:
        """Record ``question`` as finished with its ``record`` (a later line of the same
        question replaces an earlier one)."""
        start = self._append(question_line(question, record))
        self._rows[question.index] = (question.fingerprint(), start, is_provisional(record))

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
    under ``out``, streamed and each atomically; returns the records' totals:
    ``questions``, ``panned`` (records with evidence), ``fallback`` (the endpoint failed:
    :func:`~._ledger.is_provisional`, in the first stage's order), ``not_panned`` (every
    record without evidence, fallbacks included) and the sums of :data:`_TOTALS`."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    totals = dict.fromkeys(("questions", "panned", "fallback", "not_panned", *_TOTALS), 0)
    with atomic_text_file(root / JSONL_NAME) as jl, atomic_text_file(root / RUN_NAME) as run:
        for rec in records:
            jl.write(json.dumps(rec) + "\n")
            run.write(run_lines(rec, tag=tag))
            totals["questions"] += 1
            totals["panned"] += int(bool(rec.get("panned", True)))
            totals["fallback"] += int(is_provisional(rec))
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
        ran: Questions reranked by this run (fallbacks of an earlier run asked again included).
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
    """The ledger a checkpoint records (:func:`~._ledger.job_ledger`), with the input's
    fingerprint (``source.fingerprint``, else taken by reading the questions once)."""
    fingerprint = getattr(source, "fingerprint", None)
    if not isinstance(fingerprint, str):
        _, fingerprint = input_fingerprint(source)
    return job_ledger(panner, seed=seed, questions=len(source), fingerprint=fingerprint)


async def arerank_job(
    source: QuestionSource,
    out: str | Path,
    *,
    panner: Any,
    seed: int | None = None,
    in_flight: int | None = None,
    tag: str = "gold-panning",
    progress: Callable[[int], None] | None = None,
    restart: bool = False,
    keep_fallbacks: bool = False,
    restart_hint: str = "restart=True",
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
        restart: Set the folder's checkpoint aside (renamed, kept) and ask every question anew.
        keep_fallbacks: Keep the checkpoint's fallback records (questions whose endpoint
            failed) instead of asking them again.
        restart_hint: How a refusal names the way to start anew (the CLI: ``--restart``).

    Raises:
        CheckpointError: The folder's checkpoint was made with other settings (the message
            names each, old -> new) or is in use by another job.
        AllRoundsFailedError, FatalReaderError: A question failed (after the questions in
            flight finished and were recorded); rerun to resume.
    """
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"--tag must be one word without spaces, got {tag!r}")
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out {str(root)!r} is a file; pass a folder")
    count = len(source)
    meta = job_meta(source, panner, seed=seed)
    ck = RerankCheckpoint(
        root / CHECKPOINT_NAME, meta, restart=restart, keep_fallbacks=keep_fallbacks, hint=restart_hint
    )
    try:
        resumed, again = len(ck), 0 if keep_fallbacks else ck.fallbacks
        if resumed or again:
            logger.info(
                "resuming: %d of %d questions are in %s; %d fallback(s) asked again",
                resumed,
                count,
                ck.path,
                again,
            )
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
        "fallbacks_asked_again": again,
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
