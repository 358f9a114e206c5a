"""``python -m benchmarks reliability``: what a reader does when its endpoint misbehaves.

Five faults, each against a fresh loopback OpenAI-compatible endpoint
(:class:`benchmarks._loopback.LoopbackServer`) and a fresh
:class:`~gold_panning_integrations.readers.OpenAIReader` with its defaults unless said:

* ``hang``: the endpoint never answers in time (``timeout=2``), one ``GoldPanner`` query
  with the defaults (2 rounds of 3 prompts, 3 attempts): the query's seconds, requests and
  the error it ends with;
* ``429``: one reading whose first request is answered HTTP 429 with ``Retry-After: 1``:
  seconds, attempts, requests (the wait honours the header);
* ``500``: one reading whose first two requests are answered HTTP 500 (the default
  backoff): seconds, attempts, requests;
* ``rate limit``: 5 requests per 0.5 s window (the reader's limit scaled down from a
  minute), 20 readings from 8 threads: the most requests that reached the server in any
  0.5 s window, and the seconds;
* ``cancel``: a ``GoldPanner.arun`` query of 3 prompts against an endpoint that answers
  after 5 s, cancelled 0.3 s after its 3 requests reached the server: seconds from the
  cancel to the task's end, slots still held by the reader afterwards, requests the
  server saw dropped by their client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["FAULTS", "main", "max_in_window", "measure", "register"]

FAULTS: tuple[str, ...] = ("hang", "429", "500", "rate limit", "cancel")
DOCS = [f"Passage {i}: the keeper of lighthouse {i} is named Keeper{i}." for i in range(6)]
QUESTION = "Who keeps lighthouse 2?"


def max_in_window(times: Sequence[float], period: float) -> int:
    """The most of ``times`` (seconds) in any half-open window ``(t - period, t]``."""
    ordered = sorted(times)
    best = start = 0
    for end, t in enumerate(ordered):
        while ordered[start] <= t - period:
            start += 1
        best = max(best, end - start + 1)
    return best


def _server(latency: float, **kwargs: Any) -> Any:
    from benchmarks._loopback import LoopbackServer, PositionBiasedModel
    from gold_panning_integrations import DetectorProfile

    model = PositionBiasedModel(DetectorProfile.bundled("lost-in-the-middle"), {QUESTION: [DOCS[2]]})
    return LoopbackServer(model, latency=latency, **kwargs)


def _reader(server: Any, **kwargs: Any) -> Any:
    from gold_panning_integrations.readers import OpenAIReader

    return OpenAIReader(model="loopback", base_url=server.base_url, api_key="not-needed", **kwargs)


def _hang(timeout: float) -> dict[str, Any]:
    from gold_panning_integrations import GoldPanner

    with _server(latency=30.0) as server:
        panner = GoldPanner(_reader(server, timeout=timeout), "lost-in-the-middle")
        t0 = time.perf_counter()
        try:
            panner.run(QUESTION, DOCS)
            error = "none"
        except Exception as err:  # noqa: BLE001 - what the query ends with is the figure
            error = f"{type(err).__name__}: {err}"
        seconds = time.perf_counter() - t0
        requests = server.stats().requests
    return {"seconds": round(seconds, 2), "requests": requests, "error": error}


def _faulted(*codes: int, retry_after: float = 1.0) -> dict[str, Any]:
    with _server(latency=0.0, retry_after=retry_after) as server:
        reader = _reader(server)
        reader.read("warm-up?", DOCS[:2])  # the client's first request (its setup) is not the figure
        server.fail_next(*codes)
        before = server.stats().requests
        t0 = time.perf_counter()
        reading = reader.read(QUESTION, DOCS)
        seconds = time.perf_counter() - t0
        requests = server.stats().requests - before
    return {
        "seconds": round(seconds, 2),
        "attempts": reading.attempts,
        "requests": requests,
        "failed": reading.failed,
    }


def _rate_limit(requests: int, period: float, readings: int) -> dict[str, Any]:
    from gold_panning_integrations.readers import RateLimit

    with _server(latency=0.05) as server:
        reader = _reader(server, wait=0, timeout=10.0)
        reader.read("warm-up?", DOCS[:2])
        reader.rate_limit = RateLimit(requests, period=period)
        start = len(server.arrivals())
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            out = list(pool.map(lambda i: reader.read(f"q{i}?", DOCS[:2]), range(readings)))
        seconds = time.perf_counter() - t0
        arrived = server.arrivals()[start:]
    return {
        "seconds": round(seconds, 2),
        "requests": len(arrived),
        "max_in_window": max_in_window(arrived, period),
        "limit": requests,
        "failed": sum(r.failed for r in out),
    }


def _cancel(after: float) -> dict[str, Any]:
    import openai  # noqa: F401 - imported before the clock starts: the import is not the figure

    from gold_panning_integrations import GoldPanner

    with _server(latency=5.0) as server:
        reader = _reader(server, timeout=30.0)
        panner = GoldPanner(reader, "lost-in-the-middle", rounds=1, prompts_per_round=3)

        async def main() -> float:
            task = asyncio.ensure_future(panner.arun(QUESTION, DOCS))
            end = time.monotonic() + 10.0
            while server.stats().open < 3 and time.monotonic() < end:  # the 3 requests sent
                await asyncio.sleep(0.01)
            await asyncio.sleep(after)
            t0 = time.perf_counter()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            return time.perf_counter() - t0

        seconds = asyncio.run(main())
        server.wait_idle(timeout=5.0)
        stats = server.stats()
    return {
        "seconds_to_cancel": round(seconds, 3),
        "slots_held_after": reader.call_limit.in_flight,
        "requests": stats.requests,
        "dropped_by_client": stats.abandoned,
        "answered": stats.answered,
    }


def measure(
    faults: Sequence[str] = FAULTS,
    *,
    hang_timeout: float = 2.0,
    retry_after: float = 1.0,
    rate: tuple[int, float, int] = (5, 0.5, 20),
    cancel_after: float = 0.3,
) -> dict[str, dict[str, Any]]:
    """The figures of each fault in ``faults`` (see the module docstring), by name; the
    knobs are the docstring's figures (``rate``: requests per window, the window in
    seconds, readings)."""
    runs = {
        "hang": lambda: _hang(hang_timeout),
        "429": lambda: _faulted(429, retry_after=retry_after),
        "500": lambda: _faulted(500, 500),
        "rate limit": lambda: _rate_limit(*rate),
        "cancel": lambda: _cancel(cancel_after),
    }
    unknown = sorted(set(faults) - set(runs))
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}; choose from {', '.join(FAULTS)}")
    return {name: runs[name]() for name in faults}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("reliability", description=__doc__)
    p.add_argument(
        "--faults", nargs="+", choices=FAULTS, default=list(FAULTS), help="which faults (default all)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.getLogger("gold_panning_integrations").setLevel(logging.CRITICAL)
    figures = measure(args.faults)
    if args.json:
        print(json.dumps(figures))
        return 0
    for name, row in figures.items():
        print(f"{name:<11} " + ", ".join(f"{k}={v}" for k, v in row.items()))
    return 0
