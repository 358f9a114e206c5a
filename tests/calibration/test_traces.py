"""Learning from use: traces to JSONL and EM re-estimation without labels (issue 14 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gold_panning_integrations.calibration.traces import (
    Observations,
    TraceWriter,
    learn_profile,
    observations_from_traces,
    read_traces,
    trace_record,
)
from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.engine.simulator import SimulatedReader
from gold_panning_integrations.panning import GoldPanner
from gold_panning_integrations.profiles import DetectorProfile, RateCounts, load_profile


def _panned(n: int = 6, *, seed: int = 0, rounds: int = 3):  # type: ignore[no-untyped-def]
    prof = load_profile("lost-in-the-middle")
    rng = np.random.default_rng(seed)
    reader = SimulatedReader(prof, relevant=lambda d: d == "GOLD", rng=rng)
    docs = [f"d{i}" for i in range(n)]
    docs[2] = "GOLD"
    return GoldPanner(reader, profile=prof, rounds=rounds, retriever_prior="none", rng=rng).run("q", docs)


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
        "type": "trace",
        "version": 1,
        "n": 2,
        "k": 1,
        "policy": "belief",
        "prior_log_odds": [0.0, 0.0],
        "posteriors": [0.5, 0.5],
        "rounds": [
            {
                "round": 1,
                "prompts": [{"docs": [0, 1], "positions": [0, 1], "span": 2, "cited": [], "failed": True}],
            }
        ],
    }
    assert observations_from_traces([rec]).doc.size == 0


def _two_position_prior() -> DetectorProfile:
    counts = RateCounts(
        positions=[0, 1],
        gold_cited=[8, 8],
        gold_shown=[10, 10],
        distractor_cited=[2, 2],
        distractor_shown=[10, 10],
    )
    return DetectorProfile(
        n_positions=2, tpr=[0.8, 0.8], fpr=[0.2, 0.2], grid_positions=[0, 1], counts=counts
    )


def test_one_em_iteration_by_hand() -> None:
    # One query, two documents, one round: doc 0 cited at position 0, doc 1 shown at
    # position 1 and not cited. E-step with the prior's rates 0.8/0.2 and prior log-odds 0:
    # doc 0 -> sigmoid(log 4) = 0.8, doc 1 -> sigmoid(-log 4) = 0.2.
    # M-step, blended with the prior counts (8/10 gold, 2/10 distractor at each position):
    # TPR0 = (8 + 0.8 + 0.5) / (10 + 0.8 + 1) = 9.3/11.8;  TPR1 = (8 + 0 + 0.5) / (10 + 0.2 + 1) = 8.5/11.2
    # FPR0 = (2 + 0.2 + 0.5) / (10 + 0.2 + 1) = 2.7/11.2;  FPR1 = (2 + 0 + 0.5) / (10 + 0.8 + 1) = 2.5/11.8
    obs = Observations(
        doc=np.array([0, 1]),
        depth=np.array([0.0, 1.0]),
        cited=np.array([True, False]),
        prior_log_odds=np.zeros(2),
        query=np.zeros(2, dtype=np.intp),
        final_posteriors=np.full(2, 0.5),
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
        doc=np.array([0, 1]),
        depth=np.array([0.0, 1.0]),
        cited=np.array([True, False]),
        prior_log_odds=np.zeros(2),
        query=np.zeros(2, dtype=np.intp),
        final_posteriors=np.full(2, 0.5),
    )
    res = learn_profile(obs, _two_position_prior(), iterations=1, relevance="one")
    assert res.new_counts.gold_shown == pytest.approx([16 / 17, 1 / 17])


def test_learning_moves_a_wrong_profile_towards_the_truth() -> None:
    from benchmarks.calibration_sim import simulated_traces

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


def test_cli_from_traces_without_labels_refuses_too_few_and_says_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.calibration.unlabelled import MIN_UNLABELLED_QUERIES

    path = tmp_path / "traces.jsonl"
    writer = TraceWriter(path)
    for s in range(5):
        writer(_panned(seed=s))
    out = tmp_path / "learned.json"
    assert cli_main(["calibrate", "--from-traces", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "without labels" in captured.out
    assert f"at least {MIN_UNLABELLED_QUERIES} queries" in captured.err
    assert f"Trace {MIN_UNLABELLED_QUERIES - 5} more" in captured.err
    assert not out.exists()


def test_cli_from_traces_without_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.calibration.unlabelled import MIN_UNLABELLED_QUERIES

    path = tmp_path / "traces.jsonl"
    writer = TraceWriter(path)
    for s in range(MIN_UNLABELLED_QUERIES):
        writer(_panned(seed=s))
    out = tmp_path / "learned.json"
    assert cli_main(["calibrate", "--from-traces", str(path), "--out", str(out)]) == 0
    prof = DetectorProfile.load(out)
    assert prof.extra["learned_without_labels"]["queries"] == MIN_UNLABELLED_QUERIES
    assert "--from-traces" in prof.notes and prof.rank_map is not None
    printed = capsys.readouterr().out
    assert "no trace carries 'relevant' labels" in printed and "±" in printed
    assert f"learned from {MIN_UNLABELLED_QUERIES} traced queries" in printed


def test_cli_from_traces_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"type": "profile"}) + "\n")
    assert cli_main(["calibrate", "--from-traces", str(path), "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "line 1: not a trace object" in err


# ----------------------------------------------------------------- labelled traces
def test_trace_record_and_writer_carry_labels(tmp_path: Path) -> None:
    res = _panned()
    assert "relevant" not in trace_record(res)
    assert trace_record(res, relevant=[2, 2])["relevant"] == [2]
    with pytest.raises(ValueError, match=r"relevant must hold document indices in 0\.\.5, got 6"):
        trace_record(res, relevant=[6])
    with pytest.raises(ValueError, match="relevant must be document indices"):
        trace_record(res, relevant="2")  # type: ignore[arg-type]
    path = tmp_path / "labelled.jsonl"
    TraceWriter(path)(res, "the query", relevant=[2])
    (t,) = read_traces(path)
    assert t["relevant"] == [2]
    np.testing.assert_array_equal(observations_from_traces([t]).labels, [0, 0, 1, 0, 0, 0])
    assert np.isnan(observations_from_traces([trace_record(res)]).labels).all()


@pytest.mark.parametrize("bad", [[9], [1, 1], ["1"], [True], 3])
def test_read_traces_refuses_bad_labels(tmp_path: Path, bad: object) -> None:
    rec = trace_record(_panned())
    rec["relevant"] = bad
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(
        ValueError, match="line 1: field 'relevant' must be a list of distinct document indices"
    ):
        read_traces(path)


def test_one_labelled_em_iteration_by_hand() -> None:
    # The data of test_one_em_iteration_by_hand, now labelled: doc 0 relevant, doc 1 not.
    # The mixture starts at the defaults b = 0.1 and a = min(0.25 / 1, 0.5) = 0.25 (one
    # irrelevant document per query). E-step, P(reads as relevant):
    #   doc 0 (relevant, E = log 4):    0.9 * 4 / (0.9 * 4 + 0.1) = 3.6 / 3.7
    #   doc 1 (irrelevant, E = -log 4): 0.25 / 4 / (0.25 / 4 + 0.75) = 1 / 13
    # Rates with 2 pseudo-documents at the defaults:
    #   b = ((1 - 3.6/3.7) + 2 * 0.1) / (1 + 2) = 0.075676...
    #   a = (1/13 + 2 * 0.25) / (1 + 2) = 0.192308...  -> false_leads = a * 1
    # M-step as before with q = (3.6/3.7, 1/13).
    obs = Observations(
        doc=np.array([0, 1]),
        depth=np.array([0.0, 1.0]),
        cited=np.array([True, False]),
        prior_log_odds=np.zeros(2),
        query=np.zeros(2, dtype=np.intp),
        final_posteriors=np.full(2, 0.5),
        label=np.array([1.0, 0.0]),
    )
    res = learn_profile(obs, _two_position_prior(), iterations=1)
    q0, q1 = 3.6 / 3.7, 1 / 13
    assert res.mixture is not None
    assert res.mixture.blind_rate == pytest.approx(0.0757, abs=1e-4)
    assert res.mixture.false_lead_rate == pytest.approx((q1 + 0.5) / 3)
    assert res.mixture.false_leads == pytest.approx(0.1923, abs=1e-4)
    assert (res.mixture.relevant, res.mixture.irrelevant, res.mixture.queries) == (1, 1, 1)
    np.testing.assert_allclose(res.profile.tpr, [(8 + q0 + 0.5) / (10 + q0 + 1), (8 + 0.5) / (10 + q1 + 1)])
    np.testing.assert_allclose(
        res.profile.fpr, [(2 + (1 - q0) + 0.5) / (10 + (1 - q0) + 1), 2.5 / (10 + (1 - q1) + 1)]
    )
    assert res.profile.blind_rate == res.mixture.blind_rate
    assert res.profile.false_leads == res.mixture.false_leads


def _mixture_traces(blind: float, leads: float, queries: int, seed: int) -> list[dict[str, object]]:
    """Labelled traces of a simulated reader that is blind to the gold of a share
    ``blind`` of the queries (cites it at FPR) and has ``leads`` false leads per query
    on average (irrelevant documents cited at TPR), 10 documents, 6 rounds."""
    from gold_panning_integrations.engine.records import Reading

    prof = load_profile("lost-in-the-middle").resample(10)
    rng = np.random.default_rng(seed)

    class Reader:
        def __init__(self, reads_relevant: np.ndarray) -> None:
            self.reads_relevant = reads_relevant

        def read(self, question: str, documents: list[str], **kw: object) -> Reading:
            p = prof.resample(len(documents))
            rates = np.where(self.reads_relevant[[int(d) for d in documents]], p.tpr_array, p.fpr_array)
            return Reading(cited=tuple(int(i) for i in np.flatnonzero(rng.random(len(documents)) < rates)))

    out = []
    for _ in range(queries):
        gold = int(rng.integers(10))
        reads = rng.random(10) < leads / 9
        reads[gold] = rng.random() >= blind
        res = GoldPanner(Reader(reads), profile=prof, rounds=6, retriever_prior="none", rng=rng).run(
            "q",
            [str(i) for i in range(10)],  # document i's text is its index
        )
        out.append(trace_record(res, relevant=[gold]))
    return out


@pytest.mark.parametrize(("blind", "leads"), [(0.5, 0.5), (0.1, 0.1), (0.8, 0.25)])
def test_labelled_traces_measure_the_readers_mixture(blind: float, leads: float) -> None:
    # 300 labelled queries recover the simulated reader's blind rate and false leads
    # (measured: 0.51/0.50, 0.11/0.11, 0.82/0.25 with these seeds) and its per-position
    # TPR (the rate of a document that reads as relevant, not diluted by blind queries).
    traces = _mixture_traces(blind, leads, 300, seed=0)
    res = learn_profile(traces, load_profile("lost-in-the-middle").resample(10))
    assert res.mixture is not None
    assert res.mixture.blind_rate == pytest.approx(blind, abs=0.06)
    assert res.mixture.false_leads == pytest.approx(leads, abs=0.08)
    true_tpr = load_profile("lost-in-the-middle").resample(10).tpr_array
    assert np.mean(np.abs(res.profile.tpr_array - true_tpr)) < 0.06


def test_unlabelled_learning_keeps_the_priors_measured_mixture() -> None:
    prior = _two_position_prior().model_copy(update={"blind_rate": 0.6, "false_leads": 0.4})
    obs = Observations(
        doc=np.array([0, 1]),
        depth=np.array([0.0, 1.0]),
        cited=np.array([True, False]),
        prior_log_odds=np.zeros(2),
        query=np.zeros(2, dtype=np.intp),
        final_posteriors=np.full(2, 0.5),
    )
    res = learn_profile(obs, prior, iterations=1)
    assert res.mixture is None
    assert (res.profile.blind_rate, res.profile.false_leads) == (0.6, 0.4)
    # and the unlabelled update is the paper's EM, unchanged (test_one_em_iteration_by_hand)
    np.testing.assert_allclose(res.profile.tpr, [9.3 / 11.8, 8.5 / 11.2])


def test_cli_from_labelled_traces_reports_and_stores_the_mixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in _mixture_traces(0.5, 0.5, 40, seed=1)))
    out = tmp_path / "learned.json"
    assert (
        cli_main(
            ["calibrate", "--from-traces", str(path), "--prior", "lost-in-the-middle", "--out", str(out)]
        )
        == 0
    )
    text = capsys.readouterr().out
    prof = DetectorProfile.load(out)
    assert f"blind_rate {prof.blind_rate:.3f}" in text
    assert "measured on 40 labelled traces (40 relevant, 360 irrelevant documents)" in text
    fit = prof.extra["mixture_fit"]
    assert {k: fit[k] for k in ("relevant", "irrelevant", "queries")} == {
        "relevant": 40,
        "irrelevant": 360,
        "queries": 40,
    }
    # The silent rate is the moment estimate over the labelled prompts: (seen - expected)
    # / (prompts - expected), clipped at 0 (a simulated reader is never silent on purpose).
    prompts, expected, seen = fit["silent_prompts"]
    assert prof.silent_rate == round(min(max((seen - expected) / (prompts - expected), 0.0), 0.99), 4)
    assert prof.expected_relevant == 1.0  # one relevant document in each of the 40 queries
    # the panner picks the measured values up unless told otherwise
    panner = GoldPanner(_NoReader(), profile=prof)
    assert (panner.config.blind_rate, panner.config.false_leads) == (prof.blind_rate, prof.false_leads)
    assert GoldPanner(_NoReader(), profile=prof, blind_rate=0.1).config.blind_rate == 0.1


class _NoReader:
    def read(self, question: str, documents: object, **kw: object) -> object:
        raise AssertionError("not called")


def _ranked_trace(n: int, relevant: int, *, flat: bool = False) -> dict[str, object]:
    from gold_panning_integrations.engine.priors import rank_prior_probs

    p = np.full(n, 1.0 / n) if flat else rank_prior_probs(n, k=1)
    return {
        "type": "trace",
        "version": 1,
        "n": n,
        "k": 1,
        "policy": "belief",
        "prior_log_odds": np.log(p / (1 - p)).tolist(),
        "posteriors": p.tolist(),
        "rounds": [],
        "relevant": [relevant],
    }


def test_fit_head_decay_follows_where_the_relevant_documents_sat() -> None:
    from gold_panning_integrations.calibration.traces import fit_head_decay

    always_first = fit_head_decay([_ranked_trace(10, 0) for _ in range(8)])
    assert always_first is not None
    assert (always_first.head_decay, always_first.top1_share, always_first.queries) == (0.05, 1.0, 8)
    spread = fit_head_decay([_ranked_trace(10, r) for r in range(10)])
    assert spread is not None and spread.head_decay == 1.0 and spread.top1_share == 0.1
    # 3 of 4 first, 1 of 4 second: between the two
    mixed = fit_head_decay([_ranked_trace(10, 0)] * 6 + [_ranked_trace(10, 1)] * 2)
    assert mixed is not None and 0.05 < mixed.head_decay < 0.6
    # too few queries, or no rank prior (flat, or not decreasing with the index): nothing to say
    assert fit_head_decay([_ranked_trace(10, 0) for _ in range(4)]) is None
    assert fit_head_decay([_ranked_trace(10, 0, flat=True) for _ in range(8)]) is None
    rev = _ranked_trace(10, 0)
    rev["prior_log_odds"] = rev["prior_log_odds"][::-1]  # type: ignore[index]
    assert fit_head_decay([rev] * 8) is None


def test_learned_profile_carries_the_retrievers_head_decay(tmp_path: Path) -> None:
    from gold_panning_integrations import PanningConfig

    res = learn_profile([_ranked_trace(10, 0) for _ in range(8)], load_profile("lost-in-the-middle"))
    assert res.retriever is not None
    assert res.profile.prior_head_decay == 0.05
    assert res.profile.extra["retriever_fit"] == {"queries": 8, "top1_share": 1.0}
    assert PanningConfig().with_profile(res.profile).prior_head_decay == 0.05
    assert PanningConfig(prior_head_decay=0.9).with_profile(res.profile).prior_head_decay == 0.9
    assert PanningConfig().with_profile(load_profile("lost-in-the-middle")).prior_head_decay == 0.6
    bad = res.profile.model_copy(update={"prior_head_decay": 0})
    with pytest.raises(
        ValueError, match=r"the profile's prior_head_decay must be a number in \(0, 1\] or None, got 0"
    ):
        PanningConfig().with_profile(bad)


def test_degenerate_labelled_traces_stay_valid() -> None:
    # A query whose relevant document was not retrieved (relevant = []), and a reader that
    # cites everything: the measured values stay inside what the engine accepts.
    base = _mixture_traces(0.5, 0.5, 6, seed=2)
    empty = dict(base[0], relevant=[])
    everything = dict(base[1])
    everything["rounds"] = [
        {"round": r["round"], "prompts": [dict(p, cited=list(p["docs"])) for p in r["prompts"]]}  # type: ignore[index]
        for r in base[1]["rounds"]  # type: ignore[union-attr]
    ]
    res = learn_profile([empty, everything, *base[2:]], load_profile("lost-in-the-middle").resample(10))
    assert res.mixture is not None
    cfg = GoldPanner(_NoReader(), profile=res.profile).config
    assert 0.0 < cfg.blind_rate < 1.0 and cfg.false_leads > 0.0
    assert np.isfinite(res.profile.tpr_array).all() and np.isfinite(res.profile.fpr_array).all()
    # only relevant labels (every document relevant): counted, but no mixture to measure
    only = [dict(t, relevant=list(range(10))) for t in base]
    assert learn_profile(only, load_profile("lost-in-the-middle").resample(10)).mixture is None


def test_labelled_simulated_traces_learn_the_rates_and_a_near_zero_mixture() -> None:
    from benchmarks.calibration_sim import simulated_traces

    true = load_profile("smollm2-135m-kv")
    start = load_profile("lost-in-the-middle")
    traces = simulated_traces(true, start, queries=300, n=20, rounds=8, seed=3, labelled=True)
    assert all(len(t["relevant"]) == 1 for t in traces)
    res = learn_profile(traces, start)
    learned = res.profile.resample(20)
    # measured: TPR error 0.065 (0.071 from the same queries unlabelled), FPR error 0.0034
    assert np.mean(np.abs(learned.tpr_array - true.tpr_array)) < 0.08
    # the simulated reader has no blind spots and no false leads; estimated 0.09 and 0.009
    # (a never-cited gold at a low-TPR position is ambiguous, so b is biased up a little)
    assert res.mixture is not None and res.mixture.blind_rate < 0.15 and res.mixture.false_leads < 0.05


def test_labels_of_an_empty_result() -> None:
    prof = load_profile("lost-in-the-middle")
    empty = GoldPanner(_NoReader(), profile=prof).run("q", [])
    assert trace_record(empty, relevant=[])["relevant"] == []
    with pytest.raises(ValueError, match=r"indices \(this result has no documents\), got 0"):
        trace_record(empty, relevant=[0])


def test_each_prompt_of_a_round_records_its_own_citations() -> None:
    # Three prompts per round show the same three documents; the reader cites document
    # "b" only in the round's first prompt. The trace must not credit the other two
    # prompts with it (a round's union would add two false citations at their positions).
    from gold_panning_integrations import Reading

    class FirstPromptOnly:
        calls = 0

        def read(self, question: str, documents: list[str], **kw: object) -> Reading:
            self.calls += 1
            return Reading(cited=(documents.index("b"),) if self.calls % 3 == 1 else ())

    prof = DetectorProfile(n_positions=3, tpr=[0.9, 0.6, 0.3], fpr=[0.1, 0.1, 0.1])
    res = GoldPanner(
        FirstPromptOnly(), prof, rounds=1, prompts_per_round=3, retriever_prior="none", rng=0
    ).run("q", ["a", "b", "c"])
    prompts = trace_record(res)["rounds"][0]["prompts"]
    assert [p["cited"] for p in prompts] == [[1], [], []]
    assert all(sorted(p["docs"]) == [0, 1, 2] for p in prompts)
