"""Reader for any LlamaIndex LLM (``llama_index.core.llms.LLM``).

* **structured** (``structured="auto"``: function-calling models, or a non-default
  ``pydantic_program_mode``): a function-calling LLM is asked with ``chat_with_tools``
  for the ``Citations`` tool and the arguments are read as the model wrote them when the
  response keeps them, so a repeated key is malformed, not its last value; other program
  modes go through ``structured_predict``, whose output class refuses a repeated key and
  takes any label value (each is validated per label, a ``"3"`` is not coerced).
* **chat**: ``llm.chat`` / ``achat`` and the JSON extracted from the text, for everything
  else (``CustomLLM``, ``MockLLM``, whose echoed prompt gives a failed reading).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole, ToolCallBlock
from llama_index.core.llms import LLM
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.prompts import ChatPromptTemplate
from llama_index.core.types import PydanticProgramMode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from ..errors import CitationParseError
from ._options import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_CONCURRENCY,
    AnswerAttribution,
    CacheOption,
    Mode,
    PromptTemplate,
    Structured,
    Wait,
    declared_options,
    given_options,
)
from ._prompt import Prompt, Reply, Usage, attach_raw, loads_strict, token_counts
from ._reader_base import BaseReader

__all__ = ["CitationsOutput", "LlamaIndexLLMReader", "raw_tool_arguments"]

logger = logging.getLogger(__name__)


class CitationsOutput(BaseModel):
    """The numbers (labels) of the documents that contain the answer to the question."""

    model_config = ConfigDict(title="Citations")

    cited: Annotated[list[Any], WithJsonSchema({"type": "array", "items": {"type": "integer"}})] = Field(
        description="Numbers (labels) of the documents that contain the answer."
    )

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> CitationsOutput:
        """Validate JSON text, refusing an object with a repeated key (``ValueError``):
        LlamaIndex's text-completion programs hand the model's JSON here."""
        text = json_data if isinstance(json_data, str) else bytes(json_data).decode("utf-8", "replace")
        with contextlib.suppress(json.JSONDecodeError):  # not JSON: pydantic says so in its own words
            loads_strict(text)
        return super().model_validate_json(json_data, **kwargs)


def raw_tool_arguments(response: Any) -> str | None:
    """The first tool call's arguments as the model wrote them (a JSON string), when the
    chat response keeps them (a ``ToolCallBlock`` with string arguments, or OpenAI-style
    ``additional_kwargs["tool_calls"]``); None otherwise."""
    message = getattr(response, "message", None)
    for block in getattr(message, "blocks", None) or []:
        if isinstance(block, ToolCallBlock):
            return block.tool_kwargs if isinstance(block.tool_kwargs, str) else None
    calls = (getattr(message, "additional_kwargs", None) or {}).get("tool_calls")
    if isinstance(calls, list) and calls:
        fn = calls[0].get("function") if isinstance(calls[0], dict) else getattr(calls[0], "function", None)
        args = fn.get("arguments") if isinstance(fn, dict) else getattr(fn, "arguments", None)
        return args if isinstance(args, str) else None
    return None


def _usage_from(obj: Any) -> tuple[Any, Any]:
    """(prompt, completion) tokens of a dict with usage fields (or a ``usage`` dict), or of
    an object's ``usage`` (a dict or an object with those fields)."""
    if isinstance(obj, dict):
        usage = obj["usage"] if isinstance(obj.get("usage"), dict) else obj
    else:
        usage = getattr(obj, "usage", None)
    if isinstance(usage, dict):
        return token_counts(usage)
    return getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)


def _chat_usage(response: Any) -> tuple[Any, Any]:
    """Tokens a ``ChatResponse`` reports: ``additional_kwargs`` (response or message),
    else ``raw`` (OpenAI-style ``usage``)."""
    msg = getattr(response, "message", None)
    for source in (getattr(response, "additional_kwargs", None), getattr(msg, "additional_kwargs", None)):
        if isinstance(source, dict):
            pt, ct = _usage_from(source)
            if pt is not None or ct is not None:
                return pt, ct
    return _usage_from(getattr(response, "raw", None))


@declared_options
class LlamaIndexLLMReader(BaseReader):
    """Ask a LlamaIndex LLM which shown documents answer the question.

    Args:
        llm: Any ``llama_index.core.llms.LLM`` (``OpenAI``, ``Ollama``, ``MockLLM``, ...).
    """

    option_notes: ClassVar[Mapping[str, str]] = {
        "structured": '``"auto"``: ``structured_predict`` for function-calling models or a configured '
        "``pydantic_program_mode``, chat otherwise; ``True``: always ``structured_predict``; "
        "``False``: always chat.",
    }

    def __init__(
        self,
        llm: LLM,
        *,
        mode: Mode = "cite",
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int = 3,
        wait: Wait | float | None = None,
        attribution: AnswerAttribution | None = None,
        max_chars_per_doc: int | None = None,
        structured: Structured = "auto",
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        cache: CacheOption = None,
        context_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        if not isinstance(llm, LLM):
            raise TypeError(f"LlamaIndexLLMReader needs a llama_index.core LLM, got {type(llm).__name__}")
        super().__init__(**given_options(locals()))
        self.llm = llm
        self._use_structured = self.mode == "cite" and (
            self.structured is True or (self.structured is not False and self._supports_structured())
        )
        self._prompt_template = ChatPromptTemplate(
            message_templates=[
                ChatMessage(role=MessageRole.SYSTEM, content="{gp_system_message}"),
                ChatMessage(role=MessageRole.USER, content="{gp_user_message}"),
            ]
        )

    def _declared_context(self) -> int | None:
        """``llm.metadata.context_window`` (LlamaIndex's own default, 3,900, for an LLM that
        declares none)."""
        return getattr(self.llm.metadata, "context_window", None)

    def _supports_structured(self) -> bool:
        try:
            if getattr(self.llm.metadata, "is_function_calling_model", False):
                return True
        except Exception:  # noqa: BLE001 - a metadata property that fails is a model we should not trust
            return False
        mode = getattr(self.llm, "pydantic_program_mode", PydanticProgramMode.DEFAULT)
        return mode not in (None, PydanticProgramMode.DEFAULT)

    def _cache_identity(self) -> dict[str, Any]:
        try:  # the LLM's serialised fields (model, temperature, ...), as LlamaIndex writes them
            params: Any = self.llm.to_json()
        except Exception:  # noqa: BLE001 - a field that does not serialise: use the repr
            params = repr(self.llm)
        return {**super()._cache_identity(), "params": params}

    @property
    def model_name(self) -> str:
        """``llm.metadata.model_name``, else the LLM's class name."""
        try:
            name = getattr(self.llm.metadata, "model_name", None)
        except Exception:  # noqa: BLE001 - display only
            name = None
        return name if isinstance(name, str) and name else type(self.llm).__name__

    def _repr_fields(self) -> str:
        url = getattr(self.llm, "api_base", None) or getattr(self.llm, "base_url", None)
        shown = f", base_url={url!r}" if isinstance(url, str) and url else ""
        return f", llm={type(self.llm).__name__}{shown}"

    # ------------------------------------------------------------------ conversion
    def user_message(self, question: str, documents: Any, *, labels: Any = None) -> str:
        """The user message for one prompt."""
        return self.prompt(question, documents, labels=labels).user

    def _messages(self, prompt: Prompt) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in prompt.as_dicts()]

    @staticmethod
    def _chat_reply(response: Any, usage: Usage) -> Reply:
        usage.add(*_chat_usage(response))
        text = getattr(getattr(response, "message", None), "content", None)
        if text is not None and not isinstance(text, str):
            text = str(text)
        return Reply(text=text, extra={"structured": False})

    @staticmethod
    def _structured_reply(out: Any) -> Reply:
        if isinstance(out, list) and out:  # some programs return a list of objects
            out = out[0]
        value = out.model_dump() if hasattr(out, "model_dump") else out
        if not isinstance(value, (dict, list)):
            raise attach_raw(
                CitationParseError(f"structured output of unexpected type {type(out).__name__}"), out
            )
        return Reply(value=value, extra={"structured": True})

    def _calls_tools(self) -> bool:
        """Whether the structured path asks for the tool itself (a function-calling LLM
        in the default or ``FUNCTION`` program mode, as ``structured_predict`` would)."""
        mode = getattr(self.llm, "pydantic_program_mode", PydanticProgramMode.DEFAULT)
        if not isinstance(self.llm, FunctionCallingLLM) or mode not in (
            PydanticProgramMode.DEFAULT,
            PydanticProgramMode.FUNCTION,
        ):
            return False
        try:
            return bool(self.llm.metadata.is_function_calling_model) or mode == PydanticProgramMode.FUNCTION
        except Exception:  # noqa: BLE001 - a metadata property that fails: use structured_predict
            return False

    def _tool_kwargs(self, prompt: Prompt) -> dict[str, Any]:
        from llama_index.core.program.function_program import get_function_tool

        return {
            "tools": [get_function_tool(CitationsOutput)],
            "chat_history": self._messages(prompt),
            "allow_parallel_tool_calls": False,
            "tool_required": True,
        }

    def _tool_reply(self, response: ChatResponse, usage: Usage) -> Reply:
        """The tool call's arguments: the raw JSON string when kept (decoded strictly,
        later), else the arguments LlamaIndex decoded; a reply without a tool call is
        read as text."""
        usage.add(*_chat_usage(response))
        extra = {"structured": True}
        raw = raw_tool_arguments(response)
        if raw is not None:
            return Reply(text=raw, extra=extra)
        calls = self.llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)  # type: ignore[attr-defined]
        if calls:
            return Reply(value=calls[0].tool_kwargs, extra=extra)
        return Reply(text=getattr(response.message, "content", None), extra=extra)

    # ------------------------------------------------------------------ calls
    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        return self._chat_reply(self.llm.chat(self._messages(prompt)), usage)

    async def _acall(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        return self._chat_reply(await self.llm.achat(self._messages(prompt)), usage)

    def _call_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """One structured call: the ``Citations`` tool (:meth:`_calls_tools`), else
        ``structured_predict``."""
        llm: Any = self.llm
        tools = self._calls_tools()
        try:
            if tools:
                out = llm.chat_with_tools(**self._tool_kwargs(prompt))
            else:
                out = llm.structured_predict(
                    CitationsOutput, self._prompt_template, **self._predicted(prompt)
                )
        except (ValidationError, ValueError, TypeError) as err:
            raise _unparsed(err) from err
        return self._tool_reply(out, usage) if tools else self._structured_reply(out)

    async def _acall_structured(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        """Asynchronous :meth:`_call_structured` (``achat_with_tools``, ``astructured_predict``)."""
        llm: Any = self.llm
        tools = self._calls_tools()
        try:
            if tools:
                out = await llm.achat_with_tools(**self._tool_kwargs(prompt))
            else:
                out = await llm.astructured_predict(
                    CitationsOutput, self._prompt_template, **self._predicted(prompt)
                )
        except (ValidationError, ValueError, TypeError) as err:
            raise _unparsed(err) from err
        return self._tool_reply(out, usage) if tools else self._structured_reply(out)

    @staticmethod
    def _predicted(prompt: Prompt) -> dict[str, str]:
        """The ``structured_predict`` template's variables: the prompt's two messages."""
        return {"gp_system_message": prompt.system, "gp_user_message": prompt.user}


def _unparsed(err: Exception) -> CitationParseError:
    return CitationParseError(f"structured output could not be parsed: {type(err).__name__}: {err}")
