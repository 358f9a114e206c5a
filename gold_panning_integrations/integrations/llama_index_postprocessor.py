"""LlamaIndex integration: :class:`GoldPanningPostprocessor`, a node postprocessor (reranker).

Example::

    from llama_index.core.query_engine import RetrieverQueryEngine
    from gold_panning_integrations import GoldPanningPostprocessor

    panning = GoldPanningPostprocessor(llm=llm, top_n=4, rounds=4)
    engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[panning], llm=llm)

    nodes, result = panning.pan(retrieved_nodes, "who got the first nobel prize in physics")
    result.rounds          # per-round trace
    hits = panning.rerank(retrieved_nodes, "who got the first nobel prize in physics")  # [{"index", "relevance_score"}]

Needs the ``llama-index`` extra (``pip install "gold-panning-integrations[llama-index]"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import InvalidInputError, MissingExtraError

try:
    from llama_index.core import Settings
    from llama_index.core.bridge.pydantic import ConfigDict, Field, field_validator, model_validator
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.base import BaseEvent
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.llms import LLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as err:  # only when llama-index-core itself is missing
    if not (err.name or "").startswith("llama_index"):
        raise
    raise MissingExtraError(
        "llama-index-core", "llama-index", "The LlamaIndex integration (GoldPanningPostprocessor)"
    ) from err

from ..engine import PanningResult
from ..engine.reranked import RerankHit, check_top_n, document_text, reranked
from ..panning import check_question
from ._framework_base import (
    CUT_KEY,
    PanningFields,
    check_items,
    check_limit,
    empty_result,
    model_name,
    ranked,
    reader_repr,
)

__all__ = ["GoldPanningPostprocessor", "PannedNodes", "PanningEndEvent", "RerankHit"]

dispatcher = get_dispatcher(__name__)

Nodes = Sequence[NodeWithScore]
"""What :meth:`GoldPanningPostprocessor.pan` takes: the retriever's nodes, in its order."""

QueryLike = QueryBundle | str | None
"""The query: a ``QueryBundle``, its text, or None (an error: the query is needed)."""

P_NONE_PAYLOAD = "gold_panning_p_none"
"""Key of ``p_none`` in the legacy callback's RERANKING end payload."""


class PanningEndEvent(BaseEvent):
    """Sent through the LlamaIndex dispatcher after each panning, beside ``ReRankEndEvent``
    (whose fields are fixed): what the nodes' scores alone cannot say."""

    p_none: float
    """Probability that no candidate node is relevant (``PanningResult.p_none``)."""
    returned: int
    """Nodes returned (fewer than ``top_n``, even none, with ``min_relevance``)."""
    panned: bool
    """False when no evidence was used (the order is the prior's)."""

    @classmethod
    def class_name(cls) -> str:
        return "GoldPanningEndEvent"


def _default_llm() -> LLM:
    """``Settings.llm`` (resolved by LlamaIndex on first access), or a ValueError that
    says what to pass instead."""
    try:
        return Settings.llm
    except (ImportError, ValueError) as err:
        raise ValueError(
            "GoldPanningPostprocessor needs a model: pass llm=<a LlamaIndex LLM> or reader=<a reader, "
            "a LangChain chat model, or 'local'>, or set llama_index.core.Settings.llm; "
            f"Settings.llm could not be resolved: {str(err).strip()}"
        ) from err


class PannedNodes(NamedTuple):
    """What :meth:`GoldPanningPostprocessor.pan` returns."""

    nodes: list[NodeWithScore]
    """The top-n nodes, score = posterior, as ``postprocess_nodes`` returns them."""
    result: PanningResult
    """The full panning result: posteriors of every input node, per-round trace."""


class GoldPanningPostprocessor(BaseNodePostprocessor, PanningFields):
    """Rerank retrieved nodes by Gold Panning with an LLM reader.

    The nodes are shown to the reader over a few rounds, each time ordered so that the
    likeliest sit where the model's citation is most informative (its detector profile);
    citations update a posterior probability of relevance per node. Returns the ``top_n``
    nodes as new ``NodeWithScore`` objects whose ``score`` is the posterior (the input is
    not modified; a node the reader showed cut to fit the model's context is a copy whose
    metadata holds ``gold_panning_cut``, the prompts it was cut in, a key hidden from the
    response LLM and the embeddings); with ``min_relevance`` fewer, or none. ``p_none``
    (no node relevant) is on :meth:`pan`'s result, in the ``GoldPanningEndEvent`` sent
    after ``ReRankEndEvent`` and in the legacy ``RERANKING`` callback's end payload, not in
    node metadata (which the response LLM reads). :meth:`pan` / :meth:`apan` also return the full
    :class:`~gold_panning_integrations.PanningResult`.

    Give the model as ``llm`` or ``reader``, not both; with neither, ``llm`` is
    ``Settings.llm`` at construction, as for ``LLMRerank`` (a ``ValueError`` says what to
    pass when LlamaIndex cannot resolve it).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    llm: LLM | None = Field(default=None, description="LlamaIndex LLM that reads the prompts.")
    """Wrapped by ``readers.as_reader``; with neither ``llm`` nor ``reader``, ``Settings.llm``."""

    reader: Any = Field(default=None, exclude=True, description="Reader, chat model, or 'local'.")
    """Alternative to ``llm``: a reader (``read``/``aread`` returning a ``Reading``), a
    LangChain chat model, or ``"local"`` for the embedded model."""

    top_n: int | None = Field(
        default=4,
        description="Number of nodes to return (None: every node, ranked). It chooses what is "
        "returned: no probability depends on it.",
    )

    metadata_mode: MetadataMode = Field(
        default=MetadataMode.LLM, description="Which node metadata the reader sees."
    )

    @field_validator("top_n", mode="before")
    @classmethod
    def _check_top_n(cls, value: Any) -> int | None:
        return check_limit(value, name="top_n")

    @model_validator(mode="before")
    @classmethod
    def _settings_llm(cls, data: Any) -> Any:
        """Neither ``llm`` nor ``reader``: ``Settings.llm``, as ``LLMRerank`` does."""
        if isinstance(data, dict) and data.get("llm") is None and data.get("reader") is None:
            data = {**data, "llm": _default_llm()}
        return data

    @model_validator(mode="after")
    def _one_model(self) -> GoldPanningPostprocessor:
        if self.llm is not None and self.reader is not None:
            raise ValueError("give either llm=... or reader=..., not both")
        return self

    @classmethod
    def class_name(cls) -> str:
        return "GoldPanningPostprocessor"

    def _reader_source(self) -> Any:
        return self.llm if self.llm is not None else self.reader

    def _reported(self, reader: Any) -> Any:
        """A reader that is not a LlamaIndex LLM's wrapped, so each model call is an LLM span
        with its events and tokens (:mod:`._llama_index_calls`); a LlamaIndex LLM reports
        its own calls."""
        from ..readers.llama_index_llm import LlamaIndexLLMReader

        if isinstance(reader, LlamaIndexLLMReader):
            return reader
        from ._llama_index_calls import LlamaIndexReportedReader

        return LlamaIndexReportedReader(reader, callback_manager=lambda: self.callback_manager)

    def _repr_fields(self) -> dict[str, Any]:
        return {"reader": reader_repr(self._reader_source()), "top_n": repr(self.top_n)}

    def _prepare(
        self, nodes: Sequence[NodeWithScore], query_bundle: QueryBundle | str | None, top_n: int | None
    ) -> tuple[QueryBundle, int | None]:
        if query_bundle is None:
            raise InvalidInputError(
                "GoldPanningPostprocessor needs the query: pass query_bundle=... or query_str=... "
                "(a query engine passes it for you)"
            )
        check_question(query_bundle.query_str if isinstance(query_bundle, QueryBundle) else query_bundle)
        if isinstance(query_bundle, str):
            query_bundle = QueryBundle(query_bundle)
        n = check_limit(self.top_n if top_n is None else top_n, name="top_n")
        what = "llama_index NodeWithScore objects (NodeWithScore(node=TextNode(text=...)))"
        check_items(nodes, NodeWithScore, source="GoldPanningPostprocessor was given", what=what)
        model = model_name(self._reader_source())
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle, nodes=list(nodes), top_n=len(nodes) if n is None else n, model_name=model
            )
        )
        return query_bundle, n

    def pan(self, nodes: Nodes, query: QueryLike, *, top_n: int | None = None) -> PannedNodes:
        """Pan ``nodes`` for ``query``; return the top nodes and the full result.

        ``result.posteriors`` / ``result.ranking`` index ``nodes`` in the given order.
        With no nodes the result is empty (``stop_reason="no-documents"``), no call made.
        """
        query_bundle, n = self._prepare(nodes, query, top_n)
        if not nodes:
            return self._empty(n)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query_bundle, n)
        ) as event:
            engine, texts, options = self._query(nodes)
            result = self._notify(engine.run(query_bundle.query_str, texts, k=n, **options))
            out = self._ranked(nodes, result, event)
        return self._report(out, result)

    async def apan(self, nodes: Nodes, query: QueryLike, *, top_n: int | None = None) -> PannedNodes:
        """Asynchronous :meth:`pan`: awaits the reader's ``aread`` (no threads)."""
        query_bundle, n = self._prepare(nodes, query, top_n)
        if not nodes:
            return self._empty(n)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query_bundle, n)
        ) as event:
            engine, texts, options = self._query(nodes)
            result = self._notify(await engine.arun(query_bundle.query_str, texts, k=n, **options))
            out = self._ranked(nodes, result, event)
        return self._report(out, result)

    def _query(self, nodes: Nodes) -> tuple[Any, list[str], dict[str, Any]]:
        """The engine and ``run``/``arun``'s arguments for ``nodes``: their texts (with
        the metadata ``metadata_mode`` shows) and their scores (the random stream is the
        engine's: :attr:`seed`)."""
        texts = [node.node.get_content(metadata_mode=self.metadata_mode) for node in nodes]
        return self._get_engine(), texts, {"scores": [x.score for x in nodes]}

    def _empty(self, n: int | None) -> PannedNodes:
        """No nodes: an empty result, no call made."""
        dispatcher.event(ReRankEndEvent(nodes=[]))
        return PannedNodes([], empty_result(self.panning_config(n).policy))

    def _payload(self, nodes: Nodes, query_bundle: QueryBundle, n: int | None) -> dict[str, Any]:
        """The legacy ``RERANKING`` callback's start payload."""
        return {
            EventPayload.NODES: list(nodes),
            EventPayload.MODEL_NAME: model_name(self._reader_source()),
            EventPayload.QUERY_STR: query_bundle.query_str,
            EventPayload.TOP_K: n,
        }

    @staticmethod
    def _ranked(nodes: Nodes, result: PanningResult, event: Any) -> list[NodeWithScore]:
        """The top nodes of ``result`` (score: the posterior), reported to the legacy
        callback's ``event``; a node the reader showed cut is a copy that says so
        (:func:`_marked_cut`)."""
        cut = result.times_cut
        out = [
            NodeWithScore(node=_marked_cut(nodes[r.index].node, int(cut[r.index])), score=r.posterior)
            for r in ranked(result)
        ]
        event.on_end(payload={EventPayload.NODES: out, P_NONE_PAYLOAD: result.p_none})
        return out

    @staticmethod
    def _report(out: list[NodeWithScore], result: PanningResult) -> PannedNodes:
        """``out`` and ``result``, reported to the dispatcher."""
        dispatcher.event(ReRankEndEvent(nodes=out))
        dispatcher.event(PanningEndEvent(p_none=result.p_none, returned=len(out), panned=result.panned))
        return PannedNodes(out, result)

    def rerank(
        self,
        documents: Sequence[NodeWithScore | BaseNode | str | Mapping[str, Any]],
        query: QueryLike,
        *,
        top_n: int | None = None,
    ) -> list[RerankHit]:
        """``documents`` reranked for ``query``, the shape of LangChain's ``CohereRerank.rerank``:
        ``[{"index": i, "relevance_score": p}, ...]``, best first, the first ``top_n`` (None
        or -1: every node).

        A document is a ``NodeWithScore``, a node, a text, or a ``{"text": ...}`` dict (its
        ``"score"``, when given, is the retriever's; its other fields become the node's
        metadata, not shown to the reader). The dicts are :meth:`pan`'s ranking and posteriors; ``min_relevance``
        does not cut them.
        """
        top_n = check_top_n(top_n)
        return reranked(self.pan(_nodes(documents), query, top_n=top_n).result, top_n=top_n)

    async def arerank(
        self,
        documents: Sequence[NodeWithScore | BaseNode | str | Mapping[str, Any]],
        query: QueryLike,
        *,
        top_n: int | None = None,
    ) -> list[RerankHit]:
        """Asynchronous :meth:`rerank` (awaits the reader's ``aread``)."""
        top_n = check_top_n(top_n)
        return reranked((await self.apan(_nodes(documents), query, top_n=top_n)).result, top_n=top_n)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return self.pan(nodes, query_bundle).nodes

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return (await self.apan(nodes, query_bundle)).nodes


def _marked_cut(node: BaseNode, times: int) -> BaseNode:
    """``node`` itself when the reader showed it whole; else a copy whose metadata says in
    how many prompts it was cut to fit the model's context (``gold_panning_cut``), a key
    kept out of what the response LLM and the embeddings read."""
    if not times:
        return node
    copy = node.model_copy(deep=True)
    copy.metadata[CUT_KEY] = times
    for keys in (copy.excluded_llm_metadata_keys, copy.excluded_embed_metadata_keys):
        if CUT_KEY not in keys:
            keys.append(CUT_KEY)
    return copy


def _nodes(items: Any) -> Any:
    """Texts, nodes and ``{"text": ...}`` dicts as ``NodeWithScore`` objects; anything else
    as given, for :meth:`GoldPanningPostprocessor.pan` to check."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        return items
    out = []
    for i, n in enumerate(items):
        if isinstance(n, str):
            n = NodeWithScore(node=TextNode(text=n), score=None)
        elif isinstance(n, BaseNode):
            n = NodeWithScore(node=n, score=None)
        elif isinstance(n, Mapping):
            score = n.get("score")
            meta = {k: v for k, v in n.items() if k not in ("text", "score")}
            score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
            keys = list(meta)  # kept on the node, not shown to the reader (Cohere reads "text" only)
            node = TextNode(
                text=document_text(n, i),
                metadata=meta,
                excluded_llm_metadata_keys=keys,
                excluded_embed_metadata_keys=keys,
            )
            n = NodeWithScore(node=node, score=score)
        out.append(n)
    return out
