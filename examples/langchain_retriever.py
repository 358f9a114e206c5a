"""Gold Panning as a LangChain retriever: BM25 over real Wikipedia passages, reranked.

What it shows:

1. a small LangChain ``BaseRetriever`` over the package's BM25 (``bm25s``, a maintained BM25
   library, with the tokenizer that built the sample and that ``gold-panning evaluate`` uses) indexing
   the Natural Questions passages that ship inside the package
   (``gold_panning_integrations.tasks.load_sample("nq")``: 2,365 Wikipedia passages,
   CC BY-SA 3.0);
2. ``GoldPanningRetriever`` wrapping it, reading with the embedded SmolLM2 model
   (``reader="local"``; the detector profile is the reader's recommended one): the
   documents come back with ``gold_panning_posterior`` / ``gold_panning_rank`` in their
   metadata, and ``pan()`` gives the full per-round trace;
3. the same retriever as a drop-in step of an LCEL chain (retriever -> prompt -> chat
   model -> answer).

Run::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "gold-panning-integrations[local]" bm25s
    python examples/langchain_retriever.py                      # one short question
    python examples/langchain_retriever.py --question "who wrote the declaration of independence"
    python examples/langchain_retriever.py --question-id nq-2147 --n 10 --rounds 4 --prompts-per-round 1
    python examples/langchain_retriever.py --base-url http://127.0.0.1:8080/v1 --model my-model

No file outside the package is read, so it runs the same from a clone and from a wheel.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import ConfigDict, PrivateAttr

from gold_panning_integrations import GoldPanningRetriever
from gold_panning_integrations.ir.bm25 import BM25
from gold_panning_integrations.tasks import load_sample

DEFAULT_QUESTION_ID = "nq-1016"
"""A short factoid question of the sample's held-out ``test`` split ("who was elected president
of the united states in 1928")."""


# ----------------------------------------------------------------- BM25 retriever
class BM25sRetriever(BaseRetriever):
    """A small LangChain retriever over the package's ``bm25s`` BM25 (in memory, lexical).

    Returns the top ``k`` documents with their BM25 score in ``metadata["score"]``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    k: int = 5
    """Number of documents to return (override per call with ``invoke(query, k=...)``)."""

    _docs: list[Document] = PrivateAttr(default_factory=list)
    _index: Any = PrivateAttr(default=None)

    @classmethod
    def from_documents(cls, documents: list[Document], *, k: int = 5) -> BM25sRetriever:
        """Index ``documents`` (their ``page_content`` and ``metadata["title"]``)."""
        retriever = cls(k=k)
        retriever._docs = list(documents)
        retriever._index = BM25([f"{d.metadata.get('title', '')} {d.page_content}" for d in documents])
        return retriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        kk = min(k or self.k, len(self._docs))
        return [
            self._docs[i].model_copy(update={"metadata": {**self._docs[i].metadata, "score": s}})
            for i, s in self._index.top_k(query, kk)
            if s > 0.0
        ]


# ------------------------------------------------------------------------- data
def load_corpus() -> tuple[list[Document], Any]:
    """The shipped NQ sample's passages as ``Document`` objects, and the sample."""
    sample = load_sample("nq")
    docs = [
        Document(page_content=p.text, metadata={"title": p.title, "passage_id": p.id}, id=f"p{p.id}")
        for p in sample.passages
    ]
    return docs, sample


# ----------------------------------------------------------------------- models
def simulated_models(gold_ids: set[int], seed: int) -> tuple[Any, Any]:
    """Offline stand-ins (for tests without the model): a profile-driven reader that
    recognises the gold passage, and a chat model that echoes the first document."""
    from gold_panning_integrations import DetectorProfile, SimulatedReader

    gold_texts = {d.page_content for d in load_corpus()[0] if d.metadata["passage_id"] in gold_ids}
    reader = SimulatedReader(
        DetectorProfile.bundled("lost-in-the-middle"), lambda text: text in gold_texts, rng=seed
    )

    def chat(prompt: Any) -> str:
        text = str(prompt.to_messages()[-1].content)
        return "(simulated) " + text.split("[1] ", 1)[-1].split("\n", 1)[0][:60]

    return reader, RunnableLambda(chat, name="SimulatedChat")


def local_models() -> tuple[Any, Any]:
    """The embedded model as the panning reader and, through the same loaded model, as
    the chain's chat model."""
    from gold_panning_integrations.readers import as_reader

    local = as_reader("local")
    roles = {"human": "user", "ai": "assistant", "system": "system"}

    def chat(prompt: Any) -> str:
        messages = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)} for m in prompt.to_messages()
        ]
        out = local.complete(messages)
        return out["choices"][0]["message"].get("content") or ""

    return local, RunnableLambda(chat, name="LocalChat")


def endpoint_models(base_url: str | None, model: str, api_key: str | None) -> tuple[Any, Any]:
    """Any OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, OpenAI): the
    package's ``OpenAIReader`` for panning, a small runnable on the ``openai`` client for
    the chain (``langchain_openai.ChatOpenAI`` works as both, if you have it)."""
    from openai import OpenAI

    from gold_panning_integrations.readers.openai import OpenAIReader

    key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
    reader = OpenAIReader(model=model, base_url=base_url, api_key=key)
    client = OpenAI(base_url=base_url, api_key=key)
    roles = {"human": "user", "ai": "assistant", "system": "system"}

    def chat(prompt: Any) -> str:
        messages = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)} for m in prompt.to_messages()
        ]
        out = client.chat.completions.create(model=model, messages=messages, temperature=0)  # type: ignore[arg-type]
        return out.choices[0].message.content or ""

    return reader, RunnableLambda(chat, name="OpenAICompatibleChat")


# ------------------------------------------------------------------------- main
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
    p.add_argument("--n", type=int, default=5, help="documents the BM25 retriever returns (default 5)")
    p.add_argument("--k", type=int, default=2, help="documents kept after panning (default 2)")
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
    docs, sample = load_corpus()
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

    bm25 = BM25sRetriever.from_documents(docs, k=args.n)
    if args.reader == "simulated":
        reader, chat = simulated_models(gold_ids, args.seed)
    elif args.model or args.base_url:
        reader, chat = endpoint_models(args.base_url, args.model or "gpt-4o-mini", args.api_key)
    else:
        reader, chat = local_models()
    retriever = GoldPanningRetriever(
        base_retriever=bm25,
        reader=reader,
        k=args.k,
        **given(rounds=args.rounds, prompts_per_round=args.prompts_per_round),  # else the library's defaults
        expected_relevant=1,  # NQ: one gold passage per question
        seed=args.seed,
        profile=args.profile,  # None: the reader's own (smollm2-135m-kv for the embedded model)
    )

    print(f"corpus: {len(docs)} Wikipedia passages (shipped NQ sample); BM25 top {args.n}")
    print(f"question: {question!r}" + (f"; answers: {list(record.answers)}" if record else ""))
    base = bm25.invoke(question)
    base_rank = {d.id: i + 1 for i, d in enumerate(base)}
    gold_rank = next((base_rank[d.id] for d in base if d.metadata["passage_id"] in gold_ids), None)
    if record:
        print(f"BM25 rank of the gold passage: {gold_rank or 'not retrieved'}")

    t1 = time.perf_counter()
    top, result = retriever.pan(question)
    print(
        f"\nGold Panning: {result.calls} calls, stop={result.stop_reason}, "
        f"prompt tokens={result.prompt_tokens}, {time.perf_counter() - t1:.1f}s"
    )
    for d in top:
        m = d.metadata
        gold = f"  gold={m['passage_id'] in gold_ids}" if record else ""
        print(
            f"  #{m['gold_panning_rank']}  posterior={m['gold_panning_posterior']:.3f}  "
            f"bm25 rank={base_rank.get(d.id)}{gold}  {m['title']}: {d.page_content[:60]}..."
        )
    for t in result.rounds:
        answer = f" answer={t.reading.answer!r}" if getattr(t.reading, "answer", None) else ""
        print(f"  round {t.round}: cited={list(t.cited)} failed={t.failed}{answer}")

    # The same retriever as a drop-in step of an LCEL chain.
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question in a few words using only the documents."),
            ("human", "Documents:\n{context}\n\nQuestion: {question}"),
        ]
    )

    def format_docs(ds: list[Document]) -> str:
        return "\n".join(
            f"[{i + 1}] {d.metadata.get('title', '')}: {d.page_content}" for i, d in enumerate(ds)
        )

    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | chat
        | StrOutputParser()
    )
    print(f"\nLCEL chain answer: {chain.invoke(question).strip()!r}")
    print(f"total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
