"""The reply cache: a hit costs no call and is counted; everything that changes a reply
is in the key; in memory and in a SQLite file shared by threads and processes; a bad
file is refused when the cache opens."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAIServer, cite, ok, status

from gold_panning_integrations import GoldPanner
from gold_panning_integrations.cli import EXIT_ERROR, main
from gold_panning_integrations.errors import InvalidInputError
from gold_panning_integrations.readers._cache import ReplyCache, make_cache
from gold_panning_integrations.readers.openai import OpenAIReader

DOCS = ["red apples", "green pears", "blue plums"]


def _reader(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIReader:
    kwargs.setdefault("wait", 0)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIReader(model="m", base_url=server.base_url, api_key="k", **kwargs)


# ------------------------------------------------------------------------------ hits
def test_a_hit_makes_no_call_and_is_counted(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(cite(2))
    reader = _reader(openai_server, cache=True)
    first = reader.read("which is green?", DOCS)
    second = reader.read("which is green?", DOCS)
    assert len(openai_server.requests) == 1
    assert first.cited == second.cited == (1,)
    assert (first.cached, first.attempts, first.prompt_tokens) == (False, 1, 100)
    assert (second.cached, second.attempts, second.prompt_tokens) == (True, 0, None)
    assert second.extra["cache"] == "hit"
    assert reader.cache is not None and (reader.cache.hits, reader.cache.misses) == (1, 1)
    # the async path shares the same cache
    third = asyncio.run(reader.aread("which is green?", DOCS))
    assert third.cached is True and len(openai_server.requests) == 1


def test_no_cache_by_default(openai_server: FakeOpenAIServer) -> None:
    reader = _reader(openai_server)
    assert reader.cache is None
    assert reader.read("q?", DOCS).cached is None
    reader.read("q?", DOCS)
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    "other",
    [
        {"temperature": 0.5},
        {"max_tokens": 64},
        {"top_p": 0.9},
        {"response_format": "json_object"},
        {"extra_body": {"seed": 7}},
        {"model": "another-model"},
        {"mode": "answer"},
    ],
)
def test_a_different_sampling_option_misses(openai_server: FakeOpenAIServer, other: dict[str, Any]) -> None:
    shared = ReplyCache()
    base = {"model": "m", "base_url": openai_server.base_url, "api_key": "k", "wait": 0, "cache": shared}
    OpenAIReader(**base).read("q?", DOCS)
    OpenAIReader(**{**base, **other}).read("q?", DOCS)
    assert len(openai_server.requests) == 2
    assert (shared.hits, shared.misses) == (0, 2)
    OpenAIReader(**base).read("q?", DOCS)  # the first reader's options again: a hit
    assert len(openai_server.requests) == 2 and shared.hits == 1


def test_other_messages_miss(openai_server: FakeOpenAIServer) -> None:
    reader = _reader(openai_server, cache=True)
    reader.read("q?", DOCS, labels=[101, 202, 303])
    reader.read("q?", DOCS, labels=[303, 202, 101])  # same documents, other labels
    reader.read("q?", DOCS[::-1], labels=[101, 202, 303])  # other order
    reader.read("another q?", DOCS, labels=[101, 202, 303])
    assert len(openai_server.requests) == 4
    reader.read("q?", DOCS, labels=[101, 202, 303])
    assert len(openai_server.requests) == 4


def test_only_validated_replies_are_stored(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(ok("no json here"), cite(1), status(400, message="nope"))
    reader = _reader(openai_server, cache=True)
    assert reader.read("q?", DOCS).cited == (0,)  # retried past the malformed reply
    assert reader.read("q?", DOCS).cached is True
    failed = reader.read("other?", DOCS)
    assert failed.failed and failed.cached is False
    assert reader.read("other?", DOCS).cached is False  # a failure is asked again
    assert len(openai_server.requests) == 4


def test_a_repeated_query_is_answered_from_the_cache(openai_server: FakeOpenAIServer) -> None:
    reader = _reader(openai_server, cache=True)
    panner = GoldPanner(reader, profile="lost-in-the-middle", rounds=2, prompts_per_round=2, rng=3)
    first = panner.run("which is green?", DOCS)
    sent = len(openai_server.requests)
    again = GoldPanner(reader, profile="lost-in-the-middle", rounds=2, prompts_per_round=2, rng=3)
    second = again.run("which is green?", DOCS)
    assert sent == first.calls == 4 and len(openai_server.requests) == sent
    assert (first.cache_hits, first.cache_misses, first.calls_saved) == (0, 4, 0)
    assert (second.cache_hits, second.cache_misses, second.calls_saved) == (4, 0, 4)
    assert second.calls == 4 and second.attempts == 0 and second.prompt_tokens == 0
    assert second.ranking.tolist() == first.ranking.tolist()
    assert second.summary()["cache_hits"] == 4


# ------------------------------------------------------------------------------ disk
def test_a_cache_file_outlives_the_reader(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "replies.sqlite"
    _reader(openai_server, cache=path).read("q?", DOCS)
    reading = _reader(openai_server, cache=str(path)).read("q?", DOCS)
    assert reading.cached is True and len(openai_server.requests) == 1
    with sqlite3.connect(path) as conn:  # only hashes and replies: no prompt, no key
        keys = [r[0] for r in conn.execute("SELECT key FROM gp_reply_cache")]
    assert len(keys) == 1 and len(keys[0]) == 64


_CHILD = textwrap.dedent(
    """
    import sys
    from gold_panning_integrations.readers.openai import OpenAIReader
    reader = OpenAIReader(model="m", base_url=sys.argv[1], api_key="k", wait=0, cache=sys.argv[2])
    for i in range(int(sys.argv[3])):
        assert not reader.read(f"q{i}?", ["a", "b"]).failed
    print(reader.cache.misses)
    """
)


def test_two_processes_share_the_file(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    cmd = [sys.executable, "-c", _CHILD, openai_server.base_url, str(path)]
    children = [subprocess.Popen([*cmd, "20"], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [c.communicate(timeout=120)[0] for c in children]
    assert [c.returncode for c in children] == [0, 0]
    sent = len(openai_server.requests)
    assert sent == sum(int(o.strip()) for o in outs) and 20 <= sent <= 40
    # every prompt is now in the file: this process asks none of them again
    reader = _reader(openai_server, cache=path)
    assert all(reader.read(f"q{i}?", ["a", "b"]).cached for i in range(20))
    assert len(openai_server.requests) == sent


def test_threads_share_one_cache(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    reader = _reader(openai_server, cache=tmp_path / "threads.sqlite")
    prompts = [f"q{i % 5}?" for i in range(40)]
    with ThreadPoolExecutor(8) as pool:
        readings = list(pool.map(lambda q: reader.read(q, DOCS), prompts))
    assert all(not r.failed for r in readings)
    cache = reader.cache
    assert cache is not None and cache.hits + cache.misses == 40
    assert cache.misses == len(openai_server.requests) == sum(1 for r in readings if r.cached is False)
    assert 5 <= cache.misses < 40  # two threads asking at once may both miss
    for i in range(5):
        assert reader.read(f"q{i}?", DOCS).cached is True


# ------------------------------------------------------------------------ bad files
def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="not a regular file") as exc:
        ReplyCache(tmp_path)
    assert str(tmp_path) in str(exc.value)


def test_a_corrupt_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "replies.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(InvalidInputError, match="not a gold-panning reply cache") as exc:
        ReplyCache(path)
    assert str(path) in str(exc.value) and "delete it" in str(exc.value)


def test_another_sqlite_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(InvalidInputError, match="something else"):
        ReplyCache(path)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]


def test_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        ReplyCache(tmp_path / "nowhere" / "c.sqlite")


def test_bad_cache_options_name_the_value() -> None:
    with pytest.raises(InvalidInputError, match="got int"):
        make_cache(3)
    with pytest.raises(InvalidInputError, match="empty path"):
        make_cache("")


def test_a_file_damaged_mid_run_falls_back_to_memory(
    openai_server: FakeOpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite"
    reader = _reader(openai_server, cache=path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE gp_reply_cache")
    assert not reader.read("q?", DOCS).failed  # the write fails: logged, the reading stands
    assert reader.read("q?", DOCS).cached is True  # from memory
    assert sum("going on with the in-memory cache" in r.getMessage() for r in caplog.records) == 1


# ------------------------------------------------------------------- other readers
def test_a_langchain_reader_takes_the_cache() -> None:
    from doubles import SmallestLabelChatModel

    from gold_panning_integrations.readers.chat_model import ChatModelReader

    reader = ChatModelReader(SmallestLabelChatModel(), cache=True)
    first = reader.read("q?", DOCS, labels=[9, 4, 7])
    second = reader.read("q?", DOCS, labels=[9, 4, 7])
    assert first.cited == second.cited == (1,)
    assert (first.cached, second.cached, second.attempts) == (False, True, 0)
    other = ChatModelReader(SmallestLabelChatModel(preface="Sure: "), cache=reader.cache)
    assert other.read("q?", DOCS, labels=[9, 4, 7]).cached is False  # other model fields


def test_a_llama_index_reader_takes_the_cache() -> None:
    from doubles import SmallestLabelLLM

    from gold_panning_integrations.readers.llama_index_llm import LlamaIndexLLMReader

    reader = LlamaIndexLLMReader(SmallestLabelLLM(), cache=True)
    first = asyncio.run(reader.aread("q?", DOCS, labels=[9, 4, 7]))
    second = reader.read("q?", DOCS, labels=[9, 4, 7])
    assert first.cited == second.cited == (1,)
    assert (first.cached, second.cached) == (False, True)


# --------------------------------------------------------------------------- the CLI
def test_run_reports_cache_hits(openai_server: FakeOpenAIServer, tmp_path: Path, capsys: Any) -> None:
    argv = ["run", "--demo", "--reader", "openai", "--base-url", openai_server.base_url, "--model", "m"]
    argv += ["--mode", "cite", "--cache", str(tmp_path / "c.sqlite"), "--rounds", "2"]
    assert main([*argv, "--json"]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    sent = len(openai_server.requests)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert len(openai_server.requests) == sent == first["cache_misses"] == first["calls"]
    assert f"reply cache: {sent} hits, 0 misses ({sent} model calls saved)" in text


def test_run_refuses_a_cache_that_is_a_folder(tmp_path: Path, capsys: Any) -> None:
    argv = ["run", "--demo", "--reader", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*argv, "--cache", str(tmp_path)]) == EXIT_ERROR
    assert "not a regular file" in capsys.readouterr().err


# --------------------------------------------------------------- through the frameworks
def test_a_repeated_retriever_invoke_makes_no_call(openai_server: FakeOpenAIServer) -> None:
    from doubles import ListRetriever, make_docs

    from gold_panning_integrations import GoldPanningRetriever

    retriever = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(6, needle_at=4)),
        reader=_reader(openai_server, cache=True),
        profile="lost-in-the-middle",
        seed=7,
    )
    first = retriever.invoke("where is the needle?")
    sent = len(openai_server.requests)
    second = retriever.invoke("where is the needle?")
    assert sent > 0 and len(openai_server.requests) == sent
    assert [d.page_content for d in second] == [d.page_content for d in first]


def test_a_repeated_postprocess_makes_no_call(openai_server: FakeOpenAIServer) -> None:
    from doubles import make_nodes

    from gold_panning_integrations import GoldPanningPostprocessor

    post = GoldPanningPostprocessor(
        reader=_reader(openai_server, cache=True), profile="lost-in-the-middle", seed=7
    )
    first = post.postprocess_nodes(make_nodes(6, needle_at=4), query_str="where is the needle?")
    sent = len(openai_server.requests)
    second = post.postprocess_nodes(make_nodes(6, needle_at=4), query_str="where is the needle?")
    assert sent > 0 and len(openai_server.requests) == sent
    assert [n.node.get_content() for n in second] == [n.node.get_content() for n in first]


def test_cli_reader_options_reach_the_reader(tmp_path: Path) -> None:
    import argparse

    from gold_panning_integrations.readers._cli_args import add_reader_arguments, make_reader

    parser = argparse.ArgumentParser()
    add_reader_arguments(parser)
    args = parser.parse_args(
        ["--reader", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
        + ["--cache", str(tmp_path / "c.sqlite"), "--requests-per-minute", "30"]
        + ["--tokens-per-minute", "5000", "--response-format", "text"]
    )
    reader = make_reader(args)
    assert (reader.requests_per_minute, reader.tokens_per_minute, reader.format_level) == (30, 5000, "text")
    assert reader.cache.path == tmp_path / "c.sqlite"
    with pytest.raises(SystemExit):
        parser.parse_args(["--requests-per-minute", "0"])
