"""Issue 42 through every adapter: the probability a chain thresholds is a function of the
readings, the prior and the profile, never of how many documents were asked for.

Two scripted readers a person can reason about, whose readings do not depend on placement
(the ones ``python -m benchmarks.scripted_readers`` prints docs/probabilities.md's table
with): one that cites nothing in any prompt (nothing here is relevant), one that cites
passage #4 in every prompt and never another. 8 candidates in the retriever's order, the
generic profile, the defaults otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from doubles import ListRetriever
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from benchmarks.scripted_readers import TEXTS, CitesOne, Silent
from gold_panning_integrations import (
    GoldPanner,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
)

QUESTION = "which passage answers?"
PROFILE = "lost-in-the-middle"
KS: tuple[int | None, ...] = (1, 2, 4, 8, None)


def _docs() -> list[Document]:
    return [Document(page_content=t, id=f"d{i}") for i, t in enumerate(TEXTS)]


def _nodes(scores: Sequence[float | None] | None = None) -> list[NodeWithScore]:
    s = scores or [None] * len(TEXTS)
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=s[i]) for i, t in enumerate(TEXTS)]


def _through(adapter: str, reader: Any, k: int | None, *, is_async: bool, **options: Any) -> Any:
    """The PanningResult the adapter computed for the query, with ``k`` (``top_n``)."""
    if adapter == "engine":
        panner = GoldPanner(reader, PROFILE, k=k, **options)
        return asyncio.run(panner.arun(QUESTION, TEXTS)) if is_async else panner.run(QUESTION, TEXTS)
    if adapter == "retriever":
        r = GoldPanningRetriever(
            base_retriever=ListRetriever(docs=_docs()), reader=reader, profile=PROFILE, k=k, **options
        )
        out = asyncio.run(r.apan(QUESTION)) if is_async else r.pan(QUESTION)
    elif adapter == "compressor":
        c = GoldPanningCompressor(reader=reader, profile=PROFILE, top_n=k, **options)
        out = asyncio.run(c.apan(_docs(), QUESTION)) if is_async else c.pan(_docs(), QUESTION)
    else:
        p = GoldPanningPostprocessor(reader=reader, profile=PROFILE, top_n=k, **options)
        out = asyncio.run(p.apan(_nodes(), QUESTION)) if is_async else p.pan(_nodes(), QUESTION)
    return out.result


ADAPTERS = ("engine", "retriever", "compressor", "postprocessor")


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_k_chooses_what_is_returned_and_changes_no_probability(adapter: str, is_async: bool) -> None:
    for make in (Silent, CitesOne):
        results = [_through(adapter, make(), k, is_async=is_async) for k in KS]
        first = results[0]
        for k, res in zip(KS, results):
            assert res.posteriors.tolist() == first.posteriors.tolist(), (make.__name__, k)
            assert res.p_none == first.p_none, (make.__name__, k)
            assert len(res.selected) == (8 if k is None else k)
        if make is CitesOne:
            # Cited in all 6 prompts, never another: first, whatever k.
            assert all(int(r.ranking[0]) == 4 for r in results)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_reader_silent_everywhere_says_nothing_is_relevant(is_async: bool) -> None:
    """Six prompts, no citation: p_none >= 0.8 and min_relevance=0.5 returns nothing,
    through the retriever, the compressor and the postprocessor."""
    res = _through("engine", Silent(), 4, is_async=is_async)
    assert res.p_none >= 0.8 and float(res.posteriors.max()) < 0.5
    options = {"min_relevance": 0.5, "profile": PROFILE}
    retriever = GoldPanningRetriever(base_retriever=ListRetriever(docs=_docs()), reader=Silent(), **options)
    compressor = GoldPanningCompressor(reader=Silent(), **options)
    post = GoldPanningPostprocessor(reader=Silent(), **options)
    if is_async:
        got = [
            asyncio.run(retriever.ainvoke(QUESTION)),
            asyncio.run(compressor.acompress_documents(_docs(), QUESTION)),
            asyncio.run(post.apostprocess_nodes(_nodes(), query_str=QUESTION)),
        ]
    else:
        got = [
            retriever.invoke(QUESTION),
            compressor.compress_documents(_docs(), QUESTION),
            post.postprocess_nodes(_nodes(), query_str=QUESTION),
        ]
    assert [list(g) for g in got] == [[], [], []]


def test_dense_style_scores_do_not_outweigh_consistent_citations() -> None:
    """Nodes scored 1.00, 0.95, ..., 0.65 (a dense retriever's spread); n4 cited in 4 of
    the 6 prompts, nothing cited otherwise; defaults (top_n=3): n4 comes first. Without a
    temperature fitted for this retriever the scores give only their order, and the rank
    prior is bounded below what consistent citations can overturn."""
    scores = [1.0 - 0.05 * i for i in range(8)]
    post = GoldPanningPostprocessor(reader=CitesOne(4, every={1, 2, 4, 5}), profile=PROFILE, top_n=3)
    best = post.postprocess_nodes(_nodes(scores), query_str=QUESTION)
    assert best[0].node.node_id == "n4"
    assert best[0].score is not None and best[0].score > 0.5 > best[1].score


def test_equal_scores_cost_nothing() -> None:
    """A retriever whose scores carry no information (all equal) gives the same posteriors
    as one that gives none, under retriever_prior='score'."""
    post = GoldPanningPostprocessor(reader=CitesOne(4), profile=PROFILE, retriever_prior="score")
    with_scores = post.pan(_nodes([0.7] * 8), QUESTION).result.posteriors
    flat = GoldPanningPostprocessor(reader=CitesOne(4), profile=PROFILE, retriever_prior="none")
    assert np.allclose(with_scores, flat.pan(_nodes(), QUESTION).result.posteriors, atol=0)
