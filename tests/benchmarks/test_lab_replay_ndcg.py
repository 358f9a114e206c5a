"""benchmarks.replay_ndcg: binary nDCG@10 by hand, and the command on kept traces."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.replay_ndcg import main, ndcg10

TRACES = Path(__file__).parents[2] / "docs/runs/qwen-nq-calibration-2026-11-28/qwen-cal-auto-traces.jsonl"


def test_ndcg10_by_hand() -> None:
    assert ndcg10([0, 1, 2], {0}) == 1.0
    assert ndcg10([0, 1, 2], {1}) == pytest.approx(1 / math.log2(3))  # 0.631
    # Two relevant at ranks 1 and 3: (1 + 1/log2(4)) / (1 + 1/log2(3)) = 1.5 / 1.6309.
    assert ndcg10([5, 0, 7], {5, 7}) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg10(list(range(12)), {11}) == 0.0  # below the cut


def test_the_command_scores_the_retriever_and_the_replay(capsys: pytest.CaptureFixture[str]) -> None:
    main([str(TRACES), "qwen2.5-coder-0.5b-nq"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "questions with a relevant candidate: 14"  # 14 of the 20 have one (labels)
    assert out[1].startswith("nDCG@10: retriever ") and "replayed - retriever" in out[1]
