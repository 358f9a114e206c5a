"""Requests and tokens per minute, shared by every query through a reader and held where
the provider counts them (at the server, however late a request arrives): a fake clock
for the rules and an event-driven simulation of late arrivals (no test waits for real),
one bounded real-time loopback test, the literal 12 a minute on a loaded machine (slow),
and a LangChain chat model's own ``rate_limiter`` honoured through ``ChatModelReader``."""

from __future__ import annotations

import asyncio
import functools
import heapq
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from openai_server import FakeOpenAIServer, ok

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.readers._limits import RateLimit
from gold_panning_integrations.readers.openai import OpenAIReader


class FakeClock:
    """Monotonic seconds that move only when someone sleeps (threads and tasks alike)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)
        await asyncio.sleep(0)


def _limit(clock: FakeClock, rpm: int | None = None, tpm: int | None = None) -> RateLimit:
    return RateLimit(rpm, tpm, clock=clock, sleep=clock.sleep, asleep=clock.asleep)


def _max_in_window(times: list[float], period: float = 60.0) -> int:
    """The most times in any half-open window ``[t, t + period)``."""
    ts = sorted(times)
    best = 0
    j = 0
    for i, t in enumerate(ts):
        while ts[j] <= t - period:
            j += 1
        best = max(best, i - j + 1)
    return best


def _sent_and_settled(limit: RateLimit, tokens: int = 0, reported: int | None = None) -> float:
    """Admit a request, complete it at once (as a reader's ``finally`` does); its admission time."""
    entry = limit.acquire(tokens)
    assert entry is not None
    limit.settle(entry, reported)
    return entry.at


# ------------------------------------------------------------------------ the rules
def test_requests_per_minute_admits_in_whole_windows() -> None:
    clock = FakeClock()
    limit = _limit(clock, rpm=3)
    times = [_sent_and_settled(limit) for _ in range(7)]
    assert times == [0.0, 0.0, 0.0, 60.0, 60.0, 60.0, 120.0]
    assert limit.waited == 120.0


def test_a_request_in_flight_holds_its_place_until_a_period_after_it_completes() -> None:
    clock = FakeClock()
    limit = _limit(clock, rpm=2)
    first, second = limit.acquire(), limit.acquire()
    assert first is not None and second is not None and limit.in_flight == 2
    # nothing completed: the third waits the least it could, a whole period, and asks again
    assert limit.try_acquire() == (60.0, None)
    clock.now = 5.0
    limit.settle(first, None)  # completed at 5: its place frees at 65, not at 60
    clock.now = 60.0
    assert limit.try_acquire() == (5.0, None)
    clock.now = 65.0
    third = limit.acquire()
    assert third is not None and third.at == 65.0
    assert limit.try_acquire() == (60.0, None)  # the second is still in flight


def test_tokens_per_minute_counts_the_estimate_then_the_reported_usage() -> None:
    clock = FakeClock()
    limit = _limit(clock, tpm=100)
    first = limit.acquire(60)
    assert first is not None and first.at == 0.0
    assert limit.try_acquire(60) == (60.0, None)  # 60 + 60 > 100, the first still in flight
    limit.settle(first, None)  # completed at 0, nothing reported: its 60 count until 60
    second = limit.acquire(60)  # waits for the first to leave the window
    assert second is not None and second.at == 60.0
    limit.settle(second, 10)  # the server reported 10 tokens: 90 left in this window
    third = limit.acquire(90)
    assert third is not None and third.at == 60.0
    limit.settle(third, None)  # nothing reported: the estimate stands
    assert _sent_and_settled(limit, 1) == 120.0


def test_a_request_larger_than_the_token_budget_goes_alone() -> None:
    clock = FakeClock()
    limit = _limit(clock, tpm=100)
    assert _sent_and_settled(limit, 500) == 0.0
    assert _sent_and_settled(limit, 500) == 60.0  # only once the window is empty
    assert _sent_and_settled(limit, 1) == 120.0


# ------------------------------------------------- at the server: late arrivals, simulated
def _simulate(
    limit: RateLimit,
    clock: FakeClock,
    *,
    clients: int,
    each: int,
    lag: Any,
    service: Any,
    settle_at_admission: bool = False,
) -> tuple[list[float], list[float]]:
    """Event-driven run of ``clients`` callers, each sending ``each`` requests one after
    another through ``limit`` (asking again when told to wait, as ``acquire`` does). A
    request reaches the server ``lag()`` seconds after its admission and completes
    ``service()`` seconds after that. ``settle_at_admission``: the old accounting (a
    request counted from its admission only). Returns (admissions, arrivals)."""
    events: list[tuple[float, int, int, Any]] = [(0.0, c, c, None) for c in range(clients)]
    heapq.heapify(events)
    left = [each] * clients
    seq = clients
    admitted: list[float] = []
    arrived: list[float] = []
    while events:
        t, _, client, entry = heapq.heappop(events)
        clock.now = t
        if entry is not None:  # the request completed: settle it, the client asks again
            limit.settle(entry, None)
            left[client] -= 1
            entry = None
            if not left[client]:
                continue
        wait, entry = limit.try_acquire()
        if entry is None:
            seq += 1
            heapq.heappush(events, (t + wait, seq, client, None))
            continue
        if settle_at_admission:
            limit.settle(entry, None)
        admitted.append(t)
        arrival = t + lag()
        arrived.append(arrival)
        seq += 1
        heapq.heappush(events, (arrival + service(), seq, client, entry))
    assert len(admitted) == clients * each  # every request went, none starved
    return admitted, arrived


@pytest.mark.parametrize("seed", range(20))
def test_no_window_at_the_server_holds_more_than_the_limit(seed: int) -> None:
    """4 requests per 2 s, 6 callers of 12 requests, each arriving 0-1.5 s after its
    admission (a loaded client) and answered 0-3 s later: no 2-second window at the
    server ever holds more than 4 arrivals. The proof is in RateLimit's docstring."""
    rng = np.random.default_rng(seed)
    clock = FakeClock()
    limit = RateLimit(4, period=2.0, clock=clock)
    admitted, arrived = _simulate(
        limit, clock, clients=6, each=12, lag=lambda: rng.uniform(0, 1.5), service=lambda: rng.uniform(0, 3.0)
    )
    assert _max_in_window(arrived, period=2.0) <= 4
    assert _max_in_window(admitted, period=2.0) <= 4


def test_counting_admissions_only_lets_late_arrivals_break_the_limit() -> None:
    """The same traffic with a request counted from its admission only (the old rule):
    the server sees more than 4 in some 2-second window for most seeds."""
    broken = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        clock = FakeClock()
        limit = RateLimit(4, period=2.0, clock=clock)
        _, arrived = _simulate(
            limit,
            clock,
            clients=6,
            each=12,
            lag=functools.partial(rng.uniform, 0, 1.5),
            service=functools.partial(rng.uniform, 0, 3.0),
            settle_at_admission=True,
        )
        broken += _max_in_window(arrived, period=2.0) > 4
    assert broken >= 10, broken


def test_late_arrivals_by_hand() -> None:
    """2 per 10 s; each request arrives 1 s after admission and completes 2 s later (at 3):
    the next two are admitted at 13 = 3 + 10 and arrive at 14, 13 s after the first two."""
    clock = FakeClock()
    limit = RateLimit(2, period=10.0, clock=clock)
    admitted, arrived = _simulate(limit, clock, clients=2, each=3, lag=lambda: 1.0, service=lambda: 2.0)
    assert admitted == [0.0, 0.0, 13.0, 13.0, 26.0, 26.0]
    assert arrived == [1.0, 1.0, 14.0, 14.0, 27.0, 27.0]


def test_no_limit_never_waits() -> None:
    limit = RateLimit(sleep=lambda s: pytest.fail("slept"))
    assert not limit.active and limit.acquire(10**9) is None


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"requests_per_minute": 0}, "requests_per_minute"), ({"tokens_per_minute": 2.5}, "tokens_per_minute")],
)
def test_bad_limits_are_refused_naming_the_value(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name) as exc:
        OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", **kwargs)
    assert repr(next(iter(kwargs.values()))) in str(exc.value)


# ------------------------------------------------------------------ through a reader
def _recording(reader: OpenAIReader, clock: FakeClock, sent: list[float]) -> None:
    """Give ``reader`` a fake-clock limit with its own options that records admissions."""
    limit = _limit(clock, reader.requests_per_minute, reader.tokens_per_minute)
    acquire, aacquire = limit.acquire, limit.aacquire

    def recorded(tokens: int = 0) -> Any:
        entry = acquire(tokens)
        sent.append(entry.at)  # type: ignore[union-attr]
        return entry

    async def arecorded(tokens: int = 0) -> Any:
        entry = await aacquire(tokens)
        sent.append(entry.at)  # type: ignore[union-attr]
        return entry

    limit.acquire = recorded  # type: ignore[method-assign]
    limit.aacquire = arecorded  # type: ignore[method-assign]
    reader.rate_limit = limit


DOCS = [f"passage {i} about nothing in particular" for i in range(8)]


def _at_60_rpm(server: FakeOpenAIServer) -> OpenAIReader:
    """A reader limited to 60 requests a minute; no retry, so that on a loaded machine a
    slow loopback reply is not sent (and counted) twice."""
    return OpenAIReader(
        model="m", base_url=server.base_url, api_key="k", requests_per_minute=60, max_attempts=1, timeout=300
    )


def test_48_queries_at_60_rpm_never_exceed_it_in_any_minute(openai_server: FakeOpenAIServer) -> None:
    reader = _at_60_rpm(openai_server)
    clock, sent = FakeClock(), []
    _recording(reader, clock, sent)
    panner = GoldPanner(reader, profile="lost-in-the-middle", rounds=1, prompts_per_round=3)
    results = [panner.run(f"question {q}?", DOCS) for q in range(48)]
    calls = sum(r.calls for r in results)
    assert calls == 48 * 3 and len(sent) == calls == len(openai_server.requests)
    assert _max_in_window(sent) == 60  # full minutes, never more
    assert max(sent) >= 120.0  # 144 requests need at least 3 minutes' windows


def test_async_queries_share_the_limit(openai_server: FakeOpenAIServer) -> None:
    reader = _at_60_rpm(openai_server)
    clock, sent = FakeClock(), []
    _recording(reader, clock, sent)
    panner = GoldPanner(reader, profile="lost-in-the-middle", rounds=1, prompts_per_round=2)

    async def many() -> list[Any]:
        return await asyncio.gather(*(panner.arun(f"question {q}?", DOCS) for q in range(48)))

    results = asyncio.run(many())
    assert sum(r.calls for r in results) == len(sent) == 96
    assert _max_in_window(sent) == 60 and max(sent) >= 60.0


def test_reported_usage_replaces_the_estimate(scripted_reader: Any) -> None:
    reader = scripted_reader(
        ok('{"cited": [1]}', prompt_tokens=120, completion_tokens=7), tokens_per_minute=10_000
    )
    prompt = reader.prompt("q?", ["a", "b"])
    assert reader._token_estimate(prompt) == -(-(len(prompt.system) + len(prompt.user)) // 4) + 256
    reader.read("q?", ["a", "b"])
    assert [e.tokens for e in reader.rate_limit._sent] == [127]


def test_a_rejected_format_counts_as_a_request(openai_server: FakeOpenAIServer) -> None:
    openai_server.reject_formats = {"json_schema"}
    openai_server.reject_like = "llama-cpp-python"
    reader = OpenAIReader(
        model="m", base_url=openai_server.base_url, api_key="k", wait=0, requests_per_minute=1
    )
    clock, sent = FakeClock(), []
    _recording(reader, clock, sent)
    reader.read("q?", ["a", "b"])
    assert len(openai_server.requests) == 2 and sent == [0.0, 60.0]


def test_real_time_limit_over_loopback_is_bounded(openai_server: FakeOpenAIServer) -> None:
    """Scaled down: 5 requests per 0.5 s window, 20 reads from 8 threads (about 1.5 s)."""
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, api_key="k", wait=0, timeout=5.0)
    reader.read("warm-up?", ["a"])  # the client's first request is slow (setup), not limited
    openai_server.clear()
    limit = RateLimit(5, period=0.5)
    admitted: list[float] = []
    acquire = limit.acquire

    def recorded(tokens: int = 0) -> Any:
        entry = acquire(tokens)
        admitted.append(entry.at)  # type: ignore[union-attr]
        return entry

    limit.acquire = recorded  # type: ignore[method-assign]
    reader.rate_limit = limit
    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        readings = list(pool.map(lambda i: reader.read(f"q{i}?", ["a", "b"]), range(20)))
    elapsed = time.monotonic() - t0
    assert all(not r.failed for r in readings)
    assert 1.5 <= elapsed < 10.0
    assert len(admitted) == 20 and _max_in_window(admitted, period=0.5) == 5
    arrived = [r.at for r in openai_server.requests]
    # at the server too, however late a request arrives (a request holds its place until
    # a period after it completed, and it completes after it arrived)
    assert len(arrived) == 20
    assert _max_in_window(arrived, period=0.5) <= 5, sorted(round(a - t0, 3) for a in arrived)


# ------------------------------------------------- the literal limit on a loaded machine
def _busy_loops() -> list[subprocess.Popen[bytes]]:
    """One process spinning on each core, so that requests leave late."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]


@pytest.mark.slow
def test_twelve_a_minute_hold_at_the_server_on_a_loaded_machine(openai_server: FakeOpenAIServer) -> None:
    """``requests_per_minute=12``, 3 queries at once through one reader (2 rounds of 3
    prompts: 18 requests) against a loopback server that records arrivals, a busy loop on
    every core: no 60-second window at the server holds more than 12 (about 70 s)."""
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, api_key="k", requests_per_minute=12)
    panner = GoldPanner(reader, profile="lost-in-the-middle", rounds=2, prompts_per_round=3)
    busy = _busy_loops()
    try:
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda q: panner.run(f"question {q}?", DOCS), range(3)))
        elapsed = time.monotonic() - t0
    finally:
        for p in busy:
            p.kill()
            p.wait()
    arrived = sorted(r.at - t0 for r in openai_server.requests)
    print(f"18 requests in {elapsed:.1f} s; arrivals (s): {[round(a, 2) for a in arrived]}")
    print(f"most arrivals in a 60-second window: {_max_in_window(arrived)}")
    assert sum(r.calls for r in results) == 18 == len(arrived)
    assert not any(t.failed for r in results for t in r.rounds)
    assert _max_in_window(arrived) == 12


# ------------------------------------------------------------ LangChain's own limiter
def test_a_langchain_models_own_rate_limiter_is_honoured() -> None:
    from doubles import SmallestLabelChatModel
    from langchain_core.rate_limiters import InMemoryRateLimiter

    from gold_panning_integrations.readers.chat_model import ChatModelReader

    class CountingLimiter(InMemoryRateLimiter):
        acquired: int = 0

        def acquire(self, *, blocking: bool = True) -> bool:
            type(self).acquired += 1
            return True  # never wait in a unit test

        async def aacquire(self, *, blocking: bool = True) -> bool:
            type(self).acquired += 1
            return True

    model = SmallestLabelChatModel(rate_limiter=CountingLimiter(requests_per_second=1))
    reader = ChatModelReader(model)
    reader.read("q?", ["a", "b"], labels=[7, 3])
    assert CountingLimiter.acquired == 1
    asyncio.run(reader.aread("q?", ["a", "b"], labels=[7, 3]))
    assert CountingLimiter.acquired == 2
