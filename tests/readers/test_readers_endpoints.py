"""Hostile endpoints: a whole-request deadline, permanent failures raised once and
clearly (naming the URL and model), no redirect to another host, one error for a
redirect loop, CLI flags for the deadline and the attempts."""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from openai_server import FakeOpenAIServer, cite, drip, redirect

from gold_panning_integrations.errors import FatalReaderError, MissingExtraError
from gold_panning_integrations.readers import ChatModelReader, OpenAIReader
from gold_panning_integrations.readers._cli_args import add_reader_arguments, make_reader
from gold_panning_integrations.readers._http import MAX_REDIRECTS

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]
Q = "What is the capital of France?"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


# ------------------------------------------------------------------------------ deadline
def test_a_dripping_server_cannot_hold_a_request_past_the_timeout(openai_server: FakeOpenAIServer) -> None:
    """The body (~300 bytes) arrives one byte every 0.2 s: ~60 s in all, each read far
    within the 1 s timeout. The request must end at the 1 s deadline (timed out)."""
    openai_server.script(drip(0.2, cite(2)))
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=1.0, max_attempts=1, wait=0)
    reader.client  # noqa: B018 - create the client (imports) before timing the request
    start = time.monotonic()
    reading = reader.read(Q, DOCS)
    elapsed = time.monotonic() - start
    assert reading.failed
    assert "timed out" in (reading.error or "")
    assert elapsed < 10.0  # not the ~60 s the drip would take (a bound, not a speed target)
    assert openai_server.drip_bytes < 50  # the client left long before the body ended


async def test_the_async_reader_has_the_same_deadline(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(drip(0.2, cite(2)))
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, timeout=1.0, max_attempts=1, wait=0)
    reading = await reader.aread(Q, DOCS)
    assert reading.failed
    assert "timed out" in (reading.error or "")
    assert openai_server.drip_bytes < 50


# ------------------------------------------------------------------------------ fatal
def test_a_closed_port_is_one_fatal_line_naming_url_and_model() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    reader = OpenAIReader(model="my-model", base_url=url, max_attempts=3, wait=0)
    with pytest.raises(FatalReaderError, match="connection refused") as info:
        reader.read(Q, DOCS)
    message = str(info.value)
    assert url in message
    assert "my-model" in message
    assert "\n" not in message


async def test_a_closed_port_is_fatal_in_async_too() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(FatalReaderError, match="connection refused"):
        await OpenAIReader(model="m", base_url=url, wait=0).aread(Q, DOCS)


class OpenAIBackedChat(GenericFakeChatModel):
    """A chat model calling an OpenAI-compatible endpoint through the ``openai`` SDK,
    as ``ChatOpenAI`` does (its errors are the SDK's own exception types)."""

    openai_api_base: str = ""
    model_name: str = "gpt-x"
    calls: int = 0

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        import openai

        self.calls += 1
        client = openai.OpenAI(base_url=self.openai_api_base, api_key="k", max_retries=0, timeout=5)
        client.chat.completions.create(model=self.model_name, messages=[{"role": "user", "content": "x"}])
        raise AssertionError("unreachable: nothing listens there")  # pragma: no cover


def test_a_chat_model_on_a_closed_port_is_fatal_at_once_naming_url_and_model() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = OpenAIBackedChat(messages=iter([AIMessage(content="unused")]), openai_api_base=url)
    reader = ChatModelReader(model, max_attempts=3, wait=0)
    with pytest.raises(FatalReaderError, match="connection refused") as info:
        reader.read(Q, DOCS)
    assert url in str(info.value)
    assert "gpt-x" in str(info.value)
    assert model.calls == 1  # not retried


def test_a_missing_extra_raises_when_the_local_reader_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from gold_panning_integrations.readers.local import LocalReader

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(MissingExtraError, match=r"pip install \"gold-panning-integrations\[local\]\""):
        LocalReader()


# ------------------------------------------------------------------------------ redirects
def test_a_redirect_to_another_host_is_refused_and_nothing_reaches_it(
    openai_server: FakeOpenAIServer,
) -> None:
    with FakeOpenAIServer() as elsewhere:
        openai_server.script(redirect(f"{elsewhere.base_url}/chat/completions"))
        reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
        with pytest.raises(FatalReaderError, match="redirects to another host are not followed") as info:
            reader.read(Q, DOCS)
        assert elsewhere.requests == []  # the question and documents never went there
        assert openai_server.base_url in str(info.value)


def test_a_redirect_loop_is_one_clear_error(openai_server: FakeOpenAIServer) -> None:
    loop = redirect(f"{openai_server.base_url}/chat/completions")
    openai_server.default = loop
    reader = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0)
    with pytest.raises(FatalReaderError, match="redirect loop"):
        reader.read(Q, DOCS)
    assert len(openai_server.requests) == MAX_REDIRECTS + 1  # one try, not one per round and retry


def test_a_same_origin_redirect_is_followed(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(redirect(f"{openai_server.base_url}/chat/completions"), cite(2))
    reading = OpenAIReader(model="m", base_url=openai_server.base_url, wait=0).read(Q, DOCS)
    assert reading.cited == (1,)


# ------------------------------------------------------------------------------ CLI
def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_reader_arguments(p)
    return p.parse_args(list(argv))


def test_cli_timeout_and_max_attempts_reach_the_reader() -> None:
    args = _args(
        "--reader",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--timeout",
        "5",
        "--max-attempts",
        "2",
    )
    reader = make_reader(args)
    assert reader.timeout == 5.0
    assert reader.max_attempts == 2


@pytest.mark.parametrize(
    ("flag", "value"), [("--timeout", "0"), ("--timeout", "soon"), ("--max-attempts", "0")]
)
def test_cli_rejects_bad_timeout_and_attempts(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _args(flag, value)
    assert "expected" in capsys.readouterr().err


def test_chatopenai_on_a_closed_port_is_fatal_naming_url_and_model() -> None:
    import langchain_openai  # the test extra installs it (through compare)

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = langchain_openai.ChatOpenAI(model="gpt-x", base_url=url, api_key="k", max_retries=0)
    with pytest.raises(FatalReaderError, match="connection refused") as info:
        ChatModelReader(model, wait=0).read(Q, DOCS)
    assert url in str(info.value)
    assert "gpt-x" in str(info.value)


def test_a_base_url_without_scheme_is_fatal_and_says_what_to_write() -> None:
    with pytest.raises(FatalReaderError, match="must start with http:// or https://"):
        OpenAIReader(model="m", base_url="127.0.0.1:8000/v1", wait=0).read(Q, DOCS)


def test_a_connection_failure_names_its_underlying_cause() -> None:
    """An unknown host may be a passing DNS failure: transient, and the message says why
    (the SDK's own text is only "Connection error.")."""
    import openai

    from gold_panning_integrations.errors import TransientReaderError
    from gold_panning_integrations.readers._errors import classify_error
    from gold_panning_integrations.readers._http import _httpx_module

    httpx = _httpx_module()  # the httpx the installed openai uses (httpx2 in openai 3.x)
    request = httpx.Request("POST", "http://no-such-host.invalid/v1/chat/completions")
    try:
        try:
            raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)
        except httpx.ConnectError as cause:
            raise openai.APIConnectionError(request=request) from cause
    except openai.APIConnectionError as err:
        classified = classify_error(err)
    assert isinstance(classified, TransientReaderError)
    assert str(classified) == "connection failed: Connection error. ([Errno -2] Name or service not known)"


def test_each_event_loop_gets_its_own_client_and_every_one_shares_one_tls_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``asyncio.run`` per query: a connection pool belongs to the loop that opened it, so
    each loop gets its own ``AsyncOpenAI``; the CA bundle is loaded once for all of them."""
    from gold_panning_integrations.readers import openai as openai_reader

    made: list[object] = []
    real = openai_reader.tls_context

    def counted() -> object:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(openai_reader, "tls_context", counted)
    reader = openai_reader.OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")

    async def client() -> tuple[object, object]:
        return reader.async_client, reader.async_client

    (a, same), (b, _) = asyncio.run(client()), asyncio.run(client())
    assert a is same and a is not b
    assert len(made) == 1 and reader._tls is made[0]
