"""Requests and tokens per minute, shared by every query through a reader: a fake clock
for the rules (no test waits for real), one bounded real-time loopback test, and a
LangChain chat model's own ``rate_limiter`` honoured through ``ChatModelReader``."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from openai_server import FakeOpenAIServer, ok

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.readers._limit import RateLimit
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


# ------------------------------------------------------------------------ the rules
def test_requests_per_minute_admits_in_whole_windows() -> None:
    clock = FakeClock()
    limit = _limit(clock, rpm=3)
    times = [limit.acquire().at for _ in range(7)]  # type: ignore[union-attr]
    assert times == [0.0, 0.0, 0.0, 60.0, 60.0, 60.0, 120.0]
    assert limit.waited == 120.0


def test_tokens_per_minute_counts_the_estimate_then_the_reported_usage() -> None:
    clock = FakeClock()
    limit = _limit(clock, tpm=100)
    first = limit.acquire(60)
    assert first is not None and first.at == 0.0
    second = limit.acquire(60)  # 60 + 60 > 100: waits for the first to leave the window
    assert second is not None and second.at == 60.0
    limit.settle(second, 10)  # the server reported 10 tokens: 90 left in this window
    third = limit.acquire(90)
    assert third is not None and third.at == 60.0
    limit.settle(third, None)  # nothing reported: the estimate stands
    assert limit.acquire(1).at == 120.0  # type: ignore[union-attr]


def test_a_request_larger_than_the_token_budget_goes_alone() -> None:
    clock = FakeClock()
    limit = _limit(clock, tpm=100)
    assert limit.acquire(500).at == 0.0  # type: ignore[union-attr]
    assert limit.acquire(1).at == 60.0  # type: ignore[union-attr]


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
    # at the server: at most 5 in any window of half the period. A request leaves a few ms
    # after it is admitted, and up to ~0.2 s later on a loaded machine (measured with the
    # suite beside a model server); any lag under 0.25 s keeps 6 arrivals out of 0.25 s,
    # since their admissions would then fall within 0.5 s
    assert len(arrived) == 20
    assert _max_in_window(arrived, period=0.25) <= 5, sorted(round(a - t0, 3) for a in arrived)


# ------------------------------------------------------------ LangChain's own limiter
def test_a_langchain_models_own_rate_limiter_is_honoured() -> None:
    from doubles import SmallestLabelChatModel
    from langchain_core.rate_limiters import InMemoryRateLimiter

    from gold_panning_integrations.readers.langchain import ChatModelReader

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
