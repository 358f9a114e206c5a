"""Gold Panning in a LlamaIndex query engine: BM25 over real Wikipedia passages.

A ``BM25Retriever`` (llama-index-retrievers-bm25, built on ``bm25s``) fetches candidate
passages from the Natural Questions sample that ships inside the package
(``gold_panning_integrations.tasks.load_sample("nq")``: 2,365 Wikipedia passages,
CC BY-SA 3.0), ``GoldPanningPostprocessor`` reranks them on the embedded SmolLM2 model
(``reader="local"``; the detector profile is the reader's recommended one, and
``NodeWithScore.score`` becomes the posterior probability of relevance), and a
``RetrieverQueryEngine`` answers from the top nodes with the same model.

Run::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "gold-panning-integrations[local]" llama-index-retrievers-bm25
    python examples/llama_index_query_engine.py                  # one short question
    python examples/llama_index_query_engine.py --question "who wrote the declaration of independence"
    python examples/llama_index_query_engine.py --question-id nq-2147 --n 10 --rounds 4 --prompts-per-round 1
    python examples/llama_index_query_engine.py --base-url http://127.0.0.1:8080/v1 --model my-model

No file outside the package is read, so it runs the same from a clone and from a wheel.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
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
from llama_index.retrievers.bm25 import BM25Retriever

from gold_panning_integrations import GoldPanningPostprocessor
from gold_panning_integrations.tasks import NQSample, load_sample

DEFAULT_QUESTION_ID = "nq-1016"
"""A short factoid question of the sample's held-out ``test`` split ("who was elected president
of the united states in 1928")."""


def load_nodes() -> tuple[list[TextNode], NQSample]:
    """The shipped NQ sample's passages as nodes (title in metadata), and the sample."""
    sample = load_sample("nq")
    nodes = [
        TextNode(
            text=p.text,
            id_=f"p{p.id}",
            metadata={"title": p.title, "passage_id": p.id},
            excluded_llm_metadata_keys=["passage_id"],
            excluded_embed_metadata_keys=["passage_id"],
        )
        for p in sample.passages
    ]
    return nodes, sample


class FunctionLLM(CustomLLM):
    """A LlamaIndex LLM around a ``prompt -> text`` function (the response synthesizer's
    model, here the embedded model already loaded by the reader)."""

    fn: Callable[[str], str]
    name: str = "function-llm"
    context_window: int = 8192

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.name, context_window=self.context_window, num_output=64)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.fn(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.fn(prompt)
        yield CompletionResponse(text=text, delta=text)


def build_models(args: argparse.Namespace, gold_ids: set[int], nodes: list[TextNode]) -> tuple[Any, Any]:
    """``(reader for the postprocessor, LLM for the response synthesizer)``."""
    reader_kind, seed = args.reader, args.seed
    if reader_kind == "simulated":  # offline stand-in for tests without the model
        from gold_panning_integrations import DetectorProfile, SimulatedReader

        gold_texts = [n.text for n in nodes if n.metadata["passage_id"] in gold_ids]
        is_gold: Callable[[str], bool] = lambda text: any(g in text for g in gold_texts)
        return SimulatedReader(DetectorProfile.bundled("lost-in-the-middle"), is_gold, rng=seed), MockLLM(
            max_tokens=16
        )
    if args.model or args.base_url:  # any OpenAI-compatible server
        from openai import OpenAI

        from gold_panning_integrations.readers.openai import OpenAIReader

        model = args.model or "gpt-4o-mini"
        key = args.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        client = OpenAI(base_url=args.base_url, api_key=key)

        def ask(prompt: str) -> str:
            out = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], temperature=0
            )
            return out.choices[0].message.content or ""

        return OpenAIReader(model=model, base_url=args.base_url, api_key=key), FunctionLLM(fn=ask, name=model)
    from gold_panning_integrations.readers import as_reader

    local = as_reader("local")

    def ask_local(prompt: str) -> str:
        out = local.complete([{"role": "user", "content": prompt}])
        return out["choices"][0]["message"].get("content") or ""

    return local, FunctionLLM(fn=ask_local, name=getattr(local, "model_name", "local"))


def given(**options: Any) -> dict[str, Any]:
    """The options given on the command line (the others keep the library's defaults)."""
    return {name: value for name, value in options.items() if value is not None}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    q = p.add_mutually_exclusive_group()
    q.add_argument("--question", help="any question (default: a question of the shipped NQ sample)")
    q.add_argument(
        "--question-id", default=None, help=f"a question of the NQ sample (default {DEFAULT_QUESTION_ID})"
    )
    p.add_argument("--n", type=int, default=5, help="nodes the BM25 retriever returns (default 5)")
    p.add_argument("--top-n", type=int, default=2, help="nodes kept after panning (default 2)")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="panning rounds, one after another (default: the library's, 2)",
    )
    p.add_argument(
        "--prompts-per-round",
        type=int,
        default=None,
        help="prompts sent together in each round (default: the library's, 3; the embedded "
        "model answers them one after another)",
    )
    p.add_argument(
        "--model", help="model name on an OpenAI-compatible endpoint (default: the embedded model)"
    )
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--api-key", help="API key (default: $OPENAI_API_KEY, or none for local servers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile, bundled name or JSON (default: the reader's own; e.g. "
        "smollm2-135m-nq-labelled, learned from labelled NQ questions)",
    )
    p.add_argument("--reader", choices=["local", "simulated"], default="local", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    nodes, sample = load_nodes()
    by_id = {q.id: q for q in sample.questions}
    record = None
    if args.question:
        question = args.question
    else:
        qid = args.question_id or DEFAULT_QUESTION_ID
        if qid not in by_id:
            raise SystemExit(f"unknown --question-id {qid!r}; ids look like {sample.questions[0].id}")
        record = by_id[qid]
        question = record.question
    gold_ids = {record.gold} if record else set()

    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=args.n)
    reader, llm = build_models(args, gold_ids, nodes)
    panning = GoldPanningPostprocessor(
        reader=reader,
        top_n=args.top_n,
        **given(rounds=args.rounds, prompts_per_round=args.prompts_per_round),  # else the library's defaults
        # the default prior ("auto") reads BM25's scores from NodeWithScore.score
        expected_relevant=1,  # NQ: one gold passage per question
        seed=args.seed,
        profile=args.profile,  # None: the reader's own (smollm2-135m-kv for the embedded model)
    )
    engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[panning], llm=llm)

    print(f"corpus: {len(nodes)} Wikipedia passages (shipped NQ sample); BM25 top {args.n}")
    print(f"question: {question!r}" + (f"; answers: {list(record.answers)}" if record else ""))
    base = retriever.retrieve(question)
    base_rank = {n.node.node_id: i + 1 for i, n in enumerate(base)}
    if record:
        gold_rank = next(
            (i + 1 for i, n in enumerate(base) if n.node.metadata["passage_id"] in gold_ids), "not retrieved"
        )
        print(f"BM25 rank of the gold passage: {gold_rank}")

    t1 = time.perf_counter()
    top, result = panning.pan(base, question)
    print(
        f"\nGold Panning: {result.calls} calls, stop={result.stop_reason}, "
        f"prompt tokens={result.prompt_tokens}, {time.perf_counter() - t1:.1f}s"
    )
    for i, n in enumerate(top):
        gold = f"  gold={n.node.metadata['passage_id'] in gold_ids}" if record else ""
        print(
            f"  #{i + 1}  posterior={n.score:.3f}  bm25 rank={base_rank[n.node.node_id]}{gold}  "
            f"{n.node.metadata['title']}: {n.node.get_content()[:60]}..."
        )
    for t in result.rounds:
        answer = f" answer={t.reading.answer!r}" if getattr(t.reading, "answer", None) else ""
        print(f"  round {t.round}: cited={list(t.cited)} failed={t.failed}{answer}")

    response = engine.query(question)
    print(f"\nQuery engine answer: {str(response).strip()!r}")
    print("sources:", [(s.node.metadata["title"], round(s.score or 0.0, 3)) for s in response.source_nodes])
    print(f"total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
