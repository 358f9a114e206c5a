"""LlamaIndex's habit: with neither ``llm`` nor ``reader``, the postprocessor uses
``Settings.llm`` (as ``LLMRerank`` does), or says what to pass. Failed on 0.5."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from doubles import ScriptedReader, SmallestLabelLLM, make_nodes
from llama_index.core import Settings
from llama_index.core import settings as settings_module

from gold_panning_integrations import GoldPanningPostprocessor


@pytest.fixture
def restore_settings_llm() -> Iterator[None]:
    """Put back whatever ``Settings.llm`` held (set or not) after the test."""
    before = Settings._llm
    try:
        yield
    finally:
        Settings._llm = before


def test_settings_llm_is_used_when_no_model_is_given(restore_settings_llm: None) -> None:
    llm = SmallestLabelLLM()
    Settings.llm = llm
    post = GoldPanningPostprocessor(top_n=2, rounds=2, prompts_per_round=1)
    assert post.llm is llm
    nodes, result = post.pan(make_nodes(5), "which passage?")
    assert len(nodes) == 2 and result.calls == 2 and result.failed_rounds == 0


def test_an_explicit_reader_wins_over_settings(restore_settings_llm: None) -> None:
    Settings.llm = SmallestLabelLLM()
    post = GoldPanningPostprocessor(reader=ScriptedReader())
    assert post.llm is None


def test_no_model_and_no_settings_is_a_clear_error(
    restore_settings_llm: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unresolved(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(
            "`llama-index-llms-openai` package not found, please run `pip install llama-index-llms-openai`"
        )

    Settings._llm = None
    monkeypatch.setattr(settings_module, "resolve_llm", unresolved)
    with pytest.raises(
        ValueError, match=r"needs a model.*set llama_index.core.Settings.llm.*llama-index-llms-openai"
    ):
        GoldPanningPostprocessor()
