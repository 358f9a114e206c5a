"""``rerank()`` on the engine, the LangChain compressor and the LlamaIndex postprocessor:
``(index, relevance_score)`` pairs best first, the shape of LangChain's ``CohereRerank.rerank``,
equal to ``run()``'s / ``pan()``'s ranking and probabilities."""

from __future__ import annotations

import pytest
from doubles import ScriptedReader, make_docs, make_nodes

from gold_panning_integrations import GoldPanner, GoldPanningCompressor, GoldPanningPostprocessor
from gold_panning_integrations.engine.reranked import RerankHit, reranked

QUESTION = "where is the needle?"
N = 8


def _pairs(result: object, top_n: int | None = None) -> list[tuple[int, float]]:
    ranking = list(result.ranking)[:top_n]  # type: ignore[attr-defined]
    return [(int(i), float(result.posteriors[i])) for i in ranking]  # type: ignore[attr-defined]


def test_a_hit_is_a_pair_with_names_and_cohere_keys() -> None:
    hit = RerankHit(2, 0.75)
    index, score = hit
    assert (index, score) == (2, 0.75) == (hit.index, hit.relevance_score) == (hit[0], hit[1])
    assert (hit["index"], hit["relevance_score"]) == (2, 0.75)
    assert hit._asdict() == {"index": 2, "relevance_score": 0.75}
    with pytest.raises(KeyError):
        hit["score"]


def test_engine_rerank_is_the_runs_ranking_with_posteriors() -> None:
    # The needle second in the retriever's order: under the default rank map (bounded at 8
    # documents: log-odds -0.70 at rank 0, -2.07 at rank 1, -4.25 at rank 5) citations in
    # every prompt lift a document by at most log(0.9 / (0.25 / 7)) = 3.227 nats, so a
    # needle at rank 1 can pass 0.5 (up to sigmoid(1.157) = 0.761) and one at rank 5 cannot
    # (sigmoid(-1.02) = 0.265)
    texts = [d.page_content for d in make_docs(N, needle_at=1)]
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    result = panner.run(QUESTION, texts)
    hits = panner.rerank(QUESTION, texts)
    assert hits == _pairs(result)
    assert hits[0].index == 1 and 0.5 < hits[0].relevance_score < 1.0
    assert (
        len({round(h.relevance_score, 12) for h in hits}) > 2
    )  # the probabilities are the result's, not ranks
    assert panner.rerank(QUESTION, texts, top_n=3) == _pairs(result, 3)
    assert panner.rerank(QUESTION, texts, top_n=100) == hits
    assert reranked(result, top_n=1) == hits[:1]


async def test_engine_arerank_equals_rerank() -> None:
    texts = [d.page_content for d in make_docs(N, needle_at=2)]
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    assert await panner.arerank(QUESTION, texts, top_n=4) == panner.rerank(QUESTION, texts, top_n=4)


@pytest.mark.parametrize("top_n", [0, -1, 1.5, True, "3"])
def test_a_bad_top_n_is_refused_before_any_call(top_n: object) -> None:
    panner = GoldPanner(ScriptedReader(), "lost-in-the-middle")
    with pytest.raises(ValueError, match="top_n must be an int >= 1"):
        panner.rerank(QUESTION, ["a", "b"], top_n=top_n)  # type: ignore[arg-type]


@pytest.mark.parametrize("top_n", [None, 2, 5])
def test_compressor_rerank_matches_pan(top_n: int | None) -> None:
    docs = make_docs(N, needle_at=6)
    compressor = GoldPanningCompressor(reader=ScriptedReader(), top_n=3, profile="lost-in-the-middle")
    panned = compressor.pan(docs, QUESTION, top_n=top_n)
    hits = compressor.rerank(docs, QUESTION, top_n=top_n)
    assert hits == _pairs(panned.result, top_n)
    assert len(hits) == (N if top_n is None else top_n)
    # the documents pan() returns carry the same scores, in the same order
    for doc, hit in zip(panned.documents, hits):
        assert doc.metadata["relevance_score"] == hit.relevance_score
        assert doc.metadata["i"] == hit.index


async def test_compressor_takes_texts_and_arerank_equals_rerank() -> None:
    docs = make_docs(N, needle_at=1)
    compressor = GoldPanningCompressor(reader=ScriptedReader(), top_n=None, profile="lost-in-the-middle")
    hits = compressor.rerank(docs, QUESTION)
    assert compressor.rerank([d.page_content for d in docs], QUESTION) == hits
    assert await compressor.arerank(docs, QUESTION) == hits
    # the shape of CohereRerank.rerank's results
    cohere = [{"index": h["index"], "relevance_score": h["relevance_score"]} for h in hits]
    assert cohere == [{"index": i, "relevance_score": p} for i, p in hits]
    assert cohere[0]["index"] == 1


@pytest.mark.parametrize("top_n", [None, 3])
def test_postprocessor_rerank_matches_pan(top_n: int | None) -> None:
    nodes = make_nodes(N, needle_at=4, scored=True)
    post = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=2, profile="lost-in-the-middle")
    panned = post.pan(nodes, QUESTION, top_n=top_n)
    hits = post.rerank(nodes, QUESTION, top_n=top_n)
    assert hits == _pairs(panned.result, top_n)
    assert [n.score for n in panned.nodes] == [h.relevance_score for h in hits[: len(panned.nodes)]]


async def test_postprocessor_takes_texts_and_arerank_equals_rerank() -> None:
    nodes = make_nodes(N, needle_at=7)
    post = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=N, profile="lost-in-the-middle")
    hits = post.rerank(nodes, QUESTION)
    assert post.rerank([n.node.get_content() for n in nodes], QUESTION) == hits
    assert await post.arerank(nodes, QUESTION) == hits
    assert hits[0].index == 7 and len(hits) == N


def test_empty_input_gives_no_pairs() -> None:
    compressor = GoldPanningCompressor(reader=ScriptedReader(), profile="lost-in-the-middle")
    assert compressor.rerank([], QUESTION) == []
    post = GoldPanningPostprocessor(reader=ScriptedReader(), profile="lost-in-the-middle")
    assert post.rerank([], QUESTION) == []
