"""The calibration protocol: measure a model's per-position TPR and FPR on a task.

For each grid position ``j`` (``K`` positions spread over ``n``, first and last
included) and each trial, a task instance is built with its gold document at ``j`` and
shown to the reader once. The gold being cited at ``j`` is a true positive at ``j``; a
distractor cited at ``j`` (in trials whose gold sits elsewhere) is a false positive at
``j``. Rates are estimated per grid position and interpolated linearly to all ``n``
positions (:meth:`DetectorProfile.from_grid`).

Smoothing: each rate is the posterior mean under a Jeffreys ``Beta(1/2, 1/2)`` prior,
``(x + 1/2) / (m + 1)`` for ``x`` events in ``m`` trials, so 0/50 gives 0.0098 rather
than 0 and 50/50 gives 0.990 rather than 1 (a rate of exactly 0 or 1 would make one
observation decisive forever in the log-odds update).

Layout: a pure functional core (:func:`calibration_plan`, :func:`count_outcomes`,
:func:`estimate_rates`, :func:`build_profile`) under a thin stateful runner,
:class:`Calibrator`, that calls the reader, checkpoints every completed trial to a JSONL
file (one line per trial, flushed and fsynced) and resumes from it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .engine.curves import grid_positions
from .engine.reading import Reading
from .errors import CheckpointError
from .profiles import DetectorProfile
from .tasks.base import TaskBuilder

__all__ = [
    "CalibrationResult",
    "Calibrator",
    "CheckpointError",
    "OutcomeCounts",
    "TrialSpec",
    "build_profile",
    "calibration_plan",
    "count_outcomes",
    "estimate_rates",
    "smoothed_rate",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- functional core
@dataclass(frozen=True)
class TrialSpec:
    """One calibration trial: the gold at ``position`` in an instance drawn with ``seed``.

    Attributes:
        trial_id: Stable identifier (``"p07-t012"``), the checkpoint key.
        grid_index: Index of the grid position, ``0..K-1``.
        position: 0-based prompt position of the gold document.
        trial: Trial number at this position, ``0..trials-1``.
        seed: Seed of the instance's generator.
    """

    trial_id: str
    grid_index: int
    position: int
    trial: int
    seed: int


def calibration_plan(
    n: int, *, grid: int | Sequence[int] = 11, trials: int = 50, rng: np.random.Generator | int | None = 0
) -> list[TrialSpec]:
    """Every trial of a calibration run, in execution order (trial-major, so a partial run
    covers all positions evenly).

    Args:
        n: Documents per prompt.
        grid: Number of grid positions (spread by :func:`grid_positions`) or explicit
            increasing 0-based positions.
        trials: Trials per grid position.
        rng: Generator or seed for the per-trial instance seeds; the same seed gives
            the same plan (which is what makes resuming possible).

    Returns:
        ``K * trials`` :class:`TrialSpec` items.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials!r}")
    g = _grid(n, grid)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    seeds = gen.integers(0, 2**63 - 1, size=(trials, g.size), dtype=np.int64)
    return [
        TrialSpec(
            trial_id=f"p{gi:02d}-t{t:03d}",
            grid_index=gi,
            position=int(g[gi]),
            trial=t,
            seed=int(seeds[t, gi]),
        )
        for t in range(trials)
        for gi in range(g.size)
    ]


def _grid(n: int, grid: int | Sequence[int] | NDArray[np.integer]) -> NDArray[np.intp]:
    if isinstance(grid, (int, np.integer)):
        return grid_positions(n, int(grid))
    g = np.asarray(grid, dtype=np.intp)
    if g.ndim != 1 or g.size == 0 or np.any(np.diff(g) <= 0) or g[0] < 0 or g[-1] >= n:
        raise ValueError(f"grid must be increasing positions within 0..{n - 1}, got {list(np.asarray(grid))}")
    return g


def smoothed_rate(events: NDArray[np.integer] | int, trials: NDArray[np.integer] | int) -> NDArray[np.float64]:
    """Jeffreys posterior mean ``(x + 0.5) / (m + 1)``; 0.5 where ``m == 0``."""
    x = np.asarray(events, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    return (x + 0.5) / (m + 1.0)


@dataclass(frozen=True)
class OutcomeCounts:
    """Event counts per grid position, each of shape ``(K,)``.

    Attributes:
        grid: The grid positions.
        tp: Trials with the gold at the position in which the gold was cited.
        tp_trials: Usable (not failed) trials with the gold at the position.
        fp: Trials with a distractor at the position in which that distractor was cited.
        fp_trials: Usable trials with a distractor at the position.
        failed: Failed trials (excluded from every rate).
    """

    grid: NDArray[np.intp]
    tp: NDArray[np.int64]
    tp_trials: NDArray[np.int64]
    fp: NDArray[np.int64]
    fp_trials: NDArray[np.int64]
    failed: int


def count_outcomes(records: Iterable[Mapping[str, Any]], n: int, grid: int | Sequence[int]) -> OutcomeCounts:
    """Count true/false positives per grid position from trial records.

    Each record needs ``position`` (gold's prompt position), ``cited`` (0-based cited
    positions) and ``failed``; ``gold`` (all gold positions) defaults to ``[position]``.
    A record's ``n`` (if present) must equal ``n``.
    """
    g = _grid(n, grid)
    index = {int(p): i for i, p in enumerate(g)}
    tp = np.zeros(g.size, np.int64)
    tpm = np.zeros(g.size, np.int64)
    fp = np.zeros(g.size, np.int64)
    fpm = np.zeros(g.size, np.int64)
    failed = 0
    for rec in records:
        if "n" in rec and int(rec["n"]) != n:
            raise ValueError(f"record {rec.get('trial_id')!r} has n={rec['n']} but the calibration uses n={n}")
        if rec.get("failed"):
            failed += 1
            continue
        gold = {int(x) for x in rec.get("gold", [rec["position"]])}
        cited = {int(x) for x in rec.get("cited", ())}
        for p, i in index.items():
            if p in gold:
                if p == int(rec["position"]):
                    tpm[i] += 1
                    tp[i] += p in cited
            else:
                fpm[i] += 1
                fp[i] += p in cited
    return OutcomeCounts(grid=g, tp=tp, tp_trials=tpm, fp=fp, fp_trials=fpm, failed=failed)


def estimate_rates(
    records: Iterable[Mapping[str, Any]], n: int, grid: int | Sequence[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Smoothed ``(tpr, fpr)`` at each grid position, each of shape ``(K,)``.

    TPR at ``j``: the gold cited at ``j`` over trials with the gold at ``j``. FPR at
    ``j``: the document at ``j`` cited over trials whose gold sat elsewhere. Both use the
    Jeffreys smoothing of :func:`smoothed_rate`; failed trials are left out.
    """
    c = count_outcomes(records, n, grid)
    return smoothed_rate(c.tp, c.tp_trials), smoothed_rate(c.fp, c.fp_trials)


def build_profile(
    records: Sequence[Mapping[str, Any]],
    *,
    n: int,
    grid: int | Sequence[int] = 11,
    model: str = "unknown",
    task: str = "unknown",
    notes: str = "",
    extra: Mapping[str, Any] | None = None,
) -> DetectorProfile:
    """A :class:`DetectorProfile` of ``n`` positions from trial records.

    ``trials`` in the profile is the number of usable gold-at-position trials per grid
    position; the raw counts go to ``extra["counts"]``.
    """
    c = count_outcomes(records, n, grid)
    if int(c.tp_trials.sum()) == 0:
        raise ValueError("no usable calibration trials: every trial failed or none was run")
    tpr, fpr = smoothed_rate(c.tp, c.tp_trials), smoothed_rate(c.fp, c.fp_trials)
    counts = {
        "tp": c.tp.tolist(),
        "tp_trials": c.tp_trials.tolist(),
        "fp": c.fp.tolist(),
        "fp_trials": c.fp_trials.tolist(),
        "failed": c.failed,
        "smoothing": "jeffreys (x+0.5)/(m+1)",
    }
    return DetectorProfile.from_grid(
        c.grid,
        tpr,
        fpr,
        n_positions=n,
        trials=c.tp_trials,
        model=model,
        task=task,
        notes=notes,
        extra={**dict(extra or {}), "counts": counts},
    )


# --------------------------------------------------------------- stateful runner
@dataclass
class CalibrationResult:
    """Outcome of :meth:`Calibrator.run`.

    Attributes:
        records: Every trial record (resumed ones included), in plan order.
        profile: The profile built from them.
        resumed: Trials read back from the checkpoint instead of run.
        ran: Trials run in this session.
        seconds: Wall time of this session.
    """

    records: list[dict[str, Any]]
    profile: DetectorProfile
    resumed: int
    ran: int
    seconds: float
    counts: OutcomeCounts | None = field(default=None, repr=False)


def _read_checkpoint(path: Path) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """Meta line and trial records of a checkpoint; a corrupt *last* line (a kill during
    a write) is dropped with a warning and truncated away."""
    if not path.exists():
        return None, {}
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    meta: dict[str, Any] | None = None
    records: dict[str, dict[str, Any]] = {}
    offset = 0
    for i, line in enumerate(lines):
        start = offset
        offset += len(line) + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
        except ValueError as err:
            rest = b"".join(lines[i + 1 :]).strip()
            if rest:
                raise CheckpointError(
                    f"checkpoint {str(path)!r} line {i + 1} is corrupt ({err}) and is not the last line; "
                    "delete the file to start over"
                ) from err
            logger.warning(
                "checkpoint %s: ignoring a corrupt last line (an interrupted write); that trial will rerun",
                path,
            )
            with path.open("r+b") as fh:
                fh.truncate(start)
            break
        if obj.get("type") == "meta":
            meta = obj
        elif obj.get("type") == "trial":
            records[str(obj["trial_id"])] = obj
    return meta, records


class Calibrator:
    """Runs the calibration protocol for one reader on one task.

    Args:
        reader: ``read(question, documents) -> Reading`` and/or ``async aread``.
        task: A :class:`~gold_panning_integrations.tasks.base.TaskBuilder`.
        n: Documents per prompt.
        grid: Grid size ``K`` or explicit positions.
        trials: Trials per grid position.
        seed: Seed of the plan (instances); keep it to resume a run.
        checkpoint: JSONL file recording each completed trial (None: no checkpoint).
        concurrency: Simultaneous calls when the reader is asynchronous.
        progress: Called as ``progress(done, total)`` after each trial.
        model: Model name recorded in the profile.
        notes: Profile notes (the command line, data, ...).
    """

    def __init__(
        self,
        reader: Any,
        task: TaskBuilder,
        *,
        n: int = 20,
        grid: int | Sequence[int] = 11,
        trials: int = 50,
        seed: int = 0,
        checkpoint: str | os.PathLike[str] | None = None,
        concurrency: int = 1,
        progress: Callable[[int, int], None] | None = None,
        model: str | None = None,
        notes: str = "",
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")
        self.reader = reader
        self.task = task
        self.n = n
        self.grid = grid
        self.trials = trials
        self.seed = seed
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.concurrency = concurrency
        self.progress = progress
        self.model = model or getattr(reader, "model_name", None) or getattr(reader, "model", None) or "unknown"
        self.notes = notes
        self.plan = calibration_plan(n, grid=grid, trials=trials, rng=seed)
        self._fh: Any = None

    # -------------------------------------------------------------- checkpoint
    def _meta(self) -> dict[str, Any]:
        return {
            "type": "meta",
            "task": getattr(self.task, "name", type(self.task).__name__),
            "n": self.n,
            "grid": _grid(self.n, self.grid).tolist(),
            "trials": self.trials,
            "seed": self.seed,
            "model": str(self.model),
        }

    def _open_checkpoint(self) -> dict[str, dict[str, Any]]:
        if self.checkpoint is None:
            return {}
        meta, done = _read_checkpoint(self.checkpoint)
        want = self._meta()
        if meta is not None:
            keys = ("task", "n", "grid", "seed", "model")
            diff = [k for k in keys if meta.get(k) != want[k]]
            if diff:
                shown = ", ".join(f"{k}: {meta.get(k)!r} in the file vs {want[k]!r} now" for k in diff)
                raise CheckpointError(
                    f"checkpoint {str(self.checkpoint)!r} belongs to another calibration ({shown}); "
                    "use another --checkpoint path or delete the file"
                )
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.checkpoint.open("a", encoding="utf-8")
        if meta is None:
            self._write(want)
        valid = {t.trial_id for t in self.plan}
        return {k: v for k, v in done.items() if k in valid}

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps(obj) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # ------------------------------------------------------------------ trials
    def _instance(self, spec: TrialSpec) -> Any:
        return self.task.make(self.n, gold_position=spec.position, rng=np.random.default_rng(spec.seed))

    def _record(self, spec: TrialSpec, inst: Any, reading: Reading, seconds: float) -> dict[str, Any]:
        return {
            "type": "trial",
            **asdict(spec),
            "n": self.n,
            "gold": list(inst.gold),
            "cited": [int(c) for c in reading.cited],
            "failed": bool(reading.failed),
            "error": reading.error,
            "answer": reading.answer,
            "prompt_tokens": reading.prompt_tokens,
            "completion_tokens": reading.completion_tokens,
            "seconds": round(seconds, 4),
        }

    def _finish(self, done: dict[str, dict[str, Any]], resumed: int, ran: int, t0: float) -> CalibrationResult:
        records = [done[t.trial_id] for t in self.plan if t.trial_id in done]
        counts = count_outcomes(records, self.n, self.grid)
        profile = build_profile(
            records,
            n=self.n,
            grid=self.grid,
            model=str(self.model),
            task=getattr(self.task, "name", "unknown"),
            notes=self.notes,
            extra={"seed": self.seed, "trials_planned": self.trials, "trials_completed": len(records)},
        )
        return CalibrationResult(
            records=records, profile=profile, resumed=resumed, ran=ran, seconds=time.perf_counter() - t0, counts=counts
        )

    def run(self, *, limit: int | None = None) -> CalibrationResult:
        """Run every trial not yet in the checkpoint (at most ``limit`` of them).

        Uses the asynchronous path when the reader has ``aread`` and ``concurrency > 1``.
        """
        if self.concurrency > 1 and hasattr(self.reader, "aread"):
            return asyncio.run(self.arun(limit=limit))
        if not hasattr(self.reader, "read"):
            raise TypeError("the reader needs read(question, documents) (or aread with concurrency > 1)")
        t0 = time.perf_counter()
        done = self._open_checkpoint()
        resumed = len(done)
        todo = [t for t in self.plan if t.trial_id not in done][: limit if limit is not None else None]
        total = len(self.plan)
        ran = 0
        try:
            for spec in todo:
                inst = self._instance(spec)
                s0 = time.perf_counter()
                try:
                    reading = self.reader.read(inst.question, inst.documents)
                except Exception as err:  # noqa: BLE001 - a reader must not end the run
                    logger.warning("trial %s: reader raised %s: %s", spec.trial_id, type(err).__name__, err)
                    reading = Reading.failure(f"{type(err).__name__}: {err}")
                rec = self._record(spec, inst, reading, time.perf_counter() - s0)
                self._write(rec)
                done[spec.trial_id] = rec
                ran += 1
                if self.progress:
                    self.progress(len(done), total)
        finally:
            self._close()
        return self._finish(done, resumed, ran, t0)

    async def arun(self, *, limit: int | None = None) -> CalibrationResult:
        """Asynchronous :meth:`run`: up to ``concurrency`` ``aread`` calls at once."""
        if not hasattr(self.reader, "aread"):
            raise TypeError("Calibrator.arun needs a reader with async aread(question, documents)")
        t0 = time.perf_counter()
        done = self._open_checkpoint()
        resumed = len(done)
        todo = [t for t in self.plan if t.trial_id not in done][: limit if limit is not None else None]
        total = len(self.plan)
        sem = asyncio.Semaphore(self.concurrency)
        ran = 0

        async def one(spec: TrialSpec) -> None:
            nonlocal ran
            async with sem:
                inst = self._instance(spec)
                s0 = time.perf_counter()
                try:
                    reading = await self.reader.aread(inst.question, inst.documents)
                except Exception as err:  # noqa: BLE001 - a reader must not end the run
                    logger.warning("trial %s: reader raised %s: %s", spec.trial_id, type(err).__name__, err)
                    reading = Reading.failure(f"{type(err).__name__}: {err}")
                rec = self._record(spec, inst, reading, time.perf_counter() - s0)
                self._write(rec)  # single event-loop thread: writes never interleave
                done[spec.trial_id] = rec
                ran += 1
                if self.progress:
                    self.progress(len(done), total)

        try:
            await asyncio.gather(*(one(s) for s in todo))
        finally:
            self._close()
        return self._finish(done, resumed, ran, t0)
