"""``benchmarks.nq_strata`` (the strata of a split and the share-weighted difference) and
``benchmarks.nq_score_prior`` (the score prior swapped in), by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import benchmarks.nq_score_prior as nsp
import gold_panning_integrations.panning as panner_module
from benchmarks.nq_strata import main, stratum
from gold_panning_integrations import DetectorProfile
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, score_prior_probs
from gold_panning_integrations.readers.simulated import SimulatedReader


def test_strata_by_the_first_stage_alone() -> None:
    judged = {"g": 1, "h": 0}
    assert stratum(["g", "a"], judged) == "first"
    assert stratum(["a", "g"], judged) == "slice"
    assert stratum(["a", "h"], judged) == "none"
    assert stratum([], judged) == "none"


def _trec(path: Path, rankings: dict[str, list[str]], tag: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{q} Q0 {d} {i + 1} {len(r) - i} {tag}" for q, r in rankings.items() for i, d in enumerate(r)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_share_weighted_difference_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four questions: q1 and q2 in ``first``, q3 in ``slice``, q4 in ``none`` (shares 0.5,
    0.25, 0.25). Run: q1 (the method moves the gold from first to third: nDCG 1 -> 1/log2(4)
    = 0.5) and q3 (gold from second to first: 1/log2(3) -> 1). The split: 0.5 * (-0.5) +
    0.25 * (1 - 1/log2(3)) + 0.25 * 0 = -0.25 + 0.0923 = -0.1577. A peer run on q3 only."""
    first_stage = {
        "q1": ["g1", "a", "b"],
        "q2": ["g2", "a", "b"],
        "q3": ["a", "g3", "b"],
        "q4": ["a", "b", "c"],
    }
    _trec(tmp_path / "run.trec", first_stage, "bm25")
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tg1\t1\nq2\tg2\t1\nq3\tg3\t1\nq4\tz\t1\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    _trec(out / "runs" / "base.trec", {"q1": first_stage["q1"], "q3": first_stage["q3"]}, "base")
    _trec(out / "runs" / "gp-defaults.trec", {"q1": ["a", "b", "g1"], "q3": ["g3", "a", "b"]}, "gp")
    rows = [{"qid": "q1", "docs": ["g1", "a", "b"], "probabilities": [0.1, 0.7, 0.2], "relevant": ["g1"]}]
    (out / "probabilities").mkdir()
    (out / "probabilities" / "gp-defaults.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")

    _trec(out / "runs" / "peer.trec", {"q3": first_stage["q3"]}, "peer")
    args = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.tsv"), "--depth", "3"]
    assert main([*args, str(out), "--peers", "peer"]) == 0
    text = capsys.readouterr().out
    expected = 0.5 * -0.5 + 0.25 * (1 - 1 / math.log2(3))
    assert f"nDCG@10 difference {expected:+.4f}" in text
    assert "| first | 0.500 | 1 | -0.500" in text and "| slice | 0.250 | 1 | +0.369" in text
    assert "| none | 0.250 | 0 | - |" in text
    assert "| q1 | first | loss | 0.70 | 0.10 |" in text and "| q3 | slice | win | - | - |" in text
    # the slice's one question: the peer keeps the first stage's order (MRR 1/2), panning 1
    assert "1 questions of the 'slice' stratum ran by every method" in text
    assert "| peer | 0.631 | 0.500 [0.50, 0.50] | +0.500 [+0.50, +0.50] (1 / 0 / 0) |" in text


def test_a_checkpoint_stands_for_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same q3 as above from checkpoint rows: ranking indices into the run's candidates
    ``a, g3, b``; panning's (1, 0, 2) puts g3 first, a win at probability 0.9."""
    _trec(tmp_path / "run.trec", {"q3": ["a", "g3", "b"]}, "bm25")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq3\tg3\t1\n", encoding="utf-8")
    rows = [
        {"type": "meta"},
        {"type": "row", "qid": "q3", "method": "base", "ranking": [0, 1, 2], "error": None, "scores": None},
        {
            "type": "row",
            "qid": "q3",
            "method": "gp-defaults",
            "ranking": [1, 0, 2],
            "error": None,
            "scores": [0.05, 0.9, 0.05],
        },
    ]
    ck = tmp_path / "ck.jsonl"
    ck.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = [
        "--run",
        str(tmp_path / "run.trec"),
        "--qrels",
        str(tmp_path / "qrels.tsv"),
        "--depth",
        "3",
        str(ck),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert f"| slice | 1.000 | 1 | {1 - 1 / math.log2(3):+.3f}" in text
    assert "| q3 | slice | win | 0.90 | 0.05 |" in text
    assert "share-weighted" in text  # every question of this split is in the slice


def test_no_estimate_without_a_stratum_that_can_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the slice was run, and a fifth of the split has its first document right: the
    split's difference is not estimated from the slice alone."""
    _trec(tmp_path / "run.trec", {"q1": ["g1", "a"], "q2": ["a", "g2"]}, "bm25")
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tg1\t1\nq2\tg2\t1\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    _trec(out / "runs" / "base.trec", {"q2": ["a", "g2"]}, "base")
    _trec(out / "runs" / "gp-defaults.trec", {"q2": ["g2", "a"]}, "gp")
    assert (
        main(
            [
                "--run",
                str(tmp_path / "run.trec"),
                "--qrels",
                str(tmp_path / "qrels.tsv"),
                "--depth",
                "2",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "the split: not estimated (no question run in the first stratum)" in text
    assert "share-weighted" not in text


def test_score_prior_script_reads_scores_and_swaps_the_panner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchmarks.nq_score_prior``: the scores of each question's top candidates, best
    first, and a panner whose prior is the engine's score prior of those scores (scores 10,
    9.9, 0: the first two start nearly level, where the rank prior would not)."""
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "who?"}) + "\n", encoding="utf-8"
    )
    _trec(tmp_path / "run.trec", {"q1": ["d1", "d2", "d3"]}, "bm25")
    lines = (
        (tmp_path / "run.trec")
        .read_text(encoding="utf-8")
        .replace(" 3 bm25", " 10 bm25")
        .replace(" 2 bm25", " 9.9 bm25")
    )
    (tmp_path / "run.trec").write_text(lines.replace(" 1 bm25", " 0 bm25"), encoding="utf-8")
    assert nsp.scores_by_question(tmp_path, tmp_path / "run.trec", 3) == {"who?": [10.0, 9.9, 0.0]}

    seen = {}

    def fake_cli(argv: list[str]) -> int:
        profile = DetectorProfile.bundled("lost-in-the-middle")
        reader = SimulatedReader(profile, set(), rng=0)
        res = panner_module.GoldPanner(reader, profile=profile, k=1, rounds=1).run(
            "who?", ["a", "b", "c"], prior_probs=[0.9, 0.05, 0.05]
        )
        seen["prior"] = res.prior_log_odds
        return 0

    monkeypatch.setattr(nsp, "cli_main", fake_cli)
    assert (
        nsp.main(["evaluate", "--data", str(tmp_path), "--run", str(tmp_path / "run.trec"), "--n", "3"]) == 0
    )
    s = np.array([10.0, 9.9, 0.0])
    # at the default prior_temperature, sharing out the default rank map's expected count
    # over the 3 candidates (0.20098 + 0.11171 + 0.07736 = 0.39005; the profile has no rank map)
    mass = DEFAULT_RANK_MAP.mass(3)
    assert mass == pytest.approx(0.39005, abs=1e-5)
    p = score_prior_probs(s / s.std(), k=mass, temperature=0.5)
    np.testing.assert_allclose(seen["prior"], np.log(p / (1 - p)), rtol=1e-6)
    assert panner_module.GoldPanner is nsp.GoldPanner  # put back


def test_against_another_run_of_the_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run A puts q3's gold second (as BM25 did), run B first: A against B on the slice is
    1/log2(3) - 1 = -0.369 in nDCG@10 and 1/2 - 1 = -0.5 in MRR@10."""
    _trec(tmp_path / "run.trec", {"q3": ["a", "g3", "b"]}, "bm25")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq3\tg3\t1\n", encoding="utf-8")
    for name, order in (("A", ["a", "g3", "b"]), ("B", ["g3", "a", "b"])):
        _trec(tmp_path / name / "runs" / "gp-defaults.trec", {"q3": order}, "gp")
    args = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.tsv"), "--depth", "3"]
    assert main([*args, str(tmp_path / "A"), "--against", str(tmp_path / "B")]) == 0
    text = capsys.readouterr().out
    assert "1 run (gp-defaults against gp-defaults of " in text
    assert f"| slice | 1.000 | 1 | {1 / math.log2(3) - 1:+.3f}" in text and "| 0 / 1 / 0 | -0.500 |" in text


def test_score_prior_script_passes_engine_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--engine-option self_citing=0.5`` reaches the swapped panner and not ``evaluate``'s
    own arguments; a malformed one is refused with the form to use."""
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "who?"}) + "\n", encoding="utf-8"
    )
    _trec(tmp_path / "run.trec", {"q1": ["d1", "d2", "d3"]}, "bm25")
    seen: dict[str, object] = {}

    def fake_cli(argv: list[str]) -> int:
        profile = DetectorProfile.bundled("lost-in-the-middle")
        seen["argv"] = list(argv)
        seen["self_citing"] = panner_module.GoldPanner(
            SimulatedReader(profile, set(), rng=0), profile=profile
        ).self_citing
        return 0

    monkeypatch.setattr(nsp, "cli_main", fake_cli)
    argv = ["evaluate", "--data", str(tmp_path), "--run", str(tmp_path / "run.trec"), "--n", "3"]
    assert nsp.main([*argv, "--engine-option", "self_citing=0.5"]) == 0
    assert seen["self_citing"] == 0.5
    assert seen["argv"] == argv
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        nsp.main([*argv, "--engine-option", "self_citing"])
