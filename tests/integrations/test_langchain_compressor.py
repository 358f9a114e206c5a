"""GoldPanningCompressor: LangChain's document-compressor shape, sharing the retriever's code;
relevance_score metadata; chat-model Runnables as readers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from doubles import (
    NEEDLE,
    TWO,
    AsyncOnlyReader,
    ListRetriever,
    ScriptedReader,
    SmallestLabelChatModel,
    make_docs,
)
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import ConfigurableField, Runnable

import gold_panning_integrations.readers as readers_module
from gold_panning_integrations import GoldPanningCompressor, GoldPanningRetriever


class CompressionRetriever(BaseRetriever):
    """The shape of langchain-classic's ContextualCompressionRetriever (which lives in
    the ``compare`` extra): base retriever, then compressor, with child callbacks."""

    base_retriever: BaseRetriever
    base_compressor: BaseDocumentCompressor

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        docs = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        return list(self.base_compressor.compress_documents(docs, query, callbacks=run_manager.get_child()))


class Runs(BaseCallbackHandler):
    """Records (kind, run id, parent run id) of retriever, chain and chat-model runs."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, UUID, UUID | None]] = []

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("retriever", run_id, parent_run_id))

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("chat", run_id, parent_run_id))

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("chain", run_id, parent_run_id))


def _compressor(reader: Any = None, **kw: Any) -> GoldPanningCompressor:
    kw.setdefault("prompts_per_round", 1)  # rounds are calls in these tests
    return GoldPanningCompressor(reader=ScriptedReader() if reader is None else reader, **kw)


# --------------------------------------------------------------------- the shape
def test_is_a_document_compressor() -> None:
    assert isinstance(_compressor(), BaseDocumentCompressor)


def _pan_two(seed: int, **options: Any) -> Any:
    # The update derived by hand below: the flat base rate of expected_relevant (1 unless
    # given) and each reply read through the profile (content_free=0; the default weighing
    # of read and positional replies is tested in tests/engine).
    options = {"expected_relevant": 1.0, "content_free": 0.0, **options}
    return _compressor(profile=TWO, top_n=2, rounds=1, retriever_prior="none", seed=seed, **options).pan(
        make_docs(2, needle_at=0), "where is the needle?"
    )


def test_posterior_and_relevance_score_pinned_by_hand() -> None:
    # TWO under the default robust likelihood: rates 0.95*rate + 0.025 give position 0
    # TPR 0.88, FPR 0.12 and position 1 TPR = FPR = 0.5 (no evidence). Flat prior
    # min(1/2, 0.5) = 1/2 (the prior's mass is expected_relevant = 1, not top_n). The two
    # documents tie, so the seed decides who leads; seed=1 puts the needle (document 0) at
    # position 0, where it is cited. Level adaptation scales TPR and FPR by the same
    # factor, so a citation's ratio stays 0.88/0.12: evidence E = log(22/3).
    # Document-level mixture: n = 2 documents, one relevant expected, so one irrelevant:
    # a = 0.25 / 1 and b = blind_rate = 0.1: odds 1 * (0.9 * 22/3 + 0.1) / (0.25 * 22/3 +
    # 0.75) = 6.7 / (31/12) -> posterior 80.4/111.4 = 402/557 = 0.721723 (0.88 without the
    # mixture). The filler at position 1 has E = 0: g(0) = 0, stays 1/2.
    got = _pan_two(seed=1)
    assert got.result.rounds[0].windows == ((0, 1),)
    scores = [d.metadata["relevance_score"] for d in got.documents]
    assert scores == pytest.approx([402 / 557, 0.5], abs=1e-12)
    assert [d.metadata["gold_panning_rank"] for d in got.documents] == [1, 2]


def test_level_adapted_miss_pinned_by_hand() -> None:
    # seed=0 puts the filler (document 1) at position 0, uncited, and the needle at
    # position 1 (no evidence: stays 1/2). Two relevant expected (expected_relevant=2, so
    # that the level moves; flat prior min(2/2, 0.5) = 1/2). The level: beliefs rescaled to
    # the mass 2 give each document p = 1, so the predicted citations are 0.88 + 0.5 = 1.38
    # against 1 observed: level (1+1)/(1.38+1) = 0.840336. Position 0 becomes TPR
    # 0.739496, FPR 0.100840; a miss gives evidence E = log((1-0.739496)/(1-0.100840)) =
    # log(0.289720). Mixture with a = 0 (n = 2 = expected_relevant) and b = 0.1: g(E) =
    # log(0.9 * 0.289720 + 0.1) = log(0.360748), so the filler's posterior is
    # 0.360748/1.360748 = 0.265110 (0.224638 without the mixture, 0.12 without the level
    # adaptation either).
    got = _pan_two(seed=0, expected_relevant=2)
    assert got.result.rounds[0].windows == ((1, 0),)
    assert [d.metadata["relevance_score"] for d in got.documents] == pytest.approx([0.5, 0.265110], abs=1e-6)
    # The mass 1 (expected_relevant=1): each document p = 1/2, predicted 0.5 * (0.88 + 0.12) + 0.5 *
    # (0.5 + 0.5) = 1 = observed, level 1; the miss log(0.12/0.88) = log(3/22), a = 0.25 / 1:
    # odds (0.9 * 3/22 + 0.1) / (0.25 * 3/22 + 0.75) = 4.9 / 17.25 -> 98/443 = 0.221219.
    got = _pan_two(seed=0)
    assert [d.metadata["relevance_score"] for d in got.documents] == pytest.approx([0.5, 98 / 443], abs=1e-9)
    assert got.documents[0].page_content == NEEDLE


def test_relevance_score_equals_the_posterior_on_the_retriever() -> None:
    r = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(5, needle_at=3)), reader=ScriptedReader()
    )
    out = r.invoke("where is the needle?")
    assert [d.metadata["relevance_score"] for d in out] == [d.metadata["gold_panning_posterior"] for d in out]


def test_same_result_as_the_retriever_on_the_same_documents() -> None:
    docs = make_docs(8, needle_at=5)
    options: dict[str, Any] = {"profile": "lost-in-the-middle", "rounds": 3, "seed": 11, "policy": "random"}
    options["prompts_per_round"] = 3  # the defaults' prompts sent together: the same on both
    _, via_retriever = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=docs), reader=ScriptedReader(), k=3, **options
    ).pan("q")
    got, via_compressor = _compressor(top_n=3, **options).pan(docs, "q")
    assert via_compressor.posteriors.tolist() == via_retriever.posteriors.tolist()
    assert [t.shown for t in via_compressor.rounds] == [t.shown for t in via_retriever.rounds]
    assert got[0].page_content == NEEDLE


def test_top_n_and_metadata_kept() -> None:
    docs = make_docs(6, needle_at=4)
    before = [dict(d.metadata) for d in docs]
    c = _compressor(top_n=2, rounds=4)  # 0.4's four calls: enough to lift the needle from rank 5
    out = c.compress_documents(docs, "where is the needle?")
    assert len(out) == 2
    assert out[0].id == "id4"
    assert out[0].metadata["source"] == "gold"
    assert [d.metadata for d in docs] == before
    assert len(c.pan(docs, "q", top_n=1).documents) == 1
    assert len(_compressor(top_n=50).compress_documents(docs, "q")) == 6


def test_no_documents_no_calls() -> None:
    reader = ScriptedReader()
    c = _compressor(reader)
    assert list(c.compress_documents([], "q")) == []
    assert c.pan([], "q").result.stop_reason == "no-documents"
    assert reader.sync_calls == 0


async def test_async_uses_aread() -> None:
    reader = AsyncOnlyReader()
    # A flat prior: what comes back first is what the awaited readings cited. Under the
    # default rank map a needle at rank 2 of 4 starts 2.68 nats below rank 0 (log-odds
    # -3.149 against -0.468), more than citations in every prompt can add (log(0.9 / (0.25
    # / 3)) = 2.38 nats).
    compressor = _compressor(reader, top_n=1, rounds=2, retriever_prior="none")
    out = await compressor.acompress_documents(make_docs(4, needle_at=2), "q")
    assert out[0].page_content == NEEDLE
    assert reader.async_calls == 2


# ------------------------------------------------------------------ in a pipeline
def test_in_a_compression_retriever() -> None:
    pipeline = CompressionRetriever(
        base_retriever=ListRetriever(docs=make_docs(6, needle_at=5)),
        base_compressor=_compressor(top_n=2, rounds=4),
    )
    out = pipeline.invoke("where is the needle?")
    assert out[0].metadata["i"] == 5
    assert len(out) == 2


def test_chat_model_calls_nest_under_the_pipeline_run() -> None:
    chat = SmallestLabelChatModel()
    pipeline = CompressionRetriever(
        base_retriever=ListRetriever(docs=make_docs(4)), base_compressor=_compressor(chat, top_n=1, rounds=2)
    )
    runs = Runs()
    pipeline.invoke("q", config={"callbacks": [runs]})
    outer = runs.runs[0][1]
    # the compressor's own run sits under the pipeline's, the model calls under it
    (compressor,) = [(run, parent) for kind, run, parent in runs.runs if kind == "chain"]
    assert compressor[1] == outer
    assert [parent for kind, _, parent in runs.runs if kind == "chat"] == [compressor[0]] * 2


# ------------------------------------------------------------ Runnables as readers
def _runnables() -> list[tuple[str, Runnable]]:
    chat = SmallestLabelChatModel()
    return [
        ("bind", chat.bind(stop=["\n\n"])),
        ("with_retry", chat.with_retry(stop_after_attempt=2)),
        ("with_fallbacks", chat.with_fallbacks([SmallestLabelChatModel()])),
        ("configurable_fields", chat.configurable_fields(preface=ConfigurableField(id="preface"))),
    ]


RUNNABLES = pytest.mark.parametrize(("kind", "runnable"), _runnables(), ids=[k for k, _ in _runnables()])


@RUNNABLES
def test_adapter_hands_runnables_to_as_reader(
    monkeypatch: pytest.MonkeyPatch, kind: str, runnable: Runnable
) -> None:
    # The adapter must not reject (nor take as a ready reader) a chat-model Runnable:
    # it goes to readers.as_reader unchanged, which decides.
    seen: list[Any] = []
    monkeypatch.setattr(readers_module, "as_reader", lambda obj: seen.append(obj) or ScriptedReader())
    GoldPanningCompressor(reader=runnable, profile="lost-in-the-middle")._get_engine()
    assert seen == [runnable]


def _as_reader_rejects(runnable: Runnable) -> bool:
    try:
        readers_module.as_reader(runnable)
    except TypeError:
        return True
    return False


@RUNNABLES
def test_runnable_reader_end_to_end(request: pytest.FixtureRequest, kind: str, runnable: Runnable) -> None:
    if _as_reader_rejects(runnable):
        # readers.as_reader learns Runnables in separate work; until it has, this must
        # fail with its TypeError (strict: it turns into a failure once it passes).
        request.applymarker(
            pytest.mark.xfail(raises=TypeError, strict=True, reason="as_reader rejects Runnables")
        )
    out, result = _compressor(runnable, top_n=1, rounds=2).pan(make_docs(3), "q")
    assert result.failed_rounds == 0
    assert out[0].metadata["gold_panning_panned"] is True


def test_documents_given_as_a_sequence_subclass() -> None:
    class Docs(Sequence[Document]):
        def __init__(self, docs: list[Document]) -> None:
            self._docs = docs

        def __getitem__(self, i: Any) -> Any:
            return self._docs[i]

        def __len__(self) -> int:
            return len(self._docs)

    out = _compressor(top_n=1).compress_documents(Docs(make_docs(3, needle_at=1)), "q")
    assert out[0].page_content == NEEDLE
