"""Probabilities a chain can act on: p_none, min_relevance, recall_target, k=None, the
recalibration map, through the engine and every adapter.

Hand-derived numbers use the two-position profile ``TWO`` of ``doubles.py`` with the
paper's update and a flat start (``GoldPanner`` of ``doubles.py``): two documents start at
probability 1/2 (k = 1, n = 2); one round shows document 0 at position 0 (TPR 0.9, FPR
0.1) and document 1 at position 1 (TPR = FPR = 0.5, no evidence). A citation of document 0
makes its odds 9 (posterior 0.9), a miss 1/9 (posterior 0.1); document 1 stays at 0.5.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from doubles import NEEDLE, TWO, GoldPanner, ListRetriever, ScriptedReader, make_docs, make_nodes
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from pydantic import Field

from gold_panning_integrations import (
    DetectorProfile,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
)
from gold_panning_integrations.calibration.recalibration import (
    cross_validate,
    fit_isotonic,
    fit_platt,
    labelled_queries,
    replay_log_odds,
)
from gold_panning_integrations.calibration.traces import TraceWriter, read_traces
from gold_panning_integrations.engine.beliefs import RecalibrationMap, p_none, select
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.errors import ProfileError
from gold_panning_integrations.integrations.llama_index_postprocessor import PanningEndEvent


def _pan(docs: list[str], **options: Any) -> Any:
    return GoldPanner(ScriptedReader(), TWO, rounds=1, **options).run("q", docs)


# ------------------------------------------------------------------ engine
def test_p_none_is_the_product_of_the_misses() -> None:
    cited = _pan([NEEDLE, "filler"])
    assert cited.posteriors.tolist() == pytest.approx([0.9, 0.5])
    assert cited.p_none == pytest.approx(0.1 * 0.5)
    missed = _pan(["filler", "more filler"])
    assert missed.posteriors.tolist() == pytest.approx([0.1, 0.5])
    assert missed.p_none == pytest.approx(0.9 * 0.5)
    assert cited.summary()["p_none"] == pytest.approx(0.05)


def test_p_none_of_no_documents_is_one() -> None:
    assert p_none([]) == 1.0
    assert GoldPanner(ScriptedReader(), TWO).run("q", []).p_none == 1.0
    assert p_none(np.array([[0.5, 0.5], [0.0, 1.0]])).tolist() == pytest.approx([0.25, 0.0])


def test_min_relevance_cuts_the_selection_inclusively() -> None:
    assert _pan([NEEDLE, "filler"], min_relevance=0.6).selected.tolist() == [0]
    assert _pan([NEEDLE, "filler"], min_relevance=0.95).selected.tolist() == []
    # 0.5 passes a threshold of 0.5; 0.1 does not
    assert _pan(["filler", "more"], k=2, min_relevance=0.5).selected.tolist() == [1]
    assert _pan([NEEDLE, "filler"], k=None, min_relevance=0.4).selected.tolist() == [0, 1]


def test_k_none_returns_every_document() -> None:
    r = _pan([NEEDLE, "filler"], k=None)
    assert r.selected.tolist() == [0, 1]
    assert r.k == 2


def test_recall_target_is_an_adaptive_k() -> None:
    # posteriors 0.9 and 0.5 sum to 1.4: 0.6 of it (0.84) is covered by the first,
    # 0.7 of it (0.98) needs both; k still caps the list
    assert _pan([NEEDLE, "filler"], k=None, recall_target=0.6).selected.tolist() == [0]
    assert _pan([NEEDLE, "filler"], k=None, recall_target=0.7).selected.tolist() == [0, 1]
    assert _pan([NEEDLE, "filler"], k=1, recall_target=0.7).selected.tolist() == [0]
    assert select(np.array([0.1, 0.6, 0.3]), np.array([1, 2, 0]), k=None, recall_target=1.0).tolist() == [
        1,
        2,
        0,
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_relevance": 1.5}, r"min_relevance must be a number in \[0, 1\] or None, got 1\.5"),
        ({"min_relevance": -0.1}, r"min_relevance must be a number in \[0, 1\] or None, got -0\.1"),
        ({"recall_target": 0}, r"recall_target must be a number in \(0, 1\] or None, got 0"),
        ({"recall_target": 1.01}, r"recall_target must be a number in \(0, 1\] or None, got 1\.01"),
        ({"expected_relevant": -1.0}, r"expected_relevant must be a number > 0 or None, got -1\.0"),
    ],
)
def test_bad_thresholds_name_the_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PanningConfig(**options)
    with pytest.raises(ValueError, match=message):
        GoldPanningRetriever(base_retriever=ListRetriever(docs=[]), reader=ScriptedReader(), **options)


def test_expected_relevant_below_one_sets_the_prior_mass() -> None:
    r = GoldPanner(ScriptedReader(), TWO, rounds=1, expected_relevant=0.5).run("q", ["a", "b", "c", "d"])
    assert r.prior_log_odds is not None
    assert r.prior_log_odds.tolist() == pytest.approx([math.log(0.125 / 0.875)] * 4)


# --------------------------------------------------------- recalibration map
# Platt with slope 1 and intercept -log 9 turns log-odds log 9 into 0 and 0 into -log 9.
PLATT = {"kind": "platt", "slope": 1.0, "intercept": -math.log(9.0)}


def test_the_profile_map_applies_to_every_probability() -> None:
    profile = TWO.model_copy(update={"recalibration": PLATT})
    r = GoldPanner(ScriptedReader(), profile, rounds=1, min_relevance=0.4).run("q", [NEEDLE, "filler"])
    assert r.posteriors.tolist() == pytest.approx([0.5, 0.1])
    assert r.log_odds.tolist() == pytest.approx([0.0, -math.log(9.0)])
    assert r.raw_log_odds is not None and r.raw_log_odds.tolist() == pytest.approx([math.log(9.0), 0.0])
    assert r.p_none == pytest.approx(0.5 * 0.9)
    assert r.selected.tolist() == [0]  # the threshold reads the calibrated 0.5, not 0.9


def test_traces_keep_the_raw_posteriors_and_replay(tmp_path: Path) -> None:
    profile = TWO.model_copy(update={"recalibration": PLATT})
    writer = TraceWriter(tmp_path / "t.jsonl")
    r = GoldPanner(ScriptedReader(), profile, rounds=1).run("q", [NEEDLE, "filler"])
    writer(r, relevant=[0])
    (trace,) = read_traces(tmp_path / "t.jsonl")
    assert trace["posteriors"] == pytest.approx([0.5, 0.1])
    assert trace["raw_posteriors"] == pytest.approx([0.9, 0.5])
    ((lo, rel),) = labelled_queries([trace])
    assert lo.tolist() == pytest.approx([math.log(9.0), 0.0], abs=1e-4)
    assert rel.tolist() == [True, False]
    # Replaying the citations through the same profile and update gives the same log-odds.
    replayed = replay_log_odds(trace, TWO, config=PanningConfig.paper())
    assert replayed.tolist() == pytest.approx([math.log(9.0), 0.0])


@pytest.mark.parametrize(
    ("recalibration", "message"),
    [
        ({"kind": "platt", "slope": -1.0, "intercept": 0.0}, r"slope must be a finite number > 0.*got -1\.0"),
        ({"kind": "platt", "slope": 1.0}, r"intercept must be a finite number, got None"),
        ({"kind": "isotonic", "x": [0.0, 1.0], "y": [0.6, 0.4]}, r"y must not decrease.*y\[1\] = 0\.4"),
        ({"kind": "isotonic", "x": [1.0, 0.0], "y": [0.1, 0.4]}, r"x must increase strictly.*x\[1\] = 0\.0"),
        (
            {"kind": "isotonic", "x": [0.0, 1.0], "y": [0.1, 1.4]},
            r"y\[1\] must be a probability in \[0, 1\], got 1\.4",
        ),
        ({"kind": "isotonic", "x": [0.0], "y": [0.1]}, r"equal length >= 2, got 1 and 1"),
        ({"kind": "spline"}, r"kind must be 'platt' or 'isotonic', got 'spline'"),
        ("platt", r"must be an object, got 'platt'"),
    ],
)
def test_a_bad_map_is_one_profile_error_naming_the_value(
    tmp_path: Path, recalibration: Any, message: str
) -> None:
    data = json.loads(TWO.to_json())
    data["recalibration"] = recalibration
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=message):
        DetectorProfile.load(path)


def test_a_profile_with_a_map_round_trips(tmp_path: Path) -> None:
    profile = TWO.model_copy(update={"recalibration": PLATT})
    loaded = DetectorProfile.load(profile.save(tmp_path / "p.json"))
    assert loaded.recalibration_map == RecalibrationMap(kind="platt", slope=1.0, intercept=-math.log(9.0))
    assert TWO.recalibration_map is None  # profiles without a map load as before


def test_platt_recovers_a_known_map() -> None:
    # Pairs drawn from P(relevant) = sigmoid(0.5 * x - 1): the fit finds (0.5, -1).
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 3.0, 20000)
    y = rng.random(x.size) < 1.0 / (1.0 + np.exp(-(0.5 * x - 1.0)))
    m = fit_platt(x, y)
    assert (m.slope, m.intercept) == pytest.approx((0.5, -1.0), abs=0.05)


def test_isotonic_is_monotone_and_pools_violators() -> None:
    # x 0..3 with rates 0, 1, 0, 1: the middle two pool to 1/2; one pseudo-pair pulls each
    # block toward the overall rate 1/2 (a block of one at rate 0 becomes 1/4).
    m = fit_isotonic([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1])
    assert m.x == (0.0, 1.0, 2.0, 3.0)
    assert m.y == pytest.approx((0.25, 0.5, 0.5, 0.75))


def test_cross_validation_scores_each_map() -> None:
    rng = np.random.default_rng(1)
    queries = []
    for _ in range(40):
        x = rng.normal(0.0, 3.0, 10)
        queries.append((x, rng.random(10) < 1.0 / (1.0 + np.exp(-(0.5 * x - 1.0)))))
    cv = cross_validate(queries)
    assert set(cv) == {"identity", "platt", "isotonic"}
    # the identity reads sigmoid(x), far from sigmoid(0.5 x - 1): a fitted map does better
    assert cv["platt"]["brier"] < cv["identity"]["brier"]
    assert cv["platt"]["ece"] < cv["identity"]["ece"]


# ------------------------------------------------------------------ adapters
QUIET = {"profile": TWO, "retriever_prior": "none", "expected_relevant": 1, "min_relevance": 0.5}
"""Nothing relevant in the documents (the reader cites nothing): every posterior falls
below its prior of 1/8, so nothing reaches 0.5."""


def test_nothing_above_the_threshold_is_an_empty_list_everywhere() -> None:
    reader = ScriptedReader()
    retriever = GoldPanningRetriever(base_retriever=ListRetriever(docs=make_docs(8)), reader=reader, **QUIET)
    assert retriever.invoke("q") == []
    docs, result = retriever.pan("q")
    # silence moved p_none up from its prior, (7/8)^8 = 0.344
    assert docs == [] and result.p_none > 0.875**8 and result.calls > 0
    compressor = GoldPanningCompressor(reader=reader, **QUIET)
    assert compressor.compress_documents(make_docs(8), "q") == []
    post = GoldPanningPostprocessor(reader=reader, **QUIET)
    assert post.postprocess_nodes(make_nodes(8), query_str="q") == []
    assert reader.sync_calls > 0


async def test_nothing_above_the_threshold_async() -> None:
    reader = ScriptedReader()
    retriever = GoldPanningRetriever(base_retriever=ListRetriever(docs=make_docs(8)), reader=reader, **QUIET)
    assert await retriever.ainvoke("q") == []
    post = GoldPanningPostprocessor(reader=reader, **QUIET)
    assert await post.apostprocess_nodes(make_nodes(8), query_str="q") == []
    assert reader.async_calls > 0


def test_retriever_k_none_with_min_relevance() -> None:
    # The needle second: a document cited in every prompt rises by at most log((1 - b) / a)
    # = log(0.9 / (0.25 / 7)) = 3.23 nats (the mixture), from the rank map's 0.103 to 0.74;
    # from the fourth rank (0.031) it would stop at 0.45, below the threshold.
    retriever = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(8, needle_at=1)),
        reader=ScriptedReader(),
        k=None,
        min_relevance=0.5,
        profile=TWO,
    )
    docs, result = retriever.pan("q")
    assert [d.metadata["i"] for d in docs] == [int(i) for i in result.ranking if result.posteriors[i] >= 0.5]
    assert docs[0].metadata["i"] == 1
    assert docs[0].metadata["gold_panning_p_none"] == pytest.approx(result.p_none)
    everything = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(5)), reader=ScriptedReader(), k=None, profile=TWO
    )
    assert len(everything.invoke("q")) == 5


class _Captured(BaseEventHandler):
    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Captured"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


def test_llama_index_reports_p_none_in_an_event() -> None:
    handler = _Captured()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        nodes, result = GoldPanningPostprocessor(reader=ScriptedReader(), **QUIET).pan(make_nodes(8), "q")
    finally:
        root.event_handlers.remove(handler)
    (event,) = [e for e in handler.events if isinstance(e, PanningEndEvent)]
    assert nodes == []
    assert event.p_none == pytest.approx(result.p_none)
    assert (event.returned, event.panned) == (0, True)


# ------------------------------------------------------------ calibrate --from-traces
def _labelled_traces(path: Path, queries: int) -> Path:
    """``queries`` labelled traces (one gold among 10) panned with a biased copy of the
    profile the simulated reader follows, as JSONL."""
    from benchmarks.calibration_sim import biased_profile, simulated_traces

    true = DetectorProfile.bundled("lost-in-the-middle").resample(10)
    start = biased_profile(true, tpr_scale=0.6, fpr_scale=2.0)
    traces = simulated_traces(true, start, queries=queries, n=10, rounds=2, seed=3, labelled=True)
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return path


@pytest.mark.parametrize("kind", ["platt", "isotonic"])
def test_calibrate_from_labelled_traces_stores_a_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    from gold_panning_integrations.cli import main as cli_main

    traces = _labelled_traces(tmp_path / "t.jsonl", 40)
    out = tmp_path / "p.json"
    assert (
        cli_main(["calibrate", "--from-traces", str(traces), "--out", str(out), "--recalibrate", kind]) == 0
    )
    text = capsys.readouterr().out
    assert "held-out calibration of the posteriors on 40 labelled queries" in text
    m = DetectorProfile.load(out).recalibration_map
    assert m is not None and m.kind == kind


def test_calibrate_from_traces_without_a_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.cli import main as cli_main

    traces = _labelled_traces(tmp_path / "t.jsonl", 40)
    out = tmp_path / "p.json"
    assert (
        cli_main(["calibrate", "--from-traces", str(traces), "--out", str(out), "--recalibrate", "none"]) == 0
    )
    assert DetectorProfile.load(out).recalibration is None
    few = _labelled_traces(tmp_path / "few.jsonl", 4)
    assert cli_main(["calibrate", "--from-traces", str(few), "--out", str(out)]) == 0
    assert "4 labelled traces: no recalibration map fitted" in capsys.readouterr().out
    assert DetectorProfile.load(out).recalibration is None


def test_calibrate_keep_rates_fits_only_the_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.calibration.recalibration import fit_map, labelled_queries
    from gold_panning_integrations.calibration.traces import read_traces
    from gold_panning_integrations.cli import main as cli_main

    traces = _labelled_traces(tmp_path / "t.jsonl", 40)
    out = tmp_path / "p.json"
    args = ["calibrate", "--from-traces", str(traces), "--prior", "lost-in-the-middle", "--out", str(out)]
    assert cli_main([*args, "--keep-rates"]) == 0
    prior = DetectorProfile.bundled("lost-in-the-middle")
    got = DetectorProfile.load(out)
    assert (got.tpr, got.fpr, got.n_positions) == (prior.tpr, prior.fpr, prior.n_positions)
    assert "--keep-rates" in got.notes
    # the map is the one fitted on the prior's own replay of the traces
    queries = labelled_queries(read_traces(traces), profile=prior)
    lo = np.concatenate([q[0] for q in queries])
    rel = np.concatenate([q[1] for q in queries])
    want = fit_map(lo, rel, kind="platt")
    m = got.recalibration_map
    assert m is not None and m.kind == "platt"
    assert (m.slope, m.intercept) == pytest.approx((want.slope, want.intercept))
    # too few labelled traces: an error, nothing written
    few = _labelled_traces(tmp_path / "few.jsonl", 4)
    out2 = tmp_path / "q.json"
    assert cli_main(["calibrate", "--from-traces", str(few), "--out", str(out2), "--keep-rates"]) == 2
    assert "no map fitted, nothing written" in capsys.readouterr().err
    assert not out2.exists()
    # a map is all it fits: asking for none is an error, nothing written
    assert cli_main([*args[:-1], str(out2), "--keep-rates", "--recalibrate", "none"]) == 2
    assert "--keep-rates fits only a map" in capsys.readouterr().err
    assert not out2.exists()


# ------------------------------------------------------------------ gold-panning run
def test_run_flags_min_relevance_and_p_none(capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.cli import main as cli_main

    args = ["run", "--demo", "--reader", "simulated", "--profile", "lost-in-the-middle", "--rounds", "1"]
    assert cli_main([*args, "--json", "--k", "none", "--min-relevance", "1.0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["selected"] == [] and out["selected_documents"] == []
    assert out["p_none"] == pytest.approx(float(np.prod(1 - np.asarray(out["posteriors"]))), abs=1e-5)
    assert cli_main([*args, "--min-relevance", "1.0"]) == 0
    text = capsys.readouterr().out
    assert "(none reaches min_relevance)" in text and "(p_none): " in text
    with pytest.raises(SystemExit):
        cli_main([*args, "--min-relevance", "1.5"])
    assert "must be a number in [0, 1] or None, got '1.5'" in capsys.readouterr().err
