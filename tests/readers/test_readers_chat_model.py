"""ChatModelReader on LangChain's fake chat models (text path) and a tool-calling fake
(structured path)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from pydantic import Field

from gold_panning_integrations.errors import TransientReaderError
from gold_panning_integrations.readers import ChatModelReader, as_reader
from gold_panning_integrations.readers.chat_model import raw_tool_arguments

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


class ToolCallingFake(GenericFakeChatModel):
    """A fake that supports ``with_structured_output`` the standard way (tool calls)."""

    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self.bound.append((list(tools), tool_choice))
        return self


def tool_message(args: dict[str, Any], *, input_tokens: int = 40, output_tokens: int = 6) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": "Citations", "args": args, "id": "call_1"}],
        usage_metadata={
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    )


class FlakyChat(FakeListChatModel):
    """Raises a rate-limit-like error (status 429, Retry-After 4) on the first call."""

    failures: int = 1

    def _call(self, *args: Any, **kwargs: Any) -> str:
        if self.failures > 0:
            self.failures -= 1
            raise _RateLimited()
        return super()._call(*args, **kwargs)


class _Response:
    status_code = 429
    headers: ClassVar[dict[str, str]] = {"retry-after": "4"}


class _RateLimited(Exception):
    status_code = 429
    response = _Response()


# -------------------------------------------------------------------------- text path
def test_fake_list_model_reads_text_json() -> None:
    model = FakeListChatModel(responses=['Sure: {"cited": [2, "third", 2]}'])
    reader = ChatModelReader(model, wait=0)
    assert not reader.uses_structured_output  # FakeListChatModel raises NotImplementedError
    assert reader.model_name == "FakeListChatModel"
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,)
    assert (reading.invalid_labels, reading.duplicate_labels, reading.attempts) == (1, 1, 1)
    assert reading.extra["structured"] is False


def test_generic_fake_usage_metadata_and_malformed_retry() -> None:
    messages = iter(
        [
            AIMessage(
                content="I think the second.",
                usage_metadata={"input_tokens": 30, "output_tokens": 4, "total_tokens": 34},
            ),
            AIMessage(
                content='{"cited": [2]}',
                usage_metadata={"input_tokens": 30, "output_tokens": 5, "total_tokens": 35},
            ),
        ]
    )
    reader = ChatModelReader(GenericFakeChatModel(messages=messages), wait=0)
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 2
    assert (reading.prompt_tokens, reading.completion_tokens) == (60, 9)


def test_all_attempts_malformed_gives_failed_reading() -> None:
    reader = ChatModelReader(FakeListChatModel(responses=["no idea"]), wait=0, max_attempts=2)
    reading = reader.read(Q, DOCS)
    assert reading.failed and reading.attempts == 2 and "no JSON" in reading.error
    assert reading.raw == "no idea"


def test_transient_framework_error_retried_with_retry_after(recording_wait: Any) -> None:
    model = FlakyChat(responses=['{"cited": [3]}'])
    reading = ChatModelReader(model, wait=recording_wait).read(Q, DOCS)
    assert reading.cited == (2,) and reading.attempts == 2
    assert recording_wait.retry_afters == [4.0]
    assert isinstance(recording_wait.errors[0], TransientReaderError)


def test_messages_and_structured_true_refused_for_fakes() -> None:
    reader = ChatModelReader(FakeListChatModel(responses=["{}"]))
    system, human = reader.messages(Q, DOCS)
    assert system.type == "system" and human.type == "human"
    assert "<document 3>\nBerlin is in Germany.\n</document 3>" in human.content
    with pytest.raises(ValueError, match="does not support with_structured_output"):
        ChatModelReader(FakeListChatModel(responses=["{}"]), structured=True)


async def test_async_text_path() -> None:
    reader = ChatModelReader(FakeListChatModel(responses=['```json\n{"cited": [1, 3]}\n```']), wait=0)
    reading = await reader.aread(Q, DOCS)
    assert reading.cited == (0, 2) and not reading.failed


def test_answer_mode_text() -> None:
    reader = ChatModelReader(FakeListChatModel(responses=["Paris"]), mode="answer", wait=0)
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,) and reading.answer == "Paris" and reading.extra["mode"] == "answer"
    _system, human = reader.messages(Q, DOCS)
    assert "- Berlin is in Germany." in human.content


# -------------------------------------------------------------------- structured path
def test_structured_output_validates_raw_tool_args_strictly() -> None:
    model = ToolCallingFake(messages=iter([tool_message({"cited": [3, 1.0, 3, 0]})]))
    reader = ChatModelReader(model, wait=0)
    assert reader.uses_structured_output
    reading = reader.read(Q, DOCS)
    # 1.0 would be coerced to 1 by pydantic; the raw arguments are validated instead
    assert reading.cited == (2,)
    assert (reading.invalid_labels, reading.duplicate_labels) == (2, 1)
    assert (reading.prompt_tokens, reading.completion_tokens) == (40, 6)
    assert reading.extra["structured"] is True
    tools, choice = model.bound[-1]
    assert tools[0].__name__ == "Citations" and choice == "any"


async def test_structured_async_and_wrong_shape_retried() -> None:
    model = ToolCallingFake(messages=iter([tool_message({"docs": [1]}), tool_message({"cited": [1]})]))
    reading = await ChatModelReader(model, wait=0).aread(Q, DOCS)
    assert reading.cited == (0,) and reading.attempts == 2
    assert reading.prompt_tokens == 80


def test_structured_reply_without_tool_call_falls_back_to_text() -> None:
    model = ToolCallingFake(messages=iter([AIMessage(content='{"cited": [2]}')]))
    assert ChatModelReader(model, wait=0).read(Q, DOCS).cited == (1,)


# ------------------------------------------------------------ ambiguous (repeated-key) JSON
DUPLICATE_KEYS = '{"cited": [2], "cited": [1]}'


def raw_tool_message(arguments: str, parsed: dict[str, Any]) -> AIMessage:
    """A tool call as OpenAI-style integrations keep it: the decoded ``args`` (what
    ``json.loads`` keeps: the last of repeated keys) and the raw arguments string."""
    return AIMessage(
        content="",
        tool_calls=[{"name": "Citations", "args": parsed, "id": "call_1"}],
        additional_kwargs={
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "Citations", "arguments": arguments},
                }
            ]
        },
    )


def test_text_reply_with_a_repeated_key_is_malformed_then_retried() -> None:
    chat = FakeListChatModel(responses=[DUPLICATE_KEYS, '{"cited": [2]}'])
    reading = ChatModelReader(chat, wait=0).read(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 2  # never (0,), the last key's value


def test_structured_raw_arguments_with_a_repeated_key_fail_the_reading() -> None:
    msg = raw_tool_message(DUPLICATE_KEYS, {"cited": [1]})
    model = ToolCallingFake(messages=iter([msg, msg]))
    reading = ChatModelReader(model, wait=0, max_attempts=2).read(Q, DOCS)
    assert reading.failed and reading.cited == () and reading.attempts == 2
    assert "repeats the key 'cited'" in (reading.error or "")


def test_structured_raw_arguments_are_what_is_validated() -> None:
    # The raw string says 2.0 (not a label); a decoder that coerced it would say 2.
    model = ToolCallingFake(messages=iter([raw_tool_message('{"cited": [3, 2.0]}', {"cited": [3, 2]})]))
    reading = ChatModelReader(model, wait=0).read(Q, DOCS)
    assert reading.cited == (2,) and reading.invalid_labels == 1


def test_raw_tool_arguments_finds_the_string_where_messages_keep_it() -> None:
    call = {"name": "Citations", "args": {"cited": [1]}, "id": "b"}
    two = AIMessage(
        content="",
        additional_kwargs={
            "tool_calls": [
                {"id": "a", "function": {"name": "Other", "arguments": '{"x": 1}'}},
                {"id": "b", "function": {"name": "Citations", "arguments": '{"cited": [1]}'}},
            ]
        },
    )
    assert raw_tool_arguments(two, call) == '{"cited": [1]}'  # matched by id
    chunk = AIMessageChunk(
        content="", tool_call_chunks=[{"name": "Citations", "args": DUPLICATE_KEYS, "id": "b", "index": 0}]
    )
    assert raw_tool_arguments(chunk, call) == DUPLICATE_KEYS
    assert raw_tool_arguments(tool_message({"cited": [1]}), call) is None  # only decoded args kept


def test_as_reader_wraps_chat_models_and_passes_readers_through() -> None:
    reader = as_reader(FakeListChatModel(responses=["{}"]), max_attempts=2)
    assert isinstance(reader, ChatModelReader) and reader.max_attempts == 2
    assert as_reader(reader) is reader
    with pytest.raises(TypeError, match="already a reader"):
        as_reader(reader, max_attempts=3)
    with pytest.raises(TypeError, match="builtins.dict"):
        as_reader({})
    with pytest.raises(TypeError, match="'local'"):
        as_reader("gpt-4o")
