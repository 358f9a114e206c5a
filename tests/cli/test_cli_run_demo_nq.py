"""``run --demo nq``: held-out NQ questions in BM25 order, panned as the integrations pan a
retriever's documents, with BM25's and panning's top-1/top-3 side by side.

The expected counts are derived here from the shipped sample (BM25 recomputed over its
passages) and from an engine run with the same reader, never typed in."""

from __future__ import annotations

import json

import bm25s  # noqa: F401 - the demo needs it (the test extra installs it)
import numpy as np
import pytest

from gold_panning_integrations.cli import main
from gold_panning_integrations.tasks import BM25, load_sample
from gold_panning_integrations.tasks.demo import DEMO_NQ_DOCS, DEMO_NQ_QUESTIONS, demo_nq_instances

SIMULATED = ["run", "--demo", "nq", "--reader", "simulated"]


def _bm25_gold_ranks() -> dict[str, int]:
    """Question id -> 1-based rank of the gold among the gold and its best distractors,
    by BM25 over every shipped passage, for the demo's questions."""
    sample = load_sample("nq")
    bm25 = BM25([p.content for p in sample.passages])
    by_id = {q.id: q for q in sample.split("test")}
    out = {}
    for inst in demo_nq_instances():
        q = by_id[inst.metadata["question_id"]]
        s = bm25.scores(q.question)
        candidates = [q.gold, *q.distractors[: DEMO_NQ_DOCS - 1]]
        out[q.id] = 1 + sum(float(s[j]) > float(s[q.gold]) for j in candidates if j != q.gold)
    return out


@pytest.fixture(scope="module")
def demo_json() -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*SIMULATED, "--json"]) == 0
    return json.loads(buf.getvalue())


def test_instances_are_held_out_questions_in_bm25_order() -> None:
    sample = load_sample("nq")
    test_ids = {q.id for q in sample.split("test")}
    instances = demo_nq_instances()
    assert len(instances) == DEMO_NQ_QUESTIONS
    assert len({i.metadata["question_id"] for i in instances}) == DEMO_NQ_QUESTIONS
    ranks = _bm25_gold_ranks()
    for inst in instances:
        assert inst.metadata["question_id"] in test_ids
        assert len(inst.documents) == DEMO_NQ_DOCS
        assert inst.gold[0] + 1 == ranks[inst.metadata["question_id"]]


def test_json_reports_bm25_hits_derived_from_the_data(demo_json: dict) -> None:
    ranks = _bm25_gold_ranks()
    rows = demo_json["questions"]
    assert [r["question_id"] for r in rows] == [i.metadata["question_id"] for i in demo_nq_instances()]
    for r in rows:
        rank = ranks[r["question_id"]]
        assert r["bm25"] == {"gold_rank": rank, "top1": rank == 1, "top3": rank <= 3}
    s = demo_json["summary"]
    assert s["questions"] == DEMO_NQ_QUESTIONS
    assert s["bm25_top1"] == sum(r == 1 for r in ranks.values())
    assert s["bm25_top3"] == sum(r <= 3 for r in ranks.values())


def test_panning_reads_bm25s_scores_and_matches_the_engine(demo_json: dict) -> None:
    """Same reader, profile rule, options and random streams through GoldPanner: the demo's panning
    counts are the engine's, with BM25's scores to the default prior (``"auto"``)."""
    from gold_panning_integrations import GoldPanner
    from gold_panning_integrations.profiles import load_profile
    from gold_panning_integrations.readers.simulated import LexicalSimulatedReader

    assert demo_json["options"]["retriever_prior"] == "auto"
    reader = LexicalSimulatedReader(
        load_profile("lost-in-the-middle"),
        rng=np.random.default_rng(0),
        recommended_profile="lost-in-the-middle",
    )
    panner = GoldPanner(reader, rng=0)  # no --seed: the demos run with DEMO_RUN_SEED (0), one stream
    top1 = top3 = calls = 0
    for inst, row in zip(demo_nq_instances(), demo_json["questions"]):
        scores = inst.metadata["scores"]
        assert scores == sorted(scores, reverse=True) and len(scores) == DEMO_NQ_DOCS  # BM25's, in its order
        result = panner.run(inst.question, inst.documents, scores=scores)
        ranking = [int(i) for i in result.ranking]
        g = inst.gold[0]
        assert row["panning"]["gold_rank"] == ranking.index(g) + 1
        assert [t["index"] for t in row["top"]] == ranking[:3]
        assert [t["posterior"] for t in row["top"]] == pytest.approx(
            [float(result.posteriors[i]) for i in ranking[:3]]
        )
        top1 += ranking[0] == g
        top3 += g in ranking[:3]
        calls += result.calls
    s = demo_json["summary"]
    assert (s["panning_top1"], s["panning_top3"], s["calls"]) == (top1, top3, calls)
    assert calls == DEMO_NQ_QUESTIONS * panner.config.rounds * panner.config.prompts_per_round


def test_text_report_has_a_line_per_method_and_the_summary(
    capsys: pytest.CaptureFixture[str], demo_json: dict
) -> None:
    assert main(SIMULATED) == 0
    out = capsys.readouterr().out
    s = demo_json["summary"]
    q = s["questions"]
    assert out.count("\n  BM25     top-1 ") == q
    assert out.count("\n  panning  top-1 ") == q
    assert (
        f"summary over {q} questions: BM25 top-1 {s['bm25_top1']}/{q}, top-3 {s['bm25_top3']}/{q}; "
        f"panning top-1 {s['panning_top1']}/{q}, top-3 {s['panning_top3']}/{q}; {s['calls']} calls, "
    ) in out
    assert "retriever_prior='auto'" in out


def test_a_setting_applies(demo_json: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.engine.config import SETTINGS

    assert main([*SIMULATED, "--json", "--setting", "lowest-latency"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = SETTINGS["lowest-latency"]
    assert out["options"]["rounds"] == expected["rounds"]
    assert out["summary"]["calls"] == DEMO_NQ_QUESTIONS * expected["rounds"] * expected["prompts_per_round"]


@pytest.mark.parametrize("extra", [["--question", "why?"], ["--plot", "x.png"]])
def test_options_for_one_question_are_refused(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SIMULATED, *extra]) == 2
    assert "--demo nq" in capsys.readouterr().err
