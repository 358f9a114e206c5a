"""What the three adapters (LangChain retriever and compressor, LlamaIndex postprocessor)
share: the one profile rule, the on_result hook, input checks, repr and serialisation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from doubles import FLAT, TWO, ListRetriever, ReturnsRetriever, ScriptedReader, make_docs, make_nodes
from langchain_core.documents import Document

from gold_panning_integrations import (
    DetectorProfile,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    InvalidInputError,
    PanningResult,
)
from gold_panning_integrations.profiles import GENERIC_PROFILE

# ------------------------------------------------------------------ one runner per adapter
# Each runner builds an adapter around ``reader`` with ``options`` and pans 4 documents
# (the needle second) once, returning the adapter and the panning result.
Runner = Callable[..., tuple[Any, PanningResult]]


def _retriever_run(reader: Any, **options: Any) -> tuple[Any, PanningResult]:
    r = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(4, needle_at=1)), reader=reader, **options
    )
    return r, r.pan("where is the needle?").result


def _compressor_run(reader: Any, **options: Any) -> tuple[Any, PanningResult]:
    c = GoldPanningCompressor(reader=reader, **options)
    return c, c.pan(make_docs(4, needle_at=1), "where is the needle?").result


def _postprocessor_run(reader: Any, **options: Any) -> tuple[Any, PanningResult]:
    p = GoldPanningPostprocessor(reader=reader, **options)
    return p, p.pan(make_nodes(4, needle_at=1), "where is the needle?").result


RUNNERS = pytest.mark.parametrize(
    "run",
    [_retriever_run, _compressor_run, _postprocessor_run],
    ids=["retriever", "compressor", "postprocessor"],
)


# ------------------------------------------------------------------------ profile rule
@RUNNERS
def test_profile_is_none_until_first_use(run: Runner) -> None:
    # construction resolves nothing: the reader (maybe "local", a model load) is not touched
    adapter = {
        _retriever_run: lambda: GoldPanningRetriever(
            base_retriever=ListRetriever(docs=[]), reader=ScriptedReader()
        ),
        _compressor_run: lambda: GoldPanningCompressor(reader=ScriptedReader()),
        _postprocessor_run: lambda: GoldPanningPostprocessor(reader=ScriptedReader()),
    }[run]()
    assert adapter.profile is None


@RUNNERS
def test_reader_recommended_profile_is_used(run: Runner) -> None:
    # The reader names the uninformative FLAT profile: with it no position carries
    # evidence, so the engine makes no call. (With the generic profile it would call.)
    reader = ScriptedReader(recommended_profile=FLAT)
    adapter, result = run(reader, rounds=2)
    assert adapter.profile == FLAT
    assert result.calls == 0


@RUNNERS
def test_recommended_profile_by_bundled_name(run: Runner) -> None:
    adapter, _ = run(ScriptedReader(recommended_profile="smollm2-135m-kv"), rounds=1)
    assert adapter.profile == DetectorProfile.bundled("smollm2-135m-kv")


@RUNNERS
def test_explicit_profile_wins_over_the_readers(run: Runner) -> None:
    adapter, result = run(
        ScriptedReader(recommended_profile=FLAT), profile=TWO, rounds=2, prompts_per_round=1
    )
    assert adapter.profile == TWO
    assert result.calls == 2


@RUNNERS
def test_generic_profile_with_one_warning(
    run: Runner, generic_warning_reset: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.profiles"):
        first, _ = run(ScriptedReader(), rounds=1)
        run(ScriptedReader(), rounds=1)
    assert first.profile == DetectorProfile.bundled(GENERIC_PROFILE)
    warnings = [r for r in caplog.records if "gold-panning calibrate" in r.getMessage()]
    assert len(warnings) == 1


class CountingReader(ScriptedReader):
    """Counts how often its recommended profile is asked for."""

    asked = 0

    @property  # type: ignore[override]
    def recommended_profile(self) -> DetectorProfile:
        self.asked += 1
        return TWO


def test_profile_resolved_once_per_instance() -> None:
    reader = CountingReader()
    r = GoldPanningRetriever(base_retriever=ListRetriever(docs=make_docs(3, needle_at=0)), reader=reader)
    r.invoke("q")
    r.invoke("q")
    assert reader.asked == 1


# --------------------------------------------------------------------------- on_result
@RUNNERS
def test_on_result_gets_each_result(run: Runner) -> None:
    seen: list[PanningResult] = []
    _, result = run(ScriptedReader(), profile=TWO, rounds=2, on_result=seen.append)
    assert seen == [result]


@RUNNERS
def test_on_result_error_is_logged_and_documents_survive(
    run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(result: PanningResult) -> None:
        raise OSError("disk full")

    with caplog.at_level(logging.ERROR, logger="gold_panning_integrations.integrations._framework_base"):
        _, result = run(ScriptedReader(), profile=TWO, rounds=2, prompts_per_round=1, on_result=broken)
    assert result.calls == 2
    assert "on_result callback" in caplog.text
    assert "disk full" in caplog.text


async def test_on_result_on_the_async_path() -> None:
    seen: list[PanningResult] = []
    c = GoldPanningCompressor(reader=ScriptedReader(), profile=TWO, rounds=1, on_result=seen.append)
    _, result = await c.apan(make_docs(3, needle_at=2), "q")
    assert seen == [result]


def test_on_result_not_called_without_documents() -> None:
    seen: list[PanningResult] = []
    r = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=[]), reader=ScriptedReader(), on_result=seen.append
    )
    r.invoke("q")
    assert seen == []


# ---------------------------------------------------------------------- hostile inputs
BAD_COUNTS = [1.5, True, 0, -1, "4", None]


@pytest.mark.parametrize("bad", [b for b in BAD_COUNTS if b is not None])  # k=None: no count limit
def test_retriever_k_in_constructor(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"k must be a positive integer .*got"):
        GoldPanningRetriever(base_retriever=ListRetriever(docs=[]), reader=ScriptedReader(), k=bad)


@pytest.mark.parametrize("bad", [1.5, True, 0, -1, "4"])
def test_retriever_k_per_call(bad: Any) -> None:
    r = GoldPanningRetriever(base_retriever=ListRetriever(docs=make_docs(3)), reader=ScriptedReader())
    with pytest.raises(InvalidInputError, match=rf"k must be a positive integer .*got {bad!r}"):
        r.invoke("q", k=bad)


@pytest.mark.parametrize("bad", [b for b in BAD_COUNTS if b is not None])  # None: every document
def test_compressor_top_n(bad: Any) -> None:
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        GoldPanningCompressor(reader=ScriptedReader(), top_n=bad)


@pytest.mark.parametrize("bad", [b for b in BAD_COUNTS if b is not None])  # None: every node
def test_postprocessor_top_n(bad: Any) -> None:
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        GoldPanningPostprocessor(reader=ScriptedReader(), top_n=bad)


def test_postprocessor_top_n_none_returns_every_node_ranked() -> None:
    nodes = make_nodes(3, needle_at=2)
    out = GoldPanningPostprocessor(reader=ScriptedReader(), top_n=None).postprocess_nodes(
        nodes, query_str="q"
    )
    assert len(out) == 3 and out[0].node.node_id == "n2"


def test_postprocessor_top_n_per_call() -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader())
    with pytest.raises(InvalidInputError, match="top_n must be a positive integer"):
        p.pan(make_nodes(3), "q", top_n=1.5)


@pytest.mark.parametrize(
    ("returned", "match"),
    [
        (None, r"returned NoneType None; expected a list of langchain_core Document"),
        ("a single string", r"returned str 'a single string'; expected a list of langchain_core Document"),
        ({"page_content": "x"}, r"returned dict .*expected a list of langchain_core Document"),
        (
            ["just text"],
            r"returned a str at index 0 \('just text'\); expected a list of langchain_core Document",
        ),
        (
            [Document(page_content="ok"), {"page_content": "x"}],
            r"returned a dict at index 1 .*expected a list of langchain_core Document",
        ),
        ([None], r"returned a NoneType at index 0"),
    ],
)
def test_base_retriever_returning_non_documents(returned: Any, match: str) -> None:
    reader = ScriptedReader()
    r = GoldPanningRetriever(base_retriever=ReturnsRetriever(value=returned), reader=reader)
    with pytest.raises(InvalidInputError, match=match):
        r.invoke("q")
    assert reader.sync_calls == 0


def test_base_retriever_error_is_a_type_error_too() -> None:
    r = GoldPanningRetriever(base_retriever=ReturnsRetriever(value=["text"]), reader=ScriptedReader())
    with pytest.raises(TypeError, match="base retriever ReturnsRetriever"):
        r.invoke("q")


def test_compressor_given_strings() -> None:
    c = GoldPanningCompressor(reader=ScriptedReader())
    with pytest.raises(InvalidInputError, match="compress_documents was given a str at index 1"):
        c.compress_documents([Document(page_content="a"), "b"], "q")


def test_postprocessor_given_documents_instead_of_nodes() -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader())
    with pytest.raises(InvalidInputError, match="expected a list of llama_index NodeWithScore"):
        p.postprocess_nodes([Document(page_content="a")], query_str="q")


# ----------------------------------------------------------------- repr and serialising
@RUNNERS
def test_repr_is_short_and_names_the_profile(run: Runner) -> None:
    adapter, _ = run(ScriptedReader(), profile="lost-in-the-middle", rounds=3, seed=3)
    text = repr(adapter)
    assert len(text) < 400
    assert "DetectorProfile(model='generic', task='synthetic', n_positions=100)" in text
    assert "rounds=3" in text  # options away from their defaults
    assert "seed=3" in text
    assert "0.0" not in text  # no rates


@RUNNERS
def test_model_dump_json_mode_is_json(run: Runner) -> None:
    adapter, _ = run(ScriptedReader(), profile=TWO, rounds=1, on_result=lambda r: None)
    dumped = json.loads(json.dumps(adapter.model_dump(mode="json")))
    assert dumped["profile"]["tpr"] == [0.9, 0.5]
    assert "on_result" not in dumped


@RUNNERS
def test_plain_model_dump_is_json(run: Runner) -> None:
    adapter, _ = run(ScriptedReader(), profile=TWO, rounds=1)
    dumped = json.loads(json.dumps(adapter.model_dump()))
    assert dumped["profile"]["model"] == "test"


def test_retriever_dump_names_reader_and_base() -> None:
    r = GoldPanningRetriever(base_retriever=ListRetriever(docs=[]), reader=ScriptedReader())
    dumped = r.model_dump(mode="json")
    assert dumped["reader"] == {"class": "doubles.ScriptedReader"}
    assert dumped["base_retriever"] == {"class": "doubles.ListRetriever"}


def test_postprocessor_to_json() -> None:
    p = GoldPanningPostprocessor(reader=ScriptedReader(), profile=TWO, top_n=2)
    data = json.loads(p.to_json())
    assert data["class_name"] == "GoldPanningPostprocessor"
    assert data["top_n"] == 2
    assert data["profile"]["fpr"] == [0.1, 0.5]


# ------------------------------------------------------------------------ engine config
@RUNNERS
def test_config_reaches_the_engine_and_adapter_fields_override_it(run: Runner) -> None:
    from gold_panning_integrations import PanningConfig

    paper = PanningConfig.paper(rounds=7)
    adapter, result = run(ScriptedReader(), profile=TWO, rounds=2, config=paper, seed=1)
    panner = adapter._get_engine()
    assert panner.config.shuffle_top == 0
    assert panner.config.robust is False
    assert panner.config.empty_prompts == "evidence"
    assert panner.config.rounds == 2  # the adapter's own field wins over config.rounds
    assert result.calls == 2 * panner.config.prompts_per_round


@RUNNERS
def test_bad_config_is_refused_at_construction(run: Runner) -> None:
    with pytest.raises(ValueError, match="shuffle_top must be an int >= 0, got -1"):
        run(ScriptedReader(), profile=TWO, config={"shuffle_top": -1})


@RUNNERS
def test_every_engine_option_is_a_field_and_reaches_the_engine(run: Runner) -> None:
    # Engine options the adapters did not declare before (robust, shuffle_top) are fields
    # now, generated from PanningConfig, and override the config's values.
    adapter, result = run(ScriptedReader(), profile=TWO, rounds=1, robust=False, shuffle_top=0, seed=1)
    panner = adapter._get_engine()
    assert panner.config.robust is False
    assert panner.config.shuffle_top == 0
    assert result.calls == panner.config.prompts_per_round  # one round
    assert adapter.robust is False


@RUNNERS
def test_engine_option_fields_are_checked_by_the_config(run: Runner) -> None:
    with pytest.raises(ValueError, match=r"shuffle_top must be an int >= 0, got -1"):
        run(ScriptedReader(), profile=TWO, shuffle_top=-1)
    with pytest.raises(ValueError, match=r"prompts_per_round must be an int >= 1, got 0"):
        run(ScriptedReader(), profile=TWO, prompts_per_round=0)


@RUNNERS
def test_unknown_option_is_refused(run: Runner) -> None:
    with pytest.raises(ValueError, match="bogus_option"):
        run(ScriptedReader(), profile=TWO, bogus_option=1)
