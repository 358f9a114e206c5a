"""``python -m benchmarks latency``: wall-clock seconds per query beside the peers, on a
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
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gold_panning_integrations.evaluate._instances import TASKS, CompareInstance, make_instances
from gold_panning_integrations.evaluate._methods import PEER_METHODS, Endpoint, peer_missing

from ._latency_measure import engine_time, measure, run_flood, summarize_latency
from ._latency_methods import (
    _BY_NAME,
    METHODS,
    MODEL_NAME,
    PATHS,
    AsyncQueryFn,
    LatencyMethod,
    QueryFn,
    base_calls,
    make_reader,
    panning_calls,
    relevance_model,
    setting_of,
)
from ._latency_report import acceptance, format_latency_markdown
from ._loopback import OVERFLOW, LoopbackServer

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
        "gp-defaults",
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
        task: A task of :func:`._instances.make_instances` (``kv``, ``nq``, ...).
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
    from gold_panning_integrations.profiles import load_profile

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
                from gold_panning_integrations.evaluate._methods import peer_methods

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
    from gold_panning_integrations._console import Progress, print_json

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
