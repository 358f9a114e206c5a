"""A query's path through the package, pinned: one ``GoldPanningRetriever.invoke`` traced
(:mod:`benchmarks.query_path`), and the reader and profile resolved once per adapter,
not per query."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from doubles import ListRetriever, ScriptedReader, make_docs, make_nodes

from benchmarks.query_path import trace_invoke
from gold_panning_integrations import (
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    panning,
    readers,
)


def test_one_invoke_runs_through_few_frames_and_files(caplog: pytest.LogCaptureFixture) -> None:
    # 8 documents, defaults (4 rounds of 2 prompts, with a fake that cites nothing: the
    # stop rule ends it after 3 rounds). Before issue 40: 20 package frames at the model
    # call and 32 files, 247 functions, 1,086 calls on a query after the first; before
    # issue 50 (the generator step driver): 9 frames, 12 files, 210 functions, 1,014 calls.
    with caplog.at_level(logging.ERROR):
        first, later = trace_invoke(8)
    assert first["model_calls"] == later["model_calls"] == 6
    for query in (first, later):
        assert query["frames"] <= 8, query
    assert later["files"] <= 12, later["file_names"]
    assert later["functions"] <= 170 and later["calls"] <= 600, later
    resolving = {"readers/__init__.py", "profiles/__init__.py", "profiles/_lookup.py"}
    assert resolving.isdisjoint(later["file_names"])  # nothing resolved again on a later query


class _Counts:
    """Counts of ``as_reader`` and ``resolved_profile`` calls (the real ones run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.as_reader = 0
        self.resolved_profile = 0
        real_as_reader, real_resolved = readers.as_reader, panning.resolved_profile

        def as_reader(*args: Any, **kwargs: Any) -> Any:
            self.as_reader += 1
            return real_as_reader(*args, **kwargs)

        def resolved_profile(*args: Any, **kwargs: Any) -> Any:
            self.resolved_profile += 1
            return real_resolved(*args, **kwargs)

        monkeypatch.setattr(readers, "as_reader", as_reader)
        monkeypatch.setattr(panning, "resolved_profile", resolved_profile)

    def __call__(self) -> tuple[int, int]:
        return self.as_reader, self.resolved_profile


def _retriever() -> tuple[Any, Callable[[Any], Any], Callable[[Any], Any]]:
    r = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(4, needle_at=2)), reader=ScriptedReader()
    )
    return r, lambda a: a.invoke("q"), lambda a: asyncio.run(a.ainvoke("q"))


def _compressor() -> tuple[Any, Callable[[Any], Any], Callable[[Any], Any]]:
    docs = make_docs(4, needle_at=2)
    c = GoldPanningCompressor(reader=ScriptedReader())
    return (
        c,
        lambda a: a.compress_documents(docs, "q"),
        lambda a: asyncio.run(a.acompress_documents(docs, "q")),
    )


def _postprocessor() -> tuple[Any, Callable[[Any], Any], Callable[[Any], Any]]:
    nodes = make_nodes(4, needle_at=2)
    p = GoldPanningPostprocessor(reader=ScriptedReader())
    return (
        p,
        lambda a: a.postprocess_nodes(nodes, query_str="q"),
        lambda a: asyncio.run(a.apostprocess_nodes(nodes, query_str="q")),
    )


@pytest.mark.parametrize(
    "make", [_retriever, _compressor, _postprocessor], ids=["retriever", "compressor", "postprocessor"]
)
def test_reader_and_profile_are_resolved_once_per_adapter(
    make: Callable[[], tuple[Any, Callable[[Any], Any], Callable[[Any], Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _Counts(monkeypatch)
    adapter, query, aquery = make()
    assert counts() == (0, 0)  # built lazily, on the first query
    query(adapter)
    assert counts() == (1, 1)
    for _ in range(3):
        query(adapter)
        aquery(adapter)
    assert counts() == (1, 1)  # 0 per query after the first
    engine = adapter._get_engine()
    adapter.rounds = 2  # a field the engine is built from: built again, once
    query(adapter)
    query(adapter)
    assert counts() == (2, 2)
    assert adapter._get_engine() is not engine and adapter._get_engine().config.rounds == 2
    adapter.on_result = None  # not an engine field: the engine stays
    query(adapter)
    assert counts() == (2, 2)


def test_a_copy_that_changes_an_engine_field_builds_its_own_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _Counts(monkeypatch)
    adapter, query, _ = _retriever()
    query(adapter)
    same = adapter.model_copy()
    other = adapter.model_copy(update={"rounds": 1})
    query(same)
    assert counts() == (1, 1) and same._get_engine() is adapter._get_engine()
    query(other)
    assert counts() == (2, 2) and other._get_engine().config.rounds == 1


def test_a_query_resolves_no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # The config is resolved against the profile once, when the engine is built; the
    # mixture's rates (asked at every update, ~30 times a query) read it as it is.
    from gold_panning_integrations.engine.config import PanningConfig

    adapter, query, aquery = _retriever()
    query(adapter)
    calls = []
    real = PanningConfig.with_profile

    def with_profile(self: PanningConfig, profile: Any) -> PanningConfig:
        calls.append(profile)
        return real(self, profile)

    monkeypatch.setattr(PanningConfig, "with_profile", with_profile)
    query(adapter)
    aquery(adapter)
    assert calls == []
