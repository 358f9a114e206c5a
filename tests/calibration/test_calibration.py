"""The calibration protocol: plan, hand-derived rates, checkpoint resume, concurrency."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from doubles import MarkedTask

from gold_panning_integrations.calibration import (
    Calibrator,
    CheckpointError,
    build_profile,
    calibration_plan,
    count_outcomes,
    estimate_rates,
)
from gold_panning_integrations.engine.positions import grid_positions
from gold_panning_integrations.engine.records import Reading


class ScriptedReader:
    """Always cites position 0; cites the gold at position 2 on every other sighting;
    never cites anything else. Fails when told to."""

    def __init__(self, fail_on: set[int] | None = None) -> None:
        self.calls = 0
        self.gold_at_2 = 0
        self.fail_on = fail_on or set()

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        if self.calls in self.fail_on:
            return Reading.failure("scripted failure")
        cited = {0}
        g = documents.index("GOLD")
        if g == 2:
            if self.gold_at_2 % 2 == 0:
                cited.add(2)
            self.gold_at_2 += 1
        return Reading(cited=tuple(sorted(cited)))


def test_plan_layout_and_determinism() -> None:
    plan = calibration_plan(20, grid=11, trials=3, rng=0)
    assert len(plan) == 33
    assert len({t.trial_id for t in plan}) == 33
    assert [t.position for t in plan[:11]] == grid_positions(20, 11).tolist()
    assert [t.trial for t in plan[:12]] == [0] * 11 + [1]
    assert plan == calibration_plan(20, grid=11, trials=3, rng=0)
    assert plan != calibration_plan(20, grid=11, trials=3, rng=1)
    # more trials extend the plan without changing the first ones (resuming stays valid)
    assert calibration_plan(20, grid=11, trials=5, rng=0)[:33] == plan


def test_plan_rejects_bad_grid() -> None:
    with pytest.raises(ValueError, match="within 0..4"):
        calibration_plan(5, grid=[0, 5])
    with pytest.raises(ValueError, match="trials must be >= 1"):
        calibration_plan(5, trials=0)


def test_hand_derived_rates() -> None:
    # n=5, grid 0,2,4, 4 trials each: 12 trials.
    # TPR: at 0 the gold is always cited: 4/4 -> (4.5)/5 = 0.9; at 2 every other: 2/4 ->
    # 2.5/5 = 0.5; at 4 never: 0/4 -> 0.5/5 = 0.1.
    # FPR (8 trials with the gold elsewhere): at 0 always cited 8/8 -> 8.5/9; at 2 and 4
    # never -> 0.5/9.
    reader = ScriptedReader()
    res = Calibrator(reader, MarkedTask(), n=5, grid=[0, 2, 4], trials=4, seed=0).run()
    assert reader.calls == 12 and res.ran == 12
    c = res.counts
    assert c is not None
    assert c.tp.tolist() == [4, 2, 0] and c.tp_trials.tolist() == [4, 4, 4]
    assert c.fp.tolist() == [8, 0, 0] and c.fp_trials.tolist() == [8, 8, 8]
    tpr, fpr = estimate_rates(res.records, 5, [0, 2, 4])
    np.testing.assert_allclose(tpr, [0.9, 0.5, 0.1])
    np.testing.assert_allclose(fpr, [8.5 / 9, 0.5 / 9, 0.5 / 9])
    p = res.profile
    assert p.n_positions == 5 and p.grid_positions == [0, 2, 4] and p.trials == [4, 4, 4]
    np.testing.assert_allclose(p.tpr, [0.9, 0.7, 0.5, 0.3, 0.1])  # linear between grid points
    np.testing.assert_allclose(p.fpr[1], (8.5 / 9 + 0.5 / 9) / 2)
    assert p.task == "marked"


def test_zero_of_fifty_is_not_zero() -> None:
    recs = [{"position": 0, "gold": [0], "cited": [], "failed": False} for _ in range(50)]
    tpr, fpr = estimate_rates(recs, 2, [0, 1])
    assert tpr[0] == pytest.approx(0.5 / 51)  # 0/50 smoothed
    assert tpr[1] == pytest.approx(0.5)  # never measured: uninformative 0.5
    assert fpr[1] == pytest.approx(0.5 / 51)


def test_failed_trials_are_excluded_and_counted() -> None:
    reader = ScriptedReader(fail_on={1})  # first call: gold at 0 in trial 0
    res = Calibrator(reader, MarkedTask(), n=5, grid=[0, 2, 4], trials=4, seed=0).run()
    c = count_outcomes(res.records, 5, [0, 2, 4])
    assert c.failed == 1
    assert c.tp_trials.tolist() == [3, 4, 4] and c.fp_trials.tolist() == [8, 7, 7]
    assert res.profile.trials == [3, 4, 4]


def test_build_profile_needs_usable_trials() -> None:
    with pytest.raises(ValueError, match="no usable calibration trials"):
        build_profile([{"position": 0, "cited": [], "failed": True}], n=3, grid=[0, 2])


def test_checkpoint_resume_runs_only_the_rest(tmp_path: Path) -> None:
    ck = tmp_path / "cal.checkpoint.jsonl"
    first = ScriptedReader()
    part = Calibrator(first, MarkedTask(), n=5, grid=[0, 2, 4], trials=4, seed=3, checkpoint=ck).run(limit=5)
    assert first.calls == 5 and len(part.records) == 5
    lines = ck.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "meta" and len(lines) == 6

    second = ScriptedReader()
    second.gold_at_2 = 2  # the first session saw the gold at 2 in trials 0 and 1
    progress: list[tuple[int, int]] = []
    full = Calibrator(
        second,
        MarkedTask(),
        n=5,
        grid=[0, 2, 4],
        trials=4,
        seed=3,
        checkpoint=ck,
        progress=lambda d, t: progress.append((d, t)),
    ).run()
    assert second.calls == 7 and full.resumed == 5 and full.ran == 7
    assert progress[0] == (6, 12) and progress[-1] == (12, 12)
    assert [r["trial_id"] for r in full.records] == [
        t.trial_id for t in calibration_plan(5, grid=[0, 2, 4], trials=4, rng=3)
    ]
    one_shot = Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=4, seed=3).run()
    assert full.profile.tpr == one_shot.profile.tpr and full.profile.fpr == one_shot.profile.fpr

    third = ScriptedReader()
    again = Calibrator(third, MarkedTask(), n=5, grid=[0, 2, 4], trials=4, seed=3, checkpoint=ck).run()
    assert third.calls == 0 and again.resumed == 12


def test_corrupt_last_line_is_ignored_with_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ck = tmp_path / "ck.jsonl"
    Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=2, seed=0, checkpoint=ck).run(
        limit=4
    )
    with ck.open("a") as fh:
        fh.write('{"type": "trial", "trial_id": "p01-t0')  # killed mid-write
    reader = ScriptedReader()
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.calibration"):
        res = Calibrator(reader, MarkedTask(), n=5, grid=[0, 2, 4], trials=2, seed=0, checkpoint=ck).run()
    assert "corrupt last line" in caplog.text
    assert reader.calls == 2 and len(res.records) == 6
    assert all(json.loads(line) for line in ck.read_text().splitlines())  # file is clean again


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=1, seed=0, checkpoint=ck).run(
        limit=2
    )
    lines = ck.read_text().splitlines()
    lines.insert(1, "garbage")
    ck.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match="line 2 is corrupt"):
        Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=1, seed=0, checkpoint=ck).run()


def test_checkpoint_of_another_run_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=1, seed=0, checkpoint=ck).run(
        limit=1
    )
    with pytest.raises(CheckpointError, match="seed: 0 in the file vs 1 now"):
        Calibrator(ScriptedReader(), MarkedTask(), n=5, grid=[0, 2, 4], trials=1, seed=1, checkpoint=ck).run()


class SlowAsyncReader:
    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        self.in_flight -= 1
        return Reading(cited=(documents.index("GOLD"),))


async def test_async_concurrency_is_bounded(tmp_path: Path) -> None:
    reader = SlowAsyncReader()
    cal = Calibrator(
        reader,
        MarkedTask(),
        n=5,
        grid=[0, 2, 4],
        trials=4,
        seed=0,
        concurrency=3,
        checkpoint=tmp_path / "a.jsonl",
    )
    res = await cal.arun()
    assert reader.calls == 12 and reader.max_in_flight == 3
    assert (
        res.counts is not None and res.counts.tp.tolist() == [4, 4, 4] and res.counts.fp.tolist() == [0, 0, 0]
    )
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 13


def test_sync_run_uses_async_path_when_concurrent() -> None:
    reader = SlowAsyncReader()
    res = Calibrator(reader, MarkedTask(), n=5, grid=[0, 4], trials=2, concurrency=2).run()
    assert reader.calls == 4 and reader.max_in_flight == 2 and len(res.records) == 4
