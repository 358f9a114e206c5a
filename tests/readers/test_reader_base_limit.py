"""The limit on calls in flight (``max_concurrency``): one per reader, shared by every
thread and event loop that goes through it, first come first served, never leaked by
cancellation or retries."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel
from openai_server import FakeOpenAIServer, cite, delay, status

from gold_panning_integrations import DetectorProfile, GoldPanner
from gold_panning_integrations.errors import TransientReaderError
from gold_panning_integrations.readers import BaseReader, ChatModelReader, OpenAIReader
from gold_panning_integrations.readers._options import DEFAULT_MAX_CONCURRENCY
from gold_panning_integrations.readers._prompt import Prompt, Reply, Usage
from gold_panning_integrations.readers._reader_base import CallLimit

PROFILE = DetectorProfile.bundled("lost-in-the-middle")


class _Gauge:
    """Counts callers inside a section and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


# ------------------------------------------------------------------ the limit itself
def test_threads_never_exceed_the_limit_and_reach_it() -> None:
    limit, gauge = CallLimit(4), _Gauge()
    barrier = threading.Barrier(4, timeout=10)  # only 4 can be inside: each generation fills

    def work() -> None:
        with limit.slot():
            gauge.enter()
            barrier.wait()
            gauge.leave()

    threads = [threading.Thread(target=work) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert gauge.peak == 4 and limit.peak == 4
    assert limit.in_flight == 0


def test_waiters_are_served_first_come_first_served() -> None:
    limit = CallLimit(1)
    order: list[int] = []
    holder = threading.Event()
    queued = threading.Semaphore(0)

    def first() -> None:
        with limit.slot():
            holder.wait(10)

    def later(i: int) -> None:
        queued.release()
        with limit.slot():
            order.append(i)

    t0 = threading.Thread(target=first)
    t0.start()
    while limit.in_flight == 0:
        pass
    threads = []
    for i in range(5):
        t = threading.Thread(target=later, args=(i,))
        t.start()
        queued.acquire()
        while len(limit._waiters) < i + 1:  # queued in this order
            pass
        threads.append(t)
    holder.set()
    for t in (t0, *threads):
        t.join(10)
    assert order == [0, 1, 2, 3, 4]


def test_tasks_never_exceed_the_limit() -> None:
    limit, gauge = CallLimit(3), _Gauge()

    async def work() -> None:
        async with limit.aslot():
            gauge.enter()
            await asyncio.sleep(0.001)
            gauge.leave()

    async def main() -> None:
        await asyncio.gather(*(work() for _ in range(50)))

    asyncio.run(main())
    assert gauge.peak == 3 and limit.in_flight == 0


def test_threads_and_tasks_share_one_limit() -> None:
    limit, gauge = CallLimit(2), _Gauge()
    go = threading.Event()

    def thread_work() -> None:
        go.wait(10)
        for _ in range(20):
            with limit.slot():
                gauge.enter()
                gauge.leave()

    async def task_work() -> None:
        for _ in range(20):
            async with limit.aslot():
                gauge.enter()
                await asyncio.sleep(0)
                gauge.leave()

    async def main() -> None:
        go.set()
        await asyncio.gather(*(task_work() for _ in range(4)))

    threads = [threading.Thread(target=thread_work) for _ in range(4)]
    for t in threads:
        t.start()
    asyncio.run(main())
    for t in threads:
        t.join(10)
    assert gauge.peak <= 2 and limit.in_flight == 0


def test_a_cancelled_waiter_leaks_no_slot() -> None:
    limit = CallLimit(1)

    async def main() -> None:
        async with limit.aslot():
            waiter = asyncio.ensure_future(_hold(limit))
            await asyncio.sleep(0)
            assert len(limit._waiters) == 1
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        assert limit.in_flight == 0
        async with limit.aslot():  # the slot is free again
            assert limit.in_flight == 1

    asyncio.run(main())
    assert limit.in_flight == 0


async def _hold(limit: CallLimit) -> None:
    async with limit.aslot():
        await asyncio.sleep(0)


def test_a_slot_granted_to_a_waiter_being_cancelled_passes_on() -> None:
    limit = CallLimit(1)
    got: list[str] = []

    async def named(name: str) -> None:
        async with limit.aslot():
            got.append(name)

    async def main() -> None:
        with limit._lock:
            assert limit._take()  # hold the only slot by hand
        a = asyncio.ensure_future(named("a"))
        b = asyncio.ensure_future(named("b"))
        await asyncio.sleep(0)
        assert len(limit._waiters) == 2
        limit.release()  # grants a (resolution scheduled on the loop) ...
        a.cancel()  # ... and a is cancelled before it runs: the slot must go to b
        await asyncio.gather(a, b, return_exceptions=True)

    asyncio.run(main())
    assert got == ["b"] and limit.in_flight == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_bad_limits_are_refused_with_the_value(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"max_concurrency must be an int >= 1 .* got"):
        CallLimit(bad)
    with pytest.raises(ValueError, match=r"max_concurrency must be an int >= 1"):
        OpenAIReader(model="m", api_key="k", max_concurrency=bad)


def test_no_limit_counts_but_never_waits() -> None:
    limit = CallLimit(None)
    with limit.slot(), limit.slot(), limit.slot():
        assert limit.in_flight == 3
    assert limit.peak == 3 and limit.in_flight == 0


# ------------------------------------------------------------------ readers
class _Slow(BaseReader):
    """A reader whose call records how many calls are in flight."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gauge = _Gauge()
        self.barrier: threading.Barrier | None = None

    @property
    def model_name(self) -> str:
        return "slow"

    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        self.gauge.enter()
        try:
            if self.barrier is not None:
                self.barrier.wait()
            return Reply(text=f'{{"cited": [{prompt.labels[0]}]}}')  # the first label shown
        finally:
            self.gauge.leave()


def test_every_network_reader_has_the_default_limit() -> None:
    assert OpenAIReader(model="m", api_key="k").max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert ChatModelReader(FakeListChatModel(responses=["{}"])).max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert OpenAIReader(model="m", api_key="k", max_concurrency=None).max_concurrency is None


def test_many_queries_through_one_reader_share_its_limit() -> None:
    reader = _Slow(max_concurrency=3)
    reader.barrier = threading.Barrier(3, timeout=10)
    docs = [f"d{i}" for i in range(8)]
    panner = GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=3, rng=0)
    errors: list[BaseException] = []

    def query() -> None:
        try:
            res = panner.run("q", docs, rng=None)
            assert res.failed_rounds == 0
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=query) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert reader.gauge.peak == 3 and reader.call_limit.peak == 3


def test_a_retry_wait_holds_no_slot() -> None:
    seen: list[int] = []

    class Flaky(_Slow):
        def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
            if not seen:
                seen.append(-1)
                raise TransientReaderError("rate limited (HTTP 429)", retry_after=0.0)
            return super()._call(prompt, usage, **options)

    def wait(state: Any) -> float:
        seen.append(reader.call_limit.in_flight)
        return 0.0

    reader = Flaky(max_concurrency=1, wait=wait)
    reading = reader.read("q", ["a", "b"])
    assert not reading.failed and reading.attempts == 2
    assert seen == [-1, 0]  # during the wait nobody held the slot


def test_openai_reader_keeps_at_most_its_limit_of_requests_open() -> None:
    with FakeOpenAIServer() as server:
        server.script(*[delay(0.05, cite(1)) for _ in range(24)])
        reader = OpenAIReader(model="m", base_url=server.base_url, wait=0, max_concurrency=2)

        async def main() -> list[Any]:
            return list(await asyncio.gather(*(reader.aread("q", ["a", "b"]) for _ in range(12))))

        readings = asyncio.run(main())
        threads = [threading.Thread(target=reader.read, args=("q", ["a", "b"])) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert all(not r.failed for r in readings)
    assert reader.call_limit.peak == 2 and len(server.requests) == 24


def test_a_429_is_waited_out_outside_the_slot() -> None:
    with FakeOpenAIServer() as server:
        server.script(status(429, retry_after=0), cite(1))
        reader = OpenAIReader(model="m", base_url=server.base_url, wait=0, max_concurrency=1)
        reading = reader.read("q", ["a", "b"])
    assert not reading.failed and reading.attempts == 2 and reader.call_limit.in_flight == 0
