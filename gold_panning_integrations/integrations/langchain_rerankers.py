"""LangChain integration: :class:`GoldPanningRetriever`, a drop-in reranking retriever,
and :class:`GoldPanningCompressor`, the same reranker as a document compressor.

Needs the ``langchain`` extra (``pip install "gold-panning-integrations[langchain]"``).

Example::

    from gold_panning_integrations import GoldPanningCompressor, GoldPanningRetriever

    retriever = GoldPanningRetriever(base_retriever=bm25, reader=chat_model, k=4, rounds=4)
    docs = retriever.invoke("who got the first nobel prize in physics")
    docs[0].metadata["gold_panning_posterior"]   # probability the document is relevant
    docs, result = retriever.pan("who got the first nobel prize in physics")
    result.rounds          # per-round trace: shown order, citations, tokens, seconds

    # documents you already hold, or inside a compression pipeline:
    compressor = GoldPanningCompressor(reader=chat_model, top_n=3)
    best = compressor.compress_documents(docs, "who got the first nobel prize in physics")
    # [{"index": i, "relevance_score": p}, ...] best first, as CohereRerank.rerank returns them:
    hits = compressor.rerank(docs, "who got the first nobel prize in physics", top_n=3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import Any, NamedTuple, TypedDict
from uuid import UUID

from ..errors import MissingExtraError

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableConfig
    from langchain_core.runnables.config import (
        ensure_config,
        get_async_callback_manager_for_config,
        get_callback_manager_for_config,
    )
except ImportError as err:  # only when langchain-core itself is missing
    if not (err.name or "").startswith("langchain_core"):
        raise
    raise MissingExtraError(
        "langchain-core",
        "langchain",
        "The LangChain integration (GoldPanningRetriever, GoldPanningCompressor)",
    ) from err

from pydantic import ConfigDict, PrivateAttr, field_serializer, field_validator
from typing_extensions import Unpack

from ..engine import PanningConfig, PanningResult
from ..engine.reranked import RerankHit, check_top_n, document_text, reranked
from ..panning import check_question
from ..readers._adapted import accepts
from ._framework_base import (
    CUT_KEY,
    P_NONE_KEY,
    PANNED_KEY,
    POSTERIOR_KEY,
    RANK_KEY,
    RELEVANCE_KEY,
    PanningFields,
    check_count,
    check_items,
    check_limit,
    describe,
    describe_object,
    empty_result,
    ranked,
    reader_repr,
)

__all__ = ["GoldPanningCompressor", "GoldPanningRetriever", "PanOptions", "PannedDocuments", "RerankHit"]

_RESULT_SINK = "_gold_panning_result_sink"
"""Private invoke keyword through which :meth:`GoldPanningRetriever.pan` gets the result."""

_DOCUMENTS = "langchain_core Document objects (Document(page_content=..., metadata=...))"


class PannedDocuments(NamedTuple):
    """What :meth:`GoldPanningRetriever.pan` and :meth:`GoldPanningCompressor.pan` return."""

    documents: list[Document]
    """The top documents, as ``invoke`` / ``compress_documents`` return them."""
    result: PanningResult
    """The full panning result: posteriors of every input document, per-round trace."""


class PanOptions(TypedDict, total=False):
    """The keyword options of :meth:`GoldPanningCompressor.pan` and ``apan`` (and, through
    them, ``compress_documents``), all optional."""

    top_n: int | None
    """Documents to return for this call (None: the compressor's ``top_n``)."""
    callbacks: Callbacks
    """Callbacks of the run the panning becomes a child of."""
    run_name: str
    tags: list[str]
    metadata: dict[str, Any]
    run_id: UUID
    """``run_name``, ``tags``, ``metadata``, ``run_id``: the panning run's own config."""


class _LangChainPanning(PanningFields):
    """What the retriever and the compressor share: the reader field, scores from metadata,
    panning a list of Documents and the mapping back to Documents. Not used on its own."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reader: Any
    """Who reads the prompts: a reader (``read``/``aread`` returning a ``Reading``), a
    LangChain chat model or chat-model Runnable (``.bind(...)``, ``.with_retry()``, ...), a
    LlamaIndex ``LLM``, or ``"local"`` for the embedded model (wrapped by ``as_reader``)."""

    score_key: str = "score"
    """Metadata key holding the base retriever's score, read by the default ``retriever_prior='auto'`` (and ``'score'``)."""

    _config_keyword: dict[str, Any] = PrivateAttr(default_factory=dict)

    def _reader_source(self) -> Any:
        return self.reader

    def _reported(self, reader: Any) -> Any:
        """A reader that reports no LangChain runs of its own wrapped, so each model call is a
        chat-model child run with its tokens (:mod:`._langchain_calls`); a reader whose
        ``read``/``aread`` takes the run ``config`` (the chat-model reader) is handed the run
        and reports its calls itself."""
        if accepts(reader, "read", "config") or accepts(reader, "aread", "config"):
            return reader
        from ._langchain_calls import LangChainReportedReader

        return LangChainReportedReader(reader)

    @field_serializer("reader")
    def _dump_reader(self, reader: Any) -> Any:
        return describe_object(reader)  # it holds clients and locks: dump what identifies it

    @staticmethod
    def _to_documents(
        docs: Sequence[Document],
        result: PanningResult,
        *,
        every: bool = False,
        config: PanningConfig | None = None,
    ) -> list[Document]:
        """Copies of the selected documents (``every``: of all that ``config``'s
        ``min_relevance`` and ``recall_target`` keep), best first, with the panning keys
        added to a deep copy of their metadata (the caller's documents stay unchanged),
        ``gold_panning_cut`` among them: in how many prompts the reader showed the document
        cut to fit the model's context."""
        out = []
        cut = result.times_cut
        for r in ranked(result, every=every, config=config):
            keys = {POSTERIOR_KEY: r.posterior, RANK_KEY: r.rank, PANNED_KEY: result.panned}
            keys |= {P_NONE_KEY: result.p_none, RELEVANCE_KEY: r.posterior, CUT_KEY: int(cut[r.index])}
            meta = {**deepcopy(docs[r.index].metadata), **keys}
            out.append(docs[r.index].model_copy(update={"metadata": meta}))
        return out

    def _empty(self) -> PanningResult:
        """The result for no documents: no call made."""
        return empty_result(self.panning_config().policy)

    def _query(
        self, docs: Sequence[Document], callbacks: Callbacks, method: str
    ) -> tuple[Any, list[str], dict[str, Any]]:
        """The engine and ``run``/``arun``'s arguments for ``docs`` (checked to be
        Documents): their texts, and the scores and reader keywords: model calls report
        to ``callbacks`` through the run ``config`` the reader's ``method`` takes (a
        chat-model reader's own, or the wrapper of :meth:`_reported`)."""
        engine = self._get_engine()
        options: dict[str, Any] = {"scores": [d.metadata.get(self.score_key) for d in docs]}
        if callbacks is not None and self._takes_config(engine, method):
            options["reader_options"] = {"config": {"callbacks": callbacks}}
        return engine, [d.page_content for d in docs], options

    def _takes_config(self, engine: Any, method: str) -> bool:
        """Whether the reader's ``method`` of ``engine`` takes a run ``config`` (asked once
        per engine and method)."""
        known = self._config_keyword
        if known.get("engine") is not engine:
            known.clear()
            known["engine"] = engine
        if method not in known:
            known[method] = accepts(engine.reader, method, "config")
        return bool(known[method])


class GoldPanningRetriever(BaseRetriever, _LangChainPanning):
    """Rerank a base retriever's documents by Gold Panning with an LLM reader.

    The documents are shown to the reader over a few rounds, each time ordered so that the
    likeliest sit where the model's citation is most informative (its detector profile);
    citations update a posterior probability of relevance per document. ``invoke``
    returns the top ``k`` documents as copies with ``gold_panning_posterior``,
    ``relevance_score`` (the same float, LangChain rerankers' key), ``gold_panning_rank``
    (1-based), ``gold_panning_panned``, ``gold_panning_p_none`` and ``gold_panning_cut``
    (prompts in which the reader showed the document cut to fit the model's context; 0:
    always whole) added to their metadata; with ``min_relevance`` fewer than ``k``, or none.

    :meth:`pan` / :meth:`apan` also return the full
    :class:`~gold_panning_integrations.PanningResult`, which goes to ``on_result`` too; a
    one-line summary goes to the run's ``on_text``. The base retriever and the chat
    model's calls nest under this retriever's run. ``k`` can be set per call:
    ``invoke(query, k=2)``. For documents you already hold, use
    :class:`GoldPanningCompressor`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    base_retriever: BaseRetriever
    """The retriever whose documents are reranked; its order (and, with
    ``retriever_prior='auto'``, the default, scores) informs the prior."""

    k: int | None = 4
    """Number of documents to return, a positive int (per call: ``invoke(query, k=...)``),
    or None for every document that passes ``min_relevance`` / ``recall_target``."""

    @field_validator("k", mode="before")
    @classmethod
    def _check_k(cls, value: Any) -> int | None:
        return check_limit(value, name="k")

    @field_serializer("base_retriever")
    def _dump_base(self, base: BaseRetriever) -> Any:
        return describe_object(base)

    def _repr_fields(self) -> dict[str, Any]:
        return {
            "base_retriever": type(self.base_retriever).__name__,
            "reader": reader_repr(self.reader),
            "k": repr(self.k),
        }

    def _base_documents(self, docs: Any) -> list[Document]:
        return check_items(
            docs,
            Document,
            source=f"the base retriever {type(self.base_retriever).__name__} returned",
            what=_DOCUMENTS,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve with the base retriever, pan, return the top ``k`` documents (the query
        is checked before the base retriever runs).

        Extra keyword arguments are passed to the base retriever.
        """
        kk, sink = self._per_query(query, k, kwargs)
        found = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        docs = self._base_documents(found)
        if not docs:
            return self._retrieved(docs, self._empty(), run_manager, sink)
        engine, texts, options = self._query(docs, run_manager.get_child(), "read")
        result = self._notify(engine.run(query, texts, k=kk, **options))
        return self._retrieved(docs, result, run_manager, sink)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Asynchronous retrieval: ``ainvoke`` on the base retriever, ``aread`` on the reader."""
        kk, sink = self._per_query(query, k, kwargs)
        found = await self.base_retriever.ainvoke(
            query, config={"callbacks": run_manager.get_child()}, **kwargs
        )
        docs = self._base_documents(found)
        if not docs:
            return self._retrieved(docs, self._empty(), run_manager, sink)
        engine, texts, options = self._query(docs, run_manager.get_child(), "aread")
        result = self._notify(await engine.arun(query, texts, k=kk, **options))
        await run_manager.on_text(describe(result))
        return self._retrieved(docs, result, None, sink)

    def _per_query(self, query: str, k: int | None, kwargs: dict[str, Any]) -> tuple[int | None, Any]:
        """The query checked, this call's ``k`` and the result sink of :meth:`pan` (taken
        out of the base retriever's ``kwargs``)."""
        check_question(query)
        return check_limit(self.k if k is None else k, name="k"), kwargs.pop(_RESULT_SINK, None)

    def _retrieved(
        self, docs: list[Document], result: PanningResult, run_manager: Any, sink: Any
    ) -> list[Document]:
        """The documents to return; the one-line summary to ``run_manager.on_text`` (sync
        path; None: reported already) when anything was panned, the result to ``sink``."""
        if docs and run_manager is not None:
            run_manager.on_text(describe(result))
        if sink is not None:
            sink.append(result)
        return self._to_documents(docs, result)

    def pan(
        self, query: str, config: RunnableConfig | None = None, *, k: int | None = None, **kwargs: Any
    ) -> PannedDocuments:
        """``invoke`` (same callbacks and tracing), and also the full :class:`PanningResult`,
        whose ``posteriors`` and ``ranking`` index the base retriever's documents; no
        documents: an empty result (``stop_reason="no-documents"``), no model call.
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


class GoldPanningCompressor(BaseDocumentCompressor, _LangChainPanning):
    """Gold Panning as a LangChain document compressor (reranker).

    Reranks documents you already hold, or sits in a ``ContextualCompressionRetriever`` /
    ``DocumentCompressorPipeline`` like LangChain's other rerankers.
    ``compress_documents(documents, query)`` returns the top ``top_n`` as copies with the
    same metadata keys as :class:`GoldPanningRetriever` (same options, code and results);
    the input order is the base order of the prior. :meth:`pan` / :meth:`apan` also
    return the full :class:`~gold_panning_integrations.PanningResult`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    top_n: int | None = 4
    """Number of documents to return (a positive int), or None for every document, ranked
    (as ``CohereRerank(top_n=None)``). It chooses what is returned: no probability
    depends on it."""

    @field_validator("top_n", mode="before")
    @classmethod
    def _check_top_n(cls, value: Any) -> int | None:
        return None if value is None else check_count(value, name="top_n")

    def _repr_fields(self) -> dict[str, Any]:
        return {"reader": reader_repr(self.reader), "top_n": repr(self.top_n)}

    def pan(
        self, documents: Sequence[Document], query: str, **options: Unpack[PanOptions]
    ) -> PannedDocuments:
        """Pan ``documents`` for ``query``: the top documents and the full result.

        One chain run named after this class (a child of ``callbacks``' run, else of the run
        in context, else a root run) with the model calls as its children; the keyword
        options are :class:`PanOptions`. ``result.posteriors`` / ``ranking`` index
        ``documents``; no documents: an empty result, no call.
        """
        docs, n, manager, start = self._compressing(documents, query, dict(options), asynchronous=False)
        run = manager.on_chain_start(*start[0], **start[1])
        try:
            result, config = self._empty() if not docs else None, None
            if result is None:
                engine, texts, run_options = self._query(docs, run.get_child(), "read")
                result = self._notify(engine.run(query, texts, k=n, **run_options))
                config = engine.config  # its min_relevance and recall_target, resolved once
            out = self._to_documents(docs, result, every=n is None, config=config)
        except BaseException as err:
            run.on_chain_error(err)
            raise
        run.on_chain_end({"documents": out})
        return PannedDocuments(out, result)

    async def apan(
        self, documents: Sequence[Document], query: str, **options: Unpack[PanOptions]
    ) -> PannedDocuments:
        """Asynchronous :meth:`pan` (the reader's ``aread``)."""
        docs, n, manager, start = self._compressing(documents, query, dict(options), asynchronous=True)
        run = await manager.on_chain_start(*start[0], **start[1])
        try:
            result, config = self._empty() if not docs else None, None
            if result is None:
                engine, texts, run_options = self._query(docs, run.get_child(), "aread")
                result = self._notify(await engine.arun(query, texts, k=n, **run_options))
                config = engine.config  # its min_relevance and recall_target, resolved once
            out = self._to_documents(docs, result, every=n is None, config=config)
        except BaseException as err:
            await run.on_chain_error(err)
            raise
        await run.on_chain_end({"documents": out})
        return PannedDocuments(out, result)

    def _compressing(
        self, documents: Sequence[Document], query: str, options: dict[str, Any], *, asynchronous: bool
    ) -> tuple[list[Document], int | None, Any, tuple[tuple[Any, ...], dict[str, Any]]]:
        """What :meth:`pan` and :meth:`apan` check first: the query, ``top_n`` (None: this
        compressor's; None there: every document), the documents; then the callback
        manager of the run's config and the arguments of its ``on_chain_start`` (one chain
        run around the panning, ended with the documents or the error)."""
        check_question(query)
        top_n, callbacks = options.pop("top_n", None), options.pop("callbacks", None)
        n = self.top_n if top_n is None else top_n
        n = None if n is None else check_count(n, name="top_n")
        docs = check_items(documents, Document, source="compress_documents was given", what=_DOCUMENTS)
        config = _run_config(callbacks, options)
        managers = get_async_callback_manager_for_config if asynchronous else get_callback_manager_for_config
        start = (
            (None, {"query": query, "documents": len(docs), "top_n": n}),
            {"name": config.get("run_name") or type(self).__name__, "run_id": config.pop("run_id", None)},
        )
        return docs, n, managers(config), start

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None, **kwargs: Any
    ) -> Sequence[Document]:
        """The top ``top_n`` of ``documents`` for ``query``, best first (every document
        when ``top_n`` is None); keyword arguments as for :meth:`pan` (``top_n``,
        ``run_name``, ``tags``, ``metadata``, ``run_id``)."""
        return self.pan(documents, query, callbacks=callbacks, **kwargs).documents

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None, **kwargs: Any
    ) -> Sequence[Document]:
        """Asynchronous :meth:`compress_documents` (awaits the reader's ``aread``)."""
        return (await self.apan(documents, query, callbacks=callbacks, **kwargs)).documents

    def rerank(
        self,
        documents: Sequence[Document | str | Mapping[str, Any]],
        query: str,
        *,
        top_n: int | None = None,
        **kwargs: Any,
    ) -> list[RerankHit]:
        """``documents`` reranked for ``query``, as LangChain's ``CohereRerank.rerank``:
        ``[{"index": i, "relevance_score": p}, ...]``, best first, the first ``top_n`` (None
        or -1: every document).

        A document is a ``Document``, a text, or a ``{"text": ...}`` dict (its other fields
        become the Document's metadata, so a ``"score"`` is read as the retriever's). The
        dicts are :meth:`pan`'s ranking and posteriors; ``min_relevance`` does not cut
        them. Keyword arguments as for :meth:`pan` (the run's ``callbacks``, ``tags``, ...).
        """
        top_n = check_top_n(top_n)
        return reranked(self.pan(_documents(documents), query, top_n=top_n, **kwargs).result, top_n=top_n)

    async def arerank(
        self,
        documents: Sequence[Document | str | Mapping[str, Any]],
        query: str,
        *,
        top_n: int | None = None,
        **kwargs: Any,
    ) -> list[RerankHit]:
        """Asynchronous :meth:`rerank` (awaits the reader's ``aread``)."""
        top_n = check_top_n(top_n)
        panned = await self.apan(_documents(documents), query, top_n=top_n, **kwargs)
        return reranked(panned.result, top_n=top_n)


def _documents(items: Any) -> Any:
    """Texts and ``{"text": ...}`` dicts as Documents (``CohereRerank.rerank`` takes all
    three); anything else as given, for :meth:`GoldPanningCompressor.pan` to check."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        return items
    out = []
    for i, d in enumerate(items):
        if isinstance(d, str):
            d = Document(page_content=d)
        elif isinstance(d, Mapping):
            meta = {k: v for k, v in d.items() if k != "text"}
            d = Document(page_content=document_text(d, i), metadata=meta)
        out.append(d)
    return out


_RUN_KEYS = frozenset(PanOptions.__annotations__) - {"top_n", "callbacks"}


def _run_config(callbacks: Callbacks, kwargs: dict[str, Any]) -> RunnableConfig:
    """The compressor run's config: ``callbacks`` and the run keys of ``kwargs`` over the
    config in context (``ensure_config``), so a call inside a chain nests under it.

    Raises:
        TypeError: ``kwargs`` holds a key that is not a run key (the message lists them).
    """
    unknown = sorted(set(kwargs) - _RUN_KEYS)
    if unknown:
        raise TypeError(
            f"GoldPanningCompressor got unexpected keyword argument(s) {unknown}; it takes top_n and "
            f"the run's {sorted(_RUN_KEYS)}"
        )
    given: dict[str, Any] = {key: value for key, value in kwargs.items() if value is not None}
    if callbacks is not None:
        given["callbacks"] = callbacks
    return ensure_config(RunnableConfig(**given))  # type: ignore[typeddict-item]
