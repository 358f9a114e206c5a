"""The loopback position-biased server of ``python -m benchmarks latency``: each peer's format through
the peer's own package, determinism, latency, capacity, 429s and counting.

Profiles here use rates of exactly 0 and 1, so which documents are cited follows from
the positions by hand, whatever the seed.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from benchmarks._loopback import LoopbackServer, PositionBiasedModel, count_tokens
from benchmarks._peer_formats import PEER_FORMATS, UnknownFormatError, parse_request
from gold_panning_integrations.evaluate.compare import CompareInstance, Endpoint, peer_methods
from gold_panning_integrations.profiles import DetectorProfile
from gold_panning_integrations.readers import OpenAIReader

Q = "Who keeps the lighthouse key?"
DOCS = [
    "Mara keeps the bakery key.",
    "Ivo keeps the lighthouse key.",
    "Lena keeps the school key.",
    "Tom keeps the garage key.",
]
GOLD = 1


def profile(tpr: Sequence[float], fpr: Sequence[float] | None = None) -> DetectorProfile:
    return DetectorProfile(n_positions=len(tpr), tpr=list(tpr), fpr=list(fpr or [0.0] * len(tpr)))


def model(tpr: Sequence[float], fpr: Sequence[float] | None = None, *, seed: int = 0) -> PositionBiasedModel:
    return PositionBiasedModel(profile(tpr, fpr), {Q: [DOCS[GOLD]]}, seed=seed)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """Position 1 of 4 cites a relevant document, no position cites an irrelevant one."""
    with LoopbackServer(model([0.0, 1.0, 0.0, 0.0]), latency=0.0) as srv:
        yield srv


def post(url: str, body: Any, *, timeout: float = 10.0) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url + "/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def ours(labels: Sequence[int], docs: Sequence[str] = DOCS, question: str = Q) -> dict[str, Any]:
    """A request as our reader renders it (text format, labels as given)."""
    lines = "\n\n".join(f"<document {lab}>\n{d}\n</document {lab}>" for lab, d in zip(labels, docs))
    user = f'Question: {question}\n\n{lines}\n\nReply with JSON only, in the form {{"cited": [numbers]}}.'
    return {"model": "m", "messages": [{"role": "user", "content": user}]}


def inst(order: Sequence[int]) -> CompareInstance:
    """The question over DOCS in ``order`` (the gold wherever ``order`` puts it)."""
    docs = [DOCS[i] for i in order]
    return CompareInstance(Q, docs, (list(order).index(GOLD),))


# --------------------------------------------------------------------- our format
def test_our_reader_gets_the_label_of_the_document_at_the_citing_position(server: LoopbackServer) -> None:
    reader = OpenAIReader(model="m", base_url=server.base_url, wait=0)
    # The gold shown second (the citing position) under label 5521: cited.
    assert reader.read(Q, [DOCS[0], DOCS[1], DOCS[2], DOCS[3]], labels=[907, 5521, 13, 64]).cited == (1,)
    # The gold shown first (a position that never cites): nothing cited.
    assert reader.read(Q, [DOCS[1], DOCS[0], DOCS[2], DOCS[3]], labels=[907, 5521, 13, 64]).cited == ()
    assert server.stats().asked == {"gold-panning": {"json_schema": 2}}


def test_a_document_cut_short_by_the_reader_still_counts_as_relevant() -> None:
    long_gold = "Ivo keeps the lighthouse key in a tin box under the third step of the spiral stair."
    m = PositionBiasedModel(profile([1.0, 1.0]), {Q: [long_gold]})
    with LoopbackServer(m, latency=0.0) as srv:
        reader = OpenAIReader(model="m", base_url=srv.base_url, wait=0, max_chars_per_doc=40)
        assert reader.read(Q, [DOCS[0], long_gold], labels=[3, 8]).cited == (1,)


def test_labels_are_read_from_the_prompt_not_assumed() -> None:
    req = parse_request(ours([40812, 7, 99, 3]))
    assert req.kind == "gold-panning"
    assert [i for i, _ in req.documents] == [40812, 7, 99, 3]
    assert [t for _, t in req.documents] == DOCS


# ------------------------------------------------------------------------ the peers
@pytest.mark.parametrize("peer", ["langchain-listwise", "llamaindex-llmrerank", "llamaindex-rankgpt"])
def test_each_peer_puts_the_gold_first_when_it_sits_at_the_citing_position(
    server: LoopbackServer, peer: str
) -> None:
    run, _ = peer_methods(peer, Endpoint(server.base_url, "m", timeout=10), top_n=3)
    out = run(inst([0, 1, 2, 3]))  # gold at position 1: cited
    assert out.ranking[0] == 1
    assert out.unusable == 0


@pytest.mark.parametrize(
    ("peer", "expected"),
    [
        # Nothing cited: a listwise answer lists the documents as shown (the base order).
        ("langchain-listwise", [0, 1, 2]),
        ("llamaindex-rankgpt", [0, 1, 2]),
        # LLMRerank's reply names no document: it returns nothing (a miss).
        ("llamaindex-llmrerank", []),
    ],
)
def test_each_peer_misses_the_gold_at_a_position_that_never_cites(
    server: LoopbackServer, peer: str, expected: list[int]
) -> None:
    run, _ = peer_methods(peer, Endpoint(server.base_url, "m", timeout=10), top_n=3)
    out = run(inst([1, 0, 2, 3]))  # gold at position 0
    assert out.ranking == expected


@pytest.mark.parametrize(
    ("peer", "asked"),
    [("langchain-listwise", "json_schema"), ("llamaindex-llmrerank", "text"), ("llamaindex-rankgpt", "text")],
)
def test_the_server_records_what_each_peer_asked_on_both_paths(
    server: LoopbackServer, peer: str, asked: str
) -> None:
    import asyncio

    run, arun = peer_methods(peer, Endpoint(server.base_url, "m", timeout=10), top_n=3)
    sync_out = run(inst([2, 1, 0, 3]))
    async_out = asyncio.run(arun(inst([2, 1, 0, 3])))
    assert sync_out.ranking[0] == async_out.ranking[0] == 1  # the gold at position 1 on both paths
    assert server.stats().asked == {peer: {asked: 2}}


def test_a_tool_call_request_is_answered_with_a_tool_call(server: LoopbackServer) -> None:
    """LangChain's other structured-output method (function_calling) asks through tools."""
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, SecretStr

    class RankDocuments(BaseModel):
        ranked_document_ids: list[int]

    llm = ChatOpenAI(model="m", base_url=server.base_url, api_key=SecretStr("x"), temperature=0, timeout=10)
    chain = llm.with_structured_output(RankDocuments, method="function_calling")
    context = "".join(f"Document ID: {i}\n```{d}```\n\n" for i, d in enumerate(DOCS))
    got = chain.invoke(
        [("system", context + "Sort the Documents by their relevance to the Query."), ("human", Q)]
    )
    assert isinstance(got, RankDocuments)
    assert got.ranked_document_ids == [1, 0, 2, 3]  # the cited one, then the others as shown
    assert server.stats().asked == {"langchain-listwise": {"tools": 1}}


def test_a_rankgpt_window_is_numbered_within_the_window(server: LoopbackServer) -> None:
    """A sliding window shows a subset numbered from 1; the answer uses those numbers."""
    shown = [DOCS[3], DOCS[1]]  # the gold second of two: position 1 of the 2-position profile
    m = PositionBiasedModel(profile([0.0, 1.0]), {Q: [DOCS[GOLD]]})
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are RankGPT."},
            {"role": "user", "content": f"I will provide you with 2 passages. Rank them for: {Q}."},
            {"role": "assistant", "content": "Okay, please provide the passages."},
            {"role": "user", "content": f"[1] {shown[0]}"},
            {"role": "assistant", "content": "Received passage [1]."},
            {"role": "user", "content": f"[2] {shown[1]}"},
            {"role": "assistant", "content": "Received passage [2]."},
            {
                "role": "user",
                "content": f"Search Query: {Q}. \nRank the 2 passages. The output format should be [] > [].",
            },
        ],
    }
    req, message, known = m.answer(body)
    assert (req.kind, known) == ("llamaindex-rankgpt", True)
    assert message["content"] == "[2] > [1]"


def test_llmrerank_lists_every_cited_document_with_falling_relevance() -> None:
    m = PositionBiasedModel(profile([1.0, 1.0, 1.0]), {Q: [DOCS[0], DOCS[2]]})
    docs = "\n\n".join(f"Document {i + 1}:\n{d}" for i, d in enumerate(DOCS[:3]))
    user = (
        f"A list of documents is shown below.\n\nDocument 1:\n<summary of document 1>\n\n"
        f"Question: <question>\n\nAnswer:\nDoc: 9, Relevance: 7\n\nLet's try this now:\n\n{docs}\n\n\n"
        f"Question: {Q}\n\nAnswer:"
    )
    _, message, _ = m.answer({"model": "m", "messages": [{"role": "user", "content": user}]})
    assert message["content"] == "Doc: 1, Relevance: 10\nDoc: 3, Relevance: 9"


def test_a_request_in_no_known_format_is_refused_with_the_formats_listed(server: LoopbackServer) -> None:
    code, _, body = post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
    assert code == 400
    for kind in PEER_FORMATS:
        assert kind in body["error"]["message"]
    with pytest.raises(UnknownFormatError, match="no list of chat messages"):
        parse_request({"model": "m"})
    stats = server.stats()
    assert (stats.requests, stats.answered, stats.errors) == (1, 0, 1)


def test_a_streaming_request_is_refused(server: LoopbackServer) -> None:
    code, _, body = post(server.base_url, {**ours([1, 2, 3, 4]), "stream": True})
    assert code == 400 and "stream" in body["error"]["message"]


def test_models_are_listed(server: LoopbackServer) -> None:
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "loopback-position-biased"


# --------------------------------------------------------------------- determinism
def test_a_request_gets_the_same_answer_whatever_the_arrival_order() -> None:
    half = profile([0.5] * 4, [0.5] * 4)
    bodies = [ours(labels) for labels in ([1, 2, 3, 4], [4, 3, 2, 1], [10, 20, 30, 40], [7, 5, 3, 1])]
    first = PositionBiasedModel(half, {Q: [DOCS[GOLD]]}, seed=3)
    second = PositionBiasedModel(half, {Q: [DOCS[GOLD]]}, seed=3)
    forward = [first.answer(b)[1]["content"] for b in bodies]
    backward = [second.answer(b)[1]["content"] for b in reversed(bodies)][::-1]
    assert forward == backward
    assert [first.answer(b)[1]["content"] for b in bodies] == forward  # asked again: the same answers


def test_the_run_seed_changes_the_draws() -> None:
    half = profile([0.5] * 4, [0.5] * 4)
    bodies = [ours([i, i + 1, i + 2, i + 3]) for i in range(1, 41)]
    a = PositionBiasedModel(half, {Q: [DOCS[GOLD]]}, seed=0)
    b = PositionBiasedModel(half, {Q: [DOCS[GOLD]]}, seed=1)
    assert [a.answer(x)[1]["content"] for x in bodies] != [b.answer(x)[1]["content"] for x in bodies]


def test_rates_follow_the_profile_resampled_to_the_prompt() -> None:
    """A 2-position profile (1, 0) resampled to 3 positions: 1, 0.5, 0 by relative position."""
    m = PositionBiasedModel(profile([1.0, 0.0]), {})
    tpr, fpr = m.rates(3)
    assert tpr.tolist() == [1.0, 0.5, 0.0]
    assert fpr.tolist() == [0.0, 0.0, 0.0]


def test_citation_frequency_follows_the_rate_at_each_position() -> None:
    """Rates 0.9 and 0.1 for a relevant document: over 2,000 distinct prompts the cited
    shares are 0.9 and 0.1 within 0.03 (each is Binomial(2000, p)/2000, sd <= 0.007)."""
    m = PositionBiasedModel(profile([0.9, 0.1]), {Q: [DOCS[GOLD]]}, seed=0)
    hits = [0, 0]
    for i in range(2000):
        for pos in (0, 1):
            docs = [DOCS[1], DOCS[0]] if pos == 0 else [DOCS[0], DOCS[1]]
            content = m.answer(ours([i + 1, i + 2], docs))[1]["content"]
            hits[pos] += json.loads(content)["cited"] == [i + 1 + pos]
    assert abs(hits[0] / 2000 - 0.9) < 0.03
    assert abs(hits[1] / 2000 - 0.1) < 0.03


def test_the_question_is_the_longest_declared_one_in_the_request() -> None:
    m = PositionBiasedModel(profile([1.0, 1.0]), {"Who keeps the key?": [DOCS[0]], Q: [DOCS[GOLD]]})
    assert m.question_of(ours([1, 2], DOCS[:2])["messages"][0]["content"]) == Q
    _, message, known = m.answer(ours([1, 2], DOCS[:2]))
    assert known and json.loads(message["content"]) == {"cited": [2]}


def test_an_unknown_question_counts_and_cites_by_the_false_positive_rate(server: LoopbackServer) -> None:
    code, _, body = post(server.base_url, ours([1, 2, 3, 4], question="Who keeps the boat key?"))
    assert code == 200 and json.loads(body["choices"][0]["message"]["content"]) == {"cited": []}
    assert server.stats().unknown_question == 1


# ------------------------------------------------------------------------- counting
def test_count_tokens_counts_words_and_punctuation() -> None:
    assert count_tokens('Ivo keeps the key. {"cited": [7]}') == 5 + 9


def test_usage_reports_the_counted_tokens(server: LoopbackServer) -> None:
    # 'Question:' 2 + the question 6 (5 words and '?'); four blocks
    # '<document l>' 4 + 'text.' 6 + '</document l>' 5;
    # 'Reply with JSON only, in the form {"cited": [numbers]}.' 8 words + 10 marks.
    body = ours([1, 2, 3, 4])
    expected_prompt = 8 + 4 * 15 + 18
    assert count_tokens(body["messages"][0]["content"]) == expected_prompt
    code, _, resp = post(server.base_url, body)
    assert code == 200
    assert resp["choices"][0]["message"]["content"] == '{"cited": [2]}'
    # '{"cited": [2]}': the word 'cited', the digit, and 7 marks.
    assert resp["usage"] == {
        "prompt_tokens": expected_prompt,
        "completion_tokens": 9,
        "total_tokens": expected_prompt + 9,
    }
    stats = server.stats()
    assert (stats.requests, stats.answered, stats.prompt_tokens, stats.completion_tokens) == (1, 1, 86, 9)


def test_stats_minus_gives_the_counts_of_a_span(server: LoopbackServer) -> None:
    post(server.base_url, ours([1, 2, 3, 4]))
    before = server.stats()
    post(server.base_url, ours([5, 6, 7, 8]))
    post(server.base_url, ours([5, 6, 7, 8]))
    span = server.stats().minus(before)
    assert (span.requests, span.answered, span.prompt_tokens) == (2, 2, 2 * 86)
    assert span.asked == {"gold-panning": {"text": 2}}


# ------------------------------------------------------------------- latency, capacity
def _poll(predicate: Any, *, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_call_takes_at_least_the_latency() -> None:
    with LoopbackServer(model([0.0, 1.0, 0.0, 0.0]), latency=0.3) as srv:
        t0 = time.monotonic()
        code, _, _ = post(srv.base_url, ours([1, 2, 3, 4]))
        assert code == 200
        assert time.monotonic() - t0 >= 0.3


def test_above_capacity_a_request_waits_for_a_slot() -> None:
    """Capacity 2, three requests at once: one waits, all three are answered."""
    with LoopbackServer(model([0.0, 1.0, 0.0, 0.0]), latency=2.0, capacity=2) as srv:
        codes: list[int] = []
        start = threading.Barrier(3)

        def one(label: int) -> None:
            start.wait(timeout=10)
            codes.append(post(srv.base_url, ours([label, 2, 3, 4]))[0])

        threads = [threading.Thread(target=one, args=(10 + i,)) for i in range(3)]
        for t in threads:
            t.start()
        assert _poll(lambda: srv.stats().queued == 1)
        now = srv.stats()
        assert (now.serving, now.open) == (2, 3)
        for t in threads:
            t.join(timeout=20)
        stats = srv.stats()
        assert sorted(codes) == [200, 200, 200]
        assert (stats.answered, stats.rejected, stats.max_serving, stats.max_open) == (3, 0, 2, 3)
        assert srv.wait_idle(timeout=5) and srv.stats().open == 0


def test_above_capacity_the_429_server_rejects_at_once_with_retry_after() -> None:
    with LoopbackServer(
        model([0.0, 1.0, 0.0, 0.0]), latency=2.0, capacity=1, overflow="429", retry_after=1.5
    ) as srv:
        first: list[int] = []
        t = threading.Thread(target=lambda: first.append(post(srv.base_url, ours([1, 2, 3, 4]))[0]))
        t.start()
        assert _poll(lambda: srv.stats().serving == 1)
        code, headers, body = post(srv.base_url, ours([5, 6, 7, 8]))
        t.join(timeout=20)
        assert code == 429
        assert headers["Retry-After"] == "2" and headers["retry-after-ms"] == "1500"
        assert "over capacity" in body["error"]["message"]
        stats = srv.stats()
        assert first == [200]
        assert (stats.requests, stats.answered, stats.rejected, stats.max_open, stats.max_serving) == (
            2,
            1,
            1,
            2,
            1,
        )


def test_our_reader_waits_out_a_429_and_gets_its_answer() -> None:
    """The reader retries a rejected call after the server's Retry-After."""
    with LoopbackServer(
        model([0.0, 1.0, 0.0, 0.0]), latency=1.0, capacity=1, overflow="429", retry_after=0.3
    ) as srv:
        reader = OpenAIReader(model="m", base_url=srv.base_url, max_attempts=20, max_concurrency=None)
        assert reader.client is not None  # made (openai imported) before the server is busy, not during
        t = threading.Thread(target=lambda: post(srv.base_url, ours([1, 2, 3, 4])))
        t.start()
        assert _poll(lambda: srv.stats().serving == 1)
        reading = reader.read(Q, DOCS, labels=[11, 12, 13, 14])
        t.join(timeout=20)
        assert reading.cited == (1,)
        assert srv.stats().rejected >= 1


def test_option_errors_name_the_bad_value() -> None:
    m = model([1.0])
    with pytest.raises(ValueError, match="latency must be"):
        LoopbackServer(m, latency=-1)
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        LoopbackServer(m, capacity=0)
    with pytest.raises(ValueError, match="overflow must be 'queue' or '429'"):
        LoopbackServer(m, overflow="drop")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="not running"):
        _ = LoopbackServer(m).base_url
    with pytest.raises(TypeError, match="DetectorProfile"):
        PositionBiasedModel(object())
