"""Reliability: a calibration killed for real (SIGKILL) and resumed loses no trial.

A subprocess runs a calibration whose reader sleeps 20 ms per call; once the checkpoint
holds at least ``KILL_AFTER`` trials the test sends SIGKILL (no cleanup, no flush
beyond what the checkpoint already did), then resumes in this process with the same
options. Checked: every trial completed before the kill is in the checkpoint exactly
once and unchanged, nothing else was lost, the final trial count equals the plan, and
the profile equals one built from the checkpoint's records. Two ways in: the
``gold-panning calibrate`` command (synchronous path) and :class:`Calibrator` with
an asynchronous reader and ``concurrency=4`` (the concurrent write path).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from gold_panning_integrations.calibration import build_profile, calibration_plan
from gold_panning_integrations.profiles import DetectorProfile

N, GRID, TRIALS, SEED = 8, 3, 40, 5
PLAN = len(calibration_plan(N, grid=GRID, trials=TRIALS, rng=SEED))  # 120 trials
KILL_AFTER = 10

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

READER_MODULE = """
import asyncio, time
from gold_panning_integrations.readers._cli_args import LexicalSimulatedReader


class SlowReader(LexicalSimulatedReader):
    '''The CLI's simulated reader, slowed to 20 ms per call when SLOW is set.'''

    model_name = "slow-simulated"
    SLOW = 0.0

    def read(self, question, documents):
        time.sleep(self.SLOW)
        return super().read(question, documents)

    async def aread(self, question, documents):
        await asyncio.sleep(self.SLOW)
        return LexicalSimulatedReader.read(self, question, documents)
"""

CLI_SCRIPT = """
import sys
from gold_panning_integrations.readers import _cli_args as _reader_args
from slow_reader import SlowReader
SlowReader.SLOW = 0.02
_reader_args.LexicalSimulatedReader = SlowReader  # what --reader simulated builds
from gold_panning_integrations.cli import main
sys.exit(main(sys.argv[1:]))
"""

CALIBRATOR_SCRIPT = """
import sys
import numpy as np
from gold_panning_integrations.calibration import Calibrator
from gold_panning_integrations.profiles import load_profile
from gold_panning_integrations.tasks import make_task
from slow_reader import SlowReader
SlowReader.SLOW = 0.02
reader = SlowReader(load_profile("lost-in-the-middle"), rng=np.random.default_rng(0))
Calibrator(reader, make_task("kv"), n={n}, grid={grid}, trials={trials}, seed={seed},
           checkpoint=sys.argv[1], concurrency=4).run()
"""


def _trial_lines(path: Path) -> list[dict[str, Any]]:
    """Complete trial records of a checkpoint (a torn last line is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "trial":
            out.append(obj)
    return out


def _run_and_kill(cmd: list[str], checkpoint: Path, cwd: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")])}
    log = cwd / "stderr.log"  # a file, not a pipe: the progress bar must never block
    with log.open("wb") as err_fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err_fh)
        try:
            deadline = time.monotonic() + 60
            while len(_trial_lines(checkpoint)) < KILL_AFTER:
                if proc.poll() is not None:
                    tail = log.read_text(errors="replace")[-2000:]
                    pytest.fail(f"calibration exited ({proc.returncode}) before it could be killed: {tail}")
                if time.monotonic() > deadline:
                    pytest.fail("the calibration wrote no checkpoint lines within 60 s")
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = _trial_lines(checkpoint)
    assert KILL_AFTER <= len(before) < PLAN, "killed mid-run"
    print(f"\nkilled after {len(before)} of {PLAN} trials")
    return before


def _check_resumed(before: list[dict[str, Any]], checkpoint: Path, records: list[dict[str, Any]]) -> None:
    after = _trial_lines(checkpoint)
    ids = [r["trial_id"] for r in after]
    plan_ids = [t.trial_id for t in calibration_plan(N, grid=GRID, trials=TRIALS, rng=SEED)]
    assert len(ids) == len(set(ids)) == PLAN  # nothing twice, nothing missing
    assert set(ids) == set(plan_ids)
    by_id = {r["trial_id"]: r for r in after}
    for r in before:  # every trial completed before the kill: kept as written, not rerun
        assert ids.count(r["trial_id"]) == 1 and by_id[r["trial_id"]] == r
    assert [r["trial_id"] for r in records] == plan_ids
    lines = checkpoint.read_text().splitlines()
    assert sum(json.loads(x)["type"] == "meta" for x in lines) == 1 and len(lines) == PLAN + 1


def test_calibrate_command_killed_and_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slow_reader.py").write_text(textwrap.dedent(READER_MODULE))
    (tmp_path / "run_cli.py").write_text(textwrap.dedent(CLI_SCRIPT))
    out = tmp_path / "profile.json"
    ck = tmp_path / "profile.checkpoint.jsonl"
    argv = ["calibrate", "--reader", "simulated", "--task", "kv", "--n", str(N), "--grid", str(GRID)]
    argv += ["--trials", str(TRIALS), "--seed", str(SEED), "--out", str(out), "--checkpoint", str(ck)]
    before = _run_and_kill([sys.executable, str(tmp_path / "run_cli.py"), *argv], ck, tmp_path)
    assert not out.exists()  # killed before the end: no profile yet

    # resume in this process with the same command (the reader, unslowed, is the same class)
    monkeypatch.syspath_prepend(str(tmp_path))
    from slow_reader import SlowReader

    from gold_panning_integrations.cli import main
    from gold_panning_integrations.readers import _cli_args as _reader_args

    monkeypatch.setattr(_reader_args, "LexicalSimulatedReader", SlowReader)
    assert main(argv) == 0
    after = _trial_lines(ck)
    _check_resumed(before, ck, after)
    profile = DetectorProfile.load(out)
    rebuilt = build_profile(after, n=N, grid=GRID)
    assert profile.tpr == rebuilt.tpr and profile.fpr == rebuilt.fpr
    assert profile.extra["counts"] == rebuilt.extra["counts"]
    assert f"{PLAN} of {PLAN} trials completed" in profile.notes


def test_calibrator_async_killed_and_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slow_reader.py").write_text(textwrap.dedent(READER_MODULE))
    script = tmp_path / "run_calibrator.py"
    script.write_text(textwrap.dedent(CALIBRATOR_SCRIPT.format(n=N, grid=GRID, trials=TRIALS, seed=SEED)))
    ck = tmp_path / "cal.jsonl"
    before = _run_and_kill([sys.executable, str(script), str(ck)], ck, tmp_path)

    monkeypatch.syspath_prepend(str(tmp_path))
    import numpy as np
    from slow_reader import SlowReader

    from gold_panning_integrations.calibration import Calibrator
    from gold_panning_integrations.profiles import load_profile
    from gold_panning_integrations.tasks import make_task

    reader = SlowReader(load_profile("lost-in-the-middle"), rng=np.random.default_rng(0))
    cal = Calibrator(
        reader, make_task("kv"), n=N, grid=GRID, trials=TRIALS, seed=SEED, checkpoint=ck, concurrency=4
    )
    res = cal.run()
    assert res.resumed == len(before) and res.ran == PLAN - len(before)
    _check_resumed(before, ck, res.records)
    rebuilt = build_profile(_trial_lines(ck), n=N, grid=GRID)
    assert res.profile.tpr == rebuilt.tpr and res.profile.fpr == rebuilt.fpr
