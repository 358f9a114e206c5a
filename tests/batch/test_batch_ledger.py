"""``gold-panning rerank``'s checkpoint is a ledger of what each record depends on: a rerun
with another endpoint, temperature, prompt budget, response format, attempts or profile
contents is refused before any call, naming each setting in full (old -> new) and the flag
that starts anew (``--restart``); a fallback record (the endpoint failed) is provisional:
the same command asks it again once the endpoint is back (``--keep-fallbacks`` keeps it),
and ``summary.json`` counts panned and fallback records apart. Through the CLI, against
loopback endpoints."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAIServer, status
from rerank_fakes import model, question_of, write_questions

from gold_panning_integrations.cli import main
from gold_panning_integrations.profiles import load_profile

N = 8


def _args(
    base_url: str, questions: Path, out: Path, *extra: str, profile: str = "lost-in-the-middle"
) -> list[str]:
    return [
        "rerank",
        "--input",
        str(questions),
        "--out",
        str(out),
        "--base-url",
        base_url,
        "--model",
        "m",
        "--profile",
        profile,
        "--max-concurrency",
        "4",
        "-q",
        *extra,
    ]


def _asked(srv: FakeOpenAIServer) -> Counter[int | None]:
    return Counter(question_of(r) for r in srv.requests)


def _summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture
def srv() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=model()) as server:
        yield server


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    return write_questions(tmp_path / "questions.jsonl", N)


def _down(srv: FakeOpenAIServer) -> None:
    """The endpoint answers HTTP 500 to everything."""
    srv.default = status(500, message="the model server is down")
    srv.clear()


def _back(srv: FakeOpenAIServer) -> None:
    srv.default = model()
    srv.clear()


FALLBACK = ("--on-failure", "fallback", "--max-attempts", "1")


def test_fallback_records_are_asked_again_once_the_endpoint_is_back(
    tmp_path: Path, questions: Path, srv: FakeOpenAIServer
) -> None:
    out = tmp_path / "out"
    _down(srv)
    assert main(_args(srv.base_url, questions, out, *FALLBACK)) == 0
    assert (_summary(out)["panned"], _summary(out)["fallback"]) == (0, N)
    records = [json.loads(line) for line in (out / "rerank.jsonl").read_text().splitlines()]
    assert {(r["panned"], r["stop_reason"]) for r in records} == {(False, "all-rounds-failed")}

    _back(srv)
    assert main(_args(srv.base_url, questions, out, *FALLBACK)) == 0
    assert _asked(srv) == dict.fromkeys(range(N), 6)  # every fallback asked again, once
    summary = _summary(out)
    assert (summary["panned"], summary["fallback"], summary["resumed"], summary["ran"]) == (N, 0, 0, N)
    assert summary["fallbacks_asked_again"] == N

    clean = tmp_path / "clean"
    assert main(_args(srv.base_url, questions, clean, *FALLBACK)) == 0
    assert (out / "rerank.jsonl").read_bytes() == (clean / "rerank.jsonl").read_bytes()
    assert (out / "run.trec").read_bytes() == (clean / "run.trec").read_bytes()


def test_dropping_on_failure_is_accepted_and_keep_fallbacks_keeps_them(
    tmp_path: Path, questions: Path, srv: FakeOpenAIServer
) -> None:
    out = tmp_path / "out"
    _down(srv)
    assert main(_args(srv.base_url, questions, out, *FALLBACK)) == 0
    _back(srv)
    assert main(_args(srv.base_url, questions, out, "--max-attempts", "1", "--keep-fallbacks")) == 0
    assert srv.requests == []  # kept, not asked
    assert (_summary(out)["resumed"], _summary(out)["fallback"]) == (N, N)
    # --on-failure dropped (the default, raise): not a setting a kept record depends on
    assert main(_args(srv.base_url, questions, out, "--max-attempts", "1")) == 0
    assert _asked(srv) == dict.fromkeys(range(N), 6)
    assert (_summary(out)["panned"], _summary(out)["fallback"]) == (N, 0)


@pytest.mark.parametrize(
    ("flag", "value", "shown"),
    [
        ("--temperature", "0.9", "reader.temperature (--temperature): 0.0 -> 0.9"),
        ("--context-tokens", "1500", "reader.context_tokens (--context-tokens): 8192 -> 1500"),
        ("--response-format", "text", 'reader.response_format (--response-format): "auto" -> "text"'),
        ("--max-attempts", "1", "reader.max_attempts (--max-attempts): 3 -> 1"),
        ("--mode", "answer", 'reader.mode (--mode): "cite" -> "answer"'),
        ("--rounds", "3", "config.rounds (--rounds): 2 -> 3"),
        ("--seed", "4", "seed (--seed): null -> 4"),
    ],
)
def test_a_rerun_with_another_reader_or_engine_setting_is_refused_naming_it(
    tmp_path: Path,
    questions: Path,
    srv: FakeOpenAIServer,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
    shown: str,
) -> None:
    out = tmp_path / "out"
    assert main(_args(srv.base_url, questions, out)) == 0
    srv.clear()
    capsys.readouterr()
    assert main(_args(srv.base_url, questions, out, flag, value)) == 2
    assert srv.requests == []
    err = capsys.readouterr().err
    assert f"1 setting(s) differ (in the file -> now): {shown}." in err
    assert "pass --restart to set the file aside" in err
    # --restart starts anew with the new setting; the old checkpoint is kept beside it
    assert main(_args(srv.base_url, questions, out, flag, value, "--restart")) == 0
    assert set(_asked(srv)) == set(range(N))
    assert len(list(out.glob("checkpoint.jsonl.*.replaced"))) == 1


def test_another_endpoint_is_refused_with_both_urls_in_full(
    tmp_path: Path, questions: Path, srv: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(_args(srv.base_url, questions, out)) == 0
    with FakeOpenAIServer(default=model()) as other:
        long_url = other.base_url + "/" + "x" * 120  # longer than any cut a message might make
        capsys.readouterr()
        assert main(_args(long_url, questions, out)) == 2
        assert other.requests == []
    err = capsys.readouterr().err
    assert f'reader.endpoint (--base-url): "{srv.base_url}" -> "{long_url}"' in err


def test_a_profile_file_with_other_contents_is_refused(
    tmp_path: Path, questions: Path, srv: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.json"
    profile = load_profile("lost-in-the-middle")
    path.write_text(profile.model_dump_json(), encoding="utf-8")
    out = tmp_path / "out"
    assert main(_args(srv.base_url, questions, out, profile=str(path))) == 0
    tpr = list(profile.tpr)
    tpr[0] = round(tpr[0] - 0.05, 6)
    path.write_text(profile.model_copy(update={"tpr": tpr}).model_dump_json(), encoding="utf-8")
    srv.clear()
    capsys.readouterr()
    assert main(_args(srv.base_url, questions, out, profile=str(path))) == 2
    assert srv.requests == []
    err = capsys.readouterr().err
    assert "1 setting(s) differ" in err and "profile.sha256 (--profile): " in err


def test_another_input_is_refused_before_any_call(
    tmp_path: Path, questions: Path, srv: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(_args(srv.base_url, questions, out)) == 0
    other = write_questions(tmp_path / "other.jsonl", N, docs=9)
    srv.clear()
    capsys.readouterr()
    assert main(_args(srv.base_url, other, out)) == 2
    assert srv.requests == []
    assert "input.fingerprint (--input/--run, --depth): " in capsys.readouterr().err
