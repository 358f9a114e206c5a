"""`bench compare` on test collections end to end, against the loopback fake server: a BEIR
folder with graded qrels and several relevant documents per query, TREC files with a
run file as the first stage, RAG JSONL, and the shipped fixture; full rankings, the
field's metrics checked against ir-measures on the run files written, GP's k, outputs,
checkpoints."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import ir_measures
import pytest
from compare_fakes import oracle_model
from ir_data import RUN, relevant_texts, write_beir, write_rag, write_trec
from openai_server import FakeOpenAIServer, status

from gold_panning_integrations.errors import CheckpointError
from gold_panning_integrations.evaluate import compare as C
from gold_panning_integrations.evaluate._instances import (
    CompareInstance,
    choose_gp_k,
    complete_ranking,
    query_k,
)
from gold_panning_integrations.ir.collection import fixture_path, load_beir, load_collection


def _args(base_url: str, *extra: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    C.register(ap.add_subparsers())
    return ap.parse_args(
        [
            "evaluate",
            "--reader",
            "openai",
            "--base-url",
            base_url,
            "--model",
            "m",
            "--mode",
            "cite",
            "--profile",
            "lost-in-the-middle",
            "--rounds",
            "3",
            "--json",
            *extra,
        ]
    )


def _run(capsys: pytest.CaptureFixture[str], args: argparse.Namespace) -> dict[str, Any]:
    assert C.main(args) == 0
    return json.loads(capsys.readouterr().out)


def _oracle() -> Any:
    good = relevant_texts()
    return oracle_model(lambda text: text in good)


def _beir_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels read with the csv module (independent of our reader)."""
    out: dict[str, dict[str, int]] = {}
    with path.open(newline="") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)
        for q, d, g in rows:
            out.setdefault(q, {})[d] = int(g)
    return out


def _ir_measures_mean(qrels: dict[str, dict[str, int]], run_file: Path, measure: Any) -> float:
    run = list(ir_measures.read_trec_run(str(run_file)))
    qids = {r.query_id for r in run}
    return float(ir_measures.calc_aggregate([measure], {q: qrels[q] for q in qids}, run)[measure])


# ------------------------------------------------------------------ BEIR, graded, several relevant
@pytest.fixture
def beir_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Path, Path]:
    root = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    with FakeOpenAIServer(default=_oracle()) as srv:
        res = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--data",
                str(root),
                "--depth",
                "5",
                "--methods",
                "base,gp-belief,llamaindex-rankgpt",
                "--out",
                str(out),
            ),
        )
    return res, root, out


def test_beir_run_scores_every_method_with_the_fields_metrics(
    beir_result: tuple[dict[str, Any], Path, Path],
) -> None:
    res, _, _ = beir_result
    d = res["methods"]["gp-belief"]
    assert {
        k
        for k in ("ndcg@10", "ndcg@10_ci95", "mrr@10", "mrr@10_ci95", "recall@10", "recall@10_ci95")
        if k in d
    } == {"ndcg@10", "ndcg@10_ci95", "mrr@10", "mrr@10_ci95", "recall@10", "recall@10_ci95"}


def test_several_relevant_documents_leave_top1_out(beir_result: tuple[dict[str, Any], Path, Path]) -> None:
    res, _, _ = beir_result
    assert (res["methods"]["base"]["top1"], res["methods"]["base"]["top3"]) == (None, None)


def test_gp_k_is_the_median_relevant_candidate_count_and_reported(
    beir_result: tuple[dict[str, Any], Path, Path],
) -> None:
    # BM25 at depth 5 finds relevant q1: d1, d2 (of 2); q2: d4, d5, d6 (of 4); q3: d7 (of 2):
    # median 2 (q1 and q3 pan with k = 1, one less than their candidates)
    res, _, _ = beir_result
    assert (res["gp_k"], res["gp_k_how"].split(" (")[0]) == (
        2,
        "2: median relevant documents per query among the first-stage candidates",
    )


def test_the_query_without_relevant_documents_is_left_out_and_named(
    beir_result: tuple[dict[str, Any], Path, Path],
) -> None:
    res, _, _ = beir_result
    assert (res["instances"], res["left_out"]) == (3, {"q4": "no document of grade > 0 in the qrels"})


def test_our_ndcg_equals_ir_measures_on_the_written_run_files(
    beir_result: tuple[dict[str, Any], Path, Path],
) -> None:
    res, root, out = beir_result
    qrels = _beir_qrels(root / "qrels" / "test.tsv")
    for m in ("base", "gp-belief"):
        theirs = _ir_measures_mean(qrels, out / "runs" / f"{m}.trec", ir_measures.nDCG @ 10)
        assert round(theirs, 4) == res["methods"][m]["ndcg@10"], m


def test_paired_wins_losses_ties_cover_every_query(beir_result: tuple[dict[str, Any], Path, Path]) -> None:
    res, _, _ = beir_result
    p = res["methods"]["gp-belief"]["vs_first_stage"]["ndcg@10"]
    assert p["wins"] + p["losses"] + p["ties"] == 3


def test_outputs_are_listed_in_the_summary(beir_result: tuple[dict[str, Any], Path, Path]) -> None:
    _, _, out = beir_result
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files"] == [
        "runs/base.trec",
        "runs/gp-belief.trec",
        "runs/llamaindex-rankgpt.trec",
        "probabilities/gp-belief.jsonl",
        "qrels.trec",
        "table.md",
        "summary.json",
    ]


def test_run_files_rank_every_candidate_once(beir_result: tuple[dict[str, Any], Path, Path]) -> None:
    _, _, out = beir_result
    lines = [line.split() for line in (out / "runs" / "gp-belief.trec").read_text().splitlines()]
    per_query: dict[str, list[str]] = {}
    for q, _, d, _, _, tag in lines:
        per_query.setdefault(q, []).append(d)
    assert {q: sorted(ds) for q, ds in per_query.items()} == {
        "q1": ["d1", "d2"],
        "q2": ["d4", "d5", "d6", "d8"],
        "q3": ["d7", "d8"],
    }


def test_markdown_output_has_the_paired_column(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with FakeOpenAIServer(default=_oracle()) as srv:
        args = _args(srv.base_url, "--task", "beir", "--data", str(root), "--methods", "base,gp-belief")
        args.json = False
        assert C.main(args) == 0
    out = capsys.readouterr().out
    assert "| nDCG@10 vs first stage: wins / losses / ties | mean Δ nDCG@10 [95% CI] |" in out
    assert "| first stage: BM25 (bm25s) | " in out


# ------------------------------------------------------------------ TREC with a run file
def _trec_args(base_url: str, p: dict[str, Path], *extra: str) -> argparse.Namespace:
    """base and gp-belief on the TREC files of :func:`write_trec`, its run file at depth 4."""
    return _args(
        base_url,
        "--task",
        "trec",
        "--topics",
        str(p["topics"]),
        "--qrels",
        str(p["qrels"]),
        "--corpus",
        str(p["corpus"]),
        "--run",
        str(p["run"]),
        "--depth",
        "4",
        "--methods",
        "base,gp-belief",
        *extra,
    )


def test_trec_run_file_is_the_first_stage_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = write_trec(tmp_path / "trec")
    out = tmp_path / "out"
    with FakeOpenAIServer(default=_oracle()) as srv:
        res = _run(capsys, _trec_args(srv.base_url, p, "--out", str(out)))
    base_run = {}
    for line in (out / "runs" / "base.trec").read_text().splitlines():
        q, _, d, *_ = line.split()
        base_run.setdefault(q, []).append(d)
    assert base_run == {q: RUN[q][:4] for q in ("q1", "q2", "q3")}
    assert res["first_stage"] == f"run: {p['run']}"


def test_trec_gp_lifts_the_buried_relevant_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the run puts q1's grade-2 document last of 4; an oracle reader lifts it
    p = write_trec(tmp_path / "trec")
    with FakeOpenAIServer(default=_oracle()) as srv:
        res = _run(capsys, _trec_args(srv.base_url, p, "--gp-k", "1"))
    assert res["methods"]["gp-belief"]["ndcg@10"] > res["methods"]["base"]["ndcg@10"]
    assert res["gp_k_how"] == "--gp-k 1"


def test_trec_ndcg_equals_ir_measures_on_the_written_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = write_trec(tmp_path / "trec")
    out = tmp_path / "out"
    with FakeOpenAIServer(default=_oracle()) as srv:
        res = _run(capsys, _trec_args(srv.base_url, p, "--out", str(out)))
    qrels_list = list(ir_measures.read_trec_qrels(str(p["qrels"])))
    qrels: dict[str, dict[str, int]] = {}
    for r in qrels_list:
        qrels.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    for m in ("base", "gp-belief"):
        assert (
            round(_ir_measures_mean(qrels, out / "runs" / f"{m}.trec", ir_measures.nDCG @ 10), 4)
            == res["methods"][m]["ndcg@10"]
        )


# ------------------------------------------------------------------ RAG JSONL
def test_rag_jsonl_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_rag(tmp_path / "rag.jsonl")
    good = relevant_texts() | {"Banana bread: Banana bread is a sweet loaf baked from mashed ripe bananas."}
    with FakeOpenAIServer(default=oracle_model(lambda t: t in good)) as srv:
        res = _run(
            capsys, _args(srv.base_url, "--task", "rag", "--data", str(path), "--methods", "base,gp-belief")
        )
    assert (res["instances"], list(res["left_out"]), res["first_stage"]) == (2, ["q3"], f"rag: {path}")


def test_rag_refuses_a_run_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="its passages are the first stage"):
        load_collection("rag", data=write_rag(tmp_path / "r.jsonl"), run=tmp_path / "run.txt")


# ------------------------------------------------------------------ the shipped fixture
def test_fixture_smoke_run_without_data(capsys: pytest.CaptureFixture[str]) -> None:
    c = load_beir()
    gold = {c.documents[d] for j in c.qrels.values() for d, g in j.items() if g > 0}
    with FakeOpenAIServer(default=oracle_model(lambda t: t in gold)) as srv:
        res = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--instances",
                "5",
                "--depth",
                "10",
                "--methods",
                "base,gp-belief",
            ),
        )
    d = res["methods"]["gp-belief"]
    assert (res["data"], res["instances"], d["top1"]) == ("fixture", 5, 1.0)


def test_fixture_ndcg_equals_ir_measures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = load_beir()
    gold = {c.documents[d] for j in c.qrels.values() for d, g in j.items() if g > 0}
    out = tmp_path / "out"
    with FakeOpenAIServer(default=oracle_model(lambda t: t in gold, wrong=True)) as srv:
        res = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--instances",
                "8",
                "--depth",
                "10",
                "--methods",
                "base,gp-belief",
                "--out",
                str(out),
            ),
        )
    qrels = _beir_qrels(fixture_path() / "qrels" / "test.tsv")
    for m in ("base", "gp-belief"):
        for measure, key in ((ir_measures.nDCG @ 10, "ndcg@10"), (ir_measures.RR @ 10, "mrr@10")):
            assert (
                round(_ir_measures_mean(qrels, out / "runs" / f"{m}.trec", measure), 4)
                == res["methods"][m][key]
            )


# ------------------------------------------------------------------ full rankings, failures, checkpoints
def test_complete_ranking_keeps_top_n_then_first_stage_order() -> None:
    assert complete_ranking([4, 2, 9, 2, 0], 6, top_n=2) == [4, 2, 0, 1, 3, 5]


def test_complete_ranking_of_nothing_is_the_first_stage() -> None:
    assert complete_ranking([], 4, top_n=3) == [0, 1, 2, 3]


def test_a_method_that_raised_keeps_the_first_stage_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    with FakeOpenAIServer(default=status(400, message="bad request")) as srv:
        res = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--data",
                str(root),
                "--methods",
                "base,llamaindex-rankgpt",
                "--out",
                str(out),
            ),
        )
    d = res["methods"]["llamaindex-rankgpt"]
    assert (d["exceptions"], d["ndcg@10"]) == (3, res["methods"]["base"]["ndcg@10"])
    assert (out / "runs" / "llamaindex-rankgpt.trec").read_text().replace("llamaindex-rankgpt", "base") == (
        out / "runs" / "base.trec"
    ).read_text()


def test_collection_checkpoint_resumes_without_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_beir(tmp_path / "beir")
    ck = str(tmp_path / "ck.jsonl")
    with FakeOpenAIServer(default=_oracle()) as srv:
        first = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--data",
                str(root),
                "--methods",
                "base,gp-belief",
                "--checkpoint",
                ck,
            ),
        )
        srv.clear()
        again = _run(
            capsys,
            _args(
                srv.base_url,
                "--task",
                "beir",
                "--data",
                str(root),
                "--methods",
                "base,gp-belief",
                "--checkpoint",
                ck,
            ),
        )
        assert srv.requests == []
    assert again["methods"] == first["methods"]


def test_a_checkpoint_row_made_on_other_documents_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    a = CompareInstance("q", ["x", "y"], (0,), qid="q1", doc_ids=("d1", "d2"))
    b = CompareInstance("q", ["x", "z"], (0,), qid="q1", doc_ids=("d1", "d3"))
    fn = C.base_method
    C.run_compare([a], {"base": fn}, checkpoint=ck, meta={})
    with pytest.raises(CheckpointError, match="holds a base row for instance 0 made on other documents"):
        C.run_compare([b], {"base": fn}, checkpoint=ck, meta={})


def test_a_format_one_checkpoint_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    ck.write_text(json.dumps({"type": "meta", "task": "kv", "version": "0.4.0"}) + "\n")
    with pytest.raises(CheckpointError, match="format: None in the file vs 2 now"):
        C.run_compare(
            [], {}, checkpoint=ck, meta={"task": "kv", "version": "0.4.0", "format": C.CHECKPOINT_FORMAT}
        )


def test_gp_k_flag_and_builtin_default() -> None:
    insts = [CompareInstance("q", ["a", "b", "c"], (0, 1))]
    assert (choose_gp_k(2, insts).how, choose_gp_k(None, insts).k) == ("--gp-k 2", 1)


def test_gp_k_at_least_the_candidates_is_refused(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "beir")
    with pytest.raises(ValueError, match="--gp-k 9 must be below the number of candidates"):
        C.main(_args("http://127.0.0.1:9/v1", "--task", "beir", "--data", str(root), "--gp-k", "9"))


def test_out_that_is_a_file_fails_before_any_call(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with FakeOpenAIServer(default=_oracle()) as srv:
        with pytest.raises(ValueError, match="--out .* is a file; pass a folder"):
            C.main(
                _args(
                    srv.base_url,
                    "--task",
                    "beir",
                    "--data",
                    str(write_beir(tmp_path / "b")),
                    "--out",
                    str(tmp_path / "f"),
                )
            )
        assert srv.requests == []


def test_a_query_with_few_candidates_pans_with_fewer_relevant() -> None:
    assert [query_k(3, n) for n in (1, 2, 3, 4, 10)] == [1, 1, 2, 3, 3]


def test_the_method_table_derives_the_method_lists() -> None:
    # one entry per panning method: the lists, labels and defaults follow from it
    assert (C.PANNING, C.DEFAULT_METHODS[:4], C.LABELS["gp-cost"]) == (
        ("psc", "gp-belief", "gp-cost", "gp-belief-flat", "gp-defaults"),
        ("base", "psc", "gp-belief", "gp-cost"),
        "GP, lowest-cost setting",
    )


@pytest.mark.parametrize("opt", ["--top-n", "--recall-k", "--relevance-level"])
def test_bad_scoring_options_fail_before_any_call(opt: str, tmp_path: Path) -> None:
    with FakeOpenAIServer(default=_oracle()) as srv:
        with pytest.raises(ValueError, match=f"{opt} must be >= 1, got 0"):
            C.main(_args(srv.base_url, "--task", "beir", "--data", str(write_beir(tmp_path / "b")), opt, "0"))
        assert srv.requests == []
