"""``benchmarks.replay_options`` (labelled traces replayed with other options), by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.replay_options import main, option_set, replay, strata_differences, stratum
from gold_panning_integrations import DetectorProfile
from gold_panning_integrations.engine.config import PAPER_UPDATE

PROFILE = DetectorProfile(n_positions=3, tpr=[0.8, 0.5, 0.7], fpr=[0.05, 0.05, 0.05])


def _trace(relevant: list[int], cited: list[int], prior: list[float] | None = None) -> dict:
    """Three documents shown once each in input order; ``cited`` credited."""
    return {
        "type": "trace",
        "version": 1,
        "n": 3,
        "k": 1,
        "policy": "belief",
        "prior_log_odds": prior if prior is not None else [0.0, 0.0, 0.0],
        "posteriors": [0.5, 0.5, 0.5],
        "rounds": [
            {
                "round": 1,
                "prompts": [
                    {"docs": [0, 1, 2], "positions": [0, 1, 2], "span": 3, "cited": cited, "failed": False}
                ],
            }
        ],
        "relevant": relevant,
    }


def test_strata_and_option_sets() -> None:
    assert stratum([0, 2]) == "first"
    assert stratum([2]) == "slice"
    assert stratum([]) == "none"
    assert option_set("self_citing=0.5, empty_prompts=skip") == {"self_citing": 0.5, "empty_prompts": "skip"}
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        option_set("self_citing")


def test_differences_from_the_first_stage_by_hand() -> None:
    """A ``slice`` trace whose only citation is its relevant second document: replayed, that
    document comes first (MRR 1/2 -> 1: +0.5; nDCG 1/log2(3) -> 1: +0.3691). A ``first``
    trace whose first document is the one cited keeps its order (0). A ``none`` trace counts
    0 whatever the order."""
    replayed = replay([_trace([1], [1]), _trace([0], [0]), _trace([], [2])], PROFILE, {})
    assert [int(np.argmax(lo)) for lo, _ in replayed] == [1, 0, 2]
    d = strata_differences(replayed)
    assert d["slice"][0] == 1 and d["slice"][1] == pytest.approx(0.5)
    assert d["slice"][2] == pytest.approx(1 - 1 / math.log2(3), abs=1e-4)
    assert d["first"] == (1, 0.0, 0.0)
    assert d["none"] == (1, 0.0, 0.0)


def test_an_option_changes_the_replay_not_the_trace() -> None:
    """The paper's update (every extension off): one citation at TPR 0.8 / FPR 0.05 lifts
    the document by log(16) = 2.773. The same with the default mixture's rates (a = 0.25 /
    2, b = 0.3): log((0.7 * 16 + 0.3) / (0.125 * 16 + 0.875)) = 1.387."""
    trace = _trace([0], [0])
    paper = replay([trace], PROFILE, PAPER_UPDATE)[0][0]
    mixed = replay([trace], PROFILE, {**PAPER_UPDATE, "false_leads": 0.25, "blind_rate": 0.3})[0][0]
    assert paper[0] == pytest.approx(math.log(16), abs=1e-6)
    assert mixed[0] == pytest.approx(math.log((0.7 * 16 + 0.3) / (0.125 * 16 + 0.875)), abs=1e-6)
    assert trace["prior_log_odds"] == [0.0, 0.0, 0.0]


def test_rescore_puts_the_score_prior_in_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Scores 2, 1, 0 (standard deviation sqrt(2/3)): standardised 2.449, 1.225, 0, at the
    default temperature 0.5 a softmax of 4.899, 2.449, 0 gives 0.9143, 0.0789, 0.0068,
    log-odds 2.367, -2.457, -4.983. The trace is matched to the checkpoint's panning row by
    order."""
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(_trace([0], [0])) + "\n", encoding="utf-8")
    ck = tmp_path / "ck.jsonl"
    rows = [
        {"type": "meta"},
        {"type": "row", "qid": "q1", "method": "base"},
        {"type": "row", "qid": "q1", "method": "gp-defaults"},
    ]
    ck.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 2 bm25\nq1 Q0 b 2 1 bm25\nq1 Q0 c 3 0 bm25\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["rescore", str(traces), "--checkpoint", str(ck), "--run", str(run), "--out", str(out)]) == 0
    prior = json.loads(out.read_text(encoding="utf-8"))["prior_log_odds"]
    assert prior == pytest.approx([2.367, -2.457, -4.983], abs=2e-3)
    assert "1 traces with the score prior" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "expected", "said"),
    [
        # temperature 1: a softmax of 2.449, 1.225, 0 gives 0.7245, 0.2129, 0.0626
        (["--prior-temperature", "1"], [0.967, -1.308, -2.707], "score prior (temperature 1)"),
        # rank prior, 3 documents: 0.6 ** (0, 1, 2) / 1.96 mixed 0.8 / 0.2 with 1/3 gives
        # 0.4748, 0.3116, 0.2136
        (["--retriever-prior", "rank"], [-0.101, -0.793, -1.303], "rank prior"),
    ],
)
def test_rescore_writes_the_prior_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: list[float], said: str
) -> None:
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(_trace([0], [0])) + "\n", encoding="utf-8")
    ck = tmp_path / "ck.jsonl"
    ck.write_text(json.dumps({"type": "row", "qid": "q1", "method": "gp-defaults"}) + "\n", encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 2 bm25\nq1 Q0 b 2 1 bm25\nq1 Q0 c 3 0 bm25\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert (
        main(["rescore", str(traces), "--checkpoint", str(ck), "--run", str(run), "--out", str(out), *extra])
        == 0
    )
    assert json.loads(out.read_text(encoding="utf-8"))["prior_log_odds"] == pytest.approx(expected, abs=2e-3)
    assert said in capsys.readouterr().out


def test_rescore_refuses_a_checkpoint_of_another_run(tmp_path: Path) -> None:
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(_trace([0], [0])) + "\n", encoding="utf-8")
    ck = tmp_path / "ck.jsonl"
    ck.write_text(json.dumps({"type": "meta"}) + "\n", encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 2 bm25\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="1 traces but 0 gp-defaults rows"):
        main(
            ["rescore", str(traces), "--checkpoint", str(ck), "--run", str(run), "--out", str(tmp_path / "o")]
        )


def test_compare_prints_a_row_per_option_set_and_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cal = tmp_path / "cal.jsonl"
    cal.write_text(
        "\n".join(json.dumps(t) for t in (_trace([1], [1]), _trace([0], [0]), _trace([], [2]))) + "\n"
    )
    profile = tmp_path / "p.json"
    PROFILE.save(profile)
    argv = [
        "compare",
        "--profile",
        str(profile),
        "--calibration",
        str(cal),
        "--test",
        str(cal),
        "--set",
        "self_citing=0.5",
    ]
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[:3] for line in lines] == [
        ["| defaults", "calibration", "1 / 1 / 1"],
        ["| defaults", "test", "1 / 1 / 1"],
        ["| self_citing=0.5", "calibration", "1 / 1 / 1"],
        ["| self_citing=0.5", "test", "1 / 1 / 1"],
    ]
    assert "+0.000, +0.500" in lines[0]


@pytest.mark.parametrize("name", ["retriever_prior=rank", "prior_temperature=0.7"])
def test_compare_refuses_a_prior_option_it_would_ignore(name: str) -> None:
    """The replay reads each trace's stored prior, so a prior option would print the
    defaults' row under another name."""
    with pytest.raises(SystemExit, match="rescore --retriever-prior/--prior-temperature"):
        option_set(name)


def test_rescore_writes_a_profiles_score_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # logit p = 1 * score + 0 * log(1 + rank) - 1: scores 2, 1, 0 give log-odds 1, 0, -1
    # (three documents: fewer than the softmax needs, so the map's own probabilities).
    profile = PROFILE.model_copy(
        update={"score_map": {"score": 1.0, "log_rank": 0.0, "offset": -1.0, "low": 0.0, "high": 5.0}}
    )
    path = profile.save(tmp_path / "mapped.json")
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(_trace([0], [0])) + "\n", encoding="utf-8")
    ck = tmp_path / "ck.jsonl"
    ck.write_text(json.dumps({"type": "row", "qid": "q1", "method": "gp-defaults"}) + "\n", encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a 1 2 bm25\nq1 Q0 b 2 1 bm25\nq1 Q0 c 3 0 bm25\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    args = ["rescore", str(traces), "--checkpoint", str(ck), "--run", str(run), "--out", str(out)]
    assert main([*args, "--score-map", str(path)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["prior_log_odds"] == pytest.approx(
        [1.0, 0.0, -1.0], abs=1e-6
    )
    assert "score map of" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="has no score_map"):
        main([*args, "--score-map", str(PROFILE.save(tmp_path / "plain.json"))])
