"""The CachedReader of ``bench real`` (readers/simulated.py) and the per-round labels of the reader protocol."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gold_panning_integrations.cli import EXIT_ERROR, main
from gold_panning_integrations.engine.reading import Reading
from gold_panning_integrations.readers.simulated import CachedReader


class _WithLabels:
    def __init__(self) -> None:
        self.seen: list[tuple[int, ...] | None] = []

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.seen.append(None if labels is None else tuple(labels))
        return Reading(cited=(0,))


class _WithoutLabels:
    def __init__(self) -> None:
        self.calls = 0

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        self.calls += 1
        return Reading(cited=(0,))


def test_labels_are_forwarded_and_part_of_the_key() -> None:
    inner = _WithLabels()
    cached = CachedReader(inner)
    cached.read("q", ["a", "b"], labels=[2, 1])
    cached.read("q", ["a", "b"], labels=[1, 2])
    cached.read("q", ["a", "b"], labels=[2, 1])
    assert inner.seen == [(2, 1), (1, 2)]
    assert (cached.misses, cached.hits) == (2, 1)


def test_a_reader_without_labels_is_called_without_them() -> None:
    inner = _WithoutLabels()
    cached = CachedReader(inner)
    cached.read("q", ["a", "b"], labels=[2, 1])
    assert inner.calls == 1


@pytest.mark.parametrize("bad", [["--instances", "0"], ["--n", "1"], ["--rounds", "0"]])
def test_bench_real_rejects_bad_sizes(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "real", "--reader", "simulated", *bad]) == EXIT_ERROR
    assert f"{bad[0]} must be >= " in capsys.readouterr().err
