"""OpenAIReader through the real ``openai`` client against the loopback fault server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from doubles import ScriptedAttempts, shown_documents
from openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    cite,
    content_null,
    delay,
    dynamic,
    empty_choices,
    enormous,
    ok,
    raw_body,
    refusal,
    reject_format,
    reset,
    status,
)

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.engine.records import Reading
from gold_panning_integrations.errors import (
    CitationParseError,
    FatalReaderError,
    ReaderError,
    TransientReaderError,
)
from gold_panning_integrations.readers import OpenAIReader
from gold_panning_integrations.readers._errors import classify_error, parse_retry_after
from gold_panning_integrations.readers._limits import MAX_RETRY_AFTER, wait_retry_after
from gold_panning_integrations.readers._prompt import MAX_RAW_CHARS

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


# ------------------------------------------------------------------------------ success
def test_success_records_citations_tokens_and_request(
    scripted_reader: Any, openai_server: FakeOpenAIServer
) -> None:
    reader = scripted_reader(cite(2, prompt_tokens=123, completion_tokens=7), max_tokens=50, top_p=0.5)
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,)
    assert not reading.failed and reading.attempts == 1
    assert (reading.prompt_tokens, reading.completion_tokens) == (123, 7)
    assert reading.extra["response_format"] == "json_schema"
    [req] = openai_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer test-key"
    body = req.body
    assert (body["model"], body["temperature"], body["max_tokens"], body["top_p"]) == (
        "fake-model",
        0.0,
        50,
        0.5,
    )
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "<document 2>\nThe capital of France is Paris.\n</document 2>" in req.user_text
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"]["required"] == ["cited"]


def test_invalid_labels_dropped_and_counted_never_mapped(scripted_reader: Any) -> None:
    reading = scripted_reader(ok('{"cited": [0, -1, 4, "two", 2.0, true, 3, 3]}')).read(Q, DOCS)
    assert reading.cited == (2,)
    assert (reading.invalid_labels, reading.duplicate_labels) == (6, 1)


def test_empty_documents_make_no_request(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    reading = scripted_reader().read(Q, [])
    assert reading.cited == () and not reading.failed and reading.attempts == 0
    assert openai_server.requests == []


# ------------------------------------------------------------------------------ retries
def test_429_retry_after_reaches_the_wait(
    scripted_reader: Any, openai_server: FakeOpenAIServer, recording_wait: Any
) -> None:
    reader = scripted_reader(status(429, retry_after=7), cite(1), wait=recording_wait)
    reading = reader.read(Q, DOCS)
    assert reading.cited == (0,) and reading.attempts == 2
    assert recording_wait.retry_afters == [7.0]
    assert isinstance(recording_wait.errors[0], TransientReaderError)
    assert len(openai_server.requests) == 2  # the client's own retries are off


def test_default_wait_honours_retry_after_capped() -> None:
    slept: list[float] = []
    errors = iter(
        [TransientReaderError("429", retry_after=7.0), TransientReaderError("429", retry_after=1e6)]
    )

    def attempt(usage: Any) -> Reading:
        err = next(errors, None)
        if err is not None:
            raise err
        return Reading(cited=(0,))

    reading = ScriptedAttempts(attempt, max_attempts=3, wait=wait_retry_after(), sleep=slept.append).read(
        Q, DOCS
    )
    assert slept == [7.0, MAX_RETRY_AFTER]
    assert reading.attempts == 3 and reading.cited == (0,)


def test_default_wait_falls_back_without_retry_after() -> None:
    slept: list[float] = []
    calls = iter([TransientReaderError("503")])

    def attempt(usage: Any) -> Reading:
        err = next(calls, None)
        if err is not None:
            raise err
        return Reading()

    ScriptedAttempts(
        attempt, max_attempts=2, wait=wait_retry_after(fallback=lambda s: 0.25), sleep=slept.append
    ).read(Q, DOCS)
    assert slept == [0.25]


@pytest.mark.parametrize("code", [500, 502, 503])
def test_5xx_retried(scripted_reader: Any, openai_server: FakeOpenAIServer, code: int) -> None:
    reading = scripted_reader(status(code), cite(3)).read(Q, DOCS)
    assert reading.cited == (2,) and reading.attempts == 2
    assert [r.behaviour for r in openai_server.requests] == [f"status({code})", "ok"]


def test_5xx_exhausted_gives_failed_reading(scripted_reader: Any) -> None:
    reading = scripted_reader(status(503), status(503), status(503), cite(1)).read(Q, DOCS)
    assert reading.failed and reading.cited == () and reading.attempts == 3
    assert "gave up after 3 attempts" in reading.error and "HTTP 503" in reading.error


def test_a_timeout_ends_the_reading_at_its_deadline(
    scripted_reader: Any, recording_wait: Any, openai_server: FakeOpenAIServer
) -> None:
    """A request that times out used the reading's whole deadline (``timeout``, one per
    query: test_reader_base_deadline.py): no retry, one request, a failed reading saying so."""
    reader = scripted_reader(delay(30), cite(2), timeout=0.5, wait=recording_wait)
    reading = reader.read(Q, DOCS)
    assert reading.failed and reading.attempts == 1 and len(openai_server.requests) == 1
    assert "timed out" in str(recording_wait.errors[0]) and "timeout=0.5 s" in reading.error


def test_connection_reset_mid_body_retried(scripted_reader: Any, recording_wait: Any) -> None:
    reading = scripted_reader(reset(), cite(1), wait=recording_wait).read(Q, DOCS)
    assert reading.cited == (0,) and reading.attempts == 2
    assert isinstance(recording_wait.errors[0], TransientReaderError)


def test_truncated_http_body_retried(scripted_reader: Any) -> None:
    reading = scripted_reader(raw_body('{"id": "x", "choices": ['), cite(1)).read(Q, DOCS)
    assert reading.cited == (0,) and reading.attempts == 2


def test_auth_error_is_fatal_at_once(openai_server: FakeOpenAIServer, scripted_reader: Any) -> None:
    openai_server.api_key = "right-key"
    with pytest.raises(FatalReaderError, match="authentication failed.*OPENAI_API_KEY") as info:
        scripted_reader(api_key="wrong-key").read(Q, DOCS)
    assert openai_server.base_url in str(info.value)
    assert "fake-model" in str(info.value)
    assert "\n" not in str(info.value)
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(("code", "words"), [(403, "permission denied"), (404, "check the model name")])
def test_permanent_client_errors_are_fatal(
    scripted_reader: Any, openai_server: FakeOpenAIServer, code: int, words: str
) -> None:
    with pytest.raises(FatalReaderError, match=words) as info:
        scripted_reader(status(code), cite(1)).read(Q, DOCS)
    assert info.value.status_code == code
    assert len(openai_server.requests) == 1


def test_bad_request_is_a_failed_reading_not_retried(
    scripted_reader: Any, openai_server: FakeOpenAIServer
) -> None:
    reading = scripted_reader(status(400), cite(1)).read(Q, DOCS)
    assert reading.failed
    assert reading.attempts == 1
    assert "HTTP 400" in reading.error
    assert len(openai_server.requests) == 1


def test_malformed_output_retried_then_success_sums_tokens(scripted_reader: Any) -> None:
    reading = scripted_reader(ok("The second one."), cite(2)).read(Q, DOCS)
    assert reading.cited == (1,) and reading.attempts == 2
    assert (reading.prompt_tokens, reading.completion_tokens) == (200, 20)


def test_malformed_output_exhausted_gives_failed_reading(scripted_reader: Any) -> None:
    reading = scripted_reader(ok("nope"), ok('{"cited": [1,'), ok('{"documents": [1]}'), cite(1)).read(
        Q, DOCS
    )
    assert reading.failed and reading.attempts == 3 and reading.cited == ()
    assert "gave up after 3 attempts" in reading.error and "no 'cited' key" in reading.error
    assert reading.raw == '{"documents": [1]}'
    assert reading.prompt_tokens == 300


@pytest.mark.parametrize(
    "behaviour", [empty_choices(), content_null()], ids=["empty_choices", "content_null"]
)
def test_empty_replies_retried(scripted_reader: Any, behaviour: Any) -> None:
    reading = scripted_reader(behaviour, cite(3)).read(Q, DOCS)
    assert reading.cited == (2,) and reading.attempts == 2


def test_refusal_not_retried(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    reading = scripted_reader(refusal("I can't help with that."), cite(1)).read(Q, DOCS)
    assert reading.failed and reading.attempts == 1
    assert "refused" in reading.error and reading.raw == "I can't help with that."
    assert len(openai_server.requests) == 1


def test_enormous_response_truncated_in_raw(scripted_reader: Any) -> None:
    reading = scripted_reader(enormous(2_000_000), max_attempts=1).read(Q, DOCS)
    assert reading.failed and reading.attempts == 1
    assert reading.raw.startswith("gold gold")
    assert len(reading.raw) < MAX_RAW_CHARS + 60 and "2000000 characters" in reading.raw


def test_enormous_bracket_flood_fails_cleanly(scripted_reader: Any) -> None:
    """Megabytes of '[' (a quadratic case for a naive JSON search) give a failed reading."""
    reading = scripted_reader(enormous(1_000_000, fill="["), max_attempts=1).read(Q, DOCS)
    assert reading.failed and "no JSON" in reading.error


def test_enormous_valid_json_is_parsed_whole(scripted_reader: Any) -> None:
    labels = ", ".join(["3"] * 200_000)
    reading = scripted_reader(ok('{"cited": [' + labels + "]}")).read(Q, DOCS)
    assert reading.cited == (2,) and reading.duplicate_labels == 199_999
    assert len(reading.raw) < MAX_RAW_CHARS + 60


def test_length_cut_output_says_raise_max_tokens(scripted_reader: Any) -> None:
    reading = scripted_reader(ok('{"cited": [1, 2', finish_reason="length"), max_attempts=1).read(Q, DOCS)
    assert reading.failed and "raise max_tokens" in reading.error


# ------------------------------------------------------------------------ response format
def test_format_fallback_chain_is_remembered(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    openai_server.reject_formats = {"json_schema", "json_object"}
    reader = scripted_reader(cite(1), cite(3))
    first = reader.read(Q, DOCS)
    assert first.cited == (0,) and first.attempts == 3  # two rejected probes + the answer
    assert [r.response_format_type for r in openai_server.requests] == ["json_schema", "json_object", None]
    assert reader.format_level == "text" and first.extra["response_format"] == "text"
    second = reader.read(Q, DOCS)
    assert second.cited == (2,) and second.attempts == 1
    assert [r.response_format_type for r in openai_server.requests[3:]] == [None]


def test_format_fallback_stops_at_json_object(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    reader = scripted_reader(reject_format("json_schema"), cite(2))
    reading = reader.read(Q, DOCS)
    assert reading.cited == (1,)
    assert [r.response_format_type for r in openai_server.requests] == ["json_schema", "json_object"]
    assert openai_server.requests[1].response_format == {"type": "json_object"}
    assert reader.format_level == "json_object"


def test_explicit_format_rejected_is_fatal(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    openai_server.reject_formats = {"json_schema"}
    with pytest.raises(FatalReaderError, match="response_format='auto'"):
        scripted_reader(response_format="json_schema").read(Q, DOCS)
    assert len(openai_server.requests) == 1


def test_text_format_sends_no_response_format(scripted_reader: Any, openai_server: FakeOpenAIServer) -> None:
    assert scripted_reader(cite(1), response_format="text").read(Q, DOCS).cited == (0,)
    assert openai_server.requests[0].response_format is None


# ------------------------------------------------------------------------------- modes
def test_answer_mode_cites_documents_containing_the_answer(
    scripted_reader: Any, openai_server: FakeOpenAIServer
) -> None:
    reading = scripted_reader(ok("Answer: Paris."), mode="answer").read(Q, DOCS)
    assert reading.cited == (1,) and reading.answer == "Paris"
    assert reading.extra["mode"] == "answer" and reading.prompt_tokens == 100
    req = openai_server.requests[0]
    assert req.response_format is None
    assert "- The capital of France is Paris.\n" in req.user_text and "[2]" not in req.user_text


async def test_async_read_with_retry_and_fallback(
    scripted_reader: Any, openai_server: FakeOpenAIServer, recording_wait: Any
) -> None:
    reader = scripted_reader(
        reject_format("json_schema"), status(429, retry_after=3), cite(1, 2), wait=recording_wait
    )
    async with reader:
        reading = await reader.aread(Q, DOCS)
    assert reading.cited == (0, 1) and reading.attempts == 3
    assert recording_wait.retry_afters == [3.0]
    assert [r.response_format_type for r in openai_server.requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]


async def test_async_timeout_ends_the_reading_at_its_deadline(scripted_reader: Any) -> None:
    reader = scripted_reader(delay(30), ok("no json"), timeout=0.5, max_attempts=2)
    async with reader:
        reading = await reader.aread(Q, DOCS)
    assert reading.failed and reading.attempts == 1 and "timed out" in reading.error


def test_async_reader_survives_repeated_asyncio_run(openai_server: FakeOpenAIServer) -> None:
    """Each ``asyncio.run`` gets its own AsyncOpenAI client (a pool from a closed loop
    would fail with 'Event loop is closed')."""
    import asyncio

    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
    openai_server.script(cite(1), cite(2), cite(3))

    async def once() -> tuple[int, ...]:
        async with reader:
            return (await reader.aread(Q, DOCS)).cited

    cited = [asyncio.run(once()) for _ in range(3)]
    assert cited == [(0,), (1,), (2,)]


# ------------------------------------------------------------------------- construction
def test_api_key_resolution(monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAIServer) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIReader(model="m")
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
    reader.read(Q, DOCS)
    assert openai_server.requests[0].headers["authorization"] == "Bearer not-needed"
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read(Q, DOCS)
    assert openai_server.requests[1].headers["authorization"] == "Bearer from-env"


def test_given_client_gets_retries_turned_off(openai_server: FakeOpenAIServer) -> None:
    from openai import OpenAI

    client = OpenAI(api_key="k", base_url=openai_server.base_url, max_retries=5)
    reader = OpenAIReader(model="m", client=client, wait=0, max_attempts=1)
    openai_server.script(status(500), cite(1))
    assert reader.read(Q, DOCS).failed
    assert len(openai_server.requests) == 1 and client.max_retries == 5


@pytest.mark.parametrize(
    "kwargs",
    [{"model": ""}, {"response_format": "xml"}, {"temperature": -1}, {"max_attempts": 0}, {"mode": "vote"}],
)
def test_bad_options_raise(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        OpenAIReader(**{"model": "m", "api_key": "k", **kwargs})


def test_classify_error_and_retry_after_parsing() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None
    assert isinstance(classify_error(TimeoutError("t")), TransientReaderError)
    assert isinstance(classify_error(ConnectionResetError("r")), TransientReaderError)
    assert type(classify_error(RuntimeError("x"))) is ReaderError  # a failed reading, not the run
    assert isinstance(classify_error(ConnectionRefusedError(111, "Connection refused")), FatalReaderError)
    err = CitationParseError("bad")
    assert classify_error(err) is err


# ------------------------------------------------------------------------- with the panner
def test_panner_end_to_end_with_a_scripted_model(openai_server: FakeOpenAIServer) -> None:
    """A scripted model citing the shown document that contains 'Paris'; one failing
    round (503 three times) leaves beliefs unchanged and is recorded."""

    def cite_paris(req: RecordedRequest) -> Any:
        labels = [label for label, text in shown_documents(req.user_text) if "Paris" in text]
        return ok(json.dumps({"cited": labels}))

    openai_server.default = dynamic(cite_paris)
    openai_server.script(status(503), status(503), status(503))
    docs = [f"Filler sentence number {i}." for i in range(7)] + ["The capital of France is Paris."]
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
    # A flat prior: the answer comes back because the two readings cited it. Under the
    # default rank map the last of 8 starts 4.12 nats (the bound at 8 documents) below the
    # first, more than citations can add (log(0.9 / (0.25 / 7)) = 3.23 nats).
    result = GoldPanner(reader, rounds=3, prompts_per_round=1, k=1, rng=0, retriever_prior="none").run(
        Q, docs
    )
    assert result.failed_rounds == 1
    assert result.rounds[0].failed and result.rounds[0].reading.attempts == 3
    assert list(result.selected) == [7]
    assert len(openai_server.requests) == 5
