"""One deadline per query: an endpoint that never answers costs a query about ``timeout``
seconds, one failed reading per prompt and one clear error (or one warning line), not
rounds x attempts x ``timeout``; a slow endpoint that does answer keeps a long query going,
and time queued behind the reader's own limits does not count. Fake clocks for the rules,
the loopback server for the whole path."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from doubles import ScriptedAttempts
from openai_server import FakeOpenAIServer, cite, delay, status

from gold_panning_integrations import AllRoundsFailedError, GoldPanner
from gold_panning_integrations.engine.records import Reading, current_query, query_scope
from gold_panning_integrations.errors import TransientReaderError
from gold_panning_integrations.readers import OpenAIReader
from gold_panning_integrations.readers._limits import Deadline
from gold_panning_integrations.readers._prompt import Usage

pytest.importorskip("openai")  # imported once, here: the timings below are the endpoint's

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


class Clock:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# ------------------------------------------------------------------------ the rules
def test_the_deadline_starts_at_first_use_and_moves_with_replies() -> None:
    clock = Clock()
    deadline = Deadline(2.0, clock=clock)
    clock.now = 10.0
    assert not deadline.passed  # not started
    assert deadline.left() == 2.0  # starts now: ends at 12
    clock.now = 11.5
    deadline.replied()  # a reply at 11.5: the query may wait until 13.5
    clock.now = 13.0
    assert deadline.left() == 0.5
    clock.now = 13.5
    assert deadline.passed and deadline.left() == 0.0


def test_time_queued_behind_the_readers_own_limits_is_given_back() -> None:
    clock = Clock()
    deadline = Deadline(2.0, clock=clock)
    left = deadline.left()  # 2 s left when the caller queued at 0
    clock.now = 30.0  # admitted 30 s later (the rate limit)
    deadline.queued(left)
    assert deadline.left() == 2.0
    clock.now = 31.0
    deadline.queued(5.0)  # never shortens it; gives back at most what the caller had
    deadline.queued(0.5)
    assert deadline.left() == 5.0


def _hanging(clock: Clock, deadline: Deadline, seconds: float) -> Any:
    """An attempt that sends (starting the deadline's clock, as a reader's request does),
    takes ``seconds`` of the fake clock and then times out."""

    def attempt(usage: Usage) -> Reading:
        assert deadline.left() > 0
        clock.now += seconds
        raise TransientReaderError("request timed out")

    return attempt


def test_retries_stop_at_the_deadline() -> None:
    """Attempts of 1 s, waits of 0.5 s, a 2.5 s deadline, up to 5 attempts: attempt 1
    ends at 1 (1.5 s left, the wait fits), attempt 2 runs 1.5-2.5 and the deadline has
    passed: 2 attempts, not 5, and the error names the deadline."""
    clock = Clock()
    deadline = Deadline(2.5, clock=clock)
    attempts = ScriptedAttempts(
        _hanging(clock, deadline, 1.0), max_attempts=5, wait=0.5, sleep=clock.sleep, deadline=deadline
    )
    reading = attempts.read(Q, DOCS)
    assert reading.failed and reading.attempts == 2
    assert clock.now == 2.5
    assert "gave up after 2 attempts" in reading.error and "timeout=2.5 s" in reading.error


def test_no_wait_is_slept_past_the_deadline() -> None:
    """A Retry-After of 30 s with 1 s left: no sleep, no second attempt."""
    clock = Clock()
    deadline = Deadline(2.0, clock=clock)
    slept: list[float] = []
    attempts = ScriptedAttempts(
        _hanging(clock, deadline, 1.0), max_attempts=3, wait=30.0, sleep=slept.append, deadline=deadline
    )
    reading = attempts.read(Q, DOCS)
    assert reading.failed and reading.attempts == 1 and slept == []


def test_a_reading_after_the_deadline_is_not_attempted() -> None:
    clock = Clock()
    deadline = Deadline(1.0, clock=clock)
    deadline.left()
    clock.now = 1.0
    calls: list[int] = []

    def attempt(usage: Usage) -> Reading:
        calls.append(1)
        return Reading(cited=(0,))

    reading = ScriptedAttempts(attempt, max_attempts=3, wait=0, deadline=deadline).read(Q, DOCS)
    assert reading.failed and reading.attempts == 0 and calls == []
    assert "QueryDeadlineError" == reading.extra["error_type"]
    assert "deadline passed" in reading.error and "not sent" in reading.error


def test_one_query_one_deadline_per_reader(openai_server: FakeOpenAIServer) -> None:
    a = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=2.0)
    b = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=2.0)
    assert current_query() is None
    assert a._deadline() is not a._deadline()  # outside a query: one per reading
    with query_scope():
        assert a._deadline() is a._deadline() is not b._deadline()
    assert current_query() is None


# ------------------------------------------------------------------ over loopback
def _never(openai_server: FakeOpenAIServer, timeout: float, **kwargs: Any) -> OpenAIReader:
    openai_server.default = delay(60.0)
    return OpenAIReader(model="m", base_url=openai_server.base_url, timeout=timeout, **kwargs)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("gold_panning")]


def test_a_read_that_times_out_is_not_retried(openai_server: FakeOpenAIServer) -> None:
    reader = _never(openai_server, 1.0)
    reader.client  # noqa: B018 - built (openai imported) before the clock, as in the reader
    t0 = time.monotonic()
    reading = reader.read(Q, DOCS)
    elapsed = time.monotonic() - t0
    assert reading.failed and reading.attempts == 1 and len(openai_server.requests) == 1
    assert "timed out" in reading.error and "timeout=1 s" in reading.error
    # about 1 s; 3 attempts of 1 s and the backoff between them took at least 4.5 s (a
    # bound with room for a loaded machine, not a speed target)
    assert elapsed < 4.0


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_query_against_an_endpoint_that_never_answers_ends_at_its_deadline(
    openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture, asynchronous: bool
) -> None:
    """The defaults (2 rounds of 3 prompts, 3 attempts), ``timeout=1``: round 1's three
    prompts time out together at 1 s, round 2 is not sent; one AllRoundsFailedError
    naming the endpoint and the deadline, and no warning line."""
    reader = _never(openai_server, 1.0)
    panner = GoldPanner(reader, profile="lost-in-the-middle")
    caplog.set_level(logging.INFO)
    t0 = time.monotonic()
    with pytest.raises(AllRoundsFailedError) as info:
        if asynchronous:
            asyncio.run(panner.arun(Q, DOCS))
        else:
            panner.run(Q, DOCS)
    elapsed = time.monotonic() - t0
    assert elapsed < 4.0  # about 1 s; before, 2 rounds x (3 attempts x 1 s + backoff) >= 9 s
    assert len(openai_server.requests) == 3
    message = str(info.value)
    assert openai_server.base_url in message and "timeout=1 s" in message
    assert len(info.value.errors) == 6  # one failed reading per prompt, each in the trace
    assert _warnings(caplog) == []


def test_with_fallback_the_query_logs_one_warning(
    openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _never(openai_server, 1.0)
    panner = GoldPanner(reader, profile="lost-in-the-middle", on_failure="fallback")
    caplog.set_level(logging.INFO)
    result = panner.run(Q, DOCS)
    assert not result.panned and result.stop_reason == "all-rounds-failed"
    assert [x.attempts for t in result.rounds for x in t.readings] == [1, 1, 1, 0, 0, 0]
    [line] = _warnings(caplog)
    assert "6 of 6 readings failed over 2 rounds" in line.getMessage()
    assert "timeout=1 s" in line.getMessage()


def test_a_slow_endpoint_that_answers_keeps_a_long_query_going(openai_server: FakeOpenAIServer) -> None:
    """Each reply takes 0.4 s, ``timeout=1``, 4 rounds of one prompt: 1.6 s in all, more
    than ``timeout``, and every round reads (a reply moves the deadline)."""
    openai_server.default = delay(0.4)
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=1.0)
    result = GoldPanner(reader, profile="lost-in-the-middle", rounds=4, prompts_per_round=1).run(Q, DOCS)
    assert not any(t.failed for t in result.rounds) and result.calls == 4


def test_time_queued_behind_max_concurrency_does_not_count(openai_server: FakeOpenAIServer) -> None:
    """One call at a time, 3 prompts a round, replies after 0.4 s, ``timeout=0.6``: the
    third prompt waits 0.8 s for its slot, yet the query reads every prompt."""
    openai_server.default = delay(0.4)
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=0.6, max_concurrency=1)
    result = GoldPanner(reader, profile="lost-in-the-middle", rounds=1, prompts_per_round=3).run(Q, DOCS)
    assert not any(x.failed for x in result.rounds[0].readings)


def test_a_failing_endpoint_is_still_retried_within_the_deadline(scripted_reader: Any) -> None:
    reading = scripted_reader(status(503), status(503), cite(2), timeout=5.0).read(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 3


# ----------------------------------------------------------- the measurement (slow)
@pytest.mark.slow
@pytest.mark.parametrize("on_failure", ["raise", "fallback"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_endpoint_that_never_answers_with_timeout_2(
    openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture, asynchronous: bool, on_failure: str
) -> None:
    """Issue 39's measurement: ``timeout=2``, the defaults otherwise (2 rounds of 3
    prompts, 3 attempts): the query ends within 3 x ``timeout`` with one clear error, or
    (``fallback``) one warning line. Prints the figures docs/usage.md quotes."""
    reader = _never(openai_server, 2.0)
    panner = GoldPanner(reader, profile="lost-in-the-middle", on_failure=on_failure)
    caplog.set_level(logging.INFO)
    t0 = time.monotonic()
    error: Exception | None = None
    try:
        asyncio.run(panner.arun(Q, DOCS)) if asynchronous else panner.run(Q, DOCS)
    except AllRoundsFailedError as err:
        error = err
    elapsed = time.monotonic() - t0
    lines = [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith("gold_panning")]
    print(
        f"\n{'async' if asynchronous else 'sync'}, on_failure={on_failure}: {elapsed:.2f} s, "
        f"{len(openai_server.requests)} requests, {len(lines)} log lines at INFO or above; {error}"
    )
    assert elapsed <= 6.0 and len(openai_server.requests) == 3
    assert (error is not None) == (on_failure == "raise")
    assert len(_warnings(caplog)) == (on_failure == "fallback") == len(lines)
