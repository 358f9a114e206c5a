"""``python -m benchmarks async-path``: is the async path as fast as the sync one?

One :class:`~gold_panning_integrations.readers.OpenAIReader` reused for ``queries``
queries, each of ``prompts`` prompts sent at once (one round, the ``lowest-latency``
setting's shape), against a loopback OpenAI-compatible endpoint that answers every call
after ``latency`` seconds (:class:`benchmarks._loopback.LoopbackServer`), over HTTP/1.0
(a connection per request) and HTTP/1.1 keep-alive. Three ways to run the queries:

* ``sync``: ``GoldPanner.run`` (the reference);
* ``async, one loop``: ``GoldPanner.arun`` awaited for every query in one event loop;
* ``async, asyncio.run per query``: ``asyncio.run(panner.arun(...))`` for each query, as
  a script, a notebook cell or a framework bridge calls ``ainvoke``.

Each query's wall-clock seconds are measured; the figure is their median (p50) divided
by ``latency``: 1.0 is one call's worth of waiting, the least a round of prompts sent
together can take. The server sees ``prompts`` requests per query in every mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["MODES", "PROTOCOLS", "Figure", "main", "measure", "register", "run_queries"]

Mode = Literal["sync", "async-one-loop", "async-run-per-query"]
MODES: tuple[Mode, ...] = ("sync", "async-one-loop", "async-run-per-query")
PROTOCOLS: tuple[str, ...] = ("HTTP/1.0", "HTTP/1.1")

_LABELS = {
    "sync": "sync",
    "async-one-loop": "async, one loop",
    "async-run-per-query": "async, asyncio.run per query",
}


@dataclass(frozen=True)
class Figure:
    """One mode over one protocol: per-query wall-clock ``seconds`` (shape ``(queries,)``),
    their median ``p50`` and ``ratio`` = ``p50 / latency``, and ``requests``, what the
    server saw."""

    protocol: str
    mode: str
    seconds: tuple[float, ...]
    p50: float
    ratio: float
    requests: int


def _documents(n: int) -> list[str]:
    return [f"Passage {i}: the keeper of lighthouse {i} is named Keeper{i}." for i in range(n)]


def run_queries(panner: Any, mode: Mode, questions: Sequence[str], documents: Sequence[str]) -> list[float]:
    """Run ``questions`` through ``panner`` in ``mode``; the wall-clock seconds of each,
    shape ``(len(questions),)``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    seconds: list[float] = []
    if mode == "sync":
        for q in questions:
            t0 = time.perf_counter()
            panner.run(q, documents)
            seconds.append(time.perf_counter() - t0)
    elif mode == "async-run-per-query":
        for q in questions:
            t0 = time.perf_counter()
            asyncio.run(panner.arun(q, documents))
            seconds.append(time.perf_counter() - t0)
    else:

        async def all_in_one_loop() -> None:
            for q in questions:
                t0 = time.perf_counter()
                await panner.arun(q, documents)
                seconds.append(time.perf_counter() - t0)

        asyncio.run(all_in_one_loop())
    return seconds


def measure(
    protocol: str,
    mode: Mode,
    *,
    queries: int = 8,
    prompts: int = 8,
    documents: int = 20,
    latency: float = 0.4,
) -> Figure:
    """One :class:`Figure`: a fresh loopback server speaking ``protocol`` and one reader
    for ``queries`` queries of one round of ``prompts`` prompts over ``documents``
    documents, run in ``mode``."""
    from benchmarks._loopback import LoopbackServer, PositionBiasedModel
    from gold_panning_integrations import DetectorProfile, GoldPanner
    from gold_panning_integrations.readers import OpenAIReader

    profile = DetectorProfile.bundled("lost-in-the-middle")
    docs = _documents(documents)
    questions = [f"Who keeps lighthouse {i}?" for i in range(queries)]
    model = PositionBiasedModel(profile, {q: [docs[i % documents]] for i, q in enumerate(questions)})
    with LoopbackServer(model, latency=latency, capacity=4 * prompts, protocol=protocol) as server:  # type: ignore[arg-type]
        reader = OpenAIReader(model="loopback", base_url=server.base_url, api_key="not-needed", timeout=60.0)
        panner = GoldPanner(
            reader,
            profile,
            rounds=1,
            prompts_per_round=prompts,
            retriever_prior="none",
            on_failure="fallback",
        )
        seconds = run_queries(panner, mode, questions, docs)
        reader.close()
        server.wait_idle(timeout=5.0)
        requests = server.stats().requests
    p50 = statistics.median(seconds)
    return Figure(
        protocol, mode, tuple(round(s, 4) for s in seconds), round(p50, 4), round(p50 / latency, 3), requests
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("async-path", description=__doc__)
    p.add_argument("--queries", type=int, default=8, help="queries through one reader (default 8)")
    p.add_argument("--prompts", type=int, default=8, help="prompts sent at once per query (default 8)")
    p.add_argument("--documents", type=int, default=20, help="documents per query (default 20)")
    p.add_argument(
        "--latency", type=float, default=0.4, help="seconds the endpoint takes per call (default 0.4)"
    )
    p.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="which ways to run the queries (default all)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.getLogger("gold_panning_integrations").setLevel(logging.ERROR)
    figures = [
        measure(
            protocol,
            mode,
            queries=args.queries,
            prompts=args.prompts,
            documents=args.documents,
            latency=args.latency,
        )
        for protocol in PROTOCOLS
        for mode in args.modes
    ]
    if args.json:
        print(json.dumps([asdict(f) for f in figures]))
        return 0
    print(
        f"one OpenAIReader, {args.queries} queries of {args.prompts} prompts at once, {args.documents} documents, "
        f"endpoint latency {args.latency:g} s"
    )
    print(f"{'protocol':<9} {'mode':<30} {'p50 s':>7} {'p50 / latency':>14} {'max s':>7} {'requests':>9}")
    for f in figures:
        print(
            f"{f.protocol:<9} {_LABELS[f.mode]:<30} {f.p50:>7.3f} {f.ratio:>13.2f}x {max(f.seconds):>7.3f} "
            f"{f.requests:>9}"
        )
    return 0
