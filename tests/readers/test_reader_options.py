"""Reader options are declared once (readers/_options.py): each reader's constructor names
the options it takes, with the declared defaults, and the declaration reaches its docstring,
its checks and the commands' flags."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from llama_index.core.llms import MockLLM

from gold_panning_integrations.cli import build_parser
from gold_panning_integrations.readers._cli_args import add_reader_arguments, make_reader
from gold_panning_integrations.readers._options import READER_OPTIONS
from gold_panning_integrations.readers.chat_model import ChatModelReader
from gold_panning_integrations.readers.llama_index_llm import LlamaIndexLLMReader
from gold_panning_integrations.readers.local import LocalReader
from gold_panning_integrations.readers.openai import OpenAIReader

READERS = (OpenAIReader, ChatModelReader, LlamaIndexLLMReader, LocalReader)


def _gguf(tmp_path: Path) -> Path:
    """A file LocalReader accepts as a model path (never loaded: no call is made)."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def _build(cls: type, tmp_path: Path, **options: Any) -> Any:
    if cls is OpenAIReader:
        return OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", **options)
    if cls is ChatModelReader:
        return ChatModelReader(FakeListChatModel(responses=["{}"]), **options)
    if cls is LlamaIndexLLMReader:
        return LlamaIndexLLMReader(MockLLM(), **options)
    pytest.importorskip("llama_cpp")
    return LocalReader(_gguf(tmp_path), **options)


def _declared_params(cls: type) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls).parameters.items() if n in READER_OPTIONS}


@pytest.mark.parametrize("cls", READERS, ids=lambda c: c.__name__)
def test_signature_defaults_agree_with_the_declarations(cls: type) -> None:
    """A reader names its options as keyword-only parameters (what an IDE and help() show);
    each default is the declared one, or the reader's own ``option_defaults``."""
    params = _declared_params(cls)
    assert params, cls
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    overrides = getattr(cls, "option_defaults", {})
    assert {n: p.default for n, p in params.items()} == {
        n: overrides.get(n, READER_OPTIONS[n].default) for n in params
    }
    assert set(overrides) <= set(READER_OPTIONS)


def test_an_option_has_one_type_in_every_reader() -> None:
    types: dict[str, set[str]] = {}
    for cls in READERS:
        for name, p in _declared_params(cls).items():
            types.setdefault(name, set()).add(p.annotation)
    # LocalReader's max_attempts=None: 1 at temperature 0, else 3
    assert {n: t for n, t in types.items() if len(t) > 1} == {"max_attempts": {"int", "int | None"}}
    assert set(types) == set(READER_OPTIONS)  # every declared option is taken by some reader


@pytest.mark.parametrize("cls", READERS, ids=lambda c: c.__name__)
def test_the_declarations_reach_every_reader(cls: type, tmp_path: Path) -> None:
    """The declared doc is in the reader's ``Args:``; the declared check runs."""
    for name in _declared_params(cls):
        assert f"{name}: {READER_OPTIONS[name].doc[:30]}" in " ".join((cls.__doc__ or "").split())
    assert _build(cls, tmp_path, max_attempts=2).max_attempts == 2
    with pytest.raises(ValueError, match="max_attempts"):
        _build(cls, tmp_path, max_attempts=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'probe_window'"):
        _build(cls, tmp_path, probe_window=1)


def test_every_flag_is_on_help_and_reaches_the_reader() -> None:
    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    flags = [o.flag for o in READER_OPTIONS.values() if o.flag is not None]
    assert len(flags) >= 8
    assert [f for f in flags if f not in run.format_help()] == []
    parser = argparse.ArgumentParser()
    add_reader_arguments(parser)
    args = parser.parse_args(
        [
            "--reader",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://x/v1",
            "--timeout",
            "5",
            "--max-attempts",
            "2",
        ]
    )
    reader = make_reader(args)
    assert (reader.timeout, reader.max_attempts) == (5.0, 2)


def test_signatures_keep_the_names_and_defaults_users_call() -> None:
    sig = {c.__name__: inspect.signature(c).parameters for c in READERS}
    assert sig["OpenAIReader"]["max_concurrency"].default == 16
    assert sig["OpenAIReader"]["response_format"].default == "auto"
    assert sig["OpenAIReader"]["timeout"].default == 60.0
    assert "structured" not in sig["OpenAIReader"]
    assert sig["ChatModelReader"]["structured"].default == "auto"
    assert sig["LocalReader"]["mode"].default == "answer"
    assert "max_concurrency" not in sig["LocalReader"]  # one llama.cpp context: fixed at 1
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for s in sig.values() for p in s.values())


def test_readers_not_taking_an_option_keep_its_fixed_value() -> None:
    reader = LlamaIndexLLMReader(MockLLM(), max_concurrency=2, cache=True, context_tokens=128)
    assert (reader.max_concurrency, reader.context_tokens) == (2, 128)
    assert reader.cache is not None
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout'"):
        LlamaIndexLLMReader(MockLLM(), timeout=3.0)
    assert set(READER_OPTIONS) >= {
        "mode",
        "cache",
        "requests_per_minute",
        "tokens_per_minute",
        "context_tokens",
    }
