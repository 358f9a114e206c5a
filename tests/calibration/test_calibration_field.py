"""Calibration in the field: hostile checkpoints, locks, --out fallbacks (issue 10 item 5)
and the budgeted protocol (issue 14 item 1)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from doubles import MarkedTask

from gold_panning_integrations.calibration import (
    Calibrator,
    CheckpointLock,
    expected_variance_reduction,
    next_grid_index,
)
from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.engine.records import Reading
from gold_panning_integrations.errors import CheckpointError, FatalReaderError
from gold_panning_integrations.profiles import DetectorProfile


class GoldReader:
    """Cites the gold when it sits at an even position; raises FatalReaderError on call ``fatal_on``."""

    def __init__(self, fatal_on: int | None = None) -> None:
        self.calls = 0
        self.fatal_on = fatal_on

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        if self.calls == self.fatal_on:
            raise FatalReaderError("401 Unauthorized at http://127.0.0.1:1/v1 (model m)", status_code=401)
        g = documents.index("GOLD")
        return Reading(cited=(g,) if g % 2 == 0 else ())


def _cal(ck: Path | None, *, reader: GoldReader | None = None, **kw: object) -> Calibrator:
    opts: dict[str, object] = {"n": 5, "grid": [0, 2, 4], "trials": 2, "seed": 0, "checkpoint": ck}
    opts.update(kw)
    return Calibrator(reader or GoldReader(), MarkedTask(), **opts)  # type: ignore[arg-type]


# ------------------------------------------------------------------ checkpoints
def test_checkpoint_that_is_a_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"is a directory; pass a file path"):
        _cal(tmp_path).run()


def _write_checkpoint(ck: Path, trial: dict[str, object]) -> None:
    _cal(ck).run(limit=1)
    with ck.open("a") as fh:
        fh.write(json.dumps(trial) + "\n")
        fh.write(json.dumps(trial | {"trial_id": "p02-t001"}) + "\n")  # not the last line


GOOD_TRIAL = {
    "type": "trial",
    "trial_id": "p01-t000",
    "grid_index": 1,
    "position": 2,
    "trial": 0,
    "seed": 1,
    "n": 5,
    "gold": [2],
    "cited": [2],
    "failed": False,
}


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"cited": None}, r"line 3: field 'cited' is NoneType"),
        ({"position": "2"}, r"line 3: field 'position' is str '2', expected int"),
        ({"failed": 0}, r"line 3: field 'failed' is int 0, expected bool"),
        ({"cited": [True]}, r"line 3: field 'cited' must be a list of integer positions"),
        ({"trial_id": "x"}, r"line 3: field 'trial_id' is 'x', expected 'pNN-tNNN'"),
        ({"grid_index": True}, r"line 3: field 'grid_index' is bool True, expected int"),
    ],
)
def test_checkpoint_line_with_a_wrong_type(tmp_path: Path, change: dict[str, object], pattern: str) -> None:
    ck = tmp_path / "ck.jsonl"
    _write_checkpoint(ck, GOOD_TRIAL | change)
    with pytest.raises(CheckpointError, match=pattern) as exc:
        _cal(ck).run()
    assert str(ck) in str(exc.value)


def test_checkpoint_line_missing_a_field(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    _write_checkpoint(ck, {k: v for k, v in GOOD_TRIAL.items() if k != "position"})
    with pytest.raises(CheckpointError, match=r"ck\.jsonl' line 3: field 'position' is missing"):
        _cal(ck).run()


def test_checkpoint_line_of_unknown_type(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    _write_checkpoint(ck, {"type": "banana"})
    with pytest.raises(CheckpointError, match=r"line 3: field 'type' is 'banana'"):
        _cal(ck).run()


def test_checkpoint_lock_stops_a_second_run(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    held = CheckpointLock(ck).acquire()
    reader = GoldReader()
    try:
        with pytest.raises(CheckpointError, match=r"in use by another calibration \(pid \d+\)"):
            _cal(ck, reader=reader).run()
    finally:
        held.release()
    assert reader.calls == 0


def test_checkpoint_lock_is_released_after_a_run(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    _cal(ck).run(limit=2)
    second = _cal(ck).run()
    assert second.resumed == 2


def test_checkpoint_lock_is_released_after_an_error(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    with pytest.raises(FatalReaderError):
        _cal(ck, reader=GoldReader(fatal_on=1)).run()
    assert _cal(ck).run().ran == 6


def test_fatal_reader_error_ends_the_run_at_once(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    reader = GoldReader(fatal_on=3)
    with pytest.raises(FatalReaderError, match="401 Unauthorized"):
        _cal(ck, reader=reader).run()
    assert reader.calls == 3
    trials = [json.loads(x) for x in ck.read_text().splitlines()[1:]]
    assert len(trials) == 2


# ------------------------------------------------------------------------ CLI
def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "calibrate",
        "--reader",
        "simulated",
        "--task",
        "kv",
        "--n",
        "6",
        "--grid",
        "3",
        "--trials",
        "2",
        "--out",
        str(tmp_path / "out" / "p.json"),
        "--checkpoint",
        str(tmp_path / "ck.jsonl"),
        *extra,
    ]


def test_cli_out_unwritable_after_the_trials_saves_next_to_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    real_save = DetectorProfile.save

    def save(self: DetectorProfile, path: str | Path) -> Path:
        if Path(path).parent == tmp_path / "out":  # the folder turned read-only during the run
            raise PermissionError(13, "Permission denied", str(path))
        return real_save(self, path)

    monkeypatch.setattr(DetectorProfile, "save", save)
    assert cli_main(_argv(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    fallback = tmp_path / "ck.jsonl.profile.json"
    assert f"the profile was saved to {str(fallback)!r} instead" in err
    assert DetectorProfile.load(fallback).counts is not None


def test_cli_out_nowhere_writable_prints_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()

    def save(self: DetectorProfile, path: str | Path) -> Path:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(DetectorProfile, "save", save)
    assert cli_main(_argv(tmp_path)) == 2
    cap = capsys.readouterr()
    assert "its JSON was printed to stdout above" in cap.err
    js = cap.out[cap.out.index("{") :]
    assert DetectorProfile.from_json(js).n_positions == 6


def test_cli_out_missing_folder_fails_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(_argv(tmp_path)) == 2  # tmp_path/out does not exist
    assert "does not exist; create it first" in capsys.readouterr().err
    assert not (tmp_path / "ck.jsonl").exists()


def test_cli_checkpoint_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "ck.jsonl").mkdir()
    assert cli_main(_argv(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is a directory" in err


def test_cli_second_calibration_on_a_locked_checkpoint_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    held = CheckpointLock(tmp_path / "ck.jsonl").acquire()
    try:
        assert cli_main(_argv(tmp_path)) == 2
    finally:
        held.release()
    assert "is in use by another calibration" in capsys.readouterr().err


# ------------------------------------------------------------------- budget
def test_expected_variance_reduction_by_hand() -> None:
    # Logit variance ~ 1/a + 1/b. Beta(1/2, 1/2): 4; one more trial gives Beta(3/2, 1/2)
    # or Beta(1/2, 3/2), 2/3 + 2 = 8/3 either way: drop 4/3.
    assert expected_variance_reduction(0, 0) == pytest.approx(4 / 3)
    # x=1, m=1: Beta(3/2, 1/2), 8/3; success (p=3/4) -> Beta(5/2, 1/2): 2/5 + 2 = 12/5;
    # failure -> Beta(3/2, 3/2): 4/3. Expected 3/4*12/5 + 1/4*4/3 = 9/5 + 1/3 = 32/15; drop 8/15.
    assert expected_variance_reduction(1, 1) == pytest.approx(8 / 15)


def test_next_grid_index_picks_the_least_certain_position() -> None:
    # drops: x=2,m=2 -> 2.4 - (5/6*16/7 + 1/6*16/15) = 0.317; x=1,m=2 -> 4/3 - 16/15 = 0.267;
    # x=0,m=1 -> 8/15 = 0.533 (the largest)
    assert next_grid_index([2, 1, 0], [2, 2, 1]) == 2


def test_next_grid_index_covers_every_position_first() -> None:
    assert next_grid_index([2, 0, 1], [2, 0, 1]) == 1


def test_budget_spends_exactly_the_budget(tmp_path: Path) -> None:
    reader = GoldReader()
    res = _cal(tmp_path / "ck.jsonl", reader=reader, budget=7).run()
    assert reader.calls == 7
    assert res.profile.counts is not None
    assert sum(res.profile.counts.gold_shown) == 7


def test_budget_sends_calls_where_the_rate_is_uncertain() -> None:
    # GoldReader: the gold is cited at positions 0 and 4 (even), never at 2. After one
    # trial each (0: 1/1, 2: 0/1, 4: 1/1) all three are equally uncertain, so ties go
    # to the lowest index, and so on; over 9 calls each position gets 3.
    res = _cal(None, reader=GoldReader(), budget=9).run()
    assert res.profile.counts is not None
    assert res.profile.counts.gold_shown == [3.0, 3.0, 3.0]


def test_budget_resume_equals_one_shot(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    _cal(ck, budget=8).run(limit=3)
    resumed = _cal(ck, budget=8).run()
    one = _cal(None, budget=8).run()
    assert resumed.resumed == 3
    assert [r["trial_id"] for r in resumed.records] == [r["trial_id"] for r in one.records]


def test_budget_checkpoint_is_not_reused_by_a_fixed_run(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    _cal(ck, budget=4).run(limit=1)
    with pytest.raises(CheckpointError, match=re.escape("layout: 'budget' in the file vs 'fixed' now")):
        _cal(ck).run()


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget must be a whole number of calls >= 1, got 0"):
        _cal(None, budget=0)


def test_cli_budget_writes_counts(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert cli_main([*_argv(tmp_path), "--budget", "10"]) == 0
    prof = DetectorProfile.load(tmp_path / "out" / "p.json")
    assert prof.counts is not None
    assert sum(prof.counts.gold_shown) == 10
    assert "--budget 10" in prof.notes


class FailingAtZeroReader(GoldReader):
    """Every trial with the gold at position 0 fails (e.g. a prompt too long for the model)."""

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        if documents.index("GOLD") == 0:
            self.calls += 1
            return Reading.failure("prompt too long")
        return super().read(question, documents)


def test_budget_does_not_pour_calls_into_a_failing_position() -> None:
    # Failed trials count as attempts for coverage: after one failure at position 0 the
    # budget moves on (6 calls: 0 fails once, then 2 and 4, then the variance rule).
    res = _cal(None, reader=FailingAtZeroReader(), budget=6).run()
    shown_at = [r["position"] for r in res.records]
    assert shown_at.count(0) < 6
    assert res.counts is not None
    assert res.counts.failed == shown_at.count(0)


def test_cli_mostly_failed_calibration_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.readers import _cli_args as _reader_args

    class Half(_reader_args.LexicalSimulatedReader):
        def read(self, question: str, documents: Sequence[str]) -> Reading:
            self.calls += 1
            if self.calls % 4:
                return Reading.failure("the prompt needs 1300 tokens but the model's context holds 1024")
            return super().read(question, documents)

    monkeypatch.setattr(_reader_args, "LexicalSimulatedReader", Half)
    (tmp_path / "out").mkdir()
    assert cli_main(_argv(tmp_path)) == 3
    err = capsys.readouterr().err
    assert "trials failed, so the profile rests on" in err
    assert "context holds 1024" in err
