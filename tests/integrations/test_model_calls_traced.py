"""The framework sees every model call, with any reader: with ``OpenAIReader`` (the CLI's and
the docs' default) a LangChain run shows each call as a chat-model child run whose
``LLMResult`` carries the tokens (so ``astream_events`` and LangSmith show the cost), and
LlamaIndex's instrumentation gets each call's LLM span and events (and its
``TokenCountingHandler`` the tokens). A reader that reports its calls itself (a LangChain
chat model, a LlamaIndex LLM) is not reported twice. Loopback endpoint, defaults: 2 rounds
x 3 prompts = 6 calls of 50 prompt and 5 completion tokens each."""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

from compare_fakes import COMPLETION_TOKENS, PROMPT_TOKENS, oracle_model
from doubles import ListRetriever, SmallestLabelChatModel, SmallestLabelLLM, make_docs, make_nodes
from langchain_core.callbacks import BaseCallbackHandler
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from openai_server import FakeOpenAIServer

from gold_panning_integrations import (
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    OpenAIReader,
)

QUESTION = "where is the needle?"
CALLS = 6


def _server() -> FakeOpenAIServer:
    return FakeOpenAIServer(default=oracle_model(lambda text: "needle" in text.lower()))


def _reader(base_url: str) -> OpenAIReader:
    return OpenAIReader(model="m", base_url=base_url)


class Calls(BaseCallbackHandler):
    """Records the model runs a LangChain run reports: start (with its parent) and end."""

    def __init__(self) -> None:
        self.started: list[tuple[str, UUID | None, Any]] = []
        self.ended: list[Any] = []
        self.chains: list[UUID] = []

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.started.append((kw.get("name") or serialized.get("name"), parent_run_id, messages))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kw: Any) -> None:
        self.ended.append(response)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self.chains.append(run_id)


async def test_astream_events_shows_every_openai_reader_call_with_its_tokens() -> None:
    with _server() as srv:
        retriever = GoldPanningRetriever(
            base_retriever=ListRetriever(docs=make_docs(8, needle_at=3)),
            reader=_reader(srv.base_url),
            profile="lost-in-the-middle",
        )
        events = [e async for e in retriever.astream_events(QUESTION, version="v2")]
        sent = len(srv.requests)
    kinds = Counter(e["event"] for e in events)
    assert sent == CALLS
    assert kinds["on_chat_model_start"] == kinds["on_chat_model_end"] == CALLS
    ends = [e for e in events if e["event"] == "on_chat_model_end"]
    usage = [e["data"]["output"].usage_metadata for e in ends]
    assert (
        usage
        == [{"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS, "total_tokens": 55}] * CALLS
    )
    assert {e["metadata"]["ls_model_name"] for e in ends} == {"m"}
    assert {e["metadata"]["ls_provider"] for e in ends} == {"openai"}
    starts = [e for e in events if e["event"] == "on_chat_model_start"]
    root = next(
        e["run_id"]
        for e in events
        if e["event"] == "on_retriever_start" and e["name"] == "GoldPanningRetriever"
    )
    assert all(root in e["parent_ids"] for e in starts)  # children of the retriever's run
    assert all("<document" in str(e["data"]["input"]["messages"]) for e in starts)  # the prompt as sent


def test_the_compressors_run_has_each_call_as_a_child_with_its_usage() -> None:
    calls = Calls()
    with _server() as srv:
        compressor = GoldPanningCompressor(reader=_reader(srv.base_url), profile="lost-in-the-middle")
        compressor.compress_documents(make_docs(8, needle_at=5), QUESTION, callbacks=[calls])
        sent = len(srv.requests)
    assert sent == len(calls.started) == len(calls.ended) == CALLS
    assert {name for name, _, _ in calls.started} == {"OpenAIReader"}
    assert {parent for _, parent, _ in calls.started} == {calls.chains[0]}  # the compressor's run
    for result in calls.ended:
        assert result.llm_output == {
            "token_usage": {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": 55,
            },
            "model_name": "m",
        }


def test_with_nothing_listening_a_call_is_made_as_is() -> None:
    # No callbacks and no tracer: the wrapper renders no messages and starts no run for
    # nobody (the query path stays lean); with a handler, every call is a run.
    with _server() as srv:
        reader = _reader(srv.base_url)
        rendered: list[int] = []
        prompt = reader.prompt

        def counted(*args: Any, **kwargs: Any) -> Any:
            rendered.append(1)
            return prompt(*args, **kwargs)

        reader.prompt = counted  # type: ignore[method-assign]
        retriever = GoldPanningRetriever(
            base_retriever=ListRetriever(docs=make_docs(8, needle_at=3)),
            reader=reader,
            profile="lost-in-the-middle",
        )
        retriever.invoke(QUESTION)
        alone = len(rendered)
        calls = Calls()
        retriever.invoke(QUESTION, config={"callbacks": [calls]})
        sent = len(srv.requests)
    assert sent == 2 * CALLS and alone == CALLS  # each call's own prompt, none for a report
    assert len(rendered) - alone == 2 * CALLS and len(calls.started) == CALLS  # reported: rendered again


def test_a_chat_model_reader_is_not_reported_twice() -> None:
    calls = Calls()
    compressor = GoldPanningCompressor(reader=SmallestLabelChatModel(), profile="lost-in-the-middle")
    panned = compressor.pan(make_docs(8, needle_at=5), QUESTION, callbacks=[calls])
    assert len(calls.started) == panned.result.calls == CALLS


class Events(BaseEventHandler):
    """Collects the LlamaIndex dispatcher's events."""

    seen: list[Any]

    @classmethod
    def class_name(cls) -> str:
        return "Events"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.seen.append(event)


def _llm_events(run: Any) -> tuple[Counter[str], list[Any]]:
    handler = Events(seen=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        run()
    finally:
        root.event_handlers.remove(handler)
    return Counter(e.class_name() for e in handler.seen), handler.seen


def test_llama_index_sees_every_openai_reader_call_with_its_tokens() -> None:
    tokens = TokenCountingHandler()
    with _server() as srv:
        post = GoldPanningPostprocessor(
            reader=_reader(srv.base_url),
            profile="lost-in-the-middle",
            callback_manager=CallbackManager([tokens]),
        )
        kinds, seen = _llm_events(
            lambda: post.postprocess_nodes(make_nodes(8, needle_at=2), query_str=QUESTION)
        )
        sent = len(srv.requests)
    assert sent == kinds["LLMChatStartEvent"] == kinds["LLMChatEndEvent"] == CALLS
    ends = [e for e in seen if e.class_name() == "LLMChatEndEvent"]
    assert {e.response.raw["usage"]["prompt_tokens"] for e in ends} == {PROMPT_TOKENS}
    assert all(e.span_id for e in ends)  # inside a span
    assert (tokens.prompt_llm_token_count, tokens.completion_llm_token_count) == (
        CALLS * PROMPT_TOKENS,
        CALLS * COMPLETION_TOKENS,
    )


def test_a_llama_index_llm_is_not_reported_twice() -> None:
    post = GoldPanningPostprocessor(llm=SmallestLabelLLM(), profile="lost-in-the-middle")
    out: list[Any] = []
    kinds, _ = _llm_events(lambda: out.append(post.pan(make_nodes(8, needle_at=2), QUESTION)))
    # the LLM's own chat events (a CustomLLM's chat also sends its completion's), once per call
    assert kinds["LLMChatStartEvent"] == out[0].result.calls == CALLS
