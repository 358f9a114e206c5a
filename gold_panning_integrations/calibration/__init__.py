"""The calibration protocol: measure a model's per-position TPR and FPR on a task.

For each grid position ``j`` (``K`` positions spread over ``n``, first and last included)
and each trial, a task instance is built with its gold document at ``j`` and shown to the
reader once: the gold cited at ``j`` is a true positive at ``j``, a distractor cited at
``j`` (its gold elsewhere) a false positive. Rates are Jeffreys-smoothed per grid position
(:func:`smoothed_rate`) and interpolated to all ``n`` positions
(:meth:`DetectorProfile.from_grid`). With ``budget=CALLS`` each next trial goes to the grid
position whose TPR is least certain (:func:`next_grid_index`); every trial also shows a
distractor at every other grid position, which is what FPR needs. See
docs/calibration-and-profiles.md.

A pure functional core (:func:`calibration_plan`; the rest in :mod:`._fit`) under a thin
stateful runner, :class:`Calibrator`, that calls the reader, checkpoints every completed
trial to a JSONL file (flushed and fsynced), resumes from it, and locks it
(``CHECKPOINT.lock``, :mod:`._checkpoint`) while running.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._io import check_same_run
from ..engine.panner import gather_all
from ..engine.records import Reading, reader_failure
from ..errors import CheckpointError
from ..profiles import DetectorProfile
from ..tasks.base import TaskBuilder
from ._checkpoint import CheckpointLock, read_checkpoint
from ._fit import (
    OutcomeCounts,
    build_profile,
    count_outcomes,
    estimate_rates,
    expected_variance_reduction,
    grid_indices,
    next_grid_index,
    smoothed_rate,
)

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
    "expected_variance_reduction",
    "next_grid_index",
    "smoothed_rate",
]

logger = logging.getLogger(__name__)


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
    g = grid_indices(n, grid)
    seeds = _trial_seeds(rng, trials, g.size)
    return [_spec(gi, t, g, seeds) for t in range(trials) for gi in range(g.size)]


def _trial_seeds(rng: np.random.Generator | int | None, trials: int, k: int) -> NDArray[np.int64]:
    """``[t, gi]``: the instance seed of trial ``t`` at grid index ``gi``, shape ``(trials, k)``
    (whatever order a budget visits positions in, a resumed run rebuilds the same instances)."""
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return gen.integers(0, 2**63 - 1, size=(trials, k), dtype=np.int64)


def _spec(gi: int, t: int, grid: NDArray[np.intp], seeds: NDArray[np.int64]) -> TrialSpec:
    return TrialSpec(f"p{gi:02d}-t{t:03d}", gi, int(grid[gi]), t, int(seeds[t, gi]))


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


class Calibrator:
    """Runs the calibration protocol for one reader on one task.

    Args:
        reader: ``read(question, documents) -> Reading`` and/or ``async aread``.
        task: A :class:`~gold_panning_integrations.tasks.base.TaskBuilder`.
        n: Documents per prompt.
        grid: Grid size ``K`` or explicit positions.
        trials: Trials per grid position (fixed layout; ignored with ``budget``).
        budget: Total calls; each trial goes to the grid position whose TPR is least
            certain (:func:`next_grid_index`). None: the fixed layout of ``trials``.
        seed: Seed of the plan (instances); keep it to resume a run.
        checkpoint: JSONL file recording each completed trial (None: no checkpoint).
            It is locked (``CHECKPOINT.lock``) while the run lasts.
        concurrency: Simultaneous calls when the reader is asynchronous.
        progress: Called as ``progress(done, total)`` after each trial.
        model: Model name recorded in the profile.
        notes: Profile notes (the command line, data, ...).

    A :class:`~gold_panning_integrations.errors.FatalReaderError` from the reader ends the
    run at once (completed trials stay in the checkpoint); any other exception is a failed
    trial.
    """

    def __init__(
        self,
        reader: Any,
        task: TaskBuilder,
        *,
        n: int = 20,
        grid: int | Sequence[int] = 11,
        trials: int = 50,
        budget: int | None = None,
        seed: int = 0,
        checkpoint: str | os.PathLike[str] | None = None,
        concurrency: int = 1,
        progress: Callable[[int, int], None] | None = None,
        model: str | None = None,
        notes: str = "",
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError(f"budget must be a whole number of calls >= 1, got {budget!r}")
        self.reader = reader
        self.task = task
        self.n = n
        self.grid = grid
        self.trials = trials
        self.budget = budget
        self.seed = seed
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.concurrency = concurrency
        self.progress = progress
        self.model = (
            model or getattr(reader, "model_name", None) or getattr(reader, "model", None) or "unknown"
        )
        self.notes = notes
        self.grid_array = grid_indices(n, grid)
        if budget is None:
            self.plan = calibration_plan(n, grid=grid, trials=trials, rng=seed)
            self.total = len(self.plan)
        else:
            self.plan = []
            self.total = budget
            self._seeds = _trial_seeds(seed, budget, self.grid_array.size)
        self._fh: Any = None
        self._lock: CheckpointLock | None = None

    def _meta(self) -> dict[str, Any]:
        meta = {
            "type": "meta",
            "task": getattr(self.task, "name", type(self.task).__name__),
            "n": self.n,
            "grid": self.grid_array.tolist(),
            "trials": self.trials,
            "seed": self.seed,
            "model": str(self.model),
            "layout": "fixed" if self.budget is None else "budget",
        }
        if self.budget is not None:
            meta["budget"] = self.budget
        return meta

    def _open_checkpoint(self) -> dict[str, dict[str, Any]]:
        """Lock and open the checkpoint (creating its folder and header line); the
        trials already in it that belong to this plan."""
        if self.checkpoint is None:
            return {}
        self._prepare_folder(self.checkpoint)
        self._lock = CheckpointLock(self.checkpoint).acquire()
        try:
            meta, done = read_checkpoint(self.checkpoint)
            want = self._meta()
            if meta is not None:
                self._check_same_calibration(meta, want)
            try:
                self._fh = self.checkpoint.open("a", encoding="utf-8")
            except OSError as err:
                raise CheckpointError(
                    f"cannot write checkpoint {str(self.checkpoint)!r}: {err.strerror or err}"
                ) from err
            if meta is None:
                self._write(want)
        except BaseException:
            self._close()
            raise
        return self._planned(done)

    @staticmethod
    def _prepare_folder(checkpoint: Path) -> None:
        """CheckpointError when ``checkpoint`` is a folder or its folder cannot be made."""
        if checkpoint.is_dir():
            raise CheckpointError(
                f"checkpoint {str(checkpoint)!r} is a directory; pass a file path, "
                f"e.g. --checkpoint {str(checkpoint / 'calibration.checkpoint.jsonl')!r}"
            )
        try:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CheckpointError(
                f"cannot create the folder of checkpoint {str(checkpoint)!r}: {err.strerror or err}"
            ) from err

    def _check_same_calibration(self, meta: Mapping[str, Any], want: Mapping[str, Any]) -> None:
        """CheckpointError naming what differs when the file's header is another run's."""
        assert self.checkpoint is not None
        # files written before budgets existed have no "layout": they are fixed-layout
        check_same_run(
            self.checkpoint,
            {**meta, "layout": meta.get("layout", "fixed")},
            want,
            ("task", "n", "grid", "seed", "model", "layout"),
            what="calibration",
            advice="use another --checkpoint path or delete the file",
        )

    def _planned(self, done: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The trials of ``done`` this plan has (fixed layout: its trial ids; budget: its
        grid and trial range)."""
        if self.budget is None:
            valid = {t.trial_id for t in self.plan}
            return {k: v for k, v in done.items() if k in valid}
        k = self.grid_array.size
        return {key: v for key, v in done.items() if 0 <= v["grid_index"] < k and v["trial"] < self.budget}

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
        if self._lock is not None:
            self._lock.release()
            self._lock = None

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

    def _budget_specs(self, done: Mapping[str, Mapping[str, Any]], count: int) -> list[TrialSpec]:
        """The next ``count`` budgeted trials given the completed ones: each chosen by
        :func:`next_grid_index`, earlier choices in the batch counted as pending trials
        at their predicted rate."""
        k = self.grid_array.size
        tp = np.zeros(k)
        m = np.zeros(k)
        per_index = np.zeros(k, dtype=np.int64)
        tried = np.zeros(k)
        for rec in done.values():
            gi = int(rec["grid_index"])
            per_index[gi] = max(per_index[gi], int(rec["trial"]) + 1)
            tried[gi] += 1
            if rec.get("failed"):
                continue
            m[gi] += 1
            tp[gi] += int(rec["position"]) in {int(c) for c in rec.get("cited", ())}
        specs = []
        for _ in range(count):
            gi = next_grid_index(tp, m, attempts=tried)
            specs.append(_spec(gi, int(per_index[gi]), self.grid_array, self._seeds))
            per_index[gi] += 1
            tp[gi] += (tp[gi] + 0.5) / (m[gi] + 1.0)  # pending: its expected outcome
            m[gi] += 1
            tried[gi] += 1
        return specs

    def _batches(
        self, done: dict[str, dict[str, Any]], limit: int | None, resumed: int, size: int
    ) -> Iterator[list[TrialSpec]]:
        """The trials to run (at most ``limit`` this session): the fixed layout's in one batch;
        a budget's in batches of ``size``, each chosen once the previous one is in ``done``."""
        if self.budget is None:
            yield [t for t in self.plan if t.trial_id not in done][:limit]
            return
        while True:
            left = self.total - len(done)
            if limit is not None:
                left = min(left, limit - (len(done) - resumed))
            batch = self._budget_specs(done, min(size, max(left, 0)))
            if not batch:
                return
            yield batch

    def _finish(self, done: dict[str, dict[str, Any]], resumed: int, t0: float) -> CalibrationResult:
        if self.budget is None:
            records = [done[t.trial_id] for t in self.plan if t.trial_id in done]
        else:
            records = sorted(done.values(), key=lambda r: (int(r["trial"]), int(r["grid_index"])))
        counts = count_outcomes(records, self.n, self.grid)
        if records and int(counts.tp_trials.sum()) == 0:
            failed = sum(1 for r in records if r.get("failed"))
            first = next((r.get("error") for r in records if r.get("failed") and r.get("error")), None)
            where = f"; the trials are kept in {str(self.checkpoint)!r}: fix the cause, delete it and rerun"
            raise ValueError(
                f"no usable calibration trials: {failed} of {len(records)} trials failed"
                + (f"; the first error was: {first}" if first else "")
                + (where if self.checkpoint is not None else "")
            )
        profile = build_profile(
            records,
            n=self.n,
            grid=self.grid,
            model=str(self.model),
            task=getattr(self.task, "name", "unknown"),
            notes=self.notes,
            extra={
                "seed": self.seed,
                "trials_planned": self.trials if self.budget is None else None,
                "budget": self.budget,
                "trials_completed": len(records),
            },
        )
        return CalibrationResult(
            records=records,
            profile=profile,
            resumed=resumed,
            ran=len(done) - resumed,
            seconds=time.perf_counter() - t0,
            counts=counts,
        )

    def _trial(self, spec: TrialSpec, done: dict[str, dict[str, Any]]) -> None:
        """One trial through the reader's ``read``, then recorded (:meth:`_recorded`)."""
        inst, s0 = self._instance(spec), time.perf_counter()
        try:
            reading = self.reader.read(inst.question, inst.documents)
        except Exception as err:  # noqa: BLE001 - a reader must not end the run
            reading = reader_failure(err, logger, f"trial {spec.trial_id}: ")
        self._recorded(spec, inst, reading, s0, done)

    async def _atrial(self, spec: TrialSpec, done: dict[str, dict[str, Any]]) -> None:
        """One trial through the reader's ``aread``, then recorded (:meth:`_recorded`)."""
        inst, s0 = self._instance(spec), time.perf_counter()
        try:
            reading = await self.reader.aread(inst.question, inst.documents)
        except Exception as err:  # noqa: BLE001 - a reader must not end the run
            reading = reader_failure(err, logger, f"trial {spec.trial_id}: ")
        self._recorded(spec, inst, reading, s0, done)

    def _recorded(
        self, spec: TrialSpec, inst: Any, reading: Any, s0: float, done: dict[str, dict[str, Any]]
    ) -> None:
        """A trial's reading recorded: written to the checkpoint, added to ``done``,
        progress told."""
        rec = self._record(spec, inst, reading, time.perf_counter() - s0)
        self._write(rec)
        done[spec.trial_id] = rec
        if self.progress:
            self.progress(len(done), self.total)

    def run(self, *, limit: int | None = None) -> CalibrationResult:
        """Run every trial not yet in the checkpoint (at most ``limit`` of them).

        Uses the asynchronous path when the reader has ``aread`` and ``concurrency > 1``.

        Raises:
            CheckpointError: The checkpoint is a folder, unreadable, from another run,
                has a malformed line, or is locked by another running calibration.
            FatalReaderError: The reader failed permanently (completed trials are kept).
        """
        if self.concurrency > 1 and hasattr(self.reader, "aread"):
            return asyncio.run(self.arun(limit=limit))
        if not hasattr(self.reader, "read"):
            raise TypeError("the reader needs read(question, documents) (or aread with concurrency > 1)")
        t0 = time.perf_counter()
        done = self._open_checkpoint()
        resumed = len(done)
        try:
            for batch in self._batches(done, limit, resumed, 1):
                for spec in batch:
                    self._trial(spec, done)
        finally:
            self._close()
        return self._finish(done, resumed, t0)

    async def arun(self, *, limit: int | None = None) -> CalibrationResult:
        """Asynchronous :meth:`run`: up to ``concurrency`` ``aread`` calls at once (with a
        budget, positions are chosen a batch of ``concurrency`` at a time)."""
        if not hasattr(self.reader, "aread"):
            raise TypeError("Calibrator.arun needs a reader with async aread(question, documents)")
        t0 = time.perf_counter()
        done = self._open_checkpoint()
        resumed = len(done)
        sem = asyncio.Semaphore(self.concurrency)

        async def one(spec: TrialSpec) -> None:
            async with sem:  # one event-loop thread: checkpoint writes never interleave
                await self._atrial(spec, done)

        try:
            for batch in self._batches(done, limit, resumed, self.concurrency):
                await gather_all([one(s) for s in batch])
        finally:
            self._close()
        return self._finish(done, resumed, t0)
