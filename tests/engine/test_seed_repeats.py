"""A seed means the same thing at every entry point: the same call twice gives the same
output. ``GoldPanner(seed=0)`` used to keep one generator for all its runs, so a second
identical call drew other placements and labels and ranked differently (issue 49)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from doubles import make_docs

from gold_panning_integrations import GoldPanner, GoldPanningCompressor, Reading

QUESTION = "where is the needle?"
TEXTS = [f"passage {i} about hay" for i in range(10)]


class FirstShown:
    """Cites the document shown first (a position-biased reader: its citations follow the
    placements, so another random stream ranks differently); records what it was shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[tuple[str, ...], tuple[int, ...]]] = []

    def read(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
        self.shown.append((tuple(documents), tuple(int(x) for x in labels)))
        return Reading(cited=(0,))

    async def aread(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
        return self.read(question, documents, labels=labels)


def _ranked(result: object) -> list[tuple[int, float]]:
    post = result.posteriors  # type: ignore[attr-defined]
    return [(int(i), float(post[i])) for i in result.ranking]  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [0, 7])
def test_two_identical_runs_on_one_seeded_panner_are_equal(seed: int) -> None:
    reader = FirstShown()
    panner = GoldPanner(reader, "lost-in-the-middle", seed=seed)
    first = panner.run(QUESTION, TEXTS)
    prompts = list(reader.shown)
    second = panner.run(QUESTION, TEXTS)
    assert reader.shown[len(prompts) :] == prompts  # the same documents, order and labels
    assert _ranked(second) == _ranked(first)
    # a new panner with the same seed gives it too: the seed's stream, not the panner's history
    assert _ranked(GoldPanner(FirstShown(), "lost-in-the-middle", seed=seed).run(QUESTION, TEXTS)) == _ranked(
        first
    )


async def test_two_identical_async_runs_on_one_seeded_panner_are_equal() -> None:
    panner = GoldPanner(FirstShown(), "lost-in-the-middle", seed=0)
    first = await panner.arun(QUESTION, TEXTS)
    assert _ranked(await panner.arun(QUESTION, TEXTS)) == _ranked(first)
    assert _ranked(panner.run(QUESTION, TEXTS)) == _ranked(first)  # sync and async: one stream


def test_the_seed_is_the_streams_and_other_seeds_differ() -> None:
    results = {
        s: _ranked(GoldPanner(FirstShown(), "lost-in-the-middle", seed=s).run(QUESTION, TEXTS))
        for s in range(6)
    }
    assert len({tuple(r) for r in results.values()}) > 1  # the seed matters: it is not ignored
    explicit = GoldPanner(FirstShown(), "lost-in-the-middle").run(
        QUESTION, TEXTS, rng=np.random.default_rng(3)
    )
    assert _ranked(explicit) == results[3]


def test_a_generator_is_one_stream_that_runs_continue() -> None:
    """A Generator given is the caller's stream: the panner's runs continue it (documented)."""
    gen = GoldPanner(FirstShown(), "lost-in-the-middle", rng=np.random.default_rng(0))
    first = _ranked(gen.run(QUESTION, TEXTS))
    assert first == _ranked(GoldPanner(FirstShown(), "lost-in-the-middle", seed=0).run(QUESTION, TEXTS))
    assert _ranked(gen.run(QUESTION, TEXTS)) != first


def test_the_compressor_and_the_panner_give_the_same_ranking_for_a_seed() -> None:
    docs = [d.model_copy(update={"page_content": t}) for d, t in zip(make_docs(len(TEXTS)), TEXTS)]
    compressor = GoldPanningCompressor(reader=FirstShown(), profile="lost-in-the-middle", seed=0, top_n=None)
    panned = compressor.pan(docs, QUESTION)
    again = compressor.pan(docs, QUESTION)
    assert _ranked(again.result) == _ranked(panned.result)
    engine = GoldPanner(FirstShown(), "lost-in-the-middle", seed=0, k=None)
    assert _ranked(engine.run(QUESTION, TEXTS)) == _ranked(panned.result)
