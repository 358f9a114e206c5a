"""An LCEL chain that says "I don't know" when no retrieved passage is relevant.

What it shows:

1. ``GoldPanningRetriever(..., min_relevance=0.5)``: only passages whose probability of
   relevance reaches 0.5 go to the generator, so a question may get none;
2. ``gold_panning_p_none`` in every returned document's metadata: the probability that no
   candidate passage is relevant;
3. a ``RunnableBranch`` that answers "I don't know" when nothing passed or ``p_none`` is
   high, and otherwise asks the chat model with the passages that passed.

It asks two questions over the Natural Questions passages that ship inside the package
(BM25, ``bm25s``): one the passages answer and one they do not.

Run::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "gold-panning-integrations[local]" bm25s
    python examples/langchain_i_dont_know.py
    python examples/langchain_i_dont_know.py --question "who painted the mona lisa"
    python examples/langchain_i_dont_know.py --base-url http://127.0.0.1:8080/v1 --model my-model

How far to trust the probabilities on your model: ``docs/probabilities.md`` (recalibrate
with labelled traces: ``gold-panning calibrate --from-traces``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnablePassthrough
from pydantic import ConfigDict, PrivateAttr

from gold_panning_integrations import GoldPanningRetriever
from gold_panning_integrations.ir.bm25 import BM25
from gold_panning_integrations.tasks import load_sample

ANSWERED = "nq-1016"
"""A question of the sample's held-out split that its passages answer ("who was elected
president of the united states in 1928")."""
UNANSWERED = "how many moons does neptune have"
"""A question no passage of the sample answers (its one passage on Neptune describes the
atmosphere, not the moons): BM25 still retrieves it, first."""
MAX_P_NONE = 0.5
"""Above this probability that nothing retrieved is relevant, the chain does not answer."""


class BM25sRetriever(BaseRetriever):
    """A small in-memory LangChain retriever over the package's ``bm25s`` BM25."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    k: int = 5
    _docs: list[Document] = PrivateAttr(default_factory=list)
    _index: Any = PrivateAttr(default=None)

    @classmethod
    def from_documents(cls, documents: list[Document], *, k: int = 5) -> BM25sRetriever:
        retriever = cls(k=k)
        retriever._docs = list(documents)
        retriever._index = BM25([f"{d.metadata.get('title', '')} {d.page_content}" for d in documents])
        return retriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [self._docs[i] for i, s in self._index.top_k(query, min(self.k, len(self._docs))) if s > 0.0]


def models(args: argparse.Namespace, gold_texts: set[str]) -> tuple[Any, Any]:
    """The panning reader and the chain's chat model: the embedded model (default), an
    OpenAI-compatible server (``--base-url``), or offline stand-ins (``--reader simulated``)."""
    roles = {"human": "user", "ai": "assistant", "system": "system"}
    if args.reader == "simulated":
        from gold_panning_integrations import DetectorProfile, SimulatedReader

        profile = DetectorProfile.bundled("lost-in-the-middle")
        reader = SimulatedReader(profile, lambda text: text in gold_texts, rng=args.seed)
        return reader, RunnableLambda(lambda prompt: "(simulated answer)", name="SimulatedChat")
    if args.base_url:
        from openai import OpenAI

        from gold_panning_integrations.readers.openai import OpenAIReader

        reader = OpenAIReader(model=args.model, base_url=args.base_url, api_key="not-needed")
        client = OpenAI(base_url=args.base_url, api_key="not-needed")

        def remote(prompt: Any) -> str:
            messages = [
                {"role": roles.get(m.type, "user"), "content": str(m.content)} for m in prompt.to_messages()
            ]
            out = client.chat.completions.create(model=args.model, messages=messages, temperature=0)  # type: ignore[arg-type]
            return out.choices[0].message.content or ""

        return reader, RunnableLambda(remote, name="OpenAICompatibleChat")
    from gold_panning_integrations.readers import as_reader

    local = as_reader("local")

    def chat(prompt: Any) -> str:
        messages = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)} for m in prompt.to_messages()
        ]
        return local.complete(messages)["choices"][0]["message"].get("content") or ""

    return local, RunnableLambda(chat, name="LocalChat")


def build_chain(retriever: GoldPanningRetriever, chat: Any) -> Any:
    """question -> {"docs", "question"} -> "I don't know" or the chat model's answer."""
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question in a few words using only the documents."),
            ("human", "Documents:\n{context}\n\nQuestion: {question}"),
        ]
    )

    def context(x: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(f"[{i + 1}] {d.page_content}" for i, d in enumerate(x["docs"]))
        return {"context": text, "question": x["question"]}

    def nothing_relevant(x: dict[str, Any]) -> bool:
        docs = x["docs"]  # only passages with probability >= min_relevance came back
        return not docs or docs[0].metadata["gold_panning_p_none"] > MAX_P_NONE

    answer = RunnableLambda(context) | prompt | chat | StrOutputParser()
    dont_know = RunnableLambda(lambda x: "I don't know: no retrieved passage looks relevant.")
    return {"docs": retriever, "question": RunnablePassthrough()} | RunnableBranch(
        (nothing_relevant, dont_know), answer
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--question", action="append", help="a question (repeatable; default: two examples)")
    p.add_argument("--n", type=int, default=5, help="passages BM25 retrieves (default 5)")
    p.add_argument(
        "--min-relevance", type=float, default=0.5, help="probability a passage needs (default 0.5)"
    )
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the embedded model)")
    p.add_argument("--model", default="default", help="model name on --base-url")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reader", choices=["local", "simulated"], default="local", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    sample = load_sample("nq")
    docs = [
        Document(page_content=x.text, metadata={"title": x.title, "passage_id": x.id})
        for x in sample.passages
    ]
    record = {q.id: q for q in sample.questions}[ANSWERED]
    questions = args.question or [record.question, UNANSWERED]
    gold_texts = {x.text for x in sample.passages if x.id == record.gold}
    reader, chat = models(args, gold_texts)
    results: list[Any] = []  # every PanningResult, through the on_result hook
    retriever = GoldPanningRetriever(
        base_retriever=BM25sRetriever.from_documents(docs, k=args.n),
        reader=reader,
        k=3,
        min_relevance=args.min_relevance,  # passages below it never reach the generator
        expected_relevant=1,  # NQ: at most one gold passage per question
        seed=args.seed,
        on_result=results.append,
    )
    chain = build_chain(retriever, chat)
    print(f"corpus: {len(docs)} Wikipedia passages (shipped NQ sample); BM25 top {args.n}")
    for question in questions:
        t1 = time.perf_counter()
        answer = chain.invoke(question).strip()
        result = results[-1]
        passed = int((result.posteriors >= args.min_relevance).sum())
        print(f"\nquestion: {question!r}")
        print(
            f"  p_none={result.p_none:.3f}; {passed} of {len(result.posteriors)} passages reach "
            f"{args.min_relevance}; posteriors {[round(float(x), 3) for x in sorted(result.posteriors, reverse=True)]}; "
            f"{result.calls} calls"
        )
        print(f"  chain answer: {answer!r} ({time.perf_counter() - t1:.1f}s)")
    print(f"total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
