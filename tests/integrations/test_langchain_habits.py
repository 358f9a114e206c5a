"""LangChain's habits: configs merged with ``merge_configs``, one parent run per
compressor call, ``top_n=None``, ``**kwargs`` on ``compress_documents``, deep-copied
metadata. Each test failed on 0.5."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from doubles import ListRetriever, ScriptedReader, SmallestLabelChatModel, make_docs
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from gold_panning_integrations import GoldPanningCompressor, GoldPanningRetriever
from gold_panning_integrations.readers.chat_model import ChatModelReader


class Runs(BaseCallbackHandler):
    """Records (kind, name, run id, parent run id) of chain, retriever and chat-model runs."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str | None, UUID, UUID | None]] = []
        self.ended: list[UUID] = []

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("chain", kw.get("name"), run_id, parent_run_id))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self.ended.append(run_id)

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("retriever", kw.get("name"), run_id, parent_run_id))

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.runs.append(("chat", None, run_id, parent_run_id))

    def of(self, kind: str) -> list[tuple[str, str | None, UUID, UUID | None]]:
        return [r for r in self.runs if r[0] == kind]


# ------------------------------------------------------------------ merge_configs
def test_reader_config_callbacks_fire_inside_a_retriever_run() -> None:
    """0.5 merged ``{**self.config, **config}``: the run's callbacks replaced the reader's."""
    own = Runs()
    reader = ChatModelReader(SmallestLabelChatModel(), config={"callbacks": [own], "tags": ["reader"]})
    retriever = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(4)), reader=reader, rounds=2, prompts_per_round=1
    )
    outer = Runs()
    retriever.invoke("q", config={"callbacks": [outer]})
    assert len(own.of("chat")) == 2  # the reader's own handler: 0 on 0.5
    assert len(outer.of("chat")) == 2  # and the run's


def test_reader_config_merges_tags_and_metadata() -> None:
    reader = ChatModelReader(SmallestLabelChatModel(), config={"tags": ["a"], "metadata": {"x": 1}})
    merged = reader._config({"tags": ["b"], "metadata": {"y": 2}})
    assert merged is not None
    assert sorted(merged["tags"]) == ["a", "b"]
    assert merged["metadata"] == {"x": 1, "y": 2}


# ------------------------------------------------------------------ one parent run
def test_standalone_compress_documents_is_one_run_with_the_calls_as_children() -> None:
    """0.5: six unrelated root chat runs; now one chain run holding them."""
    runs = Runs()
    compressor = GoldPanningCompressor(reader=SmallestLabelChatModel(), top_n=2)
    compressor.compress_documents(make_docs(6), "q", callbacks=[runs])
    (chain,) = runs.of("chain")
    assert chain[1] == "GoldPanningCompressor" and chain[3] is None
    chats = runs.of("chat")
    assert len(chats) == 6
    assert {parent for *_, parent in chats} == {chain[2]}
    assert runs.ended == [chain[2]]


def test_compressor_run_nests_under_the_run_in_context() -> None:
    runs = Runs()
    compressor = GoldPanningCompressor(
        reader=SmallestLabelChatModel(), top_n=1, rounds=1, prompts_per_round=1
    )
    chain = RunnableLambda(lambda q: compressor.compress_documents(make_docs(3), q), name="outer")
    chain.invoke("q", config={"callbacks": [runs]})
    outer, inner = runs.of("chain")
    assert (outer[1], inner[1]) == ("outer", "GoldPanningCompressor")
    assert inner[3] == outer[2]
    assert [parent for *_, parent in runs.of("chat")] == [inner[2]]


def test_compressor_run_name_and_tags_from_kwargs() -> None:
    runs = Runs()
    compressor = GoldPanningCompressor(
        reader=SmallestLabelChatModel(), top_n=1, rounds=1, prompts_per_round=1
    )
    compressor.compress_documents(make_docs(3), "q", callbacks=[runs], run_name="rerank", tags=["t"])
    assert runs.of("chain")[0][1] == "rerank"


async def test_async_compressor_is_one_run_too() -> None:
    runs = Runs()
    compressor = GoldPanningCompressor(
        reader=SmallestLabelChatModel(), top_n=2, rounds=2, prompts_per_round=2
    )
    await compressor.acompress_documents(make_docs(5), "q", callbacks=[runs])
    (chain,) = runs.of("chain")
    assert [parent for *_, parent in runs.of("chat")] == [chain[2]] * 4


def test_a_failing_compressor_run_ends_in_error() -> None:
    errors: list[BaseException] = []

    class OnError(Runs):
        def on_chain_error(self, error: BaseException, **kw: Any) -> None:
            errors.append(error)

    compressor = GoldPanningCompressor(reader=SmallestLabelChatModel(), on_failure="raise", max_calls=None)
    with pytest.raises(Exception, match="not a list"):
        compressor.compress_documents("not a list", "q", callbacks=[OnError()])  # type: ignore[arg-type]
    assert errors == []  # checked before the run starts

    class Boom:
        def read(self, question: str, documents: Any, *, labels: Any) -> Any:
            raise SystemExit(3)  # not turned into a failed reading

    with pytest.raises(SystemExit):
        GoldPanningCompressor(reader=Boom()).compress_documents(make_docs(2), "q", callbacks=[OnError()])
    assert len(errors) == 1 and isinstance(errors[0], SystemExit)


# ------------------------------------------------------------------ top_n=None, kwargs
def test_top_n_none_returns_every_document_ranked() -> None:
    docs = make_docs(6, needle_at=4)
    out = GoldPanningCompressor(reader=ScriptedReader(), top_n=None).compress_documents(docs, "needle?")
    assert len(out) == 6
    assert out[0].metadata["i"] == 4
    assert [d.metadata["gold_panning_rank"] for d in out] == [1, 2, 3, 4, 5, 6]
    scores = [d.metadata["relevance_score"] for d in out]
    assert scores == sorted(scores, reverse=True)
    assert sorted(d.id for d in out) == sorted(d.id for d in docs)


def test_top_n_none_keeps_min_relevance() -> None:
    """top_n=None lifts the count limit only: the threshold still drops documents."""
    docs = make_docs(6, needle_at=4)
    everything = GoldPanningCompressor(reader=ScriptedReader(), top_n=None).compress_documents(
        docs, "needle?"
    )
    cut = 0.5 * (everything[0].metadata["relevance_score"] + everything[1].metadata["relevance_score"])
    out = GoldPanningCompressor(reader=ScriptedReader(), top_n=None, min_relevance=cut).compress_documents(
        docs, "needle?"
    )
    assert [d.metadata["i"] for d in out] == [4]
    none = GoldPanningCompressor(reader=ScriptedReader(), top_n=None, min_relevance=1.0).compress_documents(
        docs, "needle?"
    )
    assert none == []


def test_top_n_per_call_through_kwargs() -> None:
    compressor = GoldPanningCompressor(reader=ScriptedReader(), top_n=None)
    assert len(compressor.compress_documents(make_docs(6), "q", top_n=2)) == 2
    out = asyncio.run(
        GoldPanningCompressor(reader=ScriptedReader()).acompress_documents(make_docs(6), "q", top_n=5)
    )
    assert len(out) == 5


def test_unknown_kwargs_are_named() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['colour'\]"):
        GoldPanningCompressor(reader=ScriptedReader()).compress_documents(make_docs(2), "q", colour="red")


def test_top_n_zero_is_still_rejected() -> None:
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        GoldPanningCompressor(reader=ScriptedReader(), top_n=0)


# ------------------------------------------------------------------ deep-copied metadata
def test_nested_metadata_of_the_caller_is_never_changed() -> None:
    docs = [Document(page_content=f"doc {i}", metadata={"tags": ["a"], "nested": {"n": i}}) for i in range(3)]
    out = GoldPanningCompressor(reader=ScriptedReader(), top_n=3).compress_documents(docs, "q")
    for d in out:
        d.metadata["tags"].append("changed")
        d.metadata["nested"]["n"] = -1
    assert [d.metadata for d in docs] == [{"tags": ["a"], "nested": {"n": i}} for i in range(3)]
