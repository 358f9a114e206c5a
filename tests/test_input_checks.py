"""Bad input is refused up front, through every entry point, with one error naming the
value and no call to the reader: an empty or whitespace-only question (or one that is not
text), and a document that is not text (None, bytes, a number, another object). An empty
document is data: it is panned like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doubles import ListRetriever, ScriptedReader, make_docs, make_nodes
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from gold_panning_integrations import (
    GoldPanner,
    GoldPanningCompressor,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    InvalidInputError,
)
from gold_panning_integrations.panning import check_documents, check_question

QUESTION = "where is the needle?"
PROFILE = "lost-in-the-middle"

BAD_QUESTIONS = [
    ("", r"the question is empty \(''\)"),
    ("  \n\t ", r"the question is whitespace only \('  \\n\\t '\)"),
    (None, r"the question must be text \(a str\), got NoneType None"),
    (b"where?", r"the question must be text \(a str\), got bytes b'where\?' \(decode it first"),
]
BAD_DOCUMENTS = [
    (None, r"document 1 is not text: NoneType None; drop it, or pass its text"),
    (b"raw bytes", r"document 1 is not text: bytes b'raw bytes'; decode it first"),
    (42, r"document 1 is not text: int 42; pass its text"),
    (2.5, r"document 1 is not text: float 2.5; pass its text"),
    (object(), r"document 1 is not text: object <object object at 0x"),
]


def _no_call(reader: ScriptedReader) -> None:
    assert (reader.sync_calls, reader.async_calls, reader.prompts) == (0, 0, [])


# ------------------------------------------------------------------ the checks themselves
def test_check_question_passes_text_through() -> None:
    assert check_question(" who? ") == " who? "


def test_check_documents_allows_empty_documents_and_names_every_bad_one() -> None:
    assert check_documents(["", "text", ""]) == ["", "text", ""]
    assert check_documents(()) == ()
    docs = ["ok", None, "ok", 1, b"x", 2, 3, 4, 5, 6]
    with pytest.raises(InvalidInputError) as info:
        check_documents(docs)
    assert str(info.value) == (
        "document 1 is not text: NoneType None; drop it, or pass its text. Every document must be a "
        "str (an empty string is allowed); 7 more document(s) are not text either (at 3, 4, 5, 6, 7, ...)"
    )


@pytest.mark.parametrize(
    ("documents", "pattern"),
    [
        (None, r"documents must be a list of str \(one text per document\), got NoneType None"),
        ("one text", r"got str 'one text'"),
        ({"a": "b"}, r"got dict \{'a': 'b'\}"),
        (iter(["a"]), r"got list_iterator"),
    ],
)
def test_check_documents_refuses_what_is_not_a_list(documents: Any, pattern: str) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        check_documents(documents)


# ------------------------------------------------------------------ GoldPanner.run / arun
@pytest.mark.parametrize(("question", "pattern"), BAD_QUESTIONS)
async def test_goldpanner_refuses_a_bad_question(question: Any, pattern: str) -> None:
    reader = ScriptedReader()
    panner = GoldPanner(reader, PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        panner.run(question, ["a needle", "hay"])
    with pytest.raises(InvalidInputError, match=pattern):
        await panner.arun(question, ["a needle", "hay"])
    _no_call(reader)


@pytest.mark.parametrize(("document", "pattern"), BAD_DOCUMENTS)
async def test_goldpanner_refuses_a_document_that_is_not_text(document: Any, pattern: str) -> None:
    reader = ScriptedReader()
    panner = GoldPanner(reader, PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        panner.run(QUESTION, ["a needle", document, "hay"])
    with pytest.raises(InvalidInputError, match=pattern):
        await panner.arun(QUESTION, ["a needle", document, "hay"])
    _no_call(reader)


async def test_an_empty_document_is_data() -> None:
    reader = ScriptedReader()
    # A flat prior: the needle comes first because the one reading cited it. Under the
    # default rank map the needle at rank 1 of 3 starts 1.69 nats below rank 0 (log-odds
    # -2.160 against -0.468), near all one citation can add (log(0.9 / 0.125) = 1.97 nats).
    panner = GoldPanner(reader, PROFILE, rounds=1, prompts_per_round=1, retriever_prior="none")
    result = panner.run(QUESTION, ["", "a needle", ""])
    assert result.calls == 1 and len(reader.prompts) == 1  # shown, empty documents too
    assert sorted(reader.prompts[0]) == ["", "", "a needle"] and result.ranking[0] == 1
    assert (await panner.arun(QUESTION, ["", "a needle", ""])).ranking[0] == 1


# ------------------------------------------------------------------ the LangChain retriever
def _retriever(reader: ScriptedReader, docs: list[Document]) -> GoldPanningRetriever:
    return GoldPanningRetriever(base_retriever=ListRetriever(docs=docs), reader=reader, profile=PROFILE)


class CountingRetriever(ListRetriever):
    """Counts how often it was asked: an empty question never reaches it."""

    calls: int = 0

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        self.calls += 1
        return list(self.docs)


@pytest.mark.parametrize(("question", "pattern"), BAD_QUESTIONS[:2])
async def test_retriever_refuses_a_bad_question_before_its_base_retriever(
    question: str, pattern: str
) -> None:
    reader = ScriptedReader()
    base = CountingRetriever(docs=make_docs(3, needle_at=0))
    retriever = GoldPanningRetriever(base_retriever=base, reader=reader, profile=PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        retriever.invoke(question)
    with pytest.raises(InvalidInputError, match=pattern):
        await retriever.ainvoke(question)
    assert base.calls == 0
    _no_call(reader)


def _docs_with(bad: Any) -> list[Document]:
    docs = make_docs(3, needle_at=0)
    docs[1].page_content = bad  # no validation on assignment: a document mutated after retrieval
    return docs


@pytest.mark.parametrize(("document", "pattern"), BAD_DOCUMENTS[:3])
async def test_retriever_refuses_a_document_whose_text_is_not_text(document: Any, pattern: str) -> None:
    reader = ScriptedReader()
    retriever = _retriever(reader, _docs_with(document))
    with pytest.raises(InvalidInputError, match=pattern):
        retriever.invoke(QUESTION)
    with pytest.raises(InvalidInputError, match=pattern):
        await retriever.ainvoke(QUESTION)
    _no_call(reader)


# ------------------------------------------------------------------ the LangChain compressor
@pytest.mark.parametrize(("question", "pattern"), BAD_QUESTIONS)
async def test_compressor_refuses_a_bad_question(question: Any, pattern: str) -> None:
    reader = ScriptedReader()
    compressor = GoldPanningCompressor(reader=reader, profile=PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        compressor.compress_documents(make_docs(3, needle_at=0), question)
    with pytest.raises(InvalidInputError, match=pattern):
        await compressor.acompress_documents(make_docs(3, needle_at=0), question)
    _no_call(reader)


def test_compressor_refuses_an_empty_question_with_no_documents_too() -> None:
    with pytest.raises(InvalidInputError, match="the question is empty"):
        GoldPanningCompressor(reader=ScriptedReader(), profile=PROFILE).compress_documents([], "")


@pytest.mark.parametrize(("document", "pattern"), BAD_DOCUMENTS[:3])
async def test_compressor_refuses_a_document_whose_text_is_not_text(document: Any, pattern: str) -> None:
    reader = ScriptedReader()
    compressor = GoldPanningCompressor(reader=reader, profile=PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        compressor.compress_documents(_docs_with(document), QUESTION)
    with pytest.raises(InvalidInputError, match=pattern):
        await compressor.acompress_documents(_docs_with(document), QUESTION)
    _no_call(reader)


# ------------------------------------------------------------------ the LlamaIndex postprocessor
POSTPROCESSOR_QUESTIONS = [
    *[case for case in BAD_QUESTIONS if case[0] is not None],
    (None, r"GoldPanningPostprocessor needs the query: pass query_bundle=\.\.\. or query_str="),
]


@pytest.mark.parametrize(("question", "pattern"), POSTPROCESSOR_QUESTIONS)
async def test_postprocessor_refuses_a_bad_question(question: Any, pattern: str) -> None:
    reader = ScriptedReader()
    post = GoldPanningPostprocessor(reader=reader, profile=PROFILE)
    with pytest.raises(InvalidInputError, match=pattern):
        post.pan(make_nodes(3, needle_at=0), question)
    with pytest.raises(InvalidInputError, match=pattern):
        await post.apan(make_nodes(3, needle_at=0), question)
    _no_call(reader)


async def test_postprocessor_refuses_an_empty_query_bundle() -> None:
    from llama_index.core.schema import QueryBundle

    reader = ScriptedReader()
    post = GoldPanningPostprocessor(reader=reader, profile=PROFILE)
    with pytest.raises(InvalidInputError, match="the question is whitespace only"):
        post.postprocess_nodes(make_nodes(3, needle_at=0), QueryBundle(" "))
    with pytest.raises(InvalidInputError, match="the question is empty"):
        await post.apostprocess_nodes(make_nodes(3, needle_at=0), query_str="")
    _no_call(reader)


async def test_postprocessor_refuses_a_node_without_text() -> None:
    reader = ScriptedReader()
    post = GoldPanningPostprocessor(reader=reader, profile=PROFILE)
    nodes = make_nodes(3, needle_at=0)
    nodes[2] = NodeWithScore(node=TextNode.model_construct(text=None, id_="n2"), score=None)
    with pytest.raises(InvalidInputError, match="document 2 is not text: NoneType None"):
        post.postprocess_nodes(nodes, query_str=QUESTION)
    with pytest.raises(InvalidInputError, match="document 2 is not text: NoneType None"):
        await post.apostprocess_nodes(nodes, query_str=QUESTION)
    _no_call(reader)


# ------------------------------------------------------------------ gold-panning run
@pytest.mark.parametrize("question", ["   ", "\n"])
@pytest.mark.parametrize("source", ["docs", "demo"])
def test_cli_run_refuses_a_blank_question_before_the_reader(
    question: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gold_panning_integrations.cli import EXIT_ERROR, main
    from gold_panning_integrations.readers import _cli_args

    made: list[ScriptedReader] = []
    monkeypatch.setattr(
        _cli_args, "make_reader", lambda args, seed=0: made.append(ScriptedReader()) or made[-1]
    )
    path = tmp_path / "docs.txt"
    path.write_text("a needle\nhay\n")
    given = ["--docs", str(path)] if source == "docs" else ["--demo"]
    assert main(["run", *given, "--question", question, "--profile", PROFILE]) == EXIT_ERROR
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "the question is whitespace only" in lines[0], lines
    assert made == []  # refused before a reader (a model) was built


def test_cli_run_pans_a_docs_file_with_an_empty_line_of_json_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's documents are text by construction; an empty ``text`` is data."""
    import json

    from gold_panning_integrations.cli import main
    from gold_panning_integrations.readers import _cli_args

    reader = ScriptedReader()
    monkeypatch.setattr(_cli_args, "make_reader", lambda args, seed=0: reader)
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": ""}\n{"text": "a needle"}\n')
    # a flat prior (--retriever-prior none): the needle is selected because it was cited.
    # Under the default rank map the second of 2 starts 1.69 nats below the first, more
    # than a citation can add at n = 2 (log(0.9 / 0.25) = 1.28 nats).
    args = ["run", "--docs", str(path), "--question", QUESTION, "--profile", PROFILE, "--json"]
    args += ["--retriever-prior", "none"]
    assert main([*args, "--rounds", "1", "--prompts-per-round", "1", "--k", "1", "--no-final-answer"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["selected"] == [1] and reader.sync_calls == 1
