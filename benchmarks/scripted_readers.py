"""What the probability says about readers a person can reason about (docs/probabilities.md).

Three scripted readers whose readings do not depend on placement: one that cites nothing in
any prompt (nothing here is relevant), one that cites passage #4 in every prompt and never
another, and one that cites #4 in 4 of the 6 prompts behind dense-style scores (1.00, 0.95,
..., 0.65). 8 candidates in the retriever's order, library defaults otherwise. Prints, per
``k`` and per bundled profile, the top posterior and ``p_none`` for the silent reader and #4's
posterior and rank for the other; no model call.

    python -m benchmarks.scripted_readers
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from gold_panning_integrations import GoldPanner, Reading, bundled_profiles

TEXTS = [f"Passage number {i} about subject {i}." for i in range(8)]


class Silent:
    """Cites nothing, ever."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return Reading(cited=())

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return self.read(question, documents, labels=labels)


class CitesOne:
    """Cites ``TEXTS[target]`` in the calls listed in ``every`` (1-based; None: all)."""

    def __init__(self, target: int = 4, every: set[int] | None = None) -> None:
        self.target, self.every, self.calls = target, every, 0

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.calls += 1
        if self.every is not None and self.calls not in self.every:
            return Reading(cited=())
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d == TEXTS[self.target]))

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return self.read(question, documents, labels=labels)


def _pan(reader: Any, profile: str, k: int | None, scores: Sequence[float] | None = None) -> Any:
    return GoldPanner(reader, profile, k=k).run("which passage answers?", TEXTS, scores=scores)


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    logging.disable(logging.WARNING)
    print("| k | silent reader: top posterior, p_none | cited every time: #4's posterior, rank |")
    print("|---|---|---|")
    for k in (1, 2, 4, 8, None):
        s, c = _pan(Silent(), "lost-in-the-middle", k), _pan(CitesOne(), "lost-in-the-middle", k)
        rank = [int(i) for i in c.ranking].index(4) + 1
        print(f"| {k} | {s.posteriors.max():.3f}, {s.p_none:.3f} | {c.posteriors[4]:.3f}, {rank} |")
    print()
    print("| profile (k=4) | silent: p_none | cited every time: #4's posterior, rank |")
    print("|---|---|---|")
    for name in bundled_profiles():
        s, c = _pan(Silent(), name, 4), _pan(CitesOne(), name, 4)
        rank = [int(i) for i in c.ranking].index(4) + 1
        print(f"| {name} | {s.p_none:.3f} | {c.posteriors[4]:.3f}, {rank} |")
    print()
    scores = [1.0 - 0.05 * i for i in range(8)]
    r = _pan(CitesOne(4, every={1, 2, 4, 5}), "lost-in-the-middle", 3, scores)
    top = [int(i) for i in r.ranking[:3]]
    print(
        "scores 1.00..0.65, #4 cited in 4 of 6 prompts (k=3): "
        + ", ".join(f"#{i} {r.posteriors[i]:.3f}" for i in top)
    )


if __name__ == "__main__":
    main()
