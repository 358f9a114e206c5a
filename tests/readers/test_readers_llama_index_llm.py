"""LlamaIndexLLMReader on a scripted CustomLLM and on MockLLM."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole, ToolCallBlock
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.types import PydanticProgramMode
from pydantic import Field

from gold_panning_integrations.readers import LlamaIndexLLMReader, as_reader
from gold_panning_integrations.readers.llama_index_llm import CitationsOutput, raw_tool_arguments

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


class ScriptedLLM(CustomLLM):
    """Returns the scripted texts in order (the last one repeats) and reports tokens."""

    replies: list[str]
    prompts: list[str] = Field(default_factory=list)
    i: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    def _next(self, prompt: str) -> CompletionResponse:
        self.prompts.append(prompt)
        text = self.replies[min(self.i, len(self.replies) - 1)]
        self.i += 1
        return CompletionResponse(text=text, additional_kwargs={"prompt_tokens": 50, "completion_tokens": 5})

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self._next(prompt)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        def gen() -> Iterator[CompletionResponse]:
            yield self._next(prompt)

        return gen()


def test_chat_path_reads_json_and_tokens() -> None:
    llm = ScriptedLLM(replies=['Here: {"cited": [2, 2, "x3", 4]}'])
    reader = LlamaIndexLLMReader(llm, wait=0)
    assert not reader.uses_structured_output and reader.model_name == "scripted"
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,)
    assert (reading.invalid_labels, reading.duplicate_labels) == (2, 1)  # "x3" and 4
    assert (reading.prompt_tokens, reading.completion_tokens) == (50, 5)
    assert "<document 2>\nThe capital of France is Paris.\n</document 2>" in llm.prompts[0]


def test_chat_path_malformed_retried_then_ok() -> None:
    llm = ScriptedLLM(replies=["no idea", '{"cited": [3]}'])
    reading = LlamaIndexLLMReader(llm, wait=0).read(Q, DOCS)
    assert reading.cited == (2,) and reading.attempts == 2
    assert (reading.prompt_tokens, reading.completion_tokens) == (100, 10)


async def test_async_chat_path() -> None:
    reading = await LlamaIndexLLMReader(ScriptedLLM(replies=['{"cited": [1]}']), wait=0).aread(Q, DOCS)
    assert reading.cited == (0,) and not reading.failed


def test_structured_path_validates_labels_strictly() -> None:
    llm = ScriptedLLM(replies=['{"cited": [1, 2.0, 1]}'])
    reader = LlamaIndexLLMReader(llm, structured=True, wait=0)
    assert reader.uses_structured_output
    reading = reader.read(Q, DOCS)
    assert reading.cited == (0,)
    assert (reading.invalid_labels, reading.duplicate_labels) == (1, 1)  # 2.0 is not a label
    assert reading.extra["structured"] is True
    assert (
        "<document 3>\nBerlin is in Germany.\n</document 3>" in llm.prompts[0]
    )  # the documents reached the model


async def test_structured_path_async_and_parse_failure_retried() -> None:
    llm = ScriptedLLM(replies=["not json at all", '{"cited": [2]}'])
    reader = LlamaIndexLLMReader(llm, structured=True, wait=0)
    reading = await reader.aread(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 2


def test_auto_structured_for_configured_program_mode() -> None:
    llm = ScriptedLLM(replies=['{"cited": [3]}'], pydantic_program_mode=PydanticProgramMode.LLM)
    reader = LlamaIndexLLMReader(llm, wait=0)
    assert reader.uses_structured_output
    assert reader.read(Q, DOCS).cited == (2,)


def test_mock_llm_echo_degrades_to_failed_reading() -> None:
    """MockLLM echoes the prompt, whose document labels ``[1]`` must not become citations."""
    reading = LlamaIndexLLMReader(MockLLM(), wait=0).read(Q, DOCS)
    assert reading.failed and reading.cited == () and reading.attempts == 3
    assert "echoed the prompt" in reading.error


def test_mock_llm_filler_text_degrades_to_failed_reading() -> None:
    reading = LlamaIndexLLMReader(MockLLM(max_tokens=4), wait=0, max_attempts=1).read(Q, DOCS)
    assert reading.failed and reading.raw == "text text text text"


async def test_mock_llm_async_and_structured_degrade() -> None:
    reading = await LlamaIndexLLMReader(MockLLM(), wait=0, structured=True, max_attempts=2).aread(Q, DOCS)
    assert reading.failed and reading.cited == () and reading.attempts == 2


def test_answer_mode() -> None:
    llm = ScriptedLLM(replies=["Paris."])
    reading = LlamaIndexLLMReader(llm, mode="answer", wait=0).read(Q, DOCS)
    assert reading.cited == (1,) and reading.answer == "Paris"
    assert "- Lyon is in France.\n" in llm.prompts[0]


def test_as_reader_wraps_llms_and_rejects_others() -> None:
    assert isinstance(as_reader(MockLLM(), max_attempts=1), LlamaIndexLLMReader)
    with pytest.raises(TypeError, match="llama_index.core LLM"):
        LlamaIndexLLMReader("gpt")  # type: ignore[arg-type]


# ------------------------------------------------------------ ambiguous (repeated-key) JSON
DUPLICATE_KEYS = '{"cited": [2], "cited": [1]}'


class ToolLLM(MockFunctionCallingLLM):
    """A function-calling LLM whose replies are tool calls with the scripted arguments
    (a JSON string, as the OpenAI integration keeps it, or a decoded dict); records the
    tools it was offered."""

    arguments: list[Any] = Field(default_factory=list)
    offered: list[list[str]] = Field(default_factory=list)

    def __init__(self, arguments: list[Any]) -> None:
        super().__init__()
        self.arguments = arguments
        self.response_generator = self._reply

    def _reply(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.offered.append([t.metadata.name for t in kwargs.get("tools") or []])
        args = self.arguments[min(len(self.offered), len(self.arguments)) - 1]
        if args is None:  # a plain-text answer, no tool call
            return ChatMessage(role=MessageRole.ASSISTANT, content='{"cited": [3]}')
        block = ToolCallBlock(tool_call_id="c1", tool_name="Citations", tool_kwargs=args)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def test_chat_path_repeated_key_is_malformed_then_retried() -> None:
    reading = LlamaIndexLLMReader(ScriptedLLM(replies=[DUPLICATE_KEYS, '{"cited": [2]}']), wait=0).read(
        Q, DOCS
    )
    assert reading.cited == (1,) and reading.attempts == 2  # never (0,), the last key's value


def test_text_completion_program_refuses_a_repeated_key() -> None:
    llm = ScriptedLLM(
        replies=[DUPLICATE_KEYS, '{"cited": [2]}'], pydantic_program_mode=PydanticProgramMode.LLM
    )
    reading = LlamaIndexLLMReader(llm, wait=0).read(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 2
    with pytest.raises(ValueError, match="repeats the key 'cited'"):
        CitationsOutput.model_validate_json(DUPLICATE_KEYS.encode())
    assert CitationsOutput.model_validate_json('{"cited": [1, "2"]}').cited == [1, "2"]


def test_tool_call_arguments_with_a_repeated_key_fail_the_reading() -> None:
    llm = ToolLLM([DUPLICATE_KEYS])
    reader = LlamaIndexLLMReader(llm, wait=0, max_attempts=2)
    assert reader.uses_structured_output
    reading = reader.read(Q, DOCS)
    assert reading.failed and reading.cited == () and reading.attempts == 2
    assert "repeats the key 'cited'" in (reading.error or "")
    assert llm.offered == [["Citations"], ["Citations"]]


async def test_tool_call_arguments_async_retried_then_read() -> None:
    reading = await LlamaIndexLLMReader(ToolLLM([DUPLICATE_KEYS, '{"cited": [3, 3.0]}']), wait=0).aread(
        Q, DOCS
    )
    assert reading.cited == (2,) and reading.attempts == 2
    assert (reading.invalid_labels, reading.extra["structured"]) == (1, True)


def test_decoded_tool_arguments_and_plain_text_answers_are_read_too() -> None:
    reading = LlamaIndexLLMReader(ToolLLM([{"cited": [1, True]}]), wait=0).read(Q, DOCS)
    assert reading.cited == (0,) and reading.invalid_labels == 1
    assert LlamaIndexLLMReader(ToolLLM([None]), wait=0).read(Q, DOCS).cited == (2,)


def test_raw_tool_arguments_in_openai_style_additional_kwargs() -> None:
    from types import SimpleNamespace

    as_dict = ChatResponse(
        message=ChatMessage(
            role=MessageRole.ASSISTANT,
            additional_kwargs={
                "tool_calls": [{"id": "c", "function": {"name": "Citations", "arguments": DUPLICATE_KEYS}}]
            },
        )
    )
    as_object = ChatResponse(
        message=ChatMessage(
            role=MessageRole.ASSISTANT,
            additional_kwargs={"tool_calls": [SimpleNamespace(function=SimpleNamespace(arguments="{}"))]},
        )
    )
    assert raw_tool_arguments(as_dict) == DUPLICATE_KEYS
    assert raw_tool_arguments(as_object) == "{}"
    assert (
        raw_tool_arguments(ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="x"))) is None
    )
