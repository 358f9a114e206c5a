"""Response-format negotiation against servers that reject a format with any status,
llama-cpp-python's HTTP 500 included, remembered per endpoint and logged once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_server import LLAMA_CPP_PYTHON_FORMAT_ERROR, FakeOpenAIServer, cite, raw_body, status

from gold_panning_integrations.cli import EXIT_ERROR, main
from gold_panning_integrations.errors import FatalReaderError
from gold_panning_integrations.readers.openai import OpenAIReader

FALLBACK = "rejected response_format"


@pytest.fixture
def llama_server() -> Iterator[FakeOpenAIServer]:
    """A loopback server that answers json_schema as llama-cpp-python 0.3.36 does."""
    server = FakeOpenAIServer(reject_formats={"json_schema"}, reject_like="llama-cpp-python").start()
    try:
        yield server
    finally:
        server.stop()


def _reader(server: FakeOpenAIServer, **kwargs: object) -> OpenAIReader:
    kwargs.setdefault("wait", 0)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIReader(model="local", base_url=server.base_url, api_key="k", **kwargs)  # type: ignore[arg-type]


def _fallback_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if FALLBACK in r.getMessage()]


def test_the_body_is_llama_cpp_pythons_validation_error() -> None:
    message = LLAMA_CPP_PYTHON_FORMAT_ERROR["error"]["message"]
    assert "Input should be 'text' or 'json_object'" in message
    assert "response_format" in message
    assert LLAMA_CPP_PYTHON_FORMAT_ERROR["error"]["type"] == "internal_server_error"


def test_a_500_naming_the_format_falls_back_and_is_remembered_per_endpoint(
    llama_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    llama_server.script(cite(2), cite(1), cite(1))
    caplog.set_level(logging.INFO)
    first = _reader(llama_server)
    reading = first.read("q?", ["a", "b"])
    assert not reading.failed and reading.cited == (1,)
    assert reading.attempts == 2  # the rejected request and the json_object one
    assert [r.response_format_type for r in llama_server.requests] == ["json_schema", "json_object"]
    assert first.format_level == "json_object"
    # a second reader on the same endpoint (base URL + model) skips the failed step
    second = _reader(llama_server)
    assert not second.read("q?", ["a", "b"]).failed
    assert asyncio.run(second.aread("q?", ["a", "b"])).cited == (0,)
    assert [r.response_format_type for r in llama_server.requests][2:] == ["json_object", "json_object"]
    lines = _fallback_lines(caplog)
    assert len(lines) == 1
    assert "'json_schema'" in lines[0] and "'json_object'" in lines[0] and "HTTP 500" in lines[0]
    assert llama_server.base_url.rstrip("/") in lines[0]
    # another model on the same server is another endpoint: it probes for itself
    other = OpenAIReader(model="other", base_url=llama_server.base_url, api_key="k", wait=0)
    other.read("q?", ["a", "b"])
    assert [r.response_format_type for r in llama_server.requests][4:] == ["json_schema", "json_object"]


def test_concurrent_rejections_log_one_line(
    llama_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    reader = _reader(llama_server)

    async def many() -> list[object]:
        return await asyncio.gather(*(reader.aread("q?", ["a", "b", "c"]) for _ in range(6)))

    readings = asyncio.run(many())
    assert all(not r.failed for r in readings)  # type: ignore[attr-defined]
    assert len(_fallback_lines(caplog)) == 1


def test_a_500_that_does_not_name_the_format_is_a_server_error(scripted_reader: object) -> None:
    reader = scripted_reader(status(500), cite(1), wait=0)  # type: ignore[operator]
    reading = reader.read("q?", ["a", "b"])
    assert not reading.failed and reading.attempts == 2  # retried as transient
    assert reader.format_level == "json_schema"  # not stepped down


def test_a_chosen_format_that_the_server_rejects_fails_once_naming_auto(
    llama_server: FakeOpenAIServer,
) -> None:
    reader = _reader(llama_server, response_format="json_schema")
    with pytest.raises(FatalReaderError, match="response_format='auto'"):
        reader.read("q?", ["a", "b"])
    assert len(llama_server.requests) == 1


def test_a_500_html_page_naming_nothing_is_not_a_rejection(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(raw_body("<html>Internal Server Error</html>", code=500, content_type="text/html"))
    reader = _reader(openai_server, max_attempts=1)
    reading = reader.read("q?", ["a", "b"])
    assert reading.failed and "HTTP 500" in (reading.error or "")
    assert reader.format_level == "json_schema"


# ----------------------------------------------------------------------------- the CLI
def _cli(server: FakeOpenAIServer) -> list[str]:
    return ["--reader", "openai", "--base-url", server.base_url, "--model", "local", "--mode", "cite"]


def test_run_falls_back_and_says_so_once(
    llama_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--demo", *_cli(llama_server), "--rounds", "2", "--json"])
    err = capsys.readouterr().err
    assert code == 0
    assert err.count(FALLBACK) == 1
    sent = [r.response_format_type for r in llama_server.requests]
    # round 1's three prompts go out together, before any answer; round 2 skips the failed step
    assert sent.count("json_schema") <= 3 and sent[-3:] == ["json_object"] * 3


def test_calibrate_falls_back_and_says_so_once(
    llama_server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    argv = ["calibrate", *_cli(llama_server), "--task", "kv", "--n", "6", "--grid", "2", "--trials", "2"]
    code = main([*argv, "--out", str(out), "--concurrency", "2"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert out.exists() and captured.err.count(FALLBACK) == 1


def test_response_format_flag_reaches_the_reader(
    llama_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", "--demo", *_cli(llama_server), "--rounds", "1", "--response-format", "json_object", "--json"]
    )
    assert code == 0
    assert {r.response_format_type for r in llama_server.requests} == {"json_object"}
    assert FALLBACK not in capsys.readouterr().err


def test_calibrate_when_every_trial_fails_prints_the_first_error_and_the_count(
    openai_server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.default = status(400, message="grammar too large for this server")
    argv = ["calibrate", *_cli(openai_server), "--task", "kv", "--n", "6", "--grid", "2", "--trials", "2"]
    code = main([*argv, "--out", str(tmp_path / "p.json"), "--max-attempts", "1"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert "4 of 4 trials failed" in err
    assert "grammar too large for this server" in err
    assert "checkpoint" in err


# ------------------------------------------------------------------ the real server (slow)
@pytest.mark.slow
@pytest.mark.real_model
def test_the_real_llama_cpp_python_server_answers_500_and_the_reader_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import json
    import urllib.error
    import urllib.request

    from gold_panning_integrations.errors import MissingExtraError
    from gold_panning_integrations.evaluate._endpoints import (
        EmbeddedServer,
        check_server_extra,
        free_port,
        llama_server_command,
    )
    from gold_panning_integrations.readers._native import check_llama_runs_here
    from gold_panning_integrations.readers.local import default_model_path

    try:
        check_server_extra()
        model = default_model_path()
    except MissingExtraError as err:
        pytest.skip(str(err))
    check_llama_runs_here(model)  # a build for another CPU: this error, not a server dead of SIGILL
    port = free_port()
    command = llama_server_command(model, port=port, n_ctx=2048, threads=1)
    with EmbeddedServer(command, port=port, log=tmp_path / "server.log") as server:
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions",
            data=json.dumps(
                {
                    "model": "local",
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 4,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
                }
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(request, timeout=60)
        assert exc.value.code == 500
        body = json.loads(exc.value.read())
        ours = LLAMA_CPP_PYTHON_FORMAT_ERROR["error"]
        # the same error, line for line, up to the path of the installed app.py
        assert body["error"]["message"].splitlines()[:2] == ours["message"].splitlines()[:2]
        assert {k: v for k, v in body["error"].items() if k != "message"} == {
            k: v for k, v in ours.items() if k != "message"
        }
        caplog.set_level(logging.INFO)
        reader = OpenAIReader(model="local", base_url=server.base_url, timeout=120, max_tokens=32)
        reading = reader.read(
            "Which document says the sky is green?", ["The sky is blue.", "The sky is green."]
        )
        assert reading.attempts >= 2 and reading.extra.get("response_format") == "json_object"
        assert len(_fallback_lines(caplog)) == 1


def test_bench_compare_takes_the_response_format_flag(
    llama_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from gold_panning_integrations.evaluate import compare

    parser = argparse.ArgumentParser()
    compare.register(parser.add_subparsers())
    argv = ["evaluate", *_cli(llama_server), "--n", "4", "--instances", "1", "--rounds", "1"]
    argv += ["--methods", "gp-belief", "--profile", "lost-in-the-middle", "--json"]
    assert compare.main(parser.parse_args([*argv, "--response-format", "json_object"])) == 0
    assert {r.response_format_type for r in llama_server.requests} == {"json_object"}
    llama_server.clear()
    assert compare.main(parser.parse_args(argv)) == 0  # auto: falls back
    assert [r.response_format_type for r in llama_server.requests][:2] == ["json_schema", "json_object"]
    capsys.readouterr()
