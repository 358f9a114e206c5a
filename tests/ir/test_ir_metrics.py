"""The field's metrics (through ir-measures) pinned by hand, the intervals, the paired
differences, and run files that reproduce the numbers and are written atomically."""

from __future__ import annotations

import math
import os
from pathlib import Path

import ir_measures
import numpy as np
import pytest

from gold_panning_integrations.ir import runfile as RF
from gold_panning_integrations.ir.ranking_metrics import (
    bootstrap_interval,
    metric_names,
    paired_difference,
    per_query_metrics,
    run_scores,
    single_relevant,
)

QRELS = {"q1": {"a": 2, "b": 1, "c": 0, "z": 1}, "q2": {"x": 1}}


# ------------------------------------------------------------------ per query, by hand
def test_ndcg_at_10_with_graded_gains_by_hand() -> None:
    # q1 ranked b (1), c (0), a (2); z (1) judged but not retrieved.
    # DCG = 1/log2(2) + 0 + 2/log2(4) = 2; ideal a, b, z: 2 + 1/log2(3) + 1/log2(4) = 3.1309298
    got = per_query_metrics(QRELS, {"q1": ["b", "c", "a"], "q2": ["x"]})["q1"]["ndcg@10"]
    assert got == pytest.approx(2 / (2 + 1 / math.log2(3) + 0.5), abs=1e-9)


def test_mrr_recall_and_top_k_by_hand() -> None:
    # q1 ranked c (0), a (2), b (1): first relevant at rank 2; 2 of 3 relevant in the top 10
    m = per_query_metrics(QRELS, {"q1": ["c", "a", "b"], "q2": ["x"]})["q1"]
    assert (m["mrr@10"], m["recall@10"], m["top1"], m["top3"]) == (0.5, pytest.approx(2 / 3), 0.0, 1.0)


def test_relevance_level_two_counts_only_grade_two() -> None:
    # level 2: only a is relevant; ranked third
    m = per_query_metrics(QRELS, {"q1": ["b", "c", "a"], "q2": ["x"]}, relevance_level=2)["q1"]
    assert (m["mrr@10"], m["recall@10"]) == (pytest.approx(1 / 3), 1.0)


def test_recall_cutoff_is_respected() -> None:
    m = per_query_metrics(QRELS, {"q1": ["c", "a", "b"], "q2": ["x"]}, recall_k=2)["q1"]
    assert m["recall@2"] == pytest.approx(1 / 3)


def test_a_query_without_ranking_scores_zero() -> None:
    m = per_query_metrics(QRELS, {"q1": ["a"]})["q2"]
    assert set(m.values()) == {0.0}


def test_a_relevant_document_past_rank_ten_does_not_count() -> None:
    ranking = [f"n{i}" for i in range(10)] + ["x"]
    m = per_query_metrics({"q2": {"x": 1}}, {"q2": ranking})["q2"]
    assert (m["ndcg@10"], m["mrr@10"], m["recall@10"]) == (0.0, 0.0, 0.0)


def test_metric_names_follow_the_number_of_relevant_documents() -> None:
    assert (single_relevant(QRELS), metric_names(single=False)) == (False, ("ndcg@10", "mrr@10", "recall@10"))


def test_single_relevant_holds_for_one_per_query() -> None:
    assert single_relevant({"q": {"a": 1, "b": 0}, "r": {"c": 3}}) is True


# ------------------------------------------------------------------ intervals
def test_bootstrap_of_two_values_spans_them() -> None:
    # resampled means of [0, 1] are 0, 0.5, 1 with probability 1/4, 1/2, 1/4: the 2.5% and
    # 97.5% quantiles are 0 and 1
    assert bootstrap_interval([0.0, 1.0], rng=np.random.default_rng(0)) == (0.0, 1.0)


def test_bootstrap_of_a_constant_is_that_constant() -> None:
    assert bootstrap_interval([0.4] * 30, rng=np.random.default_rng(0)) == pytest.approx((0.4, 0.4))


def test_bootstrap_is_a_function_of_its_generator() -> None:
    x = np.linspace(0, 1, 37)
    assert bootstrap_interval(x, rng=np.random.default_rng(5)) == bootstrap_interval(
        x, rng=np.random.default_rng(5)
    )


def test_bootstrap_interval_of_a_mean_brackets_it() -> None:
    x = np.random.default_rng(1).random(50)
    lo, hi = bootstrap_interval(x, rng=np.random.default_rng(0))
    # the normal approximation: mean +- 1.96 * sd / sqrt(n), within a resampling error
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert (lo, hi) == (pytest.approx(x.mean() - half, abs=0.01), pytest.approx(x.mean() + half, abs=0.01))


def test_paired_difference_counts_wins_losses_and_ties() -> None:
    d = paired_difference([1.0, 0.5, 0.2, 0.0], [0.5, 0.5, 0.4, 0.0], rng=np.random.default_rng(0))
    assert (d["wins"], d["losses"], d["ties"], d["mean_diff"]) == (1, 1, 2, pytest.approx(0.075))


def test_paired_difference_needs_the_same_queries() -> None:
    with pytest.raises(ValueError, match="same queries"):
        paired_difference([1.0], [1.0, 0.0], rng=np.random.default_rng(0))


# ------------------------------------------------------------------ run files
def test_run_scores_decrease_strictly() -> None:
    assert run_scores(["a", "b", "c"]) == {"a": 3.0, "b": 2.0, "c": 1.0}


def test_run_text_is_trec_format() -> None:
    assert RF.run_text({"q1": ["b", "a"]}, tag="gp") == "q1 Q0 b 1 2 gp\nq1 Q0 a 2 1 gp\n"


def test_a_written_run_gives_ir_measures_our_numbers(tmp_path: Path) -> None:
    rankings = {"q1": ["b", "c", "a"], "q2": ["y", "x"]}
    ours = per_query_metrics(QRELS, rankings)
    RF.write_run(tmp_path / "r.trec", rankings, tag="m")
    RF.write_qrels(tmp_path / "q.trec", QRELS)
    theirs = {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc(
            [ir_measures.nDCG @ 10, ir_measures.RR @ 10],
            ir_measures.read_trec_qrels(str(tmp_path / "q.trec")),
            ir_measures.read_trec_run(str(tmp_path / "r.trec")),
        )
    }
    assert [round(theirs[(q, "nDCG@10")], 10) for q in rankings] == [
        round(ours[q]["ndcg@10"], 10) for q in rankings
    ]


def test_a_run_file_cannot_hold_an_id_with_spaces(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot hold the id 'a b'"):
        RF.write_run(tmp_path / "r.trec", {"q": ["a b"]}, tag="m")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.trec"
    path.write_text("old\n")

    def no_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="No space left"):
        RF.write_run(path, {"q1": ["a"]}, tag="m")
    assert (path.read_text(), sorted(p.name for p in tmp_path.iterdir())) == ("old\n", ["r.trec"])


def test_a_written_file_is_complete(tmp_path: Path) -> None:
    rankings = {f"q{i}": [f"d{j}" for j in range(20)] for i in range(50)}
    RF.write_run(tmp_path / "r.trec", rankings, tag="m")
    assert (tmp_path / "r.trec").read_text() == RF.run_text(rankings, tag="m")
