"""Learning from use: traces to JSONL and EM re-estimation without labels (issue 14 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.engine.panner import GoldPanner
from gold_panning_integrations.engine.simulate import SimulatedReader
from gold_panning_integrations.profiles import DetectorProfile, RateCounts, load_profile
from gold_panning_integrations.traces import (
    Observations,
    TraceWriter,
    learn_profile,
    observations_from_traces,
    read_traces,
    trace_record,
)


def _panned(n: int = 6, *, seed: int = 0, rounds: int = 3):  # type: ignore[no-untyped-def]
    prof = load_profile("lost-in-the-middle")
    rng = np.random.default_rng(seed)
    reader = SimulatedReader(prof, relevant=lambda d: d == "GOLD", rng=rng)
    docs = [f"d{i}" for i in range(n)]
    docs[2] = "GOLD"
    return GoldPanner(reader, profile=prof, rounds=rounds, rng=rng).run("q", docs)


def test_trace_record_mirrors_the_result() -> None:
    res = _panned()
    rec = trace_record(res)
    assert rec["n"] == 6
    assert len(rec["rounds"]) == 3
    first = rec["rounds"][0]["prompts"][0]
    assert first["docs"] == list(res.rounds[0].windows[0])
    assert first["positions"] == list(res.rounds[0].positions[0])
    assert first["span"] == 6
    assert first["cited"] == [d for d in first["docs"] if d in res.rounds[0].cited]
    assert rec["posteriors"] == pytest.approx(res.posteriors.tolist(), abs=1e-6)


def test_trace_writer_is_an_on_result_callback(tmp_path: Path) -> None:
    path = tmp_path / "t" / "traces.jsonl"
    writer = TraceWriter(path)
    writer(_panned(seed=1), "the query", documents=["text never written"])
    writer(_panned(seed=2))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert "text never written" not in path.read_text()
    assert [t["n"] for t in read_traces(path)] == [6, 6]


def test_trace_writer_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        TraceWriter(tmp_path)


def test_read_traces_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    TraceWriter(path)(_panned())
    with path.open("a") as fh:
        fh.write('{"type": "trace", "version": 1, "n": "6"}\n{}\n')
    with pytest.raises(ValueError, match=r"t\.jsonl' line 2: field 'n' must be an integer"):
        read_traces(path)


def test_read_traces_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    TraceWriter(path)(_panned())
    with path.open("a") as fh:
        fh.write('{"type": "tra')
    assert len(read_traces(path)) == 1


def test_read_traces_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        read_traces(tmp_path)


def test_failed_prompts_carry_no_evidence() -> None:
    rec = {
        "type": "trace", "version": 1, "n": 2, "k": 1, "policy": "belief", "prior_log_odds": [0.0, 0.0],
        "posteriors": [0.5, 0.5],
        "rounds": [{"round": 1, "prompts": [{"docs": [0, 1], "positions": [0, 1], "span": 2, "cited": [], "failed": True}]}],
    }
    assert observations_from_traces([rec]).doc.size == 0


def _two_position_prior() -> DetectorProfile:
    counts = RateCounts(positions=[0, 1], gold_cited=[8, 8], gold_shown=[10, 10], distractor_cited=[2, 2], distractor_shown=[10, 10])
    return DetectorProfile(n_positions=2, tpr=[0.8, 0.8], fpr=[0.2, 0.2], grid_positions=[0, 1], counts=counts)


def test_one_em_iteration_by_hand() -> None:
    # One query, two documents, one round: doc 0 cited at position 0, doc 1 shown at
    # position 1 and not cited. E-step with the prior's rates 0.8/0.2 and prior log-odds 0:
    # doc 0 -> sigmoid(log 4) = 0.8, doc 1 -> sigmoid(-log 4) = 0.2.
    # M-step, blended with the prior counts (8/10 gold, 2/10 distractor at each position):
    # TPR0 = (8 + 0.8 + 0.5) / (10 + 0.8 + 1) = 9.3/11.8;  TPR1 = (8 + 0 + 0.5) / (10 + 0.2 + 1) = 8.5/11.2
    # FPR0 = (2 + 0.2 + 0.5) / (10 + 0.2 + 1) = 2.7/11.2;  FPR1 = (2 + 0 + 0.5) / (10 + 0.8 + 1) = 2.5/11.8
    obs = Observations(
        doc=np.array([0, 1]), depth=np.array([0.0, 1.0]), cited=np.array([True, False]),
        prior_log_odds=np.zeros(2), query=np.zeros(2, dtype=np.intp), final_posteriors=np.full(2, 0.5),
    )
    res = learn_profile(obs, _two_position_prior(), iterations=1)
    np.testing.assert_allclose(res.profile.tpr, [9.3 / 11.8, 8.5 / 11.2])
    np.testing.assert_allclose(res.profile.fpr, [2.7 / 11.2, 2.5 / 11.8])
    assert res.new_counts.gold_shown == pytest.approx([0.8, 0.2])
    assert res.profile.counts is not None
    assert res.profile.counts.gold_shown == pytest.approx([10.8, 10.2])


def test_one_relevant_per_query_normalises_the_soft_labels() -> None:
    # Same data, relevance="one": softmax of (log 4, -log 4) = (16/17, 1/17).
    obs = Observations(
        doc=np.array([0, 1]), depth=np.array([0.0, 1.0]), cited=np.array([True, False]),
        prior_log_odds=np.zeros(2), query=np.zeros(2, dtype=np.intp), final_posteriors=np.full(2, 0.5),
    )
    res = learn_profile(obs, _two_position_prior(), iterations=1, relevance="one")
    assert res.new_counts.gold_shown == pytest.approx([16 / 17, 1 / 17])


def test_learning_moves_a_wrong_profile_towards_the_truth() -> None:
    from gold_panning_integrations.calibration_sim import simulated_traces

    true = load_profile("smollm2-135m-kv")  # 20 positions
    start = load_profile("lost-in-the-middle")
    traces = simulated_traces(true, start, queries=300, n=20, rounds=8, seed=3)
    learned = learn_profile(traces, start).profile.resample(20)
    before = np.mean(np.abs(start.resample(20).tpr_array - true.tpr_array))
    after = np.mean(np.abs(learned.tpr_array - true.tpr_array))
    assert after < before / 2


def test_learn_profile_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="relevance must be 'independent' or 'one'"):
        learn_profile([], _two_position_prior(), relevance="two")  # type: ignore[arg-type]


def test_cli_from_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "traces.jsonl"
    writer = TraceWriter(path)
    for s in range(5):
        writer(_panned(seed=s))
    out = tmp_path / "learned.json"
    assert cli_main(["calibrate", "--from-traces", str(path), "--out", str(out)]) == 0
    prof = DetectorProfile.load(out)
    assert prof.extra["learned_from_traces"]["queries"] == 5
    assert "--from-traces" in prof.notes
    assert "learned from 5 traces" in capsys.readouterr().out


def test_cli_from_traces_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"type": "profile"}) + "\n")
    assert cli_main(["calibrate", "--from-traces", str(path), "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "line 1: not a trace object" in err
