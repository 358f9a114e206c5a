"""``benchmarks.score_prior_fit``: the score prior's likelihood by temperature, by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.score_prior_fit import (
    first_gaps,
    heldout_report,
    labelled,
    log_likelihood,
    main,
    map_rows,
    rank_log_likelihood,
    softmax_none_auroc,
)
from gold_panning_integrations.engine.priors import ScoreMap


def test_likelihood_of_the_relevant_candidates_by_hand() -> None:
    # scores [2, 0]: std 1, so z = [2, 0]; the first is relevant. At temperature 1 the
    # softmax gives it e^2 / (e^2 + 1) = 0.880797; at 0.5, e^4 / (e^4 + 1) = 0.982014,
    # capped at 0.95 (no prior exceeds it).
    rows = labelled({"q": {"a": 1}}, {"q": ("a", "b")}, {"q": (2.0, 0.0)})
    assert len(rows) == 1
    np.testing.assert_allclose(rows[0][0], [2.0, 0.0])
    assert rows[0][1].tolist() == [True, False]
    assert log_likelihood(rows, 1.0) == pytest.approx(math.log(math.exp(2) / (math.exp(2) + 1)))
    assert log_likelihood(rows, 0.5) == pytest.approx(math.log(0.95))
    # the rank prior at n = 2: weights 0.8 * (1, 0.6) / 1.6 + 0.2 / 2 = (0.6, 0.4)
    assert rank_log_likelihood(rows) == pytest.approx(math.log(0.6))


def test_queries_without_a_relevant_candidate_or_with_equal_scores_are_left_out() -> None:
    qrels = {"q1": {"x": 1}, "q2": {"a": 1}, "q3": {"b": 2}}
    cands = {"q1": ("a", "b"), "q2": ("a", "b"), "q3": ("a", "b")}
    scores = {"q1": (3.0, 1.0), "q2": (1.0, 1.0), "q3": (3.0, 1.0)}
    rows = labelled(qrels, cands, scores)
    assert len(rows) == 1 and rows[0][1].tolist() == [False, True]
    assert labelled(qrels, cands, scores, level=3) == []


def test_first_minus_second_gap_by_stratum() -> None:
    # scores (3, 1, 1): std = sqrt(8/9) = 0.942809, gap 2 / 0.942809 = 2.121320
    qrels = {"f": {"a": 1}, "s": {"b": 1}, "n": {}}
    cands = {q: ("a", "b", "c") for q in qrels}
    scores = {q: (3.0, 1.0, 1.0) for q in qrels}
    gaps = first_gaps(qrels, cands, scores)
    assert {k: [round(g, 6) for g in v] for k, v in gaps.items()} == {
        "first": [2.12132],
        "slice": [2.12132],
        "none": [2.12132],
    }


def test_main_prints_the_fit_and_the_rank_prior(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels").mkdir()
    docs = {f"d{i}": f"passage {i}" for i in range(4)}
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items()),
        encoding="utf-8",
    )
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": q}) + "\n" for q in ("q1", "q2")), encoding="utf-8"
    )
    (tmp_path / "qrels" / "calibration.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td2\t1\n")
    run = tmp_path / "run.trec"
    run.write_text(
        "".join(
            f"{q} Q0 d{i} {i + 1} {s} t\n"
            for q, ss in (("q1", (9, 3, 2, 1)), ("q2", (4, 3.5, 3, 1)))
            for i, s in enumerate(ss)
        )
    )
    assert main([str(tmp_path), "--run", str(run), "--depth", "4"]) == 0
    out = capsys.readouterr().out
    assert "2 queries with a relevant candidate (split calibration)" in out
    assert "(ML)" in out and "| rank prior (defaults) |" in out
    assert "first " in out and "slice " in out
    assert "score map: too few queries to fit one" in out  # 2 queries, 20 needed


def test_the_score_maps_held_out_report_by_hand() -> None:
    # logit p = score - 2 (log_rank 0): q1 scores (3, 2) give p (0.7311, 0.5), p_none
    # 0.1345; q2 scores (1, 0) give (0.2689, 0.1192), p_none 0.6439; q2 has nothing
    # relevant, so the AUROC of p_none is 1. Prior mass: mean of 1.2311 and 0.3881.
    score_map = ScoreMap(score=1.0, log_rank=0.0, offset=-2.0, low=0.0, high=5.0)
    scores, labels = map_rows(
        {"q1": {"a": 1}}, {"q1": ("a", "b"), "q2": ("c", "d")}, {"q1": (3.0, 2.0), "q2": (1.0, 0.0)}
    )
    assert [y.tolist() for y in labels] == [[1.0, 0.0], [0.0, 0.0]]
    out = heldout_report(score_map, scores, labels)
    assert "2 of 2 queries on the map's scale" in out
    assert "p_none AUROC 1.000" in out
    assert "mean prior mass 0.810 against 0.500 relevant" in out


def test_the_softmax_prior_reads_the_shape_not_the_level() -> None:
    # Same mass, 0.75: a peaked query puts it on one candidate (p_none near 0.25), a flat
    # one spreads it (p_none (1 - 0.25)^3 = 0.42): the flat one reads as "nothing here",
    # whatever its level, so a flat emptied query is told apart (AUROC 1), a peaked one not (0).
    peaked, flat = np.array([10.0, 0.0, 0.0]), np.array([1.0, 1.0 - 1e-9, 1.0 - 2e-9])
    y_rel, y_none = np.array([1.0, 0.0, 0.0]), np.zeros(3)
    told = softmax_none_auroc([peaked, flat], [y_rel, y_none], temperature=0.5, mass=0.75)
    missed = softmax_none_auroc([peaked + 100.0, flat], [y_none, y_rel], temperature=0.5, mass=0.75)
    assert (told, missed) == (1.0, 0.0)
