"""``gold-panning rerank`` killed with SIGKILL about half way and run again: the outputs equal
an uninterrupted run's, and the endpoint's calls per question show that no question finished
before the kill was asked again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from openai_server import FakeOpenAIServer
from rerank_fakes import model, question_of, write_questions

ROOT = Path(__file__).resolve().parents[2]
N = 40

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _command(base_url: str, questions: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gold_panning_integrations.cli",
        "rerank",
        "--input",
        str(questions),
        "--out",
        str(out),
        "--base-url",
        base_url,
        "--model",
        "m",
        "--profile",
        "lost-in-the-middle",
        "--max-concurrency",
        "4",
        "--questions-in-flight",
        "4",
        "-q",
    ]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finished(checkpoint: Path) -> set[int]:
    """The questions a checkpoint holds (a line cut by the kill is not one)."""
    done = set()
    for line in checkpoint.read_bytes().split(b"\n")[1:]:
        try:
            done.add(json.loads(line)["index"])
        except ValueError:
            pass
    return done


def test_sigkill_half_way_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    questions = write_questions(tmp_path / "questions.jsonl", N)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "killed"
    checkpoint = out / "checkpoint.jsonl"
    with FakeOpenAIServer(default=model(0.05)) as srv:
        job = subprocess.Popen(_command(srv.base_url, questions, out), env=env, cwd=ROOT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and job.poll() is None:
            if checkpoint.exists() and len(_finished(checkpoint)) >= N // 2:
                break
            time.sleep(0.01)
        assert job.poll() is None, "the job ended before it could be killed half way"
        job.send_signal(signal.SIGKILL)
        assert job.wait(timeout=30) == -signal.SIGKILL
        done = _finished(checkpoint)
        assert N // 2 <= len(done) < N
        time.sleep(0.3)  # requests the killed job had sent are recorded by now
        srv.clear()

        again = subprocess.run(
            _command(srv.base_url, questions, out), check=False, env=env, cwd=ROOT, timeout=300
        )
        assert again.returncode == 0
        asked = Counter(question_of(r) for r in srv.requests)
        assert not set(asked) & done  # no finished question asked again
        assert asked == {i: 6 for i in range(N) if i not in done}

        full = tmp_path / "full"
        whole = subprocess.run(
            _command(srv.base_url, questions, full), check=False, env=env, cwd=ROOT, timeout=300
        )
        assert whole.returncode == 0
    assert (out / "rerank.jsonl").read_bytes() == (full / "rerank.jsonl").read_bytes()
    assert (out / "run.trec").read_bytes() == (full / "run.trec").read_bytes()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["resumed"], summary["ran"], summary["questions"]) == (len(done), N - len(done), N)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_ctrl_c_stop_with_one_line_and_keep_the_finished_questions(
    tmp_path: Path, signum: int, code: int
) -> None:
    questions = write_questions(tmp_path / "questions.jsonl", 16)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "stopped"
    with FakeOpenAIServer(default=model(0.05)) as srv:
        job = subprocess.Popen(
            _command(srv.base_url, questions, out),
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
            # an earlier test in this worker may leave SIGINT ignored, and an ignored SIGINT
            # is inherited (the job then finished all 16 and exited 0): start it as a shell would
            preexec_fn=_default_sigint,  # noqa: PLW1509 (one signal call, no locks)
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and job.poll() is None:
            if (out / "checkpoint.jsonl").exists() and len(_finished(out / "checkpoint.jsonl")) >= 3:
                break
            time.sleep(0.01)
        job.send_signal(signum)
        _, err = job.communicate(timeout=60)
        assert job.returncode == code
        assert err.strip().splitlines()[-1] == "gold-panning rerank: interrupted"
        assert "rerun the same command to resume" in err
        done = _finished(out / "checkpoint.jsonl")
        assert 3 <= len(done) < 16
        time.sleep(0.3)
        srv.clear()
        again = subprocess.run(
            _command(srv.base_url, questions, out), check=False, env=env, cwd=ROOT, timeout=300
        )
        assert again.returncode == 0
        assert not {question_of(r) for r in srv.requests} & done
