"""The example scripts run end to end (simulated reader, small corpus, no network)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/data/nq-open-oracle.jsonl.gz"
ARGS = ["--reader", "simulated", "--corpus-questions", "50", "--question-index", "3", "--data", str(DATA)]


def _need(*modules: str) -> None:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} not installed (pip install 'gold-panning-integrations[examples]')")
    if not DATA.exists():
        pytest.skip(f"example data not found: {DATA}")


def _run(script: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *ARGS],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _first_ranked_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith("#1 "))


def test_langchain_example() -> None:
    _need("langchain_community", "rank_bm25")
    out = _run("langchain_retriever.py")
    assert "Gold Panning: 3 calls" in out
    assert "gold=True" in _first_ranked_line(out)
    assert "RAG chain answer:" in out


def test_llama_index_example() -> None:
    _need("llama_index.retrievers.bm25")
    out = _run("llama_index_query_engine.py")
    assert "Gold Panning: 3 calls" in out
    assert "gold=True" in _first_ranked_line(out)
    assert "Query engine answer:" in out
    sources = next(line for line in out.splitlines() if line.startswith("sources:"))
    assert sources.startswith("sources: [('Health (gaming)'")
