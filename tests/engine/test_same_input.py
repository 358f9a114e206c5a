"""Same input, same output: with no seed, the random stream is derived from the question
and the documents, so a repeated query repeats its prompts, labels and ranking through
every entry point; ``"fresh"`` draws fresh entropy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from doubles import SmallestLabelChatModel, SmallestLabelLLM, make_docs, make_nodes
from pydantic import ValidationError

from gold_panning_integrations import (
    GoldPanner,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    Reading,
)
from gold_panning_integrations.engine.records import check_rng_option, derived_rng, input_digest

DOCS = [f"Passage {i} about topic {i % 3}." for i in range(8)]


class LabelRecorder:
    """Cites the shown document with the smallest label; records each prompt's labels."""

    def __init__(self) -> None:
        self.labels: list[tuple[int, ...]] = []

    def read(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
        self.labels.append(tuple(labels))
        return Reading(cited=(int(np.argmin(labels)),))


def _labels(result: Any) -> list[Any]:
    return [t.labels for t in result.rounds]


# ------------------------------------------------------------------ the derivation
def test_digest_is_length_prefixed_and_order_sensitive() -> None:
    assert input_digest("ab", ["c"]) != input_digest("a", ["bc"])
    assert input_digest("q", ["a", "b"]) != input_digest("q", ["b", "a"])
    assert input_digest("q", ["a", "b"]) != input_digest("q", ["a", "b", ""])
    assert input_digest("q", ["a"]) == input_digest("q", ("a",))
    assert len(input_digest("q", [])) == 32


def test_derived_stream_repeats_and_differs_by_input() -> None:
    a = derived_rng("q", DOCS).integers(1 << 30, size=4)
    assert a.tolist() == derived_rng("q", DOCS).integers(1 << 30, size=4).tolist()
    assert a.tolist() != derived_rng("another q", DOCS).integers(1 << 30, size=4).tolist()
    assert a.tolist() != derived_rng("q", DOCS[::-1]).integers(1 << 30, size=4).tolist()


def test_a_lone_surrogate_hashes() -> None:
    assert input_digest("q\ud800", ["x"]) != input_digest("q", ["x"])


@pytest.mark.parametrize("bad", ["Fresh", -1, 1.5, True, "7"])
def test_bad_rng_options_are_named(bad: Any) -> None:
    with pytest.raises(ValueError, match="seed must be"):
        check_rng_option(bad, name="seed")


# ------------------------------------------------------------------ the panner
def test_panner_repeats_its_prompts_without_a_seed() -> None:
    reader = LabelRecorder()
    panner = GoldPanner(reader, "lost-in-the-middle", rounds=3, prompts_per_round=2)
    first = panner.run("which topic?", DOCS)
    prompts_first = list(reader.labels)
    second = panner.run("which topic?", DOCS)
    assert reader.labels[len(prompts_first) :] == prompts_first
    assert _labels(first) == _labels(second)
    assert first.ranking.tolist() == second.ranking.tolist()
    np.testing.assert_array_equal(first.posteriors, second.posteriors)


def test_different_questions_give_different_labels() -> None:
    panner = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2)
    assert _labels(panner.run("one question", DOCS)) != _labels(panner.run("another question", DOCS))


def test_fresh_draws_new_labels_each_run() -> None:
    panner = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, rng="fresh")
    assert _labels(panner.run("q", DOCS)) != _labels(panner.run("q", DOCS))


def test_an_int_seed_starts_its_stream_anew_on_every_run() -> None:
    """An int is the seed of every run's stream (issue 49: it used to seed one generator
    that the panner's runs shared, so the same call twice differed); a Generator is the
    caller's one stream, which the runs continue."""
    a = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, rng=7)
    first = [_labels(a.run("q", DOCS)), _labels(a.run("q", DOCS))]
    assert first[0] == first[1]
    assert (
        _labels(GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, rng=7).run("q", DOCS)) == first[0]
    )
    shared = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, rng=np.random.default_rng(7))
    assert [_labels(shared.run("q", DOCS)), _labels(shared.run("q", DOCS))][0] == first[0]
    assert _labels(shared.run("q", DOCS)) != first[0]


def test_seed_is_the_panners_name_for_rng_too() -> None:
    """``seed`` on GoldPanner takes the adapters' values with their meaning: None derives
    the stream from the input, an int fixes it, ``"fresh"`` draws anew each run."""
    by_seed = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, seed=7)
    by_rng = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, rng=7)
    assert [_labels(by_seed.run("q", DOCS)) for _ in range(2)] == [
        _labels(by_rng.run("q", DOCS)) for _ in range(2)
    ]
    derived = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, seed=None)
    plain = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2)
    assert _labels(derived.run("q", DOCS)) == _labels(derived.run("q", DOCS)) == _labels(plain.run("q", DOCS))
    fresh = GoldPanner(LabelRecorder(), "lost-in-the-middle", rounds=2, seed="fresh")
    assert _labels(fresh.run("q", DOCS)) != _labels(fresh.run("q", DOCS))


def test_seed_and_rng_together_is_one_error() -> None:
    from gold_panning_integrations import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"give seed= or rng=, not both \(got seed=1, rng='fresh'\)"):
        GoldPanner(LabelRecorder(), "lost-in-the-middle", seed=1, rng="fresh")
    with pytest.raises(ValueError, match="seed must be a non-negative int .* got 'random'"):
        GoldPanner(LabelRecorder(), "lost-in-the-middle", seed="random")


async def test_async_run_matches_the_sync_stream() -> None:
    class Both(LabelRecorder):
        async def aread(self, question: str, documents: Sequence[str], *, labels: Sequence[int]) -> Reading:
            return self.read(question, documents, labels=labels)

    panner = GoldPanner(Both(), "lost-in-the-middle", rounds=2, prompts_per_round=1)
    assert _labels(await panner.arun("q", DOCS)) == _labels(panner.run("q", DOCS))


# ------------------------------------------------------------------ the adapters
def _meta(docs: Sequence[Any]) -> list[tuple[str, float]]:
    return [(d.id, d.metadata["gold_panning_posterior"]) for d in docs]


def test_retriever_invoke_twice_same_documents_same_order(list_retriever: Any) -> None:
    retriever = GoldPanningRetriever(
        base_retriever=list_retriever(make_docs(10)), reader=SmallestLabelChatModel(), k=4
    )
    first, r1 = retriever.pan("which passage?")
    second, r2 = retriever.pan("which passage?")
    assert _meta(first) == _meta(second)
    assert _labels(r1) == _labels(r2)
    assert _meta(retriever.invoke("which passage?")) == _meta(first)
    assert _labels(retriever.pan("another passage?").result) != _labels(r1)


def test_retriever_seed_fresh_draws_new_labels(list_retriever: Any) -> None:
    retriever = GoldPanningRetriever(
        base_retriever=list_retriever(make_docs(10)), reader=SmallestLabelChatModel(), seed="fresh"
    )
    assert _labels(retriever.pan("q").result) != _labels(retriever.pan("q").result)


def test_compressor_repeats() -> None:
    compressor = GoldPanningCompressor(reader=SmallestLabelChatModel(), top_n=3)
    docs = make_docs(10)
    first = compressor.pan(docs, "which passage?")
    second = compressor.pan(docs, "which passage?")
    assert _meta(first.documents) == _meta(second.documents)
    assert _labels(first.result) == _labels(second.result)


def test_postprocessor_twice_same_nodes_same_order() -> None:
    post = GoldPanningPostprocessor(llm=SmallestLabelLLM(), top_n=4)
    first = post.postprocess_nodes(make_nodes(10), query_str="which passage?")
    second = post.postprocess_nodes(make_nodes(10), query_str="which passage?")
    assert [(n.node.node_id, n.score) for n in first] == [(n.node.node_id, n.score) for n in second]
    assert _labels(post.pan(make_nodes(10), "which passage?").result) == _labels(
        post.pan(make_nodes(10), "which passage?").result
    )
    fresh = GoldPanningPostprocessor(llm=SmallestLabelLLM(), seed="fresh")
    assert _labels(fresh.pan(make_nodes(10), "q").result) != _labels(fresh.pan(make_nodes(10), "q").result)


def test_adapter_rejects_a_bad_seed() -> None:
    with pytest.raises(ValidationError, match="seed must be"):
        GoldPanningCompressor(reader=SmallestLabelChatModel(), seed="random")


# ------------------------------------------------------------------ the CLI
def _cli_labels(capsys: pytest.CaptureFixture[str], *extra: str) -> list[Any]:
    import json

    from gold_panning_integrations.cli import main

    args = ["run", "--demo", "--reader", "simulated", "--rounds", "2", "--json", *extra]
    assert main(args) == 0
    return [r["labels"] for r in json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rounds"]]


def test_cli_run_repeats_without_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    first = _cli_labels(capsys)
    assert _cli_labels(capsys) == first
    assert _cli_labels(capsys, "--seed", "fresh") != first


def test_cli_run_rejects_a_bad_seed(capsys: pytest.CaptureFixture[str]) -> None:
    from gold_panning_integrations.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--demo", "--seed", "new"])
    assert "expected a non-negative integer or 'fresh', got 'new'" in capsys.readouterr().err
