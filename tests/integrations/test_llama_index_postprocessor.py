"""GoldPanningPostprocessor: LlamaIndex contract, scores, top_n, async, events, priors."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from doubles import (
    FLAT,
    NEEDLE,
    TWO,
    AsyncOnlyReader,
    BrokenReader,
    ScriptedReader,
    SmallestLabelChatModel,
    SmallestLabelLLM,
)
from doubles import make_nodes as _nodes
from llama_index.core.bridge.pydantic import Field
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.schema import NodeWithScore, QueryBundle

from gold_panning_integrations import (
    AllRoundsFailedError,
    DetectorProfile,
    GoldPanningPostprocessor,
    SimulatedReader,
)
from gold_panning_integrations.engine.beliefs import sigmoid
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, bounded_prior


class Captured(BaseEventHandler):
    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Captured"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def captured() -> Iterator[Captured]:
    handler = Captured()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        yield handler
    finally:
        root.event_handlers.remove(handler)


def _rerank_events(handler: Captured) -> list[BaseEvent]:
    return [e for e in handler.events if isinstance(e, (ReRankStartEvent, ReRankEndEvent))]


def test_class_name() -> None:
    assert GoldPanningPostprocessor.class_name() == "GoldPanningPostprocessor"
    p = GoldPanningPostprocessor(reader=ScriptedReader())
    assert p.to_dict()["class_name"] == "GoldPanningPostprocessor"


def test_needs_exactly_one_model() -> None:
    with pytest.raises(ValueError, match="needs a model"):
        GoldPanningPostprocessor()
    with pytest.raises(ValueError, match="not both"):
        GoldPanningPostprocessor(reader=ScriptedReader(), llm=SmallestLabelLLM())


def test_missing_query_is_a_clear_error() -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader())
    with pytest.raises(ValueError, match="needs the query"):
        p.postprocess_nodes(_nodes(3))


def test_no_nodes_returns_empty_without_calls() -> None:
    reader = ScriptedReader()
    p = GoldPanningPostprocessor(reader=reader)
    assert p.postprocess_nodes([], query_str="q") == []
    nodes, result = p.pan([], "q")
    assert nodes == []
    assert result.calls == 0
    assert result.stop_reason == "no-documents"
    assert reader.sync_calls == 0


def test_scores_are_posteriors_pinned_by_hand() -> None:
    # Two positions: position 0 detects (TPR 0.9, FPR 0.1), position 1 carries no
    # evidence. Flat prior 1/2 each (the base rate of expected_relevant=1 over 2) and each
    # reply read through the profile (content_free=0; the default weighing of read and
    # positional replies is tested in tests/engine); the needle at position 0 is cited.
    nodes = _nodes(2, needle_at=0)
    # seed=1: the engine's shuffle of the top documents (shuffle_top) keeps input order here.
    p = GoldPanningPostprocessor(
        reader=ScriptedReader(),
        profile=TWO,
        top_n=2,
        rounds=1,
        retriever_prior="none",
        expected_relevant=1.0,
        content_free=0.0,
        seed=1,
        prompts_per_round=1,
    )
    assert p.pan(nodes, "q")[1].rounds[0].windows == ((0, 1),)
    out = p.postprocess_nodes(nodes, query_bundle=QueryBundle("where is the needle?"))
    assert [n.node.node_id for n in out] == ["n0", "n1"]
    # Robust likelihood (the default): rates 0.95 * rate + 0.025, so 0.9/0.1 -> 0.88/0.12:
    # the needle's evidence is E = log(22/3). Document-level mixture (the default): n = 2
    # and one relevant expected (expected_relevant, not top_n = 2), so one irrelevant
    # document: a = 0.25 / 1, b = 0.1: odds 1 * (0.9 * 22/3 + 0.1) / (0.25 * 22/3 + 0.75) =
    # 6.7 / (31/12) -> posterior 80.4/111.4 = 402/557 = 0.721723 (0.88 without the
    # mixture). Node n1 at position 1 has E = 0 (TPR = FPR) and g(0) = 0: stays 1/2.
    assert [n.score for n in out] == pytest.approx([402 / 557, 0.5], abs=1e-12)


def test_input_not_mutated_and_new_objects() -> None:
    nodes = _nodes(5, needle_at=3)
    before = [(n.node.node_id, n.score) for n in nodes]
    out = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=2).postprocess_nodes(nodes, query_str="q")
    assert [(n.node.node_id, n.score) for n in nodes] == before
    assert not any(o is n for o in out for n in nodes)
    assert out[0].node is nodes[3].node  # the node itself is shared, not copied


def test_top_n_and_ordering() -> None:
    nodes = _nodes(6, needle_at=4)
    # The prior never depends on top_n. The default rank map at n = 6: log-odds -1.3802 -
    # log(1 + r), the odds 0.251528 / (1 + r): (0.20098, 0.11171, 0.07736, 0.05916, 0.04790,
    # 0.04023). Mixture: a = 0.25 / (6 - 1) = 0.05, b = 0.1, so any evidence moves the odds by
    # a factor in (b / (1-a), (1-b) / a) = (0.10526, 18); the map's log-odds gap log 6 = 1.792
    # is below 0.75 of that swing (0.75 * log(18 / 0.10526) = 3.856): not bounded.
    # The reader cites only the needle: fillers see only misses (E <= 0, robust TPR >= FPR,
    # the level scales both alike), so they never rise above their prior; the needle n4
    # never rises above odds (0.251528 / 5) * 18 -> 0.475204, and n0 never falls below
    # odds 0.251528 * 0.10526 -> 0.025794.
    p = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=3, rounds=2, prompts_per_round=1)
    out = p.postprocess_nodes(nodes, query_str="where is the needle?")
    assert len(out) == 3
    assert [n.score for n in out] == sorted((n.score for n in out), reverse=True)
    _, panned = p.pan(nodes, "where is the needle?")
    assert panned.prior_log_odds is not None
    swing = math.log(0.9 / 0.05) - math.log(0.1 / 0.95)
    prior = bounded_prior(DEFAULT_RANK_MAP.probabilities(6), max_gap=0.75 * swing)
    assert prior.tolist() == pytest.approx([0.20098, 0.11171, 0.07736, 0.05916, 0.04790, 0.04023], abs=1e-5)
    assert sigmoid(panned.prior_log_odds).tolist() == pytest.approx(prior.tolist(), abs=1e-9)
    assert panned.posteriors[0] >= 0.025794
    assert panned.posteriors[4] <= 0.475204
    fillers = zip(panned.posteriors[[1, 2, 3, 5]].tolist(), [0.11171, 0.07736, 0.05916, 0.04023])
    assert all(post <= prior + 1e-5 for post, prior in fillers)  # fillers never rise above the prior
    # One needle expected among the first 10 (expected_relevant=1): the map shifted so that
    # its first 10 sum to 1 (offset -0.89266), n0 starts at 0.29056 (not bounded), and the
    # twice-cited needle leads (not a bound: measured on seeds 0..299 under the harmonic map,
    # n4 first on every one).
    one = GoldPanningPostprocessor(
        reader=ScriptedReader(), top_n=3, rounds=2, expected_relevant=1, prompts_per_round=1
    )
    out1 = one.postprocess_nodes(nodes, query_str="where is the needle?")
    assert len(out1) == 3
    assert out1[0].node.node_id == "n4"
    assert [n.score for n in out1] == sorted((n.score for n in out1), reverse=True)
    assert (
        len(
            GoldPanningPostprocessor(
                reader=ScriptedReader(), top_n=50, prompts_per_round=1
            ).postprocess_nodes(nodes, query_str="q")
        )
        == 6
    )
    nodes1, result = p.pan(nodes, "q", top_n=1)
    assert len(nodes1) == 1
    assert result.calls == 2
    assert result.posteriors.shape == (6,)


async def test_async_uses_aread() -> None:
    reader = AsyncOnlyReader()
    p = GoldPanningPostprocessor(reader=reader, top_n=2, rounds=3, prompts_per_round=1)
    out = await p.apostprocess_nodes(_nodes(5, needle_at=1), query_str="q")
    assert out[0].node.node_id == "n1"
    assert reader.async_calls == 3
    assert reader.sync_calls == 0
    with pytest.raises(AllRoundsFailedError, match="must not be called on the async path"):
        GoldPanningPostprocessor(reader=AsyncOnlyReader(), rounds=2, prompts_per_round=1).postprocess_nodes(
            _nodes(3), query_str="q"
        )


async def test_async_missing_query() -> None:
    with pytest.raises(ValueError, match="needs the query"):
        await GoldPanningPostprocessor(reader=ScriptedReader()).apostprocess_nodes(_nodes(2))


def test_rerank_events(captured: Captured) -> None:
    nodes = _nodes(4, needle_at=2)
    p = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=2)
    out = p.postprocess_nodes(nodes, query_str="where is the needle?")
    start, end = _rerank_events(captured)
    assert isinstance(start, ReRankStartEvent)
    assert isinstance(end, ReRankEndEvent)
    assert start.top_n == 2
    assert len(start.nodes) == 4
    assert start.query is not None
    assert start.query.query_str == "where is the needle?"
    assert start.model_name == "ScriptedReader"
    assert [n.node.node_id for n in end.nodes] == [n.node.node_id for n in out]


async def test_rerank_events_async(captured: Captured) -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=1)
    await p.apostprocess_nodes(_nodes(3, needle_at=0), query_str="q")
    kinds = [type(e).__name__ for e in _rerank_events(captured)]
    assert kinds == ["ReRankStartEvent", "ReRankEndEvent"]


def test_legacy_callback_event() -> None:
    debug = LlamaDebugHandler()
    p = GoldPanningPostprocessor(reader=ScriptedReader(), callback_manager=CallbackManager([debug]))
    p.postprocess_nodes(_nodes(3, needle_at=0), query_str="q")
    assert len(debug.get_event_pairs(CBEventType.RERANKING)) == 1


def test_priors_from_rank_and_score() -> None:
    # uninformative profile: no calls, the posteriors are the prior: the default rank map's
    # first 3, sigmoid(-1.3802 - log(1 + r)) = [0.20098, 0.11171, 0.07736] (not bounded: the
    # gap log 3 = 1.099 is below 0.75 of the evidence swing at 3 documents, 3.107)
    nodes = _nodes(3)
    _, result = GoldPanningPostprocessor(reader=ScriptedReader(), profile=FLAT, top_n=1).pan(nodes, "q")
    assert result.posteriors.tolist() == pytest.approx([0.20098, 0.11171, 0.07736], abs=1e-5)
    assert result.posteriors.tolist() == pytest.approx(DEFAULT_RANK_MAP.probabilities(3).tolist())
    # NodeWithScore.score: scores 3, 2, 1 have std sqrt(2/3); standardised they are
    # spaced 1/sqrt(2/3) = 1.224745 apart, so at temperature 1 the softmax weights are 1,
    # e^-1.2247, e^-2.4495, sharing out the rank map's expected count over the 3 nodes: with
    # expected_relevant=1 the map whose first 10 sum to 1 (offset -0.89266), whose first 3
    # are sigmoid(-0.89266 - log(1 + r)) = 0.29056 + 0.16997 + 0.12012 = 0.58066
    scored = _nodes(3, scored=True)
    p = GoldPanningPostprocessor(
        reader=ScriptedReader(),
        profile=FLAT,
        top_n=3,
        expected_relevant=1,
        retriever_prior="score",
        prior_temperature=1.0,
    )
    m3 = DEFAULT_RANK_MAP.with_mass(1.0).mass(3)
    assert m3 == pytest.approx(0.58066, abs=1e-5)
    w = [1.0, 0.293838, 0.086341]
    assert [n.score for n in p.postprocess_nodes(scored, query_str="q")] == pytest.approx(
        [m3 * x / sum(w) for x in w], abs=1e-5
    )
    # the default ("auto") with a temperature fitted for the retriever (the profile's, 0.5)
    # reads the scores of 5 nodes and more: scores 5..1 have std sqrt(2), so standardised
    # they are 1/sqrt(2) apart, 2/sqrt(2) = sqrt(2) at temperature 0.5; weights
    # e^(-i sqrt 2): 1, 0.243117, 0.059106, 0.014370, 0.003494, sharing out the default
    # map's expected count over 5: 0.20098 + 0.11171 + 0.07736 + 0.05916 + 0.04790 = 0.49711
    # (the first: 0.757526 of it, 0.376571)
    fitted = FLAT.model_copy(update={"prior_temperature": 0.5})
    w = [math.exp(-i * math.sqrt(2)) for i in range(5)]
    m5 = DEFAULT_RANK_MAP.mass(5)
    assert m5 == pytest.approx(0.49711, abs=1e-5)
    _, result = GoldPanningPostprocessor(reader=ScriptedReader(), profile=fitted, top_n=1).pan(
        _nodes(5, scored=True), "q"
    )
    assert result.posteriors.tolist() == pytest.approx([m5 * x / sum(w) for x in w], abs=1e-6)
    assert result.posteriors[0] == pytest.approx(0.757526 * m5, abs=1e-6)
    assert result.posteriors[0] == pytest.approx(0.376571, abs=1e-6)
    # ... without a fitted temperature the scores' scale is unknown: the rank prior, left as
    # it is by the bound at 5 nodes (the map's gap log 5 = 1.609 is below 0.75 of the
    # evidence swing, a = 0.25 / 4, b = 0.1: 0.75 * (log(0.9 / 0.0625) - log(0.1 / 0.9375)) = 3.679)
    _, result = GoldPanningPostprocessor(reader=ScriptedReader(), profile=FLAT, top_n=1).pan(
        _nodes(5, scored=True), "q"
    )
    swing5 = math.log(0.9 / 0.0625) - math.log(0.1 / 0.9375)
    rank5 = bounded_prior(DEFAULT_RANK_MAP.probabilities(5), max_gap=0.75 * swing5)
    assert result.posteriors.tolist() == pytest.approx(rank5.tolist())
    assert rank5.tolist() == pytest.approx([0.20098, 0.11171, 0.07736, 0.05916, 0.04790], abs=1e-5)
    # ... and not of 3: the rank prior
    _, result = GoldPanningPostprocessor(reader=ScriptedReader(), profile=fitted, top_n=1).pan(scored, "q")
    assert result.posteriors.tolist() == pytest.approx(DEFAULT_RANK_MAP.probabilities(3).tolist())


def test_every_round_failing() -> None:
    with pytest.raises(AllRoundsFailedError, match="model endpoint down"):
        GoldPanningPostprocessor(reader=BrokenReader(), rounds=2).postprocess_nodes(_nodes(3), query_str="q")
    out, result = GoldPanningPostprocessor(
        reader=BrokenReader(), rounds=2, top_n=3, on_failure="fallback"
    ).pan(_nodes(3), "q")
    assert [n.node.node_id for n in out] == ["n0", "n1", "n2"]
    assert result.panned is False
    assert result.stop_reason == "all-rounds-failed"


def test_profile_validation() -> None:
    with pytest.raises(ValueError, match="neither a bundled profile"):
        GoldPanningPostprocessor(reader=ScriptedReader(), profile="no-such-profile")


def test_simulated_reader_among_many() -> None:
    reader = SimulatedReader(DetectorProfile.bundled("lost-in-the-middle"), {NEEDLE}, rng=1)
    out = GoldPanningPostprocessor(reader=reader, top_n=1, rounds=4, seed=0).postprocess_nodes(
        _nodes(30, needle_at=21), query_str="q"
    )
    assert out[0].node.get_content() == NEEDLE


def _smallest_label_docs(result: Any) -> list[tuple[int, ...]]:
    """Per round, the document shown under that prompt's smallest label."""
    return [(t.windows[0][t.labels[0].index(min(t.labels[0]))],) for t in result.rounds]


def test_llama_index_llm_as_reader(captured: Captured) -> None:
    # The LLM cites the smallest label shown: whichever document holds it that round.
    # Flat prior: the order comes from the citations alone (with the rank prior the base
    # order's first node may lead uncited, which is the prior's job, not this test's).
    p = GoldPanningPostprocessor(
        llm=SmallestLabelLLM(), top_n=2, rounds=3, prompts_per_round=1, seed=0, retriever_prior="none"
    )
    out, result = p.pan(_nodes(5), "q")
    assert result.failed_rounds == 0
    assert result.calls == 3
    # Labels are drawn at random each round: the smallest names a random document.
    assert [t.cited for t in result.rounds] == _smallest_label_docs(result)
    assert result.citation_counts[int(out[0].node.node_id[1:])] >= 1
    start = next(e for e in captured.events if isinstance(e, ReRankStartEvent))
    assert start.model_name == "citing-llm"


async def test_llama_index_llm_as_reader_async() -> None:
    # As the sync test: the smallest label names a random document each round, so which
    # document wins is not the point; that the async path parsed each answer and
    # credited the document shown under that label is.
    p = GoldPanningPostprocessor(llm=SmallestLabelLLM(), top_n=1, rounds=2, seed=0, prompts_per_round=1)
    out, result = await p.apan(_nodes(4), "q")
    assert result.failed_rounds == 0
    assert [t.cited for t in result.rounds] == _smallest_label_docs(result)
    assert len(out) == 1
    assert out[0].score == float(result.posteriors[int(out[0].node.node_id[1:])])
    assert len(await p.apostprocess_nodes(_nodes(4), query_str="q")) == 1


def test_langchain_chat_model_as_reader() -> None:
    _, result = GoldPanningPostprocessor(reader=SmallestLabelChatModel(), rounds=2, prompts_per_round=1).pan(
        _nodes(4), "q"
    )
    assert result.failed_rounds == 0
    assert [t.cited for t in result.rounds] == _smallest_label_docs(result)


def test_in_a_query_engine() -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever

    nodes = _nodes(6, needle_at=5)

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(nodes)

    # A flat prior: the node the query engine gets first is where the citations led. Under
    # the default rank map the needle at rank 5 of 6 starts 3.856 nats (the bound) below
    # rank 0, more than citations in every prompt can add (log(0.9 / 0.05) = 2.890 nats).
    p = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=2, retriever_prior="none")
    engine = RetrieverQueryEngine.from_args(Fixed(), node_postprocessors=[p], llm=MockLLM())
    response = engine.query("where is the needle?")
    assert response.source_nodes[0].node.node_id == "n5"
    assert len(response.source_nodes) == 2


@pytest.fixture
def spans() -> Iterator[Any]:
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    handler = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(handler)
    try:
        yield handler
    finally:
        root.span_handlers.remove(handler)


def _span_names(handler: Any) -> list[str]:
    return [s.id_.split("-")[0] for s in handler.completed_spans]


def test_sync_postprocess_runs_in_a_span(spans: Any) -> None:
    GoldPanningPostprocessor(reader=ScriptedReader(), top_n=1).postprocess_nodes(_nodes(3), query_str="q")
    assert "GoldPanningPostprocessor._postprocess_nodes" in _span_names(spans)


async def test_async_postprocess_runs_in_a_span(spans: Any, captured: Captured) -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=1)
    await p.apostprocess_nodes(_nodes(3, needle_at=0), query_str="q")
    span = next(
        s for s in spans.completed_spans if s.id_.startswith("GoldPanningPostprocessor._apostprocess_nodes")
    )
    # the rerank events are emitted inside that span
    assert [e.span_id for e in _rerank_events(captured)] == [span.id_, span.id_]
