"""Reader options are declared once (readers/_options.py): one declaration reaches every
reader's constructor, docstring and the commands' flags."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from llama_index.core.llms import MockLLM

from gold_panning_integrations.cli import build_parser
from gold_panning_integrations.readers._cli_args import add_reader_arguments, make_reader
from gold_panning_integrations.readers._options import READER_OPTIONS, reader_option, remove_reader_option
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


@pytest.fixture
def probe_option() -> Iterator[str]:
    def check(value: Any) -> int:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"probe_window must be an integer >= 0, got {value!r}")
        return value

    reader_option(
        "probe_window",
        default=7,
        annotation="int",
        check=check,
        doc="A probe option declared by the test: the window of the probe.",
        flag="--probe-window",
        type=int,
        help="the probe's window (declared by a test)",
    )
    yield "probe_window"
    remove_reader_option("probe_window")


@pytest.mark.parametrize("cls", READERS, ids=lambda c: c.__name__)
def test_one_declaration_reaches_every_reader(cls: type, probe_option: str, tmp_path: Path) -> None:
    params = inspect.signature(cls).parameters
    assert params[probe_option].default == 7
    assert params[probe_option].kind is inspect.Parameter.KEYWORD_ONLY
    assert "probe_window: A probe option declared by the test" in (cls.__doc__ or "")
    reader = _build(cls, tmp_path, probe_window=3)
    assert reader.probe_window == 3
    assert _build(cls, tmp_path).probe_window == 7  # the declared default
    with pytest.raises(ValueError, match="probe_window must be an integer >= 0, got -1"):
        _build(cls, tmp_path, probe_window=-1)


def test_the_declared_option_is_on_help_and_reaches_the_reader(probe_option: str) -> None:
    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    assert "--probe-window" in run.format_help()
    parser = argparse.ArgumentParser()
    add_reader_arguments(parser)
    args = parser.parse_args(
        ["--reader", "openai", "--model", "m", "--base-url", "http://x/v1", "--probe-window", "5"]
    )
    assert make_reader(args).probe_window == 5


def test_withdrawn_option_is_gone(probe_option: str) -> None:
    remove_reader_option(probe_option)
    assert probe_option not in inspect.signature(OpenAIReader).parameters
    assert "probe_window" not in (OpenAIReader.__doc__ or "")
    with pytest.raises(
        TypeError, match=r"OpenAIReader.__init__\(\) got an unexpected keyword argument 'probe_window'"
    ):
        OpenAIReader(model="m", base_url="http://x/v1", probe_window=1)


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
