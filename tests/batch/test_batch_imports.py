"""``gold_panning_integrations.batch`` stands on its own: importing it (and its Ray module)
loads nothing of ``evaluate``, ``tasks``, the simulator or the plots, and the random streams
and ``k`` it shares with ``gold-panning evaluate`` come from one neutral module that both
import (:mod:`gold_panning_integrations._streams`)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from gold_panning_integrations.batch import Question, question_rng
from gold_panning_integrations.evaluate import _methods

ROOT = Path(__file__).resolve().parents[2]
BATCH = ROOT / "gold_panning_integrations" / "batch"
HEAVY = (".evaluate", ".tasks", ".engine.simulator", ".plots")


def test_importing_batch_loads_no_evaluate_tasks_simulator_or_plots() -> None:
    code = (
        "import sys\n"
        "import gold_panning_integrations.batch, gold_panning_integrations.batch.ray\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('gold_panning_integrations'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, timeout=120
    ).stdout.split()
    assert "gold_panning_integrations.batch" in out
    assert [m for m in out if any(m.startswith("gold_panning_integrations" + h) for h in HEAVY)] == []


def test_no_batch_module_imports_a_private_module_of_evaluate() -> None:
    found = []
    for path in sorted(BATCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and "evaluate" in (node.module or ""):
                found.append(f"{path.name}: {node.module}")
    assert found == []


def test_batch_and_evaluate_share_the_streams_and_k() -> None:
    from gold_panning_integrations import _streams
    from gold_panning_integrations.batch import question_k

    assert _methods.ALL_METHODS == _streams.METHODS == _methods.OURS + _methods.PEER_METHODS
    q = Question(7, "q7", "what?", ("a", "b"), ("A", "B"))
    # the stream evaluate gives gp-defaults, instance 7, seed 3: [seed, index, place of the method]
    expected = np.random.default_rng([3, 7, 5]).random(4)
    assert _methods.ALL_METHODS[5] == "gp-defaults"
    got = question_rng(q, 3)
    assert got is not None and np.array_equal(got.random(4), expected)
    assert question_rng(q, None) is None
    assert [question_k(3, n) for n in (1, 2, 3, 4, 10)] == [1, 1, 2, 3, 3]
    assert question_k(None, 5) is None
