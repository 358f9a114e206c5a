"""Gold Panning as a LangChain retriever: BM25 over Natural Questions passages, reranked.

What it shows:

1. a real base retriever (``BM25Retriever`` from langchain-community) over passages
   read from a jsonl(.gz) file;
2. ``GoldPanningRetriever`` wrapping it: the documents come back with
   ``gold_panning_posterior`` / ``gold_panning_rank`` in their metadata, and ``pan()``
   gives the full per-round trace;
3. the same retriever as a drop-in step of an LCEL RAG chain
   (retriever -> prompt -> chat model -> answer).

Run (from the repository root)::

    pip install "gold-panning-integrations[examples,local]"
    python examples/langchain_retriever.py                       # embedded SmolLM2 model
    python examples/langchain_retriever.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:0.5b

Any OpenAI-compatible server works with ``--base-url/--model/--api-key`` (vLLM,
llama.cpp's server, Ollama, OpenAI itself).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from gold_panning_integrations import GoldPanningRetriever

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/nq-open-oracle.jsonl.gz"


# ------------------------------------------------------------------------- data
def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` or ``.jsonl.gz`` file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_corpus(path: Path, n_questions: int) -> tuple[list[Document], list[dict[str, Any]]]:
    """The passages (``ctxs``) of the first ``n_questions`` questions, and those questions."""
    docs: list[Document] = []
    questions: list[dict[str, Any]] = []
    for qi, row in enumerate(read_jsonl(path)):
        if qi >= n_questions:
            break
        questions.append(row)
        for ci, ctx in enumerate(row.get("ctxs", [])):
            docs.append(
                Document(
                    page_content=ctx["text"],
                    metadata={"title": ctx.get("title", ""), "question": qi, "gold": bool(ctx.get("isgold"))},
                    id=f"q{qi}-c{ci}",
                )
            )
    if not docs:
        raise SystemExit(f"no passages found in {path}")
    return docs, questions


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lower-cased words (BM25Retriever's default only splits on spaces)."""
    return re.findall(r"\w+", text.lower())


# ----------------------------------------------------------------------- models
def openai_chat_runnable(base_url: str | None, model: str, api_key: str | None) -> Any:
    """A chat model for the chain: ``ChatOpenAI`` if langchain-openai is installed,
    otherwise a small runnable on the ``openai`` client."""
    try:
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(base_url=base_url, model=model, api_key=api_key or "not-needed", temperature=0)
    except ImportError:
        from openai import OpenAI

        client = OpenAI(base_url=base_url, api_key=api_key or "not-needed")
        roles = {"human": "user", "ai": "assistant", "system": "system"}

        def call(prompt: Any) -> str:
            messages = [
                {"role": roles.get(m.type, "user"), "content": m.content} for m in prompt.to_messages()
            ]
            out = client.chat.completions.create(model=model, messages=messages, temperature=0)
            return out.choices[0].message.content or ""

        return RunnableLambda(call, name="OpenAICompatibleChat")


def local_chat_runnable(local_reader: Any) -> Any:
    """A chat model for the chain on the embedded model already loaded by the reader."""

    def call(prompt: Any) -> str:
        roles = {"human": "user", "ai": "assistant", "system": "system"}
        messages = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)} for m in prompt.to_messages()
        ]
        out = local_reader.complete(messages)
        return out["choices"][0]["message"].get("content") or ""

    return RunnableLambda(call, name="LocalChat")


def simulated_chat_runnable() -> Any:
    """Offline stand-in: answers with the title of the best document (for tests)."""

    def call(prompt: Any) -> str:
        text = prompt.to_messages()[-1].content
        first = str(text).split("[1] ", 1)[-1].split("\n", 1)[0]
        return f"(simulated) see: {first[:80]}"

    return RunnableLambda(call, name="SimulatedChat")


def build_models(args: argparse.Namespace, gold: Callable[[str], bool]) -> tuple[Any, Any]:
    """``(reader for GoldPanningRetriever, chat model for the chain)``."""
    if args.reader == "simulated":
        from gold_panning_integrations import DetectorProfile, SimulatedReader

        reader = SimulatedReader(DetectorProfile.bundled(args.profile), gold, rng=args.seed)
        return reader, simulated_chat_runnable()
    if args.reader == "openai" or args.base_url or args.model:
        chat = openai_chat_runnable(args.base_url, args.model or "gpt-4o-mini", args.api_key)
        if hasattr(chat, "bind_tools"):  # a real BaseChatModel: let the package wrap it
            return chat, chat
        from gold_panning_integrations.readers.openai import OpenAIReader

        reader = OpenAIReader(model=args.model or "gpt-4o-mini", base_url=args.base_url, api_key=args.api_key)
        return reader, chat
    from gold_panning_integrations.readers import as_reader

    local = as_reader("local")
    return local, local_chat_runnable(local)


# ------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="jsonl(.gz) with question/answers/ctxs rows"
    )
    p.add_argument(
        "--corpus-questions", type=int, default=300, help="use the passages of the first N questions"
    )
    p.add_argument("--question-index", type=int, default=0, help="which of those questions to ask")
    p.add_argument("--fetch", type=int, default=10, help="documents the BM25 base retriever returns")
    p.add_argument("--k", type=int, default=3, help="documents kept after panning")
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
    from langchain_community.retrievers import BM25Retriever

    docs, questions = load_corpus(args.data, args.corpus_questions)
    row = questions[args.question_index]
    question = row["question"]
    gold_texts = {c["text"] for c in row.get("ctxs", []) if c.get("isgold") or c.get("hasanswer")}

    bm25 = BM25Retriever.from_documents(docs, k=args.fetch, preprocess_func=tokenize)
    reader, chat = build_models(args, lambda text: text in gold_texts)
    retriever = GoldPanningRetriever(
        base_retriever=bm25,
        reader=reader,
        profile=args.profile,
        k=args.k,
        rounds=args.rounds,
        expected_relevant=1,  # NQ: one gold passage per question
        seed=args.seed,
    )

    print(f"corpus: {len(docs)} passages; question: {question!r}; answers: {row.get('answers')}")
    base = bm25.invoke(question)
    base_rank = {d.id: i + 1 for i, d in enumerate(base)}
    print(
        f"BM25 rank of the gold passage: {next((base_rank[d.id] for d in base if d.page_content in gold_texts), 'not retrieved')}"
    )

    top, result = retriever.pan(question)
    print(
        f"\nGold Panning: {result.calls} calls, stop={result.stop_reason}, prompt tokens={result.prompt_tokens}"
    )
    for d in top:
        m = d.metadata
        print(
            f"  #{m['gold_panning_rank']}  posterior={m['gold_panning_posterior']:.3f}  bm25 rank={base_rank.get(d.id)}"
            f"  gold={d.page_content in gold_texts}  {m['title']}: {d.page_content[:70]}..."
        )
    for t in result.rounds:
        print(
            f"  round {t.round}: shown={list(t.shown)} cited={list(t.cited)} failed={t.failed} {t.seconds:.2f}s"
        )

    # The same retriever as a drop-in step of an LCEL RAG chain.
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
    print(f"\nRAG chain answer: {chain.invoke(question).strip()!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
