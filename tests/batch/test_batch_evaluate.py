"""The run file ``gold-panning rerank`` writes is read by ir-measures and equals
``gold-panning evaluate``'s panning run (its ``gp-defaults`` method) on the same input with the
same seed: the same rankings, and the same probabilities (evaluate keeps 6 digits)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from compare_fakes import oracle_model
from ir_data import RUN, relevant_texts, write_beir
from openai_server import FakeOpenAIServer

from gold_panning_integrations.cli import main

ir_measures = pytest.importorskip("ir_measures")

COMMON = ["--reader", "openai", "--model", "m", "--mode", "cite", "--profile", "lost-in-the-middle"]


def _run_file(path: Path) -> dict[str, list[str]]:
    """Query -> documents best first, as ir-measures reads the run (sorted by score)."""
    scored: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for row in ir_measures.read_trec_run(str(path)):
        scored[row.query_id].append((row.score, row.doc_id))
    return {q: [d for _, d in sorted(rows, key=lambda x: -x[0])] for q, rows in scored.items()}


@pytest.mark.parametrize("seed", [1, 7])
def test_the_run_equals_evaluates_panning_run(tmp_path: Path, seed: int) -> None:
    root = write_beir(tmp_path / "beir")
    run = tmp_path / "run.txt"
    run.write_text(
        "".join(f"{q} Q0 {d} {r + 1} {20 - r} bm25\n" for q, ds in RUN.items() for r, d in enumerate(ds)),
        encoding="utf-8",
    )
    model = oracle_model(lambda text: text in relevant_texts())
    with FakeOpenAIServer(default=model) as srv:
        url = ["--base-url", srv.base_url]
        evaluate = [
            "evaluate",
            *COMMON,
            *url,
            "--task",
            "beir",
            "--data",
            str(root),
            "--run",
            str(run),
            "--n",
            "20",
            "--top-n",
            "20",
            "--gp-k",
            "1",
            "--methods",
            "gp-defaults",
            "--seed",
            str(seed),
            "--json",
            "--out",
            str(tmp_path / "evaluate"),
        ]
        assert main(evaluate) == 0
        rerank = [
            "rerank",
            *COMMON,
            *url,
            "--run",
            str(run),
            "--queries",
            str(root / "queries.jsonl"),
            "--corpus",
            str(root / "corpus.jsonl"),
            "--depth",
            "20",
            "--seed",
            str(seed),
            "--out",
            str(tmp_path / "rerank"),
        ]
        assert main(rerank) == 0
    theirs = _run_file(tmp_path / "evaluate" / "runs" / "gp-defaults.trec")
    ours = _run_file(tmp_path / "rerank" / "run.trec")
    # evaluate ranks the judged queries (q4 has nothing relevant: left out); rerank every ranked one
    assert set(theirs) == {"q1", "q2", "q3"} and set(ours) == {"q1", "q2", "q3", "q4"}
    assert {q: ours[q] for q in theirs} == theirs
    assert RUN["q1"][0] == "d3" and ours["q1"][0] in ("d1", "d2")  # a relevant passage moved up
    probs = {
        json.loads(line)["qid"]: json.loads(line)
        for line in (tmp_path / "evaluate" / "probabilities" / "gp-defaults.jsonl").read_text().splitlines()
    }
    for rec in map(json.loads, (tmp_path / "rerank" / "rerank.jsonl").read_text().splitlines()):
        if rec["qid"] in probs:
            by_id = {c["id"]: c["probability"] for c in rec["candidates"]}
            mine = [round(by_id[d], 6) for d in probs[rec["qid"]]["docs"]]
            assert mine == pytest.approx(probs[rec["qid"]]["probabilities"], abs=1e-6)
