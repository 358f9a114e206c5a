"""What ``python -m benchmarks latency`` measures: seconds per query, one query at a time,
methods and paths interleaved (:func:`measure`, summarised by :func:`summarize_latency`);
many queries at once through one reader (:func:`run_flood`); and the engine's own time
per query (:func:`engine_time`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from gold_panning_integrations.evaluate._instances import CompareInstance
from gold_panning_integrations.evaluate._methods import MethodOutcome
from gold_panning_integrations.ir.ranking_metrics import wilson_interval

from ._latency_methods import (
    PATHS,
    AsyncQueryFn,
    LatencyMethod,
    QueryFn,
    make_reader,
    panning_calls,
    relevance_model,
)
from ._loopback import LoopbackServer, LoopbackStats

__all__ = ["engine_time", "measure", "run_flood", "summarize_latency"]

logger = logging.getLogger("gold_panning_integrations.bench.latency")
"""Logs under the command's name (``bench latency``), as before this module was split out."""


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
    from gold_panning_integrations.engine.config import PanningConfig

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
    """The engine's own time per query: one :class:`~gold_panning_integrations.GoldPanner` run of
    ``rounds`` rounds with a reader that answers at once, at each ``n`` of ``ns``; the
    median over ``repeat`` batches of at least 0.1 s each (:func:`.engine.time_call`), so a
    stall of a shared machine moves a batch, not the median.

    Returns:
        ``[{"n", "rounds", "ms_per_query", "ms_with_construction"}]``: a run of a panner
        built once, and a run of a panner built for the query (what an integration does).
    """
    from benchmarks._readers import FirstCitingReader
    from gold_panning_integrations.panning import GoldPanner
    from gold_panning_integrations.profiles import load_profile

    from .engine import time_call

    prof = load_profile(profile)
    reader = FirstCitingReader()

    def one(n: int) -> dict[str, Any]:
        docs = [f"document {i}" for i in range(n)]
        panner = GoldPanner(reader, prof, rounds=rounds, prompts_per_round=1, retriever_prior="none", rng=0)
        run = time_call(lambda: panner.run("question", docs), repeat=repeat, min_batch_seconds=0.1)
        built = time_call(
            lambda: GoldPanner(
                reader, prof, rounds=rounds, prompts_per_round=1, retriever_prior="none", rng=0
            ).run("question", docs),
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
