"""The adapters' results say what the reader cut: a document shortened to fit the model's
context carries ``gold_panning_cut`` (the prompts it was shown cut in) in its LangChain
metadata or LlamaIndex node metadata, as ``PanningResult`` counts it (``documents_cut``,
``chars_cut``, per document ``times_cut``). Through ``OpenAIReader`` on a loopback endpoint
with a small ``context_tokens``: one long passage among short ones."""

from __future__ import annotations

from compare_fakes import oracle_model
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from openai_server import FakeOpenAIServer

from gold_panning_integrations import GoldPanningCompressor, GoldPanningPostprocessor, OpenAIReader

QUESTION = "where is the needle?"
LONG = 3  # the passage that cannot fit whole
TEXTS = [f"short passage {i} about hay." for i in range(6)]
TEXTS[LONG] = "a long passage about hay. " * 400  # ~10,000 characters: ~3,300 estimated tokens
TEXTS[1] = "the needle is in this short passage."


def _reader(base_url: str) -> OpenAIReader:
    return OpenAIReader(model="m", base_url=base_url, context_tokens=1500, max_tokens=64, max_attempts=1)


def _shown(result: object, index: int) -> int:
    """Prompts that showed document ``index``."""
    return sum(index in w for r in result.rounds for w in r.windows)  # type: ignore[attr-defined]


def test_a_cut_document_says_so_in_its_langchain_metadata() -> None:
    docs = [Document(page_content=t, metadata={"i": i}) for i, t in enumerate(TEXTS)]
    with FakeOpenAIServer(default=oracle_model(lambda t: "needle" in t)) as srv:
        compressor = GoldPanningCompressor(
            reader=_reader(srv.base_url), profile="lost-in-the-middle", top_n=None
        )
        panned = compressor.pan(docs, QUESTION)
    result = panned.result
    cut = {d.metadata["i"]: d.metadata["gold_panning_cut"] for d in panned.documents}
    assert cut[LONG] == _shown(result, LONG) > 0  # cut in every prompt that showed it
    assert {i: n for i, n in cut.items() if i != LONG} == dict.fromkeys(set(range(len(TEXTS))) - {LONG}, 0)
    assert result.documents_cut == sum(cut.values()) == int(result.times_cut.sum())
    assert result.chars_cut > 0
    assert "gold_panning_cut" not in docs[LONG].metadata  # the caller's documents are unchanged


async def test_a_cut_node_says_so_in_its_metadata_hidden_from_the_llm() -> None:
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=None) for i, t in enumerate(TEXTS)]
    with FakeOpenAIServer(default=oracle_model(lambda t: "needle" in t)) as srv:
        post = GoldPanningPostprocessor(
            reader=_reader(srv.base_url), profile="lost-in-the-middle", top_n=None
        )
        panned = await post.apan(nodes, QUESTION)
    by_id = {n.node.node_id: n.node for n in panned.nodes}
    long_node = by_id[f"n{LONG}"]
    assert long_node.metadata["gold_panning_cut"] == _shown(panned.result, LONG) > 0
    assert "gold_panning_cut" not in long_node.get_content(metadata_mode=MetadataMode.LLM)
    assert "gold_panning_cut" not in long_node.get_content(metadata_mode=MetadataMode.EMBED)
    assert all("gold_panning_cut" not in n.metadata for i, n in by_id.items() if i != f"n{LONG}")
    assert "gold_panning_cut" not in nodes[LONG].node.metadata  # the input node is untouched
    assert panned.result.documents_cut == long_node.metadata["gold_panning_cut"]
