"""``benchmarks.score_map_replay``: kept traces replayed under a profile with a score map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.score_map_replay import auroc, main
from gold_panning_integrations import DetectorProfile

PROFILE = DetectorProfile(n_positions=3, tpr=[0.8, 0.5, 0.7], fpr=[0.05, 0.05, 0.05])


def _trace(relevant: list[int]) -> dict:
    """Three documents shown once in input order, a flat prior, a reply that cites nothing."""
    prompt = {"docs": [0, 1, 2], "positions": [0, 1, 2], "span": 3, "cited": [], "failed": False}
    return {
        "type": "trace",
        "version": 1,
        "n": 3,
        "k": 1,
        "policy": "belief",
        "prior_log_odds": [0.0, 0.0, 0.0],
        "posteriors": [0.5, 0.5, 0.5],
        "rounds": [{"round": 1, "prompts": [prompt]}],
        "relevant": relevant,
    }


def test_auroc_by_hand() -> None:
    import numpy as np

    # positives 0.9, 0.4 against negatives 0.4, 0.1: pairs won 1 + 1 + 0.5 + 1 of 4
    assert auroc(np.array([0.9, 0.4, 0.4, 0.1]), np.array([True, True, False, False])) == pytest.approx(0.875)


def test_the_score_level_tells_the_emptied_question_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two questions with the same silent reply and the same flat prior: before, their
    # p_none are equal (AUROC 0.5); after, the map reads q2's lower scores (top 1 against
    # 4) as fewer relevant candidates, so q2, the emptied one, gets the higher p_none.
    mapped = PROFILE.model_copy(
        update={"score_map": {"score": 1.0, "log_rank": 0.0, "offset": -3.0, "low": 0.0, "high": 5.0}}
    )
    before, after = PROFILE.save(tmp_path / "before.json"), mapped.save(tmp_path / "after.json")
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(_trace([0])) + "\n" + json.dumps(_trace([])) + "\n", encoding="utf-8")
    ck = tmp_path / "ck.jsonl"
    ck.write_text(
        "".join(json.dumps({"type": "row", "qid": q, "method": "gp-defaults"}) + "\n" for q in ("q1", "q2")),
        encoding="utf-8",
    )
    run = tmp_path / "run.trec"
    run.write_text(
        "".join(
            f"{q} Q0 {q}{d} {i + 1} {s} bm25\n"
            for q, scores in (("q1", (4, 2, 1)), ("q2", (1, 0.5, 0)))
            for i, (d, s) in enumerate(zip("abc", scores))
        ),
        encoding="utf-8",
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\tq1a\t1\nq2\tq2z\t1\n", encoding="utf-8")
    emptied = tmp_path / "emptied.txt"
    emptied.write_text("q2\n", encoding="utf-8")
    args = [
        "--set",
        str(traces),
        str(ck),
        "--run",
        str(run),
        "--qrels",
        str(qrels),
        "--emptied",
        str(emptied),
    ]
    assert main(["--before", str(before), "--after", str(after), "--draws", "50", *args]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| before", "| after"))]
    assert len(rows) == 2
    assert "| 2 (1 emptied) |" in rows[0]
    assert "| 0.500 [" in rows[0]
    assert "| 1.000 [" in rows[1]
