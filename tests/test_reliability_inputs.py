"""Reliability: awkward inputs, end to end.

Documents: one, k > n, identical texts, empty strings, megabyte documents, 10,000
documents under a small context budget (dummy positions, and windows). Profiles: a
length that differs from the number of documents (resampled), and TPR = FPR everywhere
(no evidence: prior order, flagged). Each case is either a clear error or a documented
degradation pinned here. Zero documents, profile files and values are covered in
``test_engine_panner.py``, ``test_langchain_retriever.py``,
``test_llama_index_postprocessor.py`` and ``test_profiles.py``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from doubles import ListRetriever, shown_documents
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode
from openai_server import FakeOpenAIServer, RecordedRequest, dynamic, ok, status

from gold_panning_integrations import (
    AllRoundsFailedError,
    DetectorProfile,
    GoldPanner,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    Reading,
    SimulatedReader,
)
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.priors import BOUND_SHARE, DEFAULT_RANK_MAP, bounded_prior
from gold_panning_integrations.engine.rounds import evidence_swing
from gold_panning_integrations.errors import FatalReaderError
from gold_panning_integrations.readers import ChatModelReader, LlamaIndexLLMReader, OpenAIReader
from gold_panning_integrations.readers._errors import classify_error
from gold_panning_integrations.readers._prompt import (
    TRUNCATION_MARKER,
    clip_document,
    render_documents,
    render_prompt,
)
from gold_panning_integrations.readers.answer import render_answer_prompt

NEEDLE = "The needle: the vault code is 4417."
Q = "What is the vault code?"
# Position 0 is a good detector (TPR 0.9, FPR 0.1), the last position carries no evidence.
TWO = DetectorProfile(n_positions=2, tpr=[0.9, 0.5], fpr=[0.1, 0.5], model="two")


class NeedleReader:
    """Cites every shown document containing ``needle`` (or only the first such
    position with ``first_only``); records each prompt."""

    def __init__(self, needle: str = "needle", *, first_only: bool = False) -> None:
        self.needle = needle
        self.first_only = first_only
        self.prompts: list[list[str]] = []

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.prompts.append(list(documents))
        hits = tuple(i for i, d in enumerate(documents) if self.needle in d)
        return Reading(cited=hits[:1] if self.first_only else hits)

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        return self.read(question, documents)


def _retriever(texts: Sequence[str], reader: Any, **kw: Any) -> GoldPanningRetriever:
    docs = [Document(page_content=t, metadata={"i": i}) for i, t in enumerate(texts)]
    kw.setdefault("prompts_per_round", 1)  # rounds are calls in these tests
    return GoldPanningRetriever(base_retriever=ListRetriever(docs=docs), reader=reader, **kw)


def _nodes(texts: Sequence[str]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=None) for i, t in enumerate(texts)]


def _node_index(node: NodeWithScore) -> int:
    return int(node.node.node_id[1:])


_FLAT: dict[str, Any] = {"retriever_prior": "none"}
"""Options of the tests that follow a needle placed after other documents through awkward
inputs: a flat prior, so that what comes back first is where the citations led. Under the
default rank map a needle at rank 2 starts 2.68 nats below rank 0 (log-odds -3.149 against
-0.468), more than citations in every prompt can add to it with the default rates
(``log((1 - b) / a)``, b = 0.1, a = 0.25 / (n - 1): 1.97 nats at n = 3, 2.38 at n = 4): it
overtakes rank 0 only once rank 0 is missed at informative positions."""


# ------------------------------------------------------------------ one document, k > n
def test_one_document_through_both_adapters() -> None:
    reader = NeedleReader()
    # content_free=0: the paper's update, so the evidence below is derived by hand (with one
    # slot, a reply that follows the position cites the one document too: the default
    # weighing of the two kinds of reply is tested in tests/engine)
    docs, res = _retriever([NEEDLE], reader, k=3, rounds=2, profile=TWO, content_free=0.0).pan(Q)
    assert [d.page_content for d in docs] == [NEEDLE] and res.k == 1 and res.calls == 2
    assert reader.prompts == [[NEEDLE], [NEEDLE]]
    # n=1, k=3: the rank map's first rank, whatever n or k: log-odds DEFAULT_RANK_MAP.offset
    # = -1.3802 (prior 0.201; nothing to bound with one document). Two citations at the
    # strong position (the profile resampled to one position keeps its first: 0.9/0.1, which
    # the default robust likelihood reads as 0.88/0.12; the level scales TPR and FPR alike):
    # E = 2 log(22/3), e^E = 484/9. Document-level mixture: n - 1 = 0 irrelevant, so a = 0,
    # b = 0.1: g(E) = log(0.9 * 484/9 + 0.1) = log(436.5/9) = 3.881564, log-odds -1.3802 +
    # 3.881564 = 2.501364 (posterior 0.924237; -1.3802 + 2 log(22/3) = 2.604 without the mixture).
    prior = DEFAULT_RANK_MAP.offset
    assert res.prior_log_odds is not None and res.prior_log_odds[0] == pytest.approx(prior, abs=1e-12)
    assert res.log_odds[0] == pytest.approx(prior + math.log(436.5 / 9), abs=1e-12)
    odds = math.exp(prior) * 436.5 / 9
    assert res.posteriors[0] == pytest.approx(odds / (1 + odds), abs=1e-12)
    nodes, res2 = GoldPanningPostprocessor(
        reader=NeedleReader(), top_n=3, rounds=2, profile=TWO, prompts_per_round=1, content_free=0.0
    ).pan(_nodes([NEEDLE]), Q)
    assert [_node_index(n) for n in nodes] == [0] and nodes[0].score == pytest.approx(res.posteriors[0])
    assert res2.k == 1


def test_k_larger_than_n_returns_every_document_ranked() -> None:
    texts = ["Filler one.", NEEDLE, "Filler two."]
    # A flat prior (retriever_prior="none"): the order below is the evidence's, not the
    # input's. Under the default rank map (log-odds -0.468, -2.160, -3.149) the needle at
    # rank 1 needs 1.69 nats more than rank 0, and its citations here fall at the resampled
    # profile's weak positions (0.7/0.3, 0.5/0.5): rank 0 stays first (0.28 against 0.15).
    docs = _retriever(texts, NeedleReader(), k=10, rounds=2, profile=TWO, retriever_prior="none").invoke(Q)
    assert len(docs) == 3 and docs[0].page_content == NEEDLE
    assert [d.metadata["gold_panning_rank"] for d in docs] == [1, 2, 3]
    assert sorted(d.metadata["i"] for d in docs) == [0, 1, 2]
    nodes = GoldPanningPostprocessor(
        reader=NeedleReader(), top_n=10, rounds=2, profile=TWO, retriever_prior="none"
    ).postprocess_nodes(_nodes(texts), query_str=Q)
    assert _node_index(nodes[0]) == 1 and sorted(_node_index(n) for n in nodes) == [0, 1, 2]


# ------------------------------------------------------------------ identical texts
def test_identical_texts_are_separate_documents_in_the_trace() -> None:
    """Two copies of the needle: the reader cites only the first copy in each prompt;
    the citation goes to whichever copy sat there, never to both, never merged."""
    texts = ["Filler a.", NEEDLE, "Filler b.", NEEDLE, "Filler c."]
    reader = NeedleReader(first_only=True)
    # A flat prior (retriever_prior="none"): the selection is the citations', not the input
    # order's (under the default rank map the copy at rank 1, cited once in four prompts
    # here, stays below the uncited rank 0: log-odds -0.53 against -2.11 to start).
    res = GoldPanner(
        reader,
        profile="lost-in-the-middle",
        rounds=4,
        k=2,
        rng=0,
        prompts_per_round=1,
        retriever_prior="none",
    ).run(Q, texts)
    assert res.posteriors.shape == (5,)
    for tr, prompt in zip(res.rounds, reader.prompts):
        window = tr.windows[0]
        first = prompt.index(NEEDLE)
        assert tr.cited == (window[first],)  # exactly the copy shown first
        assert [texts[i] for i in window] == prompt
    assert int(res.citation_counts[[1, 3]].sum()) == 4 and res.citation_counts[[0, 2, 4]].sum() == 0
    # both copies keep their own belief; the selection is the two copies
    assert sorted(res.selected.tolist()) == [1, 3]


def test_identical_texts_come_back_as_distinct_documents() -> None:
    texts = [NEEDLE, "Filler.", NEEDLE]
    docs, res = _retriever(texts, NeedleReader(), k=2, rounds=2, profile="lost-in-the-middle").pan(Q)
    assert sorted(d.metadata["i"] for d in docs) == [0, 2]
    assert res.citation_counts.tolist() == [2, 0, 2]
    nodes = GoldPanningPostprocessor(
        reader=NeedleReader(), top_n=2, rounds=2, profile="lost-in-the-middle", prompts_per_round=1
    ).postprocess_nodes(_nodes(texts), query_str=Q)
    assert sorted(_node_index(n) for n in nodes) == [0, 2]


# ------------------------------------------------------------------ empty strings
def test_empty_documents_keep_their_labels_through_the_openai_reader() -> None:
    """Empty and blank documents still get a label each; the model's label for the
    needle maps to the needle, whatever sits around it."""
    texts = ["", "   \n\t", NEEDLE, ""]

    def model(req: RecordedRequest) -> Any:
        labels = shown_documents(req.user_text)
        # each document, empty or not, gets a label of its own (drawn at random this round)
        assert len({lab for lab, _ in labels}) == 4
        needle = [int(lab) for lab, t in labels if "vault" in t]
        return ok(json.dumps({"cited": needle}))

    with FakeOpenAIServer(default=dynamic(model)) as server:
        reader = OpenAIReader(model="m", base_url=server.base_url, api_key="k", wait=0)
        # flat priors (retriever_prior="none"): what comes back is where the labels led, not
        # the input order (_FLAT says why)
        res = GoldPanner(reader, rounds=3, k=1, rng=0, prompts_per_round=1, **_FLAT).run(Q, texts)
        assert len(server.requests) == 3
        docs = _retriever(texts, reader, k=1, rounds=2, **_FLAT).invoke(Q)
    assert res.selected.tolist() == [2] and res.citation_counts.tolist() == [0, 0, 3, 0]
    assert docs[0].metadata["i"] == 2
    assert (
        render_documents(["", " a\n b "])
        == "<document 1>\n\n</document 1>\n\n<document 2>\na b\n</document 2>"
    )


def test_empty_nodes_through_the_postprocessor() -> None:
    texts = ["", NEEDLE, ""]
    nodes, res = GoldPanningPostprocessor(reader=NeedleReader(), top_n=1, rounds=2, prompts_per_round=1).pan(
        _nodes(texts), Q
    )
    assert [_node_index(n) for n in nodes] == [1] and res.citation_counts.tolist() == [0, 2, 0]


# ------------------------------------------------------------------ megabyte documents
def test_clip_document_pinned() -> None:
    assert clip_document("a  b\n c", 3) == "a b" + TRUNCATION_MARKER
    assert clip_document("a  b\n c", 5) == "a b c"  # exactly the limit: unchanged
    assert clip_document("abc def", 4) == "abc" + TRUNCATION_MARKER  # trailing space dropped
    assert clip_document("x" * 10, None) == "x" * 10
    assert render_documents(["abcdef", "gh"], max_chars_per_doc=2) == (
        "<document 1>\nab [...]\n</document 1>\n\n<document 2>\ngh\n</document 2>"
    )
    answer_prompt = render_answer_prompt("q?", ["abcdef", "z"], max_chars_per_doc=3)
    assert "- abc [...]\n- z\n" in answer_prompt
    p = render_prompt("q?", ["abcdef"], max_chars_per_doc=2)
    assert "<document 1>\nab [...]\n</document 1>" in p and "abcdef" not in p
    # a callable template gets the documents as they are
    assert render_prompt("q?", ["abcdef"], template=lambda q, d: d[0], max_chars_per_doc=2) == "abcdef"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100"])
def test_max_chars_per_doc_is_validated(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_chars_per_doc must be an integer >= 1"):
        OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", max_chars_per_doc=bad)
    with pytest.raises(ValueError, match="max_chars_per_doc"):
        ChatModelReader(FakeListChatModel(responses=["{}"]), max_chars_per_doc=bad)
    with pytest.raises(ValueError, match="max_chars_per_doc"):
        LlamaIndexLLMReader(MockLLM(), max_chars_per_doc=bad)
    with pytest.raises(ValueError, match="max_chars_per_doc"):
        render_prompt("q", ["a"], max_chars_per_doc=bad)


BIG = "gold " * 200_000  # 1,000,000 characters
CONTEXT_ERROR = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "250041 tokens. Please reduce the length of the messages."
)


def _context_limited(limit_chars: int) -> Any:
    """A server model that refuses prompts longer than ``limit_chars`` like vLLM/OpenAI
    do (HTTP 400), and otherwise cites the label of the document mentioning the vault."""

    def model(req: RecordedRequest) -> Any:
        if len(req.user_text) > limit_chars:
            return status(400, message=CONTEXT_ERROR)
        labels = shown_documents(req.user_text)
        return ok(json.dumps({"cited": [lab for lab, t in labels if "vault" in t]}))

    return dynamic(model)


def test_megabyte_document_is_cut_to_the_default_budget() -> None:
    """Default: the reader's 8,192-token budget (3 characters per token, estimated) cuts the
    1 MB document; the prompt fits a server that takes 8,192 x 3 characters, the needle
    is found, and the result counts the cut."""
    texts = ["Filler.", BIG, NEEDLE]
    with FakeOpenAIServer(default=_context_limited(8192 * 3)) as server:
        reader = OpenAIReader(model="m", base_url=server.base_url, api_key="k", wait=0)
        assert reader.context_tokens == 8192
        reading = reader.read(Q, texts)
        assert not reading.failed and reading.documents_cut == 1
        docs, res = _retriever(texts, reader, k=1, rounds=2, **_FLAT).pan(Q)
        assert docs[0].metadata["i"] == 2 and res.failed_rounds == 0 and res.documents_cut == 2
        cuts = [reading.chars_cut] + [x.chars_cut for t in res.rounds for x in t.readings]
        assert res.chars_cut == sum(cuts[1:])
        assert len(server.requests) == 3
        for request, cut in zip(server.requests, cuts):
            [shown] = [t for _, t in shown_documents(request.user_text) if t.startswith("gold ")]
            assert shown.endswith(TRUNCATION_MARKER)
            # what was cut plus what was shown is the whole document (999,999 characters, collapsed)
            assert cut + len(shown) - len(TRUNCATION_MARKER) == len(BIG.strip())
            assert len(request.user_text) <= 8192 * 3


def test_megabyte_document_without_a_budget_is_one_clear_error() -> None:
    """``context_tokens=None``: the whole document is sent; the server's context-length
    400 is not retried and the error says which options fix it."""
    texts = ["Filler.", BIG, NEEDLE]
    with FakeOpenAIServer(default=_context_limited(20_000)) as server:
        reader = OpenAIReader(model="m", base_url=server.base_url, api_key="k", wait=0, context_tokens=None)
        reading = reader.read(Q, texts)
        assert reading.failed and reading.attempts == 1
        assert "prompt is too long" in reading.error and "context_tokens=" in reading.error
        assert "maximum context length is 8192" in reading.error
        assert len(server.requests[0].raw) > 1_000_000  # it really was sent whole
        with pytest.raises(AllRoundsFailedError, match="context_tokens="):
            _retriever(texts, reader, k=1, rounds=2).invoke(Q)
        assert len(server.requests) == 3  # one per round, no retries


def test_megabyte_document_with_a_limit_is_cut_and_marked() -> None:
    """With max_chars_per_doc the big document is cut (marked), the prompt fits, and
    labels still map by position."""
    texts = ["Filler.", BIG, NEEDLE]
    with FakeOpenAIServer(default=_context_limited(20_000)) as server:
        reader = OpenAIReader(
            model="m", base_url=server.base_url, api_key="k", wait=0, max_chars_per_doc=2000
        )
        res = GoldPanner(reader, rounds=3, k=1, rng=0, prompts_per_round=1, **_FLAT).run(Q, texts)
        docs, res2 = _retriever(texts, reader, k=1, rounds=2, **_FLAT).pan(Q)
        nodes = GoldPanningPostprocessor(
            reader=reader, top_n=1, rounds=2, prompts_per_round=1, **_FLAT
        ).postprocess_nodes(_nodes(texts), query_str=Q)
        reqs = server.requests
    assert res.selected.tolist() == [2] and res.failed_rounds == 0
    assert docs[0].metadata["i"] == 2 and res2.failed_rounds == 0 and _node_index(nodes[0]) == 2
    assert len(reqs) == 7 and all(len(r.raw) < 5_000 for r in reqs)
    shown = [t for _, t in shown_documents(reqs[0].user_text) if t.startswith("gold ")]
    assert shown == [("gold " * 400).rstrip() + TRUNCATION_MARKER]  # 2,000 characters, then the marker


def test_megabyte_document_cut_by_the_framework_readers() -> None:
    texts = ["Filler.", BIG]
    lc = ChatModelReader(FakeListChatModel(responses=['{"cited": [1]}']), max_chars_per_doc=100)
    human = lc.messages(Q, texts)[-1].content
    assert (
        len(human) < 1_000
        and "<document 2>\n" + ("gold " * 20).rstrip() + TRUNCATION_MARKER + "\n</document 2>" in human
    )
    assert lc.read(Q, texts).cited == (0,)
    li = LlamaIndexLLMReader(MockLLM(), max_chars_per_doc=100)
    assert len(li.user_message(Q, texts)) < 1_000
    answer_mode = ChatModelReader(FakeListChatModel(responses=["x"]), mode="answer", max_chars_per_doc=10)
    assert "\n- gold gold [...]\n" in answer_mode.messages(Q, texts)[-1].content
    # MockLLM echoes the prompt; the echo of a cut megabyte document is still recognised
    # (its label [1] must not become a citation)
    echo = LlamaIndexLLMReader(MockLLM(), max_chars_per_doc=100, max_attempts=1).read(Q, [BIG, "Filler."])
    assert echo.failed and "echoed the prompt" in echo.error


def test_context_length_errors_are_classified_with_a_hint() -> None:
    class HTTPError(Exception):
        def __init__(self, status_code: int, message: str) -> None:
            super().__init__(message)
            self.status_code = status_code

    too_big = classify_error(HTTPError(413, "Payload Too Large"))
    # a failed reading (not retried), not a run-ending FatalReaderError: another window may fit
    assert not isinstance(too_big, FatalReaderError) and "prompt is too long" in str(too_big)
    llama_cpp = classify_error(
        HTTPError(400, "the request exceeds the available context size, try increasing it")
    )
    assert "max_docs_per_prompt=" in str(llama_cpp) and "context_tokens=" in str(llama_cpp)
    other = classify_error(HTTPError(400, "temperature must be <= 2"))
    assert "request rejected (HTTP 400)" in str(other) and "too long" not in str(other)


# ------------------------------------------------------------------ 10,000 documents
N_BIG = 10_000


def test_ten_thousand_documents_with_dummy_positions() -> None:
    """Budget 20 per prompt: each round shows 20 documents, the rest sit on dummy
    positions with beliefs untouched. Documented degradation: in R rounds at most
    20 R documents are ever looked at; the others keep their prior."""
    texts = [f"Filler passage {i}." for i in range(N_BIG)]
    texts[7] = NEEDLE
    reader = SimulatedReader(TWO, lambda d: "needle" in d, rng=1)
    # rng=2: finding the needle in 3 rounds of 20 out of 10,000 is luck (it is with most seeds).
    res = GoldPanner(
        reader,
        profile="lost-in-the-middle",
        rounds=3,
        k=1,
        max_docs_per_prompt=20,
        retriever_prior="none",
        rng=2,
        prompts_per_round=1,
    ).run(Q, texts)
    assert res.calls == 3 and [len(tr.windows[0]) for tr in res.rounds] == [20, 20, 20]
    shown = {i for tr in res.rounds for i in tr.shown}
    # the flat prior: the default rank map's chance that none of N_BIG is relevant, spread evenly
    prior = float(DEFAULT_RANK_MAP.flat(N_BIG)[0])
    moved = np.flatnonzero(~np.isclose(res.posteriors, prior, rtol=0, atol=1e-15))
    assert set(moved.tolist()) <= shown and 20 < len(shown) <= 60  # later rounds reach unseen ones
    assert res.selected.tolist() == [7]
    assert np.all(res.posteriors[[i for i in range(N_BIG) if i not in shown]] == pytest.approx(prior))


def test_ten_thousand_documents_with_windows_show_every_document_each_round() -> None:
    texts = [f"Filler passage {i}." for i in range(N_BIG)]
    texts[9_876] = NEEDLE
    reader = NeedleReader()
    res = GoldPanner(
        reader,
        profile="lost-in-the-middle",
        rounds=2,
        k=1,
        max_docs_per_prompt=500,
        windows=True,
        retriever_prior="none",
        rng=0,
        prompts_per_round=1,
    ).run(Q, texts)
    assert res.calls == 40 and all(len(p) <= 500 for p in reader.prompts)
    for tr in res.rounds:
        assert sorted(tr.shown) == list(range(N_BIG))  # a partition: each document once
    assert res.selected.tolist() == [9_876] and res.citation_counts[9_876] == 2


def test_ten_thousand_documents_through_the_retriever_and_postprocessor() -> None:
    texts = [f"Filler passage {i}." for i in range(N_BIG)]
    texts[3] = NEEDLE  # the rank prior puts early documents first: found under a budget
    reader = NeedleReader()
    docs, res = _retriever(texts, reader, k=1, rounds=2, max_docs_per_prompt=20).pan(Q)
    assert docs[0].metadata["i"] == 3 and res.posteriors.shape == (N_BIG,)
    assert [len(p) for p in reader.prompts] == [20, 20]
    reader2 = NeedleReader()
    texts[3], texts[8_000] = texts[8_000], NEEDLE
    nodes, res2 = GoldPanningPostprocessor(
        reader=reader2,
        top_n=1,
        rounds=1,
        max_docs_per_prompt=2_000,
        windows=True,
        retriever_prior="none",
        prompts_per_round=1,
    ).pan(_nodes(texts), Q)
    assert len(reader2.prompts) == 5 and sorted(res2.rounds[0].shown) == list(range(N_BIG))
    assert _node_index(nodes[0]) == 8_000


# ------------------------------------------------------------------ profiles
def test_profile_shorter_than_the_prompt_is_resampled_through_the_retriever() -> None:
    """A 2-position profile with 3 documents is resampled by relative position:
    TPR [0.9, 0.7, 0.5], FPR [0.1, 0.3, 0.5]. Flat prior 1/3 (``expected_relevant=1``
    spread over 3) and the paper's update of each reply (``content_free=0``); the reader
    cites the document at position 0 (doc 0 in round 1, by input order): pinned by hand."""
    texts = [NEEDLE, "Filler one.", "Filler two."]
    reader = NeedleReader()
    # seed=2: the engine's shuffle of the top documents (shuffle_top) keeps input order here.
    _, res = _retriever(
        texts,
        reader,
        k=1,
        rounds=1,
        profile=TWO,
        retriever_prior="none",
        expected_relevant=1.0,
        content_free=0.0,
        seed=2,
    ).pan(Q)
    assert reader.prompts == [texts]
    base = math.log(0.5)  # log-odds of 1/3
    assert res.log_odds.tolist() == pytest.approx(
        # Defaults: robust likelihood, TPR [0.88, 0.69, 0.5], FPR [0.12, 0.31, 0.5]; the
        # level adapts: 1 citation observed, 1.31 predicted (beliefs 1/3 each) -> rates x 2/2.31,
        # which leaves citation ratios unchanged and softens misses. Evidence: doc 0 cited,
        # e^E = 0.88/0.12 = 22/3; doc 1 missed, e^E = (1 - 0.69*2/2.31) / (1 - 0.31*2/2.31)
        # = 0.93/1.69 = 93/169; doc 2, E = 0. Document-level mixture: a = min(0.25 / (3 - 1),
        # 0.5) = 0.125, b = 0.1, factor ((1-b) e^E + b) / (a e^E + 1 - a):
        # doc 0: (0.9 * 22/3 + 0.1) / (0.125 * 22/3 + 0.875) = 6.7 / (43/24) = 804/215
        #        = 3.739535 (not 7.333);
        # doc 1: (0.9 * 93/169 + 0.1) / (0.125 * 93/169 + 0.875) = 100.6/159.5 = 1006/1595
        #        = 0.630721 (not 0.550296);
        # doc 2: g(0) = 0.
        [
            base + math.log(804 / 215),
            base + math.log(1006 / 1595),
            base,
        ],
        abs=1e-12,
    )


def test_profile_too_short_without_resampling_is_refused() -> None:
    with pytest.raises(ValueError, match="set resample_profile=True"):
        GoldPanner(NeedleReader(), profile=TWO, resample_profile=False).run(Q, ["a", "b", "c"])


@pytest.mark.parametrize("rates", [[0.3, 0.3, 0.3], [0.2, 0.6, 0.9]], ids=["constant", "varying"])
def test_tpr_equal_fpr_falls_back_to_the_prior_order_flagged(
    rates: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    blind = DetectorProfile(n_positions=3, tpr=rates, fpr=rates, model="blind")
    texts = ["Filler one.", "Filler two.", NEEDLE]
    reader = NeedleReader()
    with caplog.at_level(logging.WARNING):
        docs, res = _retriever(texts, reader, k=2, profile=blind).pan(Q)
        nodes, res2 = GoldPanningPostprocessor(reader=reader, top_n=2, profile=blind).pan(_nodes(texts), Q)
    assert "TPR == FPR at every position" in caplog.text
    assert reader.prompts == []  # no model call at all
    assert (
        res.stop_reason == res2.stop_reason == "uninformative-profile" and not res.panned and not res2.panned
    )
    assert [d.metadata["i"] for d in docs] == [0, 1]  # the rank prior's order
    assert all(d.metadata["gold_panning_panned"] is False for d in docs)
    assert [_node_index(n) for n in nodes] == [0, 1]
    # the default rank map's first 3 ranks (whatever k = 2), bounded at BOUND_SHARE of the
    # swing consistent evidence can make
    config = PanningConfig().with_profile(blind)
    prior = bounded_prior(DEFAULT_RANK_MAP.probabilities(3), max_gap=BOUND_SHARE * evidence_swing(config, 3))
    np.testing.assert_allclose(res.posteriors, prior)
    np.testing.assert_allclose(res2.posteriors, prior)
