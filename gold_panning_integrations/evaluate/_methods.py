"""``gold-panning evaluate``'s methods: our panning settings, one entry each
(:data:`PANNING_METHODS`), the peers and the packages they need (:data:`PEERS`), and how
each method ranks one instance (:func:`panning_method`, :func:`base_method`,
:func:`peer_methods`) into a :class:`MethodOutcome`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._streams import METHODS, method_rng, query_k
from ..engine.config import SETTINGS, PanningConfig
from ._instances import CompareInstance

__all__ = [
    "ALL_METHODS",
    "COST_SAVING",
    "DEFAULT_METHODS",
    "LABELS",
    "OURS",
    "PANNING",
    "PANNING_METHODS",
    "PEERS",
    "PEER_METHODS",
    "AsyncMethodFn",
    "Endpoint",
    "MethodFn",
    "MethodOutcome",
    "PanningSpec",
    "TracesNotWritten",
    "base_method",
    "panning_method",
    "peer_method",
    "peer_methods",
    "peer_missing",
]


COST_SAVING: dict[str, Any] = {k: v for k, v in SETTINGS["lowest-cost"].items() if k != "rounds"}
"""The lowest-cost setting without its rounds (``--rounds`` sets them)."""

_DEFAULTS = PanningConfig()


@dataclass(frozen=True)
class PanningSpec:
    """One of our panning methods: how :func:`panning_method` builds its panner.

    Attributes:
        label: The name in tables.
        options: Keyword options of ``GoldPanner`` beyond the shared ones (reader, profile,
            rounds, k, ``on_failure="fallback"``, rng); a method's own ``rounds`` win over
            ``--rounds``.
        rank_prior: Whether the base order is given as the rank prior (the integrations'
            default).
        default: Whether ``--methods`` runs it by default.
    """

    label: str
    options: Mapping[str, Any]
    rank_prior: bool
    default: bool = True


PANNING_METHODS: dict[str, PanningSpec] = {
    "psc": PanningSpec(
        "PSC (policy=random)",
        {"policy": "random", "prior": "uniform", "prompts_per_round": 1},
        rank_prior=False,
    ),
    "gp-belief": PanningSpec(
        "GP-Belief, one prompt per round (base order as rank prior)",
        {"prompts_per_round": 1},
        rank_prior=True,
    ),
    "gp-cost": PanningSpec("GP, lowest-cost setting", COST_SAVING, rank_prior=True),
    "gp-belief-flat": PanningSpec(
        "GP-Belief, no prior (the reader alone)", {"prompts_per_round": 1}, rank_prior=False, default=False
    ),
    "gp-defaults": PanningSpec(
        f"GP defaults ({_DEFAULTS.rounds} rounds x {_DEFAULTS.prompts_per_round} prompts)",
        {"rounds": _DEFAULTS.rounds, "prompts_per_round": _DEFAULTS.prompts_per_round},
        rank_prior=True,
        default=False,
    ),
}
"""Our panning methods (entries keep their places: a method's seed follows its position)."""

PANNING: tuple[str, ...] = tuple(PANNING_METHODS)
OURS: tuple[str, ...] = ("base", *PANNING)
PEER_METHODS = ("langchain-listwise", "llamaindex-llmrerank", "llamaindex-rankgpt")
ALL_METHODS: tuple[str, ...] = METHODS
"""Every method, in the order their random streams follow (:data:`.._streams.METHODS`, which
``gold-panning rerank --seed`` shares; ``OURS + PEER_METHODS``)."""
DEFAULT_METHODS: tuple[str, ...] = tuple(
    m for m in ALL_METHODS if m not in PANNING_METHODS or PANNING_METHODS[m].default
)
LABELS = {
    "base": "base order",
    **{m: spec.label for m, spec in PANNING_METHODS.items()},
    "langchain-listwise": "LangChain LLMListwiseRerank + ChatOpenAI",
    "llamaindex-llmrerank": "LlamaIndex LLMRerank + OpenAILike",
    "llamaindex-rankgpt": "LlamaIndex RankGPTRerank + OpenAILike",
}

PEERS: dict[str, tuple[tuple[str, ...], str]] = {
    "langchain-listwise": (
        ("langchain_classic", "langchain_openai"),
        "pip install langchain-classic langchain-openai",
    ),
    "llamaindex-llmrerank": (
        ("llama_index.core", "llama_index.llms.openai_like"),
        "pip install llama-index-core llama-index-llms-openai-like",
    ),
    "llamaindex-rankgpt": (
        ("llama_index.core", "llama_index.llms.openai_like", "llama_index.postprocessor.rankgpt_rerank"),
        "pip install llama-index-llms-openai-like llama-index-postprocessor-rankgpt-rerank",
    ),
}
"""Peer -> (modules it needs, the install line shown when one is missing)."""


# ================================================================================= methods
@dataclass
class MethodOutcome:
    """What one method returned for one instance.

    Attributes:
        ranking: Input indices best first (may be shorter than ``n`` for peers' top-n).
        per_round: Top-1 hit after each round (panning methods), shape ``(rounds,)``.
        round_tokens: Cumulative prompt tokens after each round (reader-reported),
            shape ``(rounds,)``.
        unusable: Model outputs that could not be used (failed rounds, empty results).
        note: Free text for the checkpoint (e.g. the stop reason).
        scores: Probability of relevance of every input document, in [0, 1], shape
            ``(n,)`` (the panning methods' posteriors); None for a method without one.
    """

    ranking: list[int]
    per_round: list[float] | None = None
    round_tokens: list[int] | None = None
    unusable: int = 0
    note: str | None = None
    scores: list[float] | None = None


MethodFn = Callable[[CompareInstance], MethodOutcome]
AsyncMethodFn = Callable[[CompareInstance], Coroutine[Any, Any, MethodOutcome]]


@dataclass(frozen=True)
class Endpoint:
    """Where the methods send their requests (the proxy's URL) and with what model."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    timeout: float = 300.0
    peer_max_tokens: int = 512


def _per_round(
    result: Any, gold: Sequence[int], rounds: int, rng: np.random.Generator
) -> tuple[list[float], list[int]]:
    from ._scoring import carry_forward, per_round_hits

    hits = per_round_hits(result, gold, rng=rng, rounds=rounds)
    toks = carry_forward(np.cumsum([r.prompt_tokens for r in result.rounds]), rounds)
    return [float(h) for h in hits], [int(t) for t in toks]


def panning_method(
    name: str,
    reader: Any,
    *,
    profile: Any,
    rounds: int,
    seed: int,
    k: int = 1,
    on_result: Callable[[Any, CompareInstance], None] | None = None,
) -> MethodFn:
    """One of our methods (an entry of :data:`PANNING_METHODS`) as ``instance -> outcome``.

    ``profile`` is a profile object, a bundled name or a path; ``k`` the relevant documents
    the panner selects (at most ``n - 1``, :func:`~.._streams.query_k`);
    ``on_result(result, instance)`` gets every finished result (``--traces``). The
    generator is seeded by ``seed``, the instance and the method's place in :data:`ALL_METHODS`."""
    from ..panning import GoldPanner

    if name not in PANNING_METHODS:
        raise ValueError(f"{name!r} is not a panning method; choose one of {', '.join(PANNING)}")
    spec = PANNING_METHODS[name]
    if isinstance(profile, (str, Path)):
        from ..profiles import load_profile

        profile = load_profile(profile)

    def run(inst: CompareInstance) -> MethodOutcome:
        rng = method_rng(seed, inst.index, name)
        kq = query_k(k, len(inst.documents))
        options = {
            "rounds": rounds,
            **({} if spec.rank_prior else {"retriever_prior": "none"}),
            **spec.options,
        }
        panner = GoldPanner(reader, profile=profile, k=kq, on_failure="fallback", rng=rng, **options)
        # The first stage's scores, where it gave them: the default prior ("auto") reads
        # them, else the rank.
        res = panner.run(inst.question, inst.documents, scores=list(inst.scores) or None)
        if on_result is not None:
            on_result(res, inst)
        hits, toks = _per_round(res, inst.gold, int(options["rounds"]), rng)
        return MethodOutcome(
            ranking=[int(i) for i in res.ranking],
            per_round=hits,
            round_tokens=toks,
            unusable=res.failed_rounds,
            note=res.stop_reason,
            scores=[round(float(p), 6) for p in res.posteriors],
        )

    run.__name__ = name
    return run


class TracesNotWritten(OSError):
    """``--traces`` could not be written: the run stops (the traces are what was asked for),
    instead of counting the failure as the method's miss."""


def _trace_writer(path: str | None) -> Callable[[Any, CompareInstance], None] | None:
    """``--traces``: an ``on_result`` that appends each result labelled with its gold. The
    file is opened once up front, so an unwritable path fails before any model call."""
    if not path:
        return None
    from ..calibration.traces import TraceWriter

    try:
        writer = TraceWriter(path)
        writer.path.parent.mkdir(parents=True, exist_ok=True)
        with open(writer.path, "a", encoding="utf-8"):
            pass
    except (OSError, ValueError) as err:
        raise TracesNotWritten(
            f"cannot write --traces {path!r}: {getattr(err, 'strerror', None) or err}"
        ) from err

    def write(result: Any, inst: CompareInstance) -> None:
        try:
            writer(result, relevant=list(inst.gold))
        except OSError as err:
            raise TracesNotWritten(
                f"cannot append to --traces {path!r}: {err.strerror or err}; the rows so far are in the checkpoint"
            ) from err

    return write


def base_method(inst: CompareInstance) -> MethodOutcome:
    """The base order: no model call."""
    return MethodOutcome(ranking=list(range(len(inst.documents))))


def peer_missing(name: str) -> str | None:
    """The install line when a peer's packages are missing, else None."""
    modules, hint = PEERS[name]
    for mod in modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):  # a parent package is missing
            found = False
        if not found:
            return f"{mod} not installed ({hint})"
    return None


def _doc_index(doc: Any) -> int | None:
    """The input index a LangChain document returned by a peer carries."""
    index = (getattr(doc, "metadata", None) or {}).get("gp_index")
    return int(index) if isinstance(index, int) else None


def _node_index(node: Any) -> int | None:
    """The input index in a LlamaIndex node's id (``gp-doc-<i>``)."""
    node_id = str(getattr(node, "node_id", ""))
    number = node_id.removeprefix("gp-doc-")
    return int(number) if number != node_id and number.isdigit() else None


def _outcome(indices: Sequence[int | None]) -> MethodOutcome:
    """The returned documents' input indices in order; unknown or repeated ones are dropped
    and counted unusable, as is an empty result."""
    ranking = list(dict.fromkeys(i for i in indices if i is not None))
    return MethodOutcome(ranking=ranking, unusable=int(not ranking) + len(indices) - len(ranking))


def peer_method(name: str, ep: Endpoint, *, top_n: int = 3) -> MethodFn:
    """A peer reranker, built from its own package, as ``instance -> outcome``.

    The peer returns its top ``top_n`` documents; those are the ranking. An empty result
    counts as an unusable output (a miss).
    """
    return peer_methods(name, ep, top_n=top_n)[0]


def peer_methods(name: str, ep: Endpoint, *, top_n: int = 3) -> tuple[MethodFn, AsyncMethodFn]:
    """A peer reranker as ``(instance -> outcome, async instance -> outcome)``: its sync
    call (``compress_documents`` / ``postprocess_nodes``) and its async one
    (``acompress_documents`` / ``apostprocess_nodes``), both from one peer object as
    :func:`peer_method` builds it."""
    if name == "langchain-listwise":
        import openai
        from langchain_classic.retrievers.document_compressors import LLMListwiseRerank
        from langchain_core.documents import Document
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        from ..readers.openai import _is_format_rejection

        class _ToolCallingChatOpenAI(ChatOpenAI):
            """ChatOpenAI whose structured output is a forced tool call (``method=
            "function_calling"``), for servers that refuse ``json_schema``."""

            def with_structured_output(
                self, schema: Any = None, *, method: Any = "function_calling", **kw: Any
            ) -> Any:
                return super().with_structured_output(schema, method=method, **kw)

        def listwise(chat: type[ChatOpenAI]) -> Any:
            llm = chat(
                model=ep.model,
                base_url=ep.base_url,
                api_key=SecretStr(ep.api_key),
                temperature=0,
                max_completion_tokens=ep.peer_max_tokens,
                timeout=ep.timeout,
            )
            return LLMListwiseRerank.from_llm(llm, top_n=top_n)

        # LangChain's default structured output (``json_schema``) first; a server that refuses
        # that format (llama-cpp-python's answers HTTP 500) gets the peer's other documented
        # route, a forced tool call, from then on. The switch is noted in the checkpoint row.
        rerankers = [listwise(ChatOpenAI), listwise(_ToolCallingChatOpenAI)]
        level = [0]
        notes = (None, "structured output by function calling (the server refused json_schema)")

        def lc_docs(inst: CompareInstance) -> list[Any]:
            return [Document(page_content=d, metadata={"gp_index": i}) for i, d in enumerate(inst.documents)]

        def lc_outcome(got: Sequence[Any]) -> MethodOutcome:
            out = _outcome([_doc_index(d) for d in got])
            out.note = notes[level[0]]
            return out

        def fall_back(err: openai.APIStatusError) -> None:
            """Switch to the tool call on a format refusal of the first route; else re-raise."""
            if level[0] or not _is_format_rejection(err):
                raise err
            level[0] = 1

        def run_lc(inst: CompareInstance) -> MethodOutcome:
            try:
                return lc_outcome(rerankers[level[0]].compress_documents(lc_docs(inst), inst.question))
            except openai.APIStatusError as err:
                fall_back(err)
            return lc_outcome(rerankers[1].compress_documents(lc_docs(inst), inst.question))

        async def arun_lc(inst: CompareInstance) -> MethodOutcome:
            try:
                return lc_outcome(await rerankers[level[0]].acompress_documents(lc_docs(inst), inst.question))
            except openai.APIStatusError as err:
                fall_back(err)
            return lc_outcome(await rerankers[1].acompress_documents(lc_docs(inst), inst.question))

        return run_lc, arun_lc
    if name in ("llamaindex-llmrerank", "llamaindex-rankgpt"):
        from llama_index.core.schema import NodeWithScore, TextNode
        from llama_index.llms.openai_like import OpenAILike

        li_llm = OpenAILike(
            model=ep.model,
            api_base=ep.base_url,
            api_key=ep.api_key,
            is_chat_model=True,
            context_window=8192,
            max_tokens=ep.peer_max_tokens,
            temperature=0.0,
            timeout=ep.timeout,
        )
        from llama_index.core.postprocessor import LLMRerank

        rankgpt: Any = None
        if name == "llamaindex-rankgpt":
            from llama_index.postprocessor.rankgpt_rerank import RankGPTRerank

            rankgpt = RankGPTRerank(llm=li_llm, top_n=top_n)

        def li_post(inst: CompareInstance) -> Any:
            if rankgpt is not None:
                return rankgpt
            return LLMRerank(
                llm=li_llm, top_n=top_n, choice_batch_size=len(inst.documents)
            )  # one call per query

        def li_nodes(inst: CompareInstance) -> list[Any]:
            # No metadata: both peers show node metadata to the model; the id is not shown.
            return [
                NodeWithScore(node=TextNode(text=d, id_=f"gp-doc-{i}"), score=None)
                for i, d in enumerate(inst.documents)
            ]

        def run_li(inst: CompareInstance) -> MethodOutcome:
            got = li_post(inst).postprocess_nodes(li_nodes(inst), query_str=inst.question)
            return _outcome([_node_index(nw.node) for nw in got])

        async def arun_li(inst: CompareInstance) -> MethodOutcome:
            got = await li_post(inst).apostprocess_nodes(li_nodes(inst), query_str=inst.question)
            return _outcome([_node_index(nw.node) for nw in got])

        return run_li, arun_li
    raise ValueError(f"unknown peer {name!r}; choose one of {', '.join(PEER_METHODS)}")
