"""``gold-panning bench latency``: wall-clock seconds per query beside the peers, on a
loopback server that plays one position-biased model for every method.

The server (:class:`~._loopback.LoopbackServer`) answers each call after ``--latency``
seconds, serves ``--capacity`` calls at once, and cites each shown document with the
detector profile's rate at its position (:class:`~._loopback.PositionBiasedModel`); it
answers each peer in the peer's own format from that same rule (:mod:`._peer_formats`),
so every method reads the same reader and accuracy differences are the methods'.

Every method in :data:`METHODS` runs on every query, on the sync path (``GoldPanner.run``,
the peers' ``compress_documents`` / ``postprocess_nodes``) and on the async path
(``GoldPanner.arun``, ``acompress_documents`` / ``apostprocess_nodes``), one query at a
time, methods and paths interleaved query by query so load on a shared machine falls on
all of them alike. Per method and path: p50 and p95 seconds per query (also as a multiple
of the per-call latency), top-1 and top-3, calls and prompt tokens per query (counted by
the server), 429s and errors.

Also in the report:

* **flood**: ``--flood-queries`` queries at once (``asyncio.gather`` of ``arun`` on the
  async path, a thread pool of ``run`` on the sync path) through one ``OpenAIReader``
  limited to ``--max-concurrency`` calls in flight, against a server that answers 429
  (with ``Retry-After``) above ``--capacity`` open requests: failed queries, the most
  requests open at once, the 429s;
* **engine**: the engine's own time per query (a reader that answers at once, 4 rounds)
  at ``--engine-n`` documents (:func:`.engine.panner_round`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..ir.metrics import wilson_interval
from ._instances import TASKS, CompareInstance, make_instances
from ._loopback import OVERFLOW, LoopbackServer, LoopbackStats, PositionBiasedModel
from ._methods import COST_SAVING, LATENCY_SETTING, PEER_METHODS, Endpoint, MethodOutcome, peer_missing

__all__ = [
    "DEFAULTS",
    "METHODS",
    "OPTIONS",
    "PATHS",
    "LatencyMethod",
    "Option",
    "engine_time",
    "format_latency_markdown",
    "main",
    "measure",
    "register",
    "relevance_model",
    "run_flood",
    "run_latency_bench",
    "summarize_latency",
]

logger = logging.getLogger(__name__)

PATHS: tuple[str, ...] = ("sync", "async")
MODEL_NAME = "loopback-position-biased"


@dataclass(frozen=True)
class LatencyMethod:
    """One row of the benchmark.

    Attributes:
        name: Name on the command line (``--methods``).
        label: Name in the report.
        kind: ``"base"`` (the input order, no call), ``"panning"`` (our
            :class:`~..engine.panner.Panner` with ``options``) or ``"peer"`` (a peer
            reranker through its own package, :func:`.compare.peer_methods`).
        options: :class:`~..engine.config.PanningConfig` options laid over the defaults
            (``"panning"`` only).
    """

    name: str
    label: str
    kind: Literal["base", "panning", "peer"]
    options: Mapping[str, Any] = field(default_factory=dict)


METHODS: tuple[LatencyMethod, ...] = (
    LatencyMethod("base", "base order", "base"),
    LatencyMethod(
        "psc-8",
        "PSC, 8 prompts at once",
        "panning",
        {"policy": "random", "prior": "uniform", "rounds": 1, "prompts_per_round": 8},
    ),
    LatencyMethod("gp-default", "GP defaults", "panning", {}),
    LatencyMethod("gp-latency", "GP, latency setting", "panning", dict(LATENCY_SETTING)),
    LatencyMethod(
        "gp-cost",
        "GP, cost-saving",
        "panning",
        {k: COST_SAVING[k] for k in ("stop_at", "min_rounds", "prune_below")},
    ),
    LatencyMethod("langchain-listwise", "LangChain LLMListwiseRerank", "peer"),
    LatencyMethod("llamaindex-llmrerank", "LlamaIndex LLMRerank", "peer"),
    LatencyMethod("llamaindex-rankgpt", "LlamaIndex RankGPTRerank", "peer"),
)
"""Every method of the benchmark, in report order: the one place their settings live."""

_BY_NAME = {m.name: m for m in METHODS}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


@dataclass(frozen=True)
class Option:
    """One option of the benchmark: its default and what it means (the bounds are
    checked once, in :func:`run_latency_bench`).

    Attributes:
        name: Keyword of :func:`run_latency_bench`; the CLI flag is ``--name`` with dashes.
        default: Default value.
        help: What the option does (the CLI appends the default).
        type: Parser of the CLI's text (None: the text as is).
        choices: Allowed values, if a fixed set.
    """

    name: str
    default: Any
    help: str
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None


OPTIONS: tuple[Option, ...] = (
    Option("latency", 0.5, "seconds each call takes on the loopback server", float),
    Option("capacity", 16, "calls the server serves at once", int),
    Option(
        "overflow",
        "queue",
        "above capacity in the per-query runs: wait for a slot, or answer 429 with "
        "Retry-After (the flood always answers 429)",
        choices=OVERFLOW,
    ),
    Option("retry_after", 1.0, "seconds in the server's Retry-After", float),
    Option("queries", 60, "queries (task instances)", int),
    Option("n", 20, "documents per query", int),
    Option("task", "kv", "task of the queries", choices=TASKS),
    Option("seed", 1, "seed of the queries, the panners and the loopback model", int),
    Option("profile", "smollm2-135m-kv", "detector profile of the loopback model and of our methods"),
    Option("max_concurrency", 16, "our reader's limit on calls in flight", int),
    Option("timeout", 60.0, "per-request deadline of every client, seconds", float),
    Option("flood_queries", 200, "queries sent at once in each flood run (0: no flood)", int),
    Option(
        "flood_method",
        "gp-latency",
        "the method the flood runs",
        choices=tuple(m.name for m in METHODS if m.kind == "panning"),
    ),
    Option(
        "engine_n",
        (20, 100),
        "document counts of the engine-time measurement, comma-separated (empty: none)",
        _int_list,
    ),
    Option("top_n", 3, "documents the peers return", int),
)
"""Every option of ``bench latency`` once: the CLI and :func:`run_latency_bench` read them here."""

DEFAULTS: dict[str, Any] = {o.name: o.default for o in OPTIONS}
"""Option name -> default."""


# ================================================================================ methods
QueryFn = Callable[[CompareInstance], MethodOutcome]
AsyncQueryFn = Callable[[CompareInstance], Coroutine[Any, Any, MethodOutcome]]


def resolved_config(method: LatencyMethod) -> Any:
    """The :class:`~..engine.config.PanningConfig` a panning method runs with."""
    from ..engine.config import PanningConfig

    return PanningConfig.from_options(None, **dict(method.options))


def setting_of(method: LatencyMethod) -> str:
    """``"rounds x prompts per round"`` of a panning method (its sequential calls and
    prompts sent together), ``"-"`` otherwise."""
    if method.kind != "panning":
        return "-"
    cfg = resolved_config(method)
    text = f"{cfg.rounds} x {cfg.prompts_per_round}"
    if cfg.stop_at is not None:
        text += f", stop_at={cfg.stop_at:g}"
    return text


def _failed_readings(result: Any) -> int:
    return sum(bool(r.failed) for t in result.rounds for r in t.readings)


def panning_calls(
    method: LatencyMethod, reader: Any, *, profile: Any, seed: int
) -> tuple[QueryFn, AsyncQueryFn]:
    """``(sync, async)`` query functions of a panning method: a fresh
    :class:`~..engine.panner.Panner` per query, its generator seeded by ``(seed,
    query index, method)``, so both paths send the same prompts. The panners start from
    the flat prior (``retriever_prior="none"``) unless the method's options say
    otherwise."""
    from ..engine.panner import Panner

    code = [m.name for m in METHODS].index(method.name) if method.name in _BY_NAME else len(METHODS)
    options = {"retriever_prior": "none", **method.options}

    def panner(inst: CompareInstance) -> Any:
        rng = np.random.default_rng([seed, inst.index, code])
        return Panner(reader, profile, rng=rng, on_failure="fallback", **options)

    def outcome(result: Any) -> MethodOutcome:
        return MethodOutcome(
            ranking=[int(i) for i in result.ranking],
            unusable=_failed_readings(result),
            note=result.stop_reason,
        )

    def run(inst: CompareInstance) -> MethodOutcome:
        return outcome(panner(inst).run(inst.question, inst.documents))

    async def arun(inst: CompareInstance) -> MethodOutcome:
        return outcome(await panner(inst).arun(inst.question, inst.documents))

    return run, arun


def base_calls() -> tuple[QueryFn, AsyncQueryFn]:
    """``(sync, async)`` query functions of the base order (no call)."""

    def run(inst: CompareInstance) -> MethodOutcome:
        return MethodOutcome(ranking=list(range(len(inst.documents))))

    async def arun(inst: CompareInstance) -> MethodOutcome:
        return run(inst)

    return run, arun


def relevance_model(instances: Sequence[CompareInstance], profile: Any, *, seed: int) -> PositionBiasedModel:
    """The loopback model of ``instances``: each question's gold documents are relevant."""
    model = PositionBiasedModel(profile, seed=seed)
    for inst in instances:
        model.add_relevant(inst.question, [inst.documents[g] for g in inst.gold])
    return model


def make_reader(base_url: str, *, max_concurrency: int | None, timeout: float) -> Any:
    """The ``OpenAIReader`` our methods use: cite mode, temperature 0, one call limit."""
    from ..readers.openai import OpenAIReader

    return OpenAIReader(
        model=MODEL_NAME,
        base_url=base_url,
        api_key="not-needed",
        mode="cite",
        temperature=0.0,
        max_tokens=256,
        timeout=timeout,
        max_concurrency=max_concurrency,
    )


# ============================================================================ measurement
def measure(
    instances: Sequence[CompareInstance],
    calls: Mapping[str, tuple[QueryFn, AsyncQueryFn]],
    *,
    server: LoopbackServer,
    paths: Sequence[str] = PATHS,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every method on every query on each path, one query at a time, methods and
    paths interleaved query by query; the async calls share one event loop.

    Args:
        instances: The queries.
        calls: Method name -> ``(sync, async)`` query functions.
        server: The loopback server all of them call (its counters are read around
            each query).
        paths: ``"sync"`` and/or ``"async"``.
        progress: Called with the number of finished (query, method, path) triples.

    Returns:
        One row per (query, method, path): ``{"instance", "method", "path", "seconds",
        "top1", "top3", "calls", "rejected", "errors", "prompt_tokens", "error",
        "unusable"}``; an exception is a miss with its type in ``error``.
    """
    bad = [p for p in paths if p not in PATHS]
    if bad:
        raise ValueError(f"unknown path(s) {bad}; choose from {', '.join(PATHS)}")
    rows: list[dict[str, Any]] = []
    loop = asyncio.new_event_loop()
    try:
        for inst in instances:
            for name, (sync, asyn) in calls.items():
                for path in paths:
                    before = server.stats()
                    error = None
                    t0 = time.perf_counter()
                    try:
                        out = sync(inst) if path == "sync" else loop.run_until_complete(asyn(inst))
                    except Exception as err:  # noqa: BLE001 - an exception is a miss; its type is recorded
                        logger.info(
                            "%s (%s) raised on query %d: %s: %s",
                            name,
                            path,
                            inst.index,
                            type(err).__name__,
                            err,
                        )
                        error, out = type(err).__name__, MethodOutcome(ranking=[])
                    seconds = time.perf_counter() - t0
                    rows.append(_row(inst, name, path, seconds, out, error, server.stats().minus(before)))
                    if progress is not None:
                        progress(len(rows))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return rows


def _row(
    inst: CompareInstance,
    name: str,
    path: str,
    seconds: float,
    out: MethodOutcome,
    error: str | None,
    used: LoopbackStats,
) -> dict[str, Any]:
    gold = set(inst.gold)
    rank = next((r for r, j in enumerate(out.ranking) if j in gold), None)
    return {
        "instance": inst.index,
        "method": name,
        "path": path,
        "seconds": seconds,
        "top1": rank is not None and rank < 1,
        "top3": rank is not None and rank < 3,
        "calls": used.answered,
        "rejected": used.rejected,
        "errors": used.errors,
        "prompt_tokens": used.prompt_tokens,
        "error": error,
        "unusable": int(out.unusable),
        "asked": used.asked,
    }


def summarize_latency(
    rows: Sequence[Mapping[str, Any]],
    *,
    latency: float,
    methods: Sequence[str],
    paths: Sequence[str] = PATHS,
) -> list[dict[str, Any]]:
    """One summary per (method, path), in ``methods`` then ``paths`` order.

    Returns:
        ``[{"method", "path", "queries", "p50", "p95", "p50_x_latency",
        "p95_x_latency", "top1", "top1_ci95", "top3", "top3_ci95", "calls_per_query",
        "prompt_tokens_per_query", "rejected", "errors", "exceptions", "unusable",
        "asked"}]``; seconds are per query, ``*_x_latency`` are multiples of ``latency``
        (None when it is 0).
    """
    out = []
    for m in methods:
        for p in paths:
            rs = [r for r in rows if r["method"] == m and r["path"] == p]
            if not rs:
                continue
            k = len(rs)
            secs = np.asarray([r["seconds"] for r in rs], dtype=float)
            p50, p95 = (float(np.percentile(secs, q)) for q in (50, 95))
            asked: dict[str, dict[str, int]] = {}
            for r in rs:
                for kind, forms in r.get("asked", {}).items():
                    for form, c in forms.items():
                        asked.setdefault(kind, {})[form] = asked.get(kind, {}).get(form, 0) + c
            d: dict[str, Any] = {
                "method": m,
                "path": p,
                "queries": k,
                "p50": round(p50, 4),
                "p95": round(p95, 4),
                "p50_x_latency": round(p50 / latency, 2) if latency > 0 else None,
                "p95_x_latency": round(p95 / latency, 2) if latency > 0 else None,
            }
            for key in ("top1", "top3"):
                hits = sum(bool(r[key]) for r in rs)
                d[key] = round(hits / k, 4)
                d[f"{key}_ci95"] = [round(x, 4) for x in wilson_interval(hits, k)]
            d["calls_per_query"] = round(sum(r["calls"] for r in rs) / k, 3)
            d["prompt_tokens_per_query"] = round(sum(r["prompt_tokens"] for r in rs) / k, 1)
            d["rejected"] = sum(r["rejected"] for r in rs)
            d["errors"] = sum(r["errors"] for r in rs)
            d["exceptions"] = sum(r["error"] is not None for r in rs)
            d["unusable"] = sum(r["unusable"] for r in rs)
            d["asked"] = asked
            out.append(d)
    return out


# ================================================================================== flood
def run_flood(
    instances: Sequence[CompareInstance],
    *,
    profile: Any,
    options: Mapping[str, Any],
    path: str,
    latency: float,
    capacity: int,
    max_concurrency: int,
    retry_after: float = 1.0,
    seed: int = 1,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Every query of ``instances`` at once through one reader limited to
    ``max_concurrency`` calls in flight, against a fresh loopback server that answers
    429 (with ``Retry-After: retry_after``) above ``capacity`` open requests.

    Args:
        instances: The queries (all sent at once).
        profile: Profile of the loopback model and of the panners.
        options: ``PanningConfig`` options of the panners.
        path: ``"async"`` (``asyncio.gather`` of ``GoldPanner.arun``) or ``"sync"`` (a
            thread pool of one thread per query running ``GoldPanner.run``).
        latency: Seconds per call.
        capacity: Requests the server serves at once; above it, 429.
        max_concurrency: The reader's limit on calls in flight.
        retry_after: Seconds the server asks a rejected client to wait.
        seed: Run seed (the panners' and the loopback model's).
        timeout: The reader's per-request deadline (seconds).

    Returns:
        ``{"path", "queries", "failed", "exceptions", "failed_readings", "unfinished",
        "max_open", "rejected", "calls", "wall_seconds", "top1", "max_concurrency",
        "capacity", "latency"}``. A query failed if it raised, did not finish within the
        deadline, or had a failed reading. The whole flood has a deadline derived from
        the work it holds (120 s plus four times the ideal time).
    """
    if path not in PATHS:
        raise ValueError(f"path must be 'sync' or 'async', got {path!r}")
    from ..engine.config import PanningConfig

    cfg = PanningConfig.from_options(None, **dict(options))
    per_query = cfg.rounds * cfg.prompts_per_round
    deadline = 120.0 + 4.0 * len(instances) * per_query * latency / max(1, min(max_concurrency, capacity))
    model = relevance_model(instances, profile, seed=seed)
    method = LatencyMethod("flood", "flood", "panning", dict(options))
    with LoopbackServer(
        model, latency=latency, capacity=capacity, overflow="429", retry_after=retry_after
    ) as srv:
        reader = make_reader(srv.base_url, max_concurrency=max_concurrency, timeout=timeout)
        sync, asyn = panning_calls(method, reader, profile=profile, seed=seed)
        t0 = time.perf_counter()
        results: list[Any]
        if path == "async":
            results = asyncio.run(_gather(asyn, reader, instances, deadline))
        else:
            pool = ThreadPoolExecutor(max_workers=len(instances), thread_name_prefix="flood")
            try:
                futures = [pool.submit(sync, inst) for inst in instances]
                wait(futures, timeout=deadline)
                results = [
                    (f.exception() or f.result()) if f.done() else TimeoutError("unfinished") for f in futures
                ]
            finally:
                pool.shutdown(wait=False, cancel_futures=True)  # past the deadline: report, do not hang
                reader.close()
        wall = time.perf_counter() - t0
        srv.wait_idle(timeout=max(5.0, 10 * latency))
        stats = srv.stats()
    exceptions = sum(isinstance(r, BaseException) and not isinstance(r, TimeoutError) for r in results)
    unfinished = sum(isinstance(r, TimeoutError) for r in results)
    outcomes = [r for r in results if isinstance(r, MethodOutcome)]
    failed_readings = sum(o.unusable for o in outcomes)
    hits = sum(
        bool(o.ranking) and o.ranking[0] in inst.gold
        for o, inst in zip(results, instances)
        if isinstance(o, MethodOutcome)
    )
    return {
        "path": path,
        "queries": len(instances),
        "failed": exceptions + unfinished + sum(o.unusable > 0 for o in outcomes),
        "exceptions": exceptions,
        "failed_readings": failed_readings,
        "unfinished": unfinished,
        "max_open": stats.max_open,
        "rejected": stats.rejected,
        "calls": stats.answered,
        "wall_seconds": round(wall, 2),
        "top1": round(hits / len(instances), 4) if instances else None,
        "max_concurrency": max_concurrency,
        "capacity": capacity,
        "latency": latency,
    }


async def _gather(
    asyn: AsyncQueryFn, reader: Any, instances: Sequence[CompareInstance], deadline: float
) -> list[Any]:
    """``asyncio.gather`` of every query (exceptions returned), within ``deadline`` seconds."""
    try:
        return await asyncio.wait_for(
            asyncio.gather(*(asyn(inst) for inst in instances), return_exceptions=True), deadline
        )
    except asyncio.TimeoutError:
        return [TimeoutError("unfinished")] * len(instances)
    finally:
        await reader.aclose()


# ================================================================================= engine
def engine_time(
    ns: Sequence[int], *, rounds: int = 4, profile: Any = "lost-in-the-middle", repeat: int = 15
) -> list[dict[str, Any]]:
    """The engine's own time per query: one :class:`~..engine.panner.Panner` run of
    ``rounds`` rounds with a reader that answers at once, at each ``n`` of ``ns``; the
    median over ``repeat`` batches of at least 0.1 s each (:func:`.engine.time_call`), so a
    stall of a shared machine moves a batch, not the median.

    Returns:
        ``[{"n", "rounds", "ms_per_query", "ms_with_construction"}]``: a run of a panner
        built once, and a run of a panner built for the query (what an integration does).
    """
    from ..engine.panner import Panner
    from ..profiles import load_profile
    from ..readers.simulated import FirstCitingReader
    from .engine import time_call

    prof = load_profile(profile)
    reader = FirstCitingReader()

    def one(n: int) -> dict[str, Any]:
        docs = [f"document {i}" for i in range(n)]
        panner = Panner(reader, prof, rounds=rounds, retriever_prior="none", rng=0)
        run = time_call(lambda: panner.run("question", docs), repeat=repeat, min_batch_seconds=0.1)
        built = time_call(
            lambda: Panner(reader, prof, rounds=rounds, retriever_prior="none", rng=0).run("question", docs),
            repeat=repeat,
            min_batch_seconds=0.1,
        )
        return {
            "n": n,
            "rounds": rounds,
            "ms_per_query": round(1000 * run, 3),
            "ms_with_construction": round(1000 * built, 3),
        }

    return [one(int(n)) for n in ns]


# ================================================================================ the run
def _check_options(
    *,
    latency: float,
    capacity: int,
    overflow: str,
    retry_after: float,
    queries: int,
    n: int,
    max_concurrency: int,
    timeout: float,
    flood_queries: int,
    flood_method: str,
    paths: Sequence[str],
) -> None:
    """Validate :func:`run_latency_bench`'s options; the message names the bad value."""
    for name, value, low in (
        ("latency", latency, 0.0),
        ("retry_after", retry_after, 0.0),
        ("timeout", timeout, None),
    ):
        number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        if not number or (value <= 0 if low is None else value < low):
            bound = "> 0" if low is None else f">= {low:g}"
            raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    for name, value, low in (
        ("capacity", capacity, 1),
        ("queries", queries, 1),
        ("n", n, 2),
        ("max_concurrency", max_concurrency, 1),
        ("flood_queries", flood_queries, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if overflow not in OVERFLOW:
        raise ValueError(f"overflow must be 'queue' or '429', got {overflow!r}")
    bad = [p for p in paths if p not in PATHS]
    if bad or not paths:
        raise ValueError(f"paths must be a non-empty subset of {', '.join(PATHS)}, got {list(paths)!r}")
    panning = [m.name for m in METHODS if m.kind == "panning"]
    if flood_queries and flood_method not in panning:
        raise ValueError(
            f"flood_method must be one of our panning methods ({', '.join(panning)}), got {flood_method!r}"
        )


def run_latency_bench(
    *,
    methods: Sequence[str] | None = None,
    paths: Sequence[str] = PATHS,
    latency: float = DEFAULTS["latency"],
    capacity: int = DEFAULTS["capacity"],
    overflow: str = DEFAULTS["overflow"],
    retry_after: float = DEFAULTS["retry_after"],
    queries: int = DEFAULTS["queries"],
    n: int = DEFAULTS["n"],
    task: str = DEFAULTS["task"],
    seed: int = DEFAULTS["seed"],
    profile: Any = DEFAULTS["profile"],
    max_concurrency: int = DEFAULTS["max_concurrency"],
    timeout: float = DEFAULTS["timeout"],
    flood_queries: int = DEFAULTS["flood_queries"],
    flood_method: str = DEFAULTS["flood_method"],
    engine_n: Sequence[int] = DEFAULTS["engine_n"],
    top_n: int = DEFAULTS["top_n"],
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring) and return a JSON-ready report.

    Args:
        methods: Names from :data:`METHODS` (None: all). A peer whose packages are
            missing is reported as skipped.
        paths: ``"sync"`` and/or ``"async"``.
        latency: Seconds per call of the loopback model.
        capacity: Calls the server serves at once.
        overflow: ``"queue"`` or ``"429"`` above capacity (the per-query runs).
        retry_after: Seconds in the server's ``Retry-After``.
        queries: Task instances (queries), each of ``n`` documents.
        task: A task of :func:`.compare.make_instances` (``kv``, ``nq``, ...).
        seed: Instance seed, also the panners' and the loopback model's.
        profile: Detector profile (object, bundled name or path) of the loopback model
            and of our methods.
        max_concurrency: Our reader's limit on calls in flight.
        timeout: Per-request deadline of every client (seconds).
        flood_queries: Queries of the flood runs (0: no flood).
        flood_method: The method (from :data:`METHODS`, panning) the flood runs.
        engine_n: Document counts of the engine-time measurement (empty: none).
        top_n: Documents the peers return.
        progress: Called with the number of finished (query, method, path) triples.
        on_total: Called once with the number of such triples.

    Returns:
        ``{"settings", "call_latency", "methods": [summary rows], "skipped", "flood":
        [...], "engine": [...], "checks", "seconds"}``.
    """
    from ..profiles import load_profile

    names = list(methods) if methods is not None else [m.name for m in METHODS]
    unknown = [m for m in names if m not in _BY_NAME]
    if unknown or not names:
        raise ValueError(
            f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(m.name for m in METHODS)}"
        )
    _check_options(
        latency=latency,
        capacity=capacity,
        overflow=overflow,
        retry_after=retry_after,
        queries=queries,
        n=n,
        max_concurrency=max_concurrency,
        timeout=timeout,
        flood_queries=flood_queries,
        flood_method=flood_method,
        paths=paths,
    )
    prof = load_profile(profile)
    skipped = {m: why for m in names if m in PEER_METHODS and (why := peer_missing(m)) is not None}
    t_start = time.perf_counter()
    instances = make_instances(task, n=n, instances=queries, seed=seed)
    model = relevance_model(instances, prof, seed=seed)
    with LoopbackServer(
        model,
        latency=latency,
        capacity=capacity,
        overflow=overflow,  # type: ignore[arg-type]
        retry_after=retry_after,
        model_name=MODEL_NAME,
    ) as srv:
        reader = make_reader(srv.base_url, max_concurrency=max_concurrency, timeout=timeout)
        ep = Endpoint(srv.base_url, MODEL_NAME, timeout=timeout)
        calls: dict[str, tuple[QueryFn, AsyncQueryFn]] = {}
        for name in names:
            if name in skipped:
                continue
            method = _BY_NAME[name]
            if method.kind == "base":
                calls[name] = base_calls()
            elif method.kind == "panning":
                calls[name] = panning_calls(method, reader, profile=prof, seed=seed)
            else:
                from ._methods import peer_methods

                calls[name] = peer_methods(name, ep, top_n=top_n)
        call_seconds = _call_seconds(reader, instances[0], srv)
        if on_total is not None:
            on_total(len(instances) * len(calls) * len(paths))
        rows = measure(instances, calls, server=srv, paths=paths, progress=progress)
        reader.close()
        totals = srv.stats()
    summary = summarize_latency(rows, latency=latency, methods=list(calls), paths=paths)
    flood = []
    if flood_queries:
        flood_instances = make_instances(task, n=n, instances=flood_queries, seed=seed + 1)
        for p in paths:
            flood.append(
                run_flood(
                    flood_instances,
                    profile=prof,
                    options=_BY_NAME[flood_method].options,
                    path=p,
                    latency=latency,
                    capacity=capacity,
                    max_concurrency=max_concurrency,
                    retry_after=retry_after,
                    seed=seed,
                    timeout=timeout,
                )
            )
    engine = engine_time(engine_n) if engine_n else []
    settings = {
        "latency": latency,
        "capacity": capacity,
        "overflow": overflow,
        "retry_after": retry_after,
        "queries": len(instances),
        "n": n,
        "task": task,
        "seed": seed,
        "profile": str(profile) if isinstance(profile, str) else "(a profile object)",
        "max_concurrency": max_concurrency,
        "timeout": timeout,
        "paths": list(paths),
        "flood_queries": flood_queries,
        "flood_method": flood_method,
        "top_n": top_n,
        "method_settings": {
            m: {
                "label": _BY_NAME[m].label,
                "kind": _BY_NAME[m].kind,
                "options": dict(_BY_NAME[m].options),
                "setting": setting_of(_BY_NAME[m]),
            }
            for m in names
        },
    }
    return {
        "settings": settings,
        "call_latency": {"configured": latency, "measured_p50": call_seconds},
        "methods": summary,
        "skipped": skipped,
        "server": {"unknown_question": totals.unknown_question, "errors": totals.errors},
        "flood": flood,
        "engine": engine,
        "checks": acceptance(summary, flood, latency=latency),
        "seconds": round(time.perf_counter() - t_start, 1),
    }


def _call_seconds(
    reader: Any, inst: CompareInstance, server: LoopbackServer, *, calls: int = 5
) -> float | None:
    """Median seconds of one call through ``reader`` (all ``n`` documents shown): the
    per-call latency as a client sees it. None when a call fails."""
    secs = []
    for i in range(calls):
        t0 = time.perf_counter()
        reading = reader.read(inst.question, inst.documents, labels=list(range(1, len(inst.documents) + 1)))
        secs.append(time.perf_counter() - t0)
        if reading.failed:
            logger.warning("a reference call failed: %s", reading.error)
            return None
    return round(float(np.median(secs)), 4)


def acceptance(
    summary: Sequence[Mapping[str, Any]], flood: Sequence[Mapping[str, Any]], *, latency: float
) -> list[dict[str, Any]]:
    """The issue's acceptance checks on this run, each ``{"check", "path", "value", "met"}``:
    the latency setting's p50 at most 2.3x the per-call latency, its top-1 at least
    PSC-8's, and a flood with no failed query and at most ``max_concurrency`` requests open."""
    by = {(d["method"], d["path"]): d for d in summary}
    out = []
    for path in PATHS:
        lat, psc = by.get(("gp-latency", path)), by.get(("psc-8", path))
        if lat is not None and latency > 0:
            out.append(
                {
                    "check": "gp-latency p50 <= 2.3 x call latency",
                    "path": path,
                    "value": lat["p50_x_latency"],
                    "met": lat["p50"] <= 2.3 * latency,
                }
            )
        if lat is not None and psc is not None:
            out.append(
                {
                    "check": "gp-latency top-1 >= psc-8 top-1",
                    "path": path,
                    "value": [lat["top1"], psc["top1"]],
                    "met": lat["top1"] >= psc["top1"],
                }
            )
    for f in flood:
        out.append(
            {
                "check": f"flood of {f['queries']}: no failed query, open <= {f['max_concurrency']}",
                "path": f["path"],
                "value": [f["failed"], f["max_open"]],
                "met": f["failed"] == 0 and f["max_open"] <= f["max_concurrency"],
            }
        )
    return out


# ============================================================================== reporting
def _ci(d: Mapping[str, Any], key: str) -> str:
    lo, hi = d[f"{key}_ci95"]
    return f"{d[key]:.2f} [{lo:.2f}, {hi:.2f}]"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def format_latency_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: settings, the per-method table, formats asked, the flood,
    the engine's time and the acceptance checks."""
    s = report["settings"]
    lat = s["latency"]
    ms = s["method_settings"]
    cl = report["call_latency"]
    measured = "-" if cl["measured_p50"] is None else f"{cl['measured_p50']:.3f} s"
    lines = [
        (
            f"Loopback model: profile `{s['profile']}`, {lat:g} s per call, {s['capacity']} calls at once "
            f"(above: {s['overflow']}); task `{s['task']}`, {s['n']} documents, {s['queries']} queries, seed {s['seed']}; "
            f"our reader limited to {s['max_concurrency']} calls in flight. One call through our reader: {measured} (p50)."
        ),
        "",
        (
            "| method | setting | path | p50 s/q | p50 / call | p95 s/q | top-1 [95% CI] | top-3 [95% CI] "
            "| calls/q | prompt tok/q | 429s | errors |"
        ),
        "|" + "---|" * 12,
    ]
    for d in report["methods"]:
        meta = ms.get(d["method"], {"label": d["method"], "setting": "-"})
        err = d["exceptions"] + d["errors"]
        lines.append(
            f"| {meta['label']} | {meta['setting']} | {d['path']} | {d['p50']:.2f} | {_x(d['p50_x_latency'])} "
            f"| {d['p95']:.2f} | {_ci(d, 'top1')} | {_ci(d, 'top3')} | {d['calls_per_query']:.2f} "
            f"| {d['prompt_tokens_per_query']:,.0f} | {d['rejected']} | {err} |"
        )
    for m, why in report.get("skipped", {}).items():
        lines.append(f"| {ms.get(m, {}).get('label', m)} | skipped: {why} |" + " |" * 10)
    asked = {}
    for d in report["methods"]:
        if d["asked"] and d["path"] == "sync":
            asked[d["method"]] = "; ".join(
                f"{k}: " + ", ".join(f"{f} x{c}" for f, c in v.items()) for k, v in d["asked"].items()
            )
    if asked:
        lines += [
            "",
            "What each method asked the server (format: how the answer was asked for x calls, sync path):",
            "",
        ]
        lines += [f"- {ms.get(m, {}).get('label', m)}: {a}" for m, a in asked.items()]
    if report.get("flood"):
        lines += [
            "",
            "Flood: all queries at once through one reader, the server answering 429 above its capacity:",
            "",
            (
                "| path | queries | max in flight | capacity | failed | most open at once | 429s | calls "
                "| wall s | top-1 |"
            ),
            "|" + "---|" * 10,
        ]
        for f in report["flood"]:
            lines.append(
                f"| {f['path']} | {f['queries']} | {f['max_concurrency']} | {f['capacity']} | {f['failed']} "
                f"| {f['max_open']} | {f['rejected']} | {f['calls']} | {f['wall_seconds']:.1f} "
                f"| {f['top1']:.2f} |"
            )
    if report.get("engine"):
        lines += [
            "",
            "The engine's own time per query (a reader that answers at once; median of batches):",
            "",
            "| documents | rounds | ms per query | ms per query, panner built for it |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {e['n']} | {e['rounds']} | {e['ms_per_query']:.2f} | {e['ms_with_construction']:.2f} |"
            for e in report["engine"]
        ]
    if report.get("checks"):
        lines += ["", "Acceptance checks:", ""]
        lines += [
            f"- {'met' if c['met'] else 'NOT met'}: {c['check']} ({c['path']}: {c['value']})"
            for c in report["checks"]
        ]
    return "\n".join(lines)


# ==================================================================================== CLI
def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in names if x not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(bad) or '(none)'}; choose from {', '.join(known)}"
        )
    return names


def register(sub: Any) -> None:
    p = sub.add_parser(
        "latency",
        help="seconds per query beside the peers, on a loopback server with a per-call latency",
        description=(
            "Wall-clock seconds per query (p50, p95), top-1/top-3, calls and prompt tokens of base order, PSC, "
            "Gold Panning settings and the LangChain/LlamaIndex LLM rerankers, on the sync and the async path, "
            "against a loopback OpenAI-compatible server that plays a position-biased model from a detector "
            "profile with a fixed per-call latency and capacity. Also: a flood of queries at once through one "
            "reader limited in calls in flight, and the engine's own time per query."
        ),
    )
    for o in OPTIONS:
        shown = ",".join(map(str, o.default)) if isinstance(o.default, tuple) else o.default
        kwargs: dict[str, Any] = {"default": o.default, "help": f"{o.help} (default {shown})"}
        if o.type is not None:
            kwargs["type"] = o.type
        if o.choices is not None:
            kwargs["choices"] = o.choices
        p.add_argument("--" + o.name.replace("_", "-"), **kwargs)
    names = [m.name for m in METHODS]
    p.add_argument(
        "--methods",
        type=lambda t: _names(t, names, "method(s)"),
        default=names,
        help=f"comma-separated subset of {','.join(names)} (default: all)",
    )
    p.add_argument(
        "--paths",
        type=lambda t: _names(t, PATHS, "path(s)"),
        default=list(PATHS),
        help="comma-separated subset of sync,async (default: both)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the Markdown report")
    p.add_argument(
        "--output",
        default=None,
        metavar="FILE",
        help="also write the JSON report to FILE (the Markdown report still goes to stdout)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from .._console import Progress, print_json

    bar = Progress(1, label="bench latency")
    try:
        report = run_latency_bench(
            methods=args.methods,
            paths=args.paths,
            **{o.name: getattr(args, o.name) for o in OPTIONS},
            progress=bar.update,
            on_total=lambda t: setattr(bar, "total", t),
        )
    finally:
        bar.close()
    for m, why in report["skipped"].items():
        sys.stderr.write(f"bench latency: skipped {m}: {why}\n")
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print_json(report)
        return 0
    print(f"bench latency: {report['seconds']} s")
    print()
    print(format_latency_markdown(report))
    return 0
