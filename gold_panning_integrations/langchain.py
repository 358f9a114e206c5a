"""LangChain integration: :class:`GoldPanningRetriever`, a drop-in reranking retriever.

Example::

    from gold_panning_integrations import GoldPanningRetriever

    retriever = GoldPanningRetriever(
        base_retriever=bm25, reader=chat_model, k=4, rounds=4
    )
    docs = retriever.invoke("who got the first nobel prize in physics")
    docs[0].metadata["gold_panning_posterior"]   # probability the document is relevant

    docs, result = retriever.pan("who got the first nobel prize in physics")
    result.rounds          # per-round trace: shown order, citations, tokens, seconds
    result.summary()       # JSON-ready
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field

from ._adapter import PANNED_KEY, POSTERIOR_KEY, RANK_KEY, PanningOptions, describe, empty_result, ranked
from .engine import PanningResult

__all__ = ["GoldPanningRetriever", "PannedDocuments"]

logger = logging.getLogger(__name__)

_RESULT_SINK = "_gold_panning_result_sink"
"""Private invoke keyword through which :meth:`GoldPanningRetriever.pan` gets the result."""


def _takes_config(method: Any) -> bool:
    try:
        return "config" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


class _ConfiguredReader:
    """Hands the retriever run's child callbacks to a reader whose ``read``/``aread``
    take ``config=`` (the LangChain chat-model reader), so model calls nest under the
    retriever run in traces. Other attributes pass through."""

    def __init__(self, reader: Any, config: RunnableConfig) -> None:
        self._reader = reader
        self._config = config

    def read(self, question: str, documents: Sequence[str]) -> Any:
        return self._reader.read(question, documents, config=self._config)

    async def aread(self, question: str, documents: Sequence[str]) -> Any:
        return await self._reader.aread(question, documents, config=self._config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def _with_callbacks(reader: Any, callbacks: Any, *, method: str) -> Any:
    fn = getattr(reader, method, None)
    return (
        _ConfiguredReader(reader, {"callbacks": callbacks})
        if fn is not None and _takes_config(fn)
        else reader
    )


class PannedDocuments(NamedTuple):
    """What :meth:`GoldPanningRetriever.pan` returns."""

    documents: list[Document]
    """The top-k documents, as ``invoke`` returns them."""
    result: PanningResult
    """The full panning result: posteriors of every base document, per-round trace."""


class GoldPanningRetriever(BaseRetriever, PanningOptions):
    """Rerank a base retriever's documents by Gold Panning with an LLM reader.

    The base retriever's documents are shown to the reader over a few rounds, each time
    in a new order chosen so that the likeliest documents sit where the model's citation
    is most informative (its detector profile); citations update a posterior
    probability of relevance per document. ``invoke`` returns the top ``k`` documents
    (copies, original metadata kept) with ``gold_panning_posterior`` (float),
    ``gold_panning_rank`` (1-based) and ``gold_panning_panned`` (False when no evidence
    was used) added to their metadata.

    The full :class:`~gold_panning_integrations.PanningResult` (posteriors of every base
    document, per-round trace, token counts, stop reason) is returned by :meth:`pan` /
    :meth:`apan`; a one-line summary is also sent to callback handlers as text
    (``on_text``) of the retriever run. The base retriever runs, and the chat model's
    calls when the reader is a LangChain chat model, nest under this retriever's run.

    ``k`` can be set in the constructor or per call: ``invoke(query, k=2)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_retriever: BaseRetriever
    """The retriever whose documents are reranked, called with child callbacks; its
    order (and, with ``retriever_prior='score'``, scores) informs the prior."""

    reader: Any
    """Who reads the prompts: a reader (``read``/``aread`` returning a ``Reading``), a
    LangChain ``BaseChatModel``, a LlamaIndex ``LLM``, or ``"local"`` for the embedded
    model. Non-readers are wrapped by ``gold_panning_integrations.readers.as_reader``
    on first use."""

    k: int = Field(default=4, ge=1)
    """Number of documents to return (override per call with ``invoke(query, k=...)``)."""

    score_key: str = "score"
    """Metadata key holding the base retriever's score, used by ``retriever_prior='score'``."""

    def _reader_source(self) -> Any:
        return self.reader

    # ---------------------------------------------------------------- mapping
    def _k(self, k: int | None) -> int:
        kk = self.k if k is None else k
        if isinstance(kk, bool) or not isinstance(kk, int) or kk < 1:
            raise ValueError(f"k must be a positive integer, got {kk!r}")
        return kk

    def _scores(self, docs: Sequence[Document]) -> list[float | None] | None:
        if self.retriever_prior != "score":
            return None
        return [d.metadata.get(self.score_key) for d in docs]

    @staticmethod
    def _to_documents(docs: Sequence[Document], result: PanningResult) -> list[Document]:
        out = []
        for r in ranked(result):
            src = docs[r.index]
            meta = {**src.metadata, POSTERIOR_KEY: r.posterior, RANK_KEY: r.rank, PANNED_KEY: result.panned}
            out.append(src.model_copy(update={"metadata": meta}))
        return out

    @staticmethod
    def _split_kwargs(kwargs: dict[str, Any]) -> tuple[list[PanningResult] | None, dict[str, Any]]:
        sink = kwargs.pop(_RESULT_SINK, None)
        return sink, kwargs

    # ------------------------------------------------------------ retrieval
    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Retrieve with the base retriever, pan, return the top ``k`` documents.

        Extra keyword arguments are passed to the base retriever.
        """
        kk = self._k(k)
        sink, kwargs = self._split_kwargs(kwargs)
        docs = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        if not docs:
            if sink is not None:
                sink.append(empty_result(self.policy))
            return []
        reader = _with_callbacks(self._get_reader(), run_manager.get_child(), method="read")
        result = self._run(
            query, [d.page_content for d in docs], k=kk, scores=self._scores(docs), reader=reader
        )
        run_manager.on_text(describe(result))
        if sink is not None:
            sink.append(result)
        return self._to_documents(docs, result)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Asynchronous retrieval: ``ainvoke`` on the base retriever, ``aread`` on the reader."""
        kk = self._k(k)
        sink, kwargs = self._split_kwargs(kwargs)
        docs = await self.base_retriever.ainvoke(
            query, config={"callbacks": run_manager.get_child()}, **kwargs
        )
        if not docs:
            if sink is not None:
                sink.append(empty_result(self.policy))
            return []
        reader = _with_callbacks(self._get_reader(), run_manager.get_child(), method="aread")
        result = await self._arun(
            query, [d.page_content for d in docs], k=kk, scores=self._scores(docs), reader=reader
        )
        await run_manager.on_text(describe(result))
        if sink is not None:
            sink.append(result)
        return self._to_documents(docs, result)

    # --------------------------------------------------------- full result
    def pan(
        self, query: str, config: RunnableConfig | None = None, *, k: int | None = None, **kwargs: Any
    ) -> PannedDocuments:
        """Like ``invoke``, and also return the full :class:`PanningResult`.

        Runs through ``invoke`` (same callbacks and tracing). ``result.posteriors`` and
        ``result.ranking`` index the base retriever's documents in its order. When the
        base retriever returns nothing, the result is empty with
        ``stop_reason="no-documents"`` and no model call is made.
        """
        sink: list[PanningResult] = []
        docs = self.invoke(query, config, k=k, **{_RESULT_SINK: sink}, **kwargs)
        return PannedDocuments(docs, sink[0])

    async def apan(
        self, query: str, config: RunnableConfig | None = None, *, k: int | None = None, **kwargs: Any
    ) -> PannedDocuments:
        """Asynchronous :meth:`pan` (through ``ainvoke``)."""
        sink: list[PanningResult] = []
        docs = await self.ainvoke(query, config, k=k, **{_RESULT_SINK: sink}, **kwargs)
        return PannedDocuments(docs, sink[0])
