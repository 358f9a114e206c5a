"""``python -m benchmarks real``: its CachedReader (benchmarks/_readers.py), the per-round labels of the
reader protocol, bad sizes, and a resumed run with the simulated reader."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks._cli import main as lab_main
from benchmarks._readers import CachedReader
from gold_panning_integrations.cli import EXIT_ERROR
from gold_panning_integrations.engine.records import Reading


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
    assert lab_main(["real", "--reader", "simulated", *bad]) == EXIT_ERROR
    assert f"{bad[0]} must be >= " in capsys.readouterr().err


def test_bench_real_with_simulated_reader_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ck = tmp_path / "bench.jsonl"
    args = [
        "real",
        "--reader",
        "simulated",
        "--instances",
        "4",
        "--rounds",
        "3",
        "--json",
        "--profile",
        "lost-in-the-middle",
        "--checkpoint",
        str(ck),
    ]
    assert lab_main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(first["policies"]) == {"belief", "entropy", "random"}
    assert all(len(v["f1"]) == 3 and all(0 <= x <= 1 for x in v["f1"]) for v in first["policies"].values())
    # 4 instances x 3 methods x 3 rounds = 36 readings, answered or cached
    assert first["model_calls"] + first["cache_hits"] == 36
    assert len(ck.read_text().splitlines()) == 12
    assert lab_main(args) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["policies"] == first["policies"] and second["model_calls"] == 0
