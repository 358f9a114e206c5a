"""One ``rerank`` everywhere, the one LangChain's ``CohereRerank.rerank`` users call:
``rerank(documents, query, *, top_n=None)`` (keywords in any order) on the engine, the
LangChain compressor and the LlamaIndex postprocessor, returning
``[{"index": i, "relevance_score": p}, ...]`` best first (plain dicts: ``json.dumps`` and
``hit.get("index")`` work), ``top_n`` None or -1 for every document, texts and
``{"text": ...}`` dicts accepted as Cohere accepts them; equal to ``run()``'s / ``pan()``'s
ranking and probabilities."""

from __future__ import annotations

import json

import pytest
from doubles import ScriptedReader, make_docs, make_nodes

from gold_panning_integrations import (
    GoldPanner,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    InvalidInputError,
)
from gold_panning_integrations.engine.reranked import reranked

QUESTION = "where is the needle?"
N = 8


def _hits(result: object, top_n: int | None = None) -> list[dict[str, object]]:
    """The reranking of a result, written out by hand: ranking cut to ``top_n``, posteriors."""
    ranking = list(result.ranking)[:top_n]  # type: ignore[attr-defined]
    return [{"index": int(i), "relevance_score": float(result.posteriors[i])} for i in ranking]  # type: ignore[attr-defined]


def _texts(needle_at: int) -> list[str]:
    return [d.page_content for d in make_docs(N, needle_at=needle_at)]


def test_the_engine_takes_cohere_order_and_returns_cohere_dicts() -> None:
    # the needle second in the retriever's order: the default rank map's prior there is low
    # enough that citations must lift it, high enough that citations in every prompt can
    # pass 0.5 (the false-lead mixture caps their lift at log(0.9 / (0.25 / 7)) = 3.23 nats)
    texts = _texts(1)
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    result = panner.run(QUESTION, texts)
    hits = panner.rerank(texts, QUESTION)  # CohereRerank.rerank(documents, query)
    assert hits == _hits(result)
    assert all(type(h) is dict for h in hits)
    assert json.loads(json.dumps(hits)) == hits  # serialises as Cohere's results do
    assert hits[0].get("index") == 1 and 0.5 < hits[0]["relevance_score"] < 1.0
    assert len({round(h["relevance_score"], 12) for h in hits}) > 2  # probabilities, not ranks
    # keywords in any order, as Cohere users write them
    assert panner.rerank(query=QUESTION, documents=texts, top_n=3) == _hits(result, 3)
    assert panner.rerank(top_n=3, documents=texts, query=QUESTION) == _hits(result, 3)
    assert panner.rerank(texts, QUESTION, top_n=100) == hits
    assert reranked(result, top_n=1) == hits[:1]


@pytest.mark.parametrize("everything", [None, -1])
def test_none_and_minus_one_mean_every_document(everything: int | None) -> None:
    texts = _texts(2)
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    assert len(panner.rerank(texts, QUESTION, top_n=everything)) == N
    compressor = GoldPanningCompressor(reader=ScriptedReader(), profile="lost-in-the-middle", top_n=2)
    assert len(compressor.rerank(make_docs(N, needle_at=2), QUESTION, top_n=everything)) == N
    post = GoldPanningPostprocessor(reader=ScriptedReader(), profile="lost-in-the-middle", top_n=2)
    assert len(post.rerank(make_nodes(N, needle_at=2), QUESTION, top_n=everything)) == N


def test_text_dicts_are_read_as_cohere_reads_them() -> None:
    texts = _texts(3)
    dicts = [{"text": t, "source": f"s{i}"} for i, t in enumerate(texts)]
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    assert panner.rerank(dicts, QUESTION) == panner.rerank(texts, QUESTION)
    compressor = GoldPanningCompressor(reader=ScriptedReader(), profile="lost-in-the-middle", top_n=None)
    assert compressor.rerank(dicts, QUESTION) == compressor.rerank(texts, QUESTION)
    post = GoldPanningPostprocessor(reader=ScriptedReader(), profile="lost-in-the-middle", top_n=None)
    assert post.rerank(dicts, QUESTION) == post.rerank(texts, QUESTION)
    with pytest.raises(InvalidInputError, match=r'document 1 is a dict without a "text" string'):
        panner.rerank([{"text": "a"}, {"body": "b"}], QUESTION)


async def test_engine_arerank_equals_rerank() -> None:
    texts = _texts(2)
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    assert await panner.arerank(texts, QUESTION, top_n=4) == panner.rerank(texts, QUESTION, top_n=4)
    assert await panner.arerank(query=QUESTION, documents=texts) == panner.rerank(texts, QUESTION)


@pytest.mark.parametrize("top_n", [0, -2, 1.5, True, "3"])
def test_a_bad_top_n_is_refused_before_any_call(top_n: object) -> None:
    reader = ScriptedReader()
    panner = GoldPanner(reader, "lost-in-the-middle")
    with pytest.raises(ValueError, match=r"top_n must be an int >= 1 .*, or None or -1 \(all of them\)"):
        panner.rerank(["a", "b"], QUESTION, top_n=top_n)  # type: ignore[arg-type]
    compressor = GoldPanningCompressor(reader=reader, profile="lost-in-the-middle")
    with pytest.raises(ValueError, match="top_n must be an int >= 1"):
        compressor.rerank(["a", "b"], QUESTION, top_n=top_n)  # type: ignore[arg-type]
    assert reader.sync_calls == 0


@pytest.mark.parametrize("top_n", [None, 2, 5])
def test_compressor_rerank_matches_pan(top_n: int | None) -> None:
    docs = make_docs(N, needle_at=6)
    compressor = GoldPanningCompressor(reader=ScriptedReader(), top_n=3, profile="lost-in-the-middle")
    panned = compressor.pan(docs, QUESTION, top_n=top_n)
    hits = compressor.rerank(docs, QUESTION, top_n=top_n)
    assert hits == _hits(panned.result, top_n)
    assert len(hits) == (N if top_n is None else top_n)
    # the documents pan() returns carry the same scores, in the same order
    for doc, hit in zip(panned.documents, hits):
        assert doc.metadata["relevance_score"] == hit["relevance_score"]
        assert doc.metadata["i"] == hit["index"]


async def test_compressor_takes_texts_and_arerank_equals_rerank() -> None:
    docs = make_docs(N, needle_at=1)
    compressor = GoldPanningCompressor(reader=ScriptedReader(), top_n=None, profile="lost-in-the-middle")
    hits = compressor.rerank(docs, QUESTION)
    assert compressor.rerank([d.page_content for d in docs], QUESTION) == hits
    assert compressor.rerank(query=QUESTION, documents=docs) == hits
    assert await compressor.arerank(docs, QUESTION) == hits
    assert hits[0]["index"] == 1


@pytest.mark.parametrize("top_n", [None, 3])
def test_postprocessor_rerank_matches_pan(top_n: int | None) -> None:
    nodes = make_nodes(N, needle_at=4, scored=True)
    post = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=2, profile="lost-in-the-middle")
    panned = post.pan(nodes, QUESTION, top_n=top_n)
    hits = post.rerank(nodes, QUESTION, top_n=top_n)
    assert hits == _hits(panned.result, top_n)
    assert [n.score for n in panned.nodes] == [h["relevance_score"] for h in hits[: len(panned.nodes)]]


async def test_postprocessor_takes_texts_and_nodes_and_arerank_equals_rerank() -> None:
    nodes = make_nodes(N, needle_at=7)
    post = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=N, profile="lost-in-the-middle")
    hits = post.rerank(nodes, QUESTION)
    assert post.rerank([n.node.get_content() for n in nodes], QUESTION) == hits
    assert post.rerank([n.node for n in nodes], QUESTION) == hits
    assert post.rerank(query=QUESTION, documents=nodes) == hits
    assert await post.arerank(nodes, QUESTION) == hits
    assert hits[0]["index"] == 7 and len(hits) == N


def test_empty_input_gives_no_hits() -> None:
    compressor = GoldPanningCompressor(reader=ScriptedReader(), profile="lost-in-the-middle")
    assert compressor.rerank([], QUESTION) == []
    post = GoldPanningPostprocessor(reader=ScriptedReader(), profile="lost-in-the-middle")
    assert post.rerank([], QUESTION) == []
    assert GoldPanner(ScriptedReader(), "lost-in-the-middle").rerank([], QUESTION) == []
