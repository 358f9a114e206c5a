"""The base install does what the README says: in a clean virtual environment (no system
site packages) holding only ``pip install gold-panning-integrations`` (from this tree;
pip fetches numpy, scipy, pydantic, tenacity, openai, tqdm, typing-extensions from its
cache or PyPI), ``gold-panning --help`` and ``gold-panning calibrate --from-traces`` with
its default recalibration map run, and ``gold-panning evaluate`` names the extra it needs
instead of failing on an import. Nothing compiles.

About a minute with a warm pip cache (the first run downloads ~60 MB of wheels); marked
``install`` so that ``-m "not install"`` leaves it out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "docs" / "runs" / "qwen-nq-calibration-2026-11-28" / "qwen-cal-auto-traces.jsonl"
"""20 labelled traces kept from a real run (Qwen2.5-Coder-0.5B on NQ, `gold-panning evaluate
--traces`): what a user labels and feeds to ``calibrate --from-traces``."""

pytestmark = pytest.mark.install


def _bin(env: Path, name: str) -> Path:
    return env / ("Scripts" if sys.platform == "win32" else "bin") / name


def _run(argv: list[str | Path], *, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the package from this tree and its base dependencies only."""
    tmp = tmp_path_factory.mktemp("base-install")
    src = tmp / "src"  # only what the wheel is built from: the tree itself stays clean
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "gold_panning_integrations",
        src / "gold_panning_integrations",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    env = tmp / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env)
    done = _run([_bin(env, "python"), "-m", "pip", "install", "--quiet", src], cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return env


def test_the_base_install_holds_no_extra(base_env: Path) -> None:
    code = (
        "import importlib.util as u\n"
        "print(sorted(m for m in ('langchain_core', 'llama_index', 'llama_cpp', 'matplotlib', 'ir_measures',"
        " 'bm25s') if u.find_spec(m)))\n"
    )
    done = _run([_bin(base_env, "python"), "-c", code], cwd=base_env)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_help_runs(base_env: Path) -> None:
    done = _run([_bin(base_env, "gold-panning"), "--help"], cwd=base_env)
    assert done.returncode == 0, done.stderr
    assert all(c in done.stdout for c in ("run", "calibrate", "simulate", "evaluate"))


def test_calibrate_from_labelled_traces_writes_a_profile_with_its_map(base_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    argv = [_bin(base_env, "gold-panning"), "calibrate", "--from-traces", TRACES, "--out", out]
    done = _run(argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stored a platt recalibration map in the profile" in done.stdout
    profile = json.loads(out.read_text())
    assert profile["recalibration"]["kind"] == "platt"
    assert profile["recalibration"]["slope"] > 0
    assert profile["extra"]["recalibration_fit"]["queries"] == 20


def test_evaluate_names_the_extra_it_needs(base_env: Path, tmp_path: Path) -> None:
    """``--reader openai`` needs ``[compare]`` only (nothing to compile): one line, exit 2,
    before any call (the URL is a closed port)."""
    argv = [_bin(base_env, "gold-panning"), "evaluate", "--reader", "openai", "--base-url"]
    argv += ["http://127.0.0.1:9/v1", "--model", "m"]
    done = _run(argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gold-panning evaluate: error: ")
    assert 'pip install "gold-panning-integrations[compare]"' in line
    assert "CMAKE_ARGS" not in line


def test_simulate_runs(base_env: Path, tmp_path: Path) -> None:
    argv = [_bin(base_env, "gold-panning"), "simulate", "--n", "10", "--trials", "50", "--json"]
    done = _run(argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)


def test_run_on_an_openai_compatible_endpoint(base_env: Path, tmp_path: Path) -> None:
    """The base install's reader against a loopback server (this process's fake, citing the
    smallest label it is shown): every call answered, a ranking printed."""
    from doubles import smallest_label_reply
    from openai_server import FakeOpenAIServer, dynamic, ok

    with FakeOpenAIServer(default=dynamic(lambda req: ok(smallest_label_reply(req.user_text)))) as server:
        argv = [_bin(base_env, "gold-panning"), "run", "--demo", "--reader", "openai", "--json", "-q"]
        argv += ["--base-url", server.base_url, "--model", "fake", "--api-key", "k"]
        done = _run(argv, cwd=tmp_path)
        calls = len(server.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert calls == result["calls"] > 0
