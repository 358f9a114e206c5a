"""The one reader base, as every reader sees it: identity (model_name,
recommended_profile, short repr), the labels the panner passes, label forms and
invalid-only replies, sanitised text, and LangChain Runnables as readers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from doubles import ScriptedAttempts, shown_documents
from langchain_core.language_models import FakeListChatModel
from llama_index.core.llms import CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from openai_server import FakeOpenAIServer, RecordedRequest, dynamic, ok
from pydantic import Field

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP
from gold_panning_integrations.engine.records import Reading
from gold_panning_integrations.readers import (
    BaseReader,
    ChatModelReader,
    LlamaIndexLLMReader,
    OpenAIReader,
    as_reader,
)
from gold_panning_integrations.readers._prompt import Usage

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


class TextLLM(CustomLLM):
    """A LlamaIndex LLM that replies with scripted texts and records its prompts."""

    replies: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="text-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        from llama_index.core.base.llms.types import CompletionResponse

        self.prompts.append(prompt)
        return CompletionResponse(text=self.replies.pop(0) if self.replies else "{}")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


# ------------------------------------------------------------------------------ identity
def test_every_reader_is_a_base_reader_with_a_model_name_and_no_profile_of_its_own() -> None:
    readers = [
        OpenAIReader(model="gpt-x", api_key="k"),
        ChatModelReader(FakeListChatModel(responses=["{}"])),
        LlamaIndexLLMReader(TextLLM()),
    ]
    assert [isinstance(r, BaseReader) for r in readers] == [True, True, True]
    assert [r.model_name for r in readers] == ["gpt-x", "FakeListChatModel", "text-llm"]
    assert [r.recommended_profile for r in readers] == [None, None, None]


def test_repr_is_one_short_line() -> None:
    assert repr(OpenAIReader(model="gpt-x", base_url="http://h:1/v1", api_key="k")) == (
        "OpenAIReader(model='gpt-x', base_url='http://h:1/v1', mode='cite')"
    )
    assert repr(ChatModelReader(FakeListChatModel(responses=["{}"]), mode="answer")) == (
        "ChatModelReader(model='FakeListChatModel', chat_model=FakeListChatModel, mode='answer')"
    )


def test_one_retry_policy_for_sync_and_async() -> None:
    def flaky_sync(usage: Usage) -> Reading:
        if usage.calls == 1:  # the reader counts each attempt before making it
            raise TimeoutError("slow")
        return Reading(cited=(1,))

    async def flaky_async(usage: Usage) -> Reading:
        return flaky_sync(usage)

    slept: list[float] = []

    async def asleep(s: float) -> None:
        slept.append(s)

    sync = ScriptedAttempts(flaky_sync, max_attempts=3, wait=0.5, sleep=slept.append).read(Q, DOCS)
    asy = asyncio.run(ScriptedAttempts(flaky_async, max_attempts=3, wait=0.5, asleep=asleep).aread(Q, DOCS))
    assert (sync.cited, sync.attempts) == ((1,), 2)
    assert (asy.cited, asy.attempts) == ((1,), 2)
    assert slept == [0.5, 0.5]


# ------------------------------------------------------------------------------ labels
def _cite_label_of(needle: str) -> Any:
    """A scripted model: cites the label under which ``needle`` is shown."""

    def answer(req: RecordedRequest) -> Any:
        labels = [label for label, text in shown_documents(req.user_text) if needle in text]
        return ok(json.dumps({"cited": labels}))

    return dynamic(answer)


def test_openai_reader_shows_the_panners_labels_and_maps_back_to_positions(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.default = _cite_label_of("Paris")
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
    reading = reader.read(Q, DOCS, labels=[7, 3, 9])
    assert reading.cited == (1,)  # label 3 names position 1
    assert reading.extra["labels"] == [7, 3, 9]
    text = openai_server.requests[0].user_text
    assert shown_documents(text) == [
        (7, "Lyon is in France."),
        (3, "The capital of France is Paris."),
        (9, "Berlin is in Germany."),
    ]
    assert "these numbers" not in text  # the labels appear on the documents' markers only


def test_a_label_not_shown_this_round_is_invalid_never_a_position(openai_server: FakeOpenAIServer) -> None:
    # labels 7, 3, 9 shown; the model cites 1 (shown nowhere) and 9
    openai_server.default = ok('{"cited": [1, 9]}')
    reading = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read(Q, DOCS, labels=[7, 3, 9])
    assert reading.cited == (2,)
    assert reading.invalid_labels == 1


@pytest.mark.parametrize("mode", ["cite", "answer"])
def test_chat_model_and_llama_index_readers_take_labels(mode: str) -> None:
    reply = '{"cited": [4]}' if mode == "cite" else "Paris"
    chat = ChatModelReader(FakeListChatModel(responses=[reply]), mode=mode, wait=0)
    llm = TextLLM(replies=[reply], prompts=[])
    li = LlamaIndexLLMReader(llm, mode=mode, wait=0)
    for reader in (chat, li):
        assert reader.read(Q, DOCS, labels=[2, 4, 6]).cited == (1,)
    if mode == "cite":
        assert "<document 4>\nThe capital of France is Paris.\n</document 4>" in llm.prompts[0]


# ------------------------------------------------------------------------------ label forms
@pytest.mark.parametrize(
    "reply", ["٦", "6.", "[6]", "#6", "Document 6", '{"cited": ["6"]}', '{"cited": ["[6]"]}', '"6"', "６"]
)
def test_common_label_forms_are_read_as_labels(openai_server: FakeOpenAIServer, reply: str) -> None:
    openai_server.default = ok(reply)
    reading = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read(Q, DOCS, labels=[4, 6, 2])
    assert reading.cited == (1,)
    assert not reading.failed


@pytest.mark.parametrize(
    "reply",
    [
        '{"cited": [0, 99]}',  # only labels not shown
        '{"cited": ["The capital of France is Paris."]}',  # quotes the document instead of its label
        "The capital of France is Paris.",  # the document's text as the reply
    ],
)
def test_a_reply_with_only_invalid_labels_is_retried_then_a_failed_reading(
    openai_server: FakeOpenAIServer, reply: str
) -> None:
    openai_server.default = ok(reply)
    reading = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read(Q, DOCS)
    assert reading.failed
    assert reading.cited == ()
    assert reading.attempts == 3
    assert len(openai_server.requests) == 3


def test_invalid_only_replies_leave_the_beliefs_unchanged(openai_server: FakeOpenAIServer) -> None:
    """The gold cited as 'quoted text' every round: before, each round counted as
    'nothing cited' and buried the gold; now every round fails and nothing moves."""
    openai_server.default = ok('{"cited": ["The capital of France is Paris."]}')
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0, max_attempts=1)
    result = GoldPanner(
        reader, profile="lost-in-the-middle", rounds=2, rng=0, on_failure="fallback", retriever_prior="none"
    ).run(Q, DOCS)
    assert result.failed_rounds == 2
    # the flat prior: the default rank map's chance that none of the 3 is relevant, (1 -
    # 0.20098)(1 - 0.11171)(1 - 0.07736) = 0.65486, spread evenly: 1 - 0.65486^(1/3) each
    flat = 1.0 - ((1 - 0.20098) * (1 - 0.11171) * (1 - 0.07736)) ** (1 / 3)
    assert flat == pytest.approx(0.13161, abs=1e-5)
    assert DEFAULT_RANK_MAP.flat(3).tolist() == pytest.approx([flat] * 3, abs=1e-5)
    assert result.posteriors.tolist() == pytest.approx(DEFAULT_RANK_MAP.flat(3).tolist())


# ------------------------------------------------------------------------------ hostile text
def test_a_lone_surrogate_is_replaced_not_sent_and_not_fatal(openai_server: FakeOpenAIServer) -> None:
    openai_server.default = _cite_label_of("Paris")
    docs = ["bad \ud800 text", "The capital of France is Paris.", "ok"]
    reading = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read("Which\udfff?", docs)
    assert not reading.failed
    assert reading.cited == (1,)
    text = openai_server.requests[0].user_text
    assert "bad \ufffd text" in text
    assert "Which\ufffd?" in text


def test_surrogate_pairs_are_joined_and_every_reader_sanitises() -> None:
    chat = FakeListChatModel(responses=['{"cited": [1]}'])
    reader = ChatModelReader(chat, wait=0)
    _system, human = reader.messages(Q, ["smile \ud83d\ude00 and \udc00"])
    assert "smile \U0001f600 and \ufffd" in human.content
    llm = TextLLM(replies=['{"cited": [1]}'], prompts=[])
    assert LlamaIndexLLMReader(llm, wait=0).read(Q, ["x\ud800"]).cited == (0,)
    assert "x\ufffd" in llm.prompts[0]


# ------------------------------------------------------------------------------ runnables
@pytest.mark.parametrize("wrap", ["bind", "with_retry", "with_fallbacks", "configurable_fields"])
def test_chat_model_runnables_are_readers(wrap: str) -> None:
    from langchain_core.runnables import ConfigurableField

    model = FakeListChatModel(responses=['{"cited": [2]}'])
    runnable = {
        "bind": lambda: model.bind(stop=["\n\n"]),
        "with_retry": lambda: model.with_retry(stop_after_attempt=2),
        "with_fallbacks": lambda: model.with_fallbacks([FakeListChatModel(responses=['{"cited": [3]}'])]),
        "configurable_fields": lambda: model.configurable_fields(
            responses=ConfigurableField(id="responses", name="Responses")
        ),
    }[wrap]()
    reader = as_reader(runnable, wait=0)
    assert isinstance(reader, ChatModelReader)
    assert reader.model_name == "FakeListChatModel"
    assert reader.read(Q, DOCS).cited == (1,)


def test_a_runnable_that_is_not_a_chat_model_is_still_refused() -> None:
    from langchain_core.runnables import RunnableLambda

    with pytest.raises(TypeError, match="cannot use a .*RunnableLambda as a reader"):
        as_reader(RunnableLambda(lambda x: x))


def test_a_callable_template_without_labels_is_read_under_1_to_m_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def numbered(q: str, docs: list) -> str:
        return "\n".join(f"[{i}] {d}" for i, d in enumerate(docs, start=1)) + f"\n{q}"

    reader = ChatModelReader(FakeListChatModel(responses=['{"cited": [2]}']), template=numbered, wait=0)
    with caplog.at_level("WARNING"):
        reading = reader.read(Q, DOCS, labels=[9, 8, 7])
    assert reading.cited == (1,)  # the template showed "[2]" for position 1
    assert "takes no labels= parameter" in caplog.text


# ------------------------------------------------------------------ which mode reads
COUNTING = '{"cited": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,'  # cut at the cap


def _mode_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "try mode='answer'" in r.getMessage()]


def test_a_reader_whose_cite_replies_are_unreadable_names_answer_mode_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The 0.5B model's reply in cite mode (issue 27): labels counted until the token cap.
    reader = ChatModelReader(FakeListChatModel(responses=[COUNTING] * 7), max_attempts=1, wait=0)
    for i in range(7):
        assert reader.read(Q, DOCS, labels=[4417, 1093, 2750]).failed
        assert len(_mode_warnings(caplog)) == (1 if i >= 4 else 0)  # after the 5th, and once
    assert (reader.cite_readings, reader.unreadable_replies) == (7, 7)
    (message,) = _mode_warnings(caplog)
    assert "5 of the first 5 cite-mode readings" in message and "--mode answer" in message


def test_no_mode_warning_when_most_replies_read_or_in_answer_mode(caplog: pytest.LogCaptureFixture) -> None:
    # 2 unreadable of 5, then 3 of 6 ("{}" has no cited key): never more than half, no warning.
    replies = [COUNTING, '{"cited": [1093]}', COUNTING, '{"cited": []}', '{"cited": [4417]}', "{}"]
    reader = ChatModelReader(FakeListChatModel(responses=replies), max_attempts=1, wait=0)
    cited = [reader.read(Q, DOCS, labels=[4417, 1093, 2750]).cited for _ in replies]
    assert cited == [(), (1,), (), (), (0,), ()]
    assert (reader.cite_readings, reader.unreadable_replies) == (6, 3) and _mode_warnings(caplog) == []
    answer = ChatModelReader(FakeListChatModel(responses=["Paris"] * 6), mode="answer", wait=0)
    for _ in range(6):
        answer.read(Q, DOCS)
    assert answer.cite_readings == 0 and _mode_warnings(caplog) == []
