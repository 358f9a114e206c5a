"""Readers: ask a model about one round's prompt and return validated citations.

* :class:`OpenAIReader` — any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp,
  Ollama) through the ``openai`` client.
* :class:`ChatModelReader` — any LangChain chat model, or a Runnable wrapping one
  (``.bind()``, ``.with_retry()``, ``.with_fallbacks()``, ``.configurable_fields()``).
* :class:`LlamaIndexLLMReader` — any LlamaIndex ``LLM``.
* :class:`LocalReader` — the embedded local model (llama-cpp-python, extra ``local``).
* :class:`SimulatedReader` — follows a detector profile exactly (tests, ablations).

:func:`as_reader` turns whatever the user passed into a reader of the :class:`Reader`
protocol, once, at the edge. Importing this package imports no framework, and the
simulator (:class:`SimulatedReader`) only on first access.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..engine.records import Reader, Reading
from ._adapted import adapt_reader
from ._cache import ReplyCache
from ._limits import RateLimit, wait_retry_after
from ._prompt import (
    DEFAULT_TEMPLATE,
    SYSTEM_PROMPT,
    Citations,
    ParsedCitations,
    PromptTemplate,
    citation_json_schema,
    extract_json,
    parse_citations,
    render_documents,
    render_prompt,
    sanitize_text,
    validate_labels,
)
from ._reader_base import BaseReader

if TYPE_CHECKING:
    from ..engine.simulator import SimulatedReader
    from .chat_model import ChatModelReader
    from .llama_index_llm import LlamaIndexLLMReader
    from .local import LocalReader
    from .openai import OpenAIReader

__all__ = [
    "DEFAULT_TEMPLATE",
    "SYSTEM_PROMPT",
    "BaseReader",
    "ChatModelReader",
    "Citations",
    "LlamaIndexLLMReader",
    "LocalReader",
    "OpenAIReader",
    "ParsedCitations",
    "PromptTemplate",
    "RateLimit",
    "Reader",
    "Reading",
    "ReplyCache",
    "SimulatedReader",
    "as_reader",
    "citation_json_schema",
    "extract_json",
    "parse_citations",
    "render_documents",
    "render_prompt",
    "sanitize_text",
    "validate_labels",
    "wait_retry_after",
]

_LAZY = {
    "SimulatedReader": "..engine.simulator",
    "OpenAIReader": ".openai",
    "ChatModelReader": ".chat_model",
    "LlamaIndexLLMReader": ".llama_index_llm",
    "LocalReader": ".local",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_instance_of(obj: Any, module: str, cls: str) -> bool:
    """``isinstance(obj, module.cls)``, False while ``module`` is not loaded (no object of
    that class can exist yet)."""
    mod = sys.modules.get(module)
    if mod is None:
        return False
    klass = getattr(mod, cls, None)
    return isinstance(klass, type) and isinstance(obj, klass)


def as_reader(obj: Any, **kwargs: Any) -> Any:
    """The reader for ``obj``: a reader (an object with ``read`` and/or ``aread``) as is,
    or adapted once when they take no ``labels`` (:class:`~._adapted.AdaptedReader`); a
    LangChain chat model or a Runnable wrapping one in a :class:`ChatModelReader`; a
    LlamaIndex ``LLM`` in a :class:`LlamaIndexLLMReader`; ``"local"``: a
    :class:`LocalReader`. ``kwargs`` are the wrapping reader's options.

    Raises:
        TypeError: ``obj`` is none of these, or options were given for a ready reader.
    """
    if isinstance(obj, str):
        if obj == "local":
            return import_module(".local", __name__).LocalReader(**kwargs)
        raise TypeError(
            f"unknown reader name {obj!r}: the only name accepted is 'local' (the embedded model); "
            "for a server use OpenAIReader(model=..., base_url=...)"
        )
    if _is_instance_of(obj, "langchain_core.runnables.base", "Runnable"):
        lc = import_module(".chat_model", __name__)
        if lc.is_chat_runnable(obj):
            return lc.ChatModelReader(obj, **kwargs)
    if _is_instance_of(obj, "llama_index.core.llms.llm", "LLM"):
        return import_module(".llama_index_llm", __name__).LlamaIndexLLMReader(obj, **kwargs)
    if callable(getattr(obj, "read", None)) or callable(getattr(obj, "aread", None)):
        if kwargs:
            raise TypeError(
                f"{type(obj).__name__} is already a reader; options {sorted(kwargs)} apply only when "
                "wrapping a chat model or LLM"
            )
        return adapt_reader(obj)
    raise TypeError(
        f"cannot use a {type(obj).__module__}.{type(obj).__qualname__} as a reader: pass an object with "
        "read(question, documents, *, labels) / aread(...), a LangChain chat model (or a Runnable wrapping one), "
        "a LlamaIndex LLM, or the string 'local'"
    )
