"""One declared reader protocol: the engine calls ``read(question, documents, *, labels)``
and never inspects a signature; a user's reader is adapted once, at the edge."""

from __future__ import annotations

import ast
import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.engine import Reader
from gold_panning_integrations.readers import as_reader
from gold_panning_integrations.readers._adapted import AdaptedReader, adapt_template

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
DOCS = [f"d{i}" for i in range(5)]


class Labelled:
    model_name = "labelled"
    recommended_profile = None
    max_concurrency = 1

    def __init__(self) -> None:
        self.labels: list[list[int]] = []

    def read(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
        self.labels.append(list(labels))
        return Reading()

    async def aread(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
        return self.read(question, documents, labels=labels)


class Unlabelled:
    recommended_profile = "smollm2-135m-kv"

    def __init__(self) -> None:
        self.calls = 0

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        return Reading(cited=(0,))

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        return self.read(question, documents)


def test_a_reader_of_the_protocol_is_used_as_it_is() -> None:
    reader = Labelled()
    assert isinstance(reader, Reader)
    assert as_reader(reader) is reader
    panner = GoldPanner(reader, PROFILE, rounds=2, rng=0, prompts_per_round=1)
    assert panner.reader is reader
    res = panner.run("q", DOCS)
    assert [list(t.labels[0]) for t in res.rounds] == reader.labels  # the trace shows what was passed


def test_an_unlabelled_reader_is_wrapped_once_with_one_warning(
    caplog: pytest.LogCaptureFixture, unlabelled_warning_reset: None
) -> None:
    reader = Unlabelled()
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.readers._adapted"):
        adapted = as_reader(reader)
        assert isinstance(adapted, AdaptedReader) and as_reader(adapted) is adapted
        res = GoldPanner(reader, PROFILE, rounds=2, rng=0, prompts_per_round=1).run("q", DOCS)
        asyncio.run(GoldPanner(reader, PROFILE, rounds=1, rng=0, prompts_per_round=1).arun("q", DOCS))
    assert reader.calls == 3
    # one warning per class and method, naming the signature to write
    assert caplog.text.count("Unlabelled.read takes no 'labels' argument") == 1
    assert caplog.text.count("Unlabelled.aread takes no 'labels' argument") == 1
    assert "Add `*, labels` to the reader's read" in caplog.text
    # the trace records the labels the reader showed: 1..m
    assert all(t.labels == (tuple(range(1, 6)),) for t in res.rounds)
    assert all(r.labels == (1, 2, 3, 4, 5) for t in res.rounds for r in t.readings)
    # the wrapped reader's other attributes pass through (its recommended profile too)
    assert adapted.recommended_profile == "smollm2-135m-kv"
    assert GoldPanner(reader, prompts_per_round=1).profile == DetectorProfile.bundled("smollm2-135m-kv")


def test_an_adapted_reader_has_only_the_methods_the_reader_has() -> None:
    class OnlyRead:
        def read(self, question: str, documents: Sequence[str]) -> Reading:
            return Reading()

    adapted = as_reader(OnlyRead())
    assert hasattr(adapted, "read") and not hasattr(adapted, "aread")
    with pytest.raises(
        TypeError, match=r"arun needs a reader with an async aread\(question, documents, \*, labels\)"
    ):
        asyncio.run(GoldPanner(OnlyRead(), PROFILE).arun("q", DOCS))


def test_an_object_that_is_no_reader_is_refused_saying_what_is_needed() -> None:
    with pytest.raises(
        TypeError,
        match=r"cannot use a .*int as a reader: pass an object with read\(question, documents, \*, labels\)",
    ):
        as_reader(42)
    with pytest.raises(TypeError, match="cannot use a"):
        GoldPanner(object(), PROFILE)


def test_a_callable_template_without_labels_numbers_itself() -> None:
    def numbered(q: str, docs: list[str]) -> str:
        return q

    adapted = adapt_template(numbered)
    assert adapted.numbers_itself and adapted("q", ["a"], labels=[7]) == "q"
    labelled = lambda q, docs, *, labels: q
    assert adapt_template(labelled) is labelled
    assert adapt_template("{question}") == "{question}" and adapt_template(None) is None


def test_only_the_edge_adapter_inspects_signatures() -> None:
    import gold_panning_integrations as pkg

    root = Path(pkg.__file__).parent
    inspecting = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if any(
            isinstance(node, ast.Attribute) and node.attr in ("signature", "getfullargspec")
            for node in ast.walk(ast.parse(p.read_text()))
        )
    )
    # readers/_adapted.py holds the edge adapter's one check (takes_keyword: a template's, and
    # through adapt_reader a user's reader's); readers/_options.py reads the four readers'
    # own constructors once, to add the declared options to their signatures
    # (documentation); nothing decides behaviour by a signature
    assert inspecting == ["readers/_adapted.py", "readers/_options.py"]
