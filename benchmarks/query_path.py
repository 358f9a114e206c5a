"""``python -m benchmarks query-path``: how far one query travels through the package.

One ``GoldPanningRetriever.invoke`` (a LangChain fake chat model, 8 documents, the
default options) traced with :func:`sys.setprofile`: the package files and functions
it runs, the calls made into package code, and the package frames on the stack when
the chat model is called (the deepest of its calls). The first query builds the engine
(reader and profile resolved); the figures are of a later query, and of the first.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

import gold_panning_integrations

__all__ = ["main", "register", "trace_invoke"]

_PACKAGE = str(Path(str(gold_panning_integrations.__file__)).parent)
"""The directory of the package under test: frames of files below it are package frames."""


def _in_package(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_PACKAGE)


def _retriever(n: int) -> Any:
    """A ``GoldPanningRetriever`` over ``n`` fixed documents with a fake chat model that
    cites nothing (``{"cited": []}``) and marks each call's stack."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever

    from gold_panning_integrations import GoldPanningRetriever

    docs = [Document(page_content=f"Passage number {i} about topic {i}.") for i in range(n)]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(docs)

    class Marked(FakeListChatModel):
        depths: ClassVar[list[int]] = []

        def _call(self, *args: Any, **kwargs: Any) -> str:
            frame: FrameType | None = sys._getframe(1)
            depth = 0
            while frame is not None and frame.f_code is not _trace_one.__code__:  # below the invoke only
                depth += _in_package(frame)
                frame = frame.f_back
            self.depths.append(depth)
            return super()._call(*args, **kwargs)

    model = Marked(responses=['{"cited": []}'])
    return GoldPanningRetriever(base_retriever=Fixed(), reader=model), model


def trace_invoke(n: int = 8, *, queries: int = 2) -> list[dict[str, Any]]:
    """Trace ``queries`` successive ``invoke`` calls of one retriever over ``n`` documents.

    Returns:
        One dict per query: ``files`` and ``functions`` (distinct package files and
        functions run), ``calls`` (profile ``call`` events in package code, generator
        resumptions included), ``frames`` (the most package frames on the stack at a
        chat-model call) and ``model_calls``.
    """
    retriever, model = _retriever(n)
    return [_trace_one(retriever, model, f"which passage is about topic {q}?") for q in range(queries)]


def _trace_one(retriever: Any, model: Any, query: str) -> dict[str, Any]:
    """The figures of one ``retriever.invoke(query)`` (see :func:`trace_invoke`)."""
    files: set[str] = set()
    functions: set[tuple[str, int, str]] = set()
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and _in_package(frame):
            code = frame.f_code
            files.add(code.co_filename)
            functions.add((code.co_filename, code.co_firstlineno, code.co_name))
            calls += 1

    model.depths.clear()
    sys.setprofile(profile)
    try:
        retriever.invoke(query)
    finally:
        sys.setprofile(None)
    return {
        "file_names": sorted(f[len(_PACKAGE) + 1 :] for f in files),
        "files": len(files),
        "functions": len(functions),
        "calls": calls,
        "frames": max(model.depths),
        "model_calls": len(model.depths),
    }


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("query-path", description=__doc__)
    p.add_argument("--n", type=int, default=8, help="documents (default 8)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.getLogger("gold_panning_integrations").setLevel(logging.ERROR)
    rows = trace_invoke(args.n)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"one GoldPanningRetriever.invoke, {args.n} documents, fake chat model, defaults ({_PACKAGE})")
    print(
        f"{'query':>6} {'files':>6} {'functions':>10} {'calls':>6} {'frames at model call':>21} {'model calls':>12}"
    )
    for i, r in enumerate(rows, 1):
        print(
            f"{i:>6} {r['files']:>6} {r['functions']:>10} {r['calls']:>6} {r['frames']:>21} {r['model_calls']:>12}"
        )
    return 0
