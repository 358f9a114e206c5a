"""``bench compare --reader embedded --model-path F`` names the model F's metadata names,
and picks the bundled profile measured for it on the task's documents (no server started:
the server is a fake, or the loopback fake of an OpenAI-compatible server)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from gguf_fakes import QWEN_META, SMOL_META, write_gguf
from typing_extensions import Self

from gold_panning_integrations.evaluate import compare as C


class _NoServer:
    def __init__(self, command: list[str], *, port: int, log: Path, ready_timeout: float) -> None:
        self.command, self.base_url = command, f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def check(self) -> None:
        return None


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "check_server_extra", lambda: None)
    monkeypatch.setattr(C, "EmbeddedServer", _NoServer)
    monkeypatch.setattr(C, "check_llama_runs_here", lambda path: "skipped")  # a header, no weights


def _args(model_path: Path | None, tmp_path: Path) -> Any:
    return argparse.Namespace(
        reader="embedded",
        model_path=str(model_path) if model_path else None,
        n_ctx=8192,
        threads=1,
        server_timeout=5.0,
        server_log=str(tmp_path / "server.log"),
    )


def test_a_gguf_path_is_served_under_the_name_in_its_metadata(no_server: None, tmp_path: Path) -> None:
    qwen = write_gguf(tmp_path / "qwen.gguf", QWEN_META)
    with C._endpoint(_args(qwen, tmp_path)) as (_, model, _key):
        assert model == "Qwen2.5 Coder 0.5B Instruct AWQ"  # was "SmolLM2-135M-Instruct"
    smol = write_gguf(tmp_path / "copy-of-smollm2.gguf", SMOL_META)
    with C._endpoint(_args(smol, tmp_path)) as (_, model, _key):
        assert model == "SmolLM2-135M-Instruct"


def test_the_default_model_keeps_its_name(
    no_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gold_panning_integrations.readers import local

    monkeypatch.setattr(local, "default_model_path", lambda: tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
    with C._endpoint(_args(None, tmp_path)) as (_, model, _key):
        assert model == C.EMBEDDED_MODEL


def test_embedded_profile_by_task_and_by_name() -> None:
    smol = "SmolLM2-135M-Instruct"
    assert C.embedded_profile("nq", smol, mode="answer") == "smollm2-135m-nq-labelled"
    assert C.embedded_profile("kv", smol, mode="answer") == "smollm2-135m-kv"
    assert C.embedded_profile("beir", smol, mode="answer") == "smollm2-135m-nq-labelled"
    assert C.embedded_profile("litm-kv", smol, mode="answer") == C.EMBEDDED_PROFILE == "smollm2-135m-kv"
    qwen = "Qwen2.5 Coder 0.5B Instruct AWQ"
    # passages (NQ, the collections): the profile measured on NQ passages, with its map
    for task in ("nq", "beir", "trec", "rag"):
        assert C.embedded_profile(task, qwen, mode="answer") == "qwen2.5-coder-0.5b-nq"
    for task in ("kv", "litm-kv"):
        assert C.embedded_profile(task, qwen, mode="answer") == "qwen2.5-coder-0.5b-kv"
    assert C.embedded_profile("nq", qwen, mode="cite") is None  # none measured: the generic one, warned
    assert C.embedded_profile("nq", "Some Other Model 1B", mode="answer") is None


class _LoopbackServer(_NoServer):
    """The embedded server's stand-in that answers: the loopback fake OpenAI-compatible server."""

    def __init__(self, command: list[str], *, port: int, log: Path, ready_timeout: float) -> None:
        from compare_fakes import oracle_model
        from openai_server import FakeOpenAIServer

        self.fake = FakeOpenAIServer(default=oracle_model(lambda text: False)).start()
        self.command, self.base_url = command, self.fake.base_url

    def __exit__(self, *exc: object) -> None:
        self.fake.stop()


@pytest.mark.parametrize(
    ("task", "profile"),
    [
        (["--task", "beir", "--depth", "4", "--instances", "1"], "qwen2.5-coder-0.5b-nq"),
        (["--task", "kv", "--n", "4", "--instances", "1"], "qwen2.5-coder-0.5b-kv"),
    ],
)
def test_evaluate_on_a_collection_uses_the_models_passages_profile(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    task: list[str],
    profile: str,
) -> None:
    """``evaluate --task beir --reader embedded --model-path <Qwen GGUF>``: the profile
    measured on NQ passages, with its map; ``--task kv``: the kv one (the run's meta row)."""
    import json

    monkeypatch.setattr(C, "check_server_extra", lambda: None)
    monkeypatch.setattr(C, "EmbeddedServer", _LoopbackServer)
    qwen = write_gguf(tmp_path / "qwen.gguf", QWEN_META)
    ap = argparse.ArgumentParser()
    C.register(ap.add_subparsers())
    argv = ["evaluate", "--reader", "embedded", "--model-path", str(qwen), "--methods", "base,gp-belief"]
    args = ap.parse_args([*argv, "--rounds", "1", "--server-log", str(tmp_path / "log"), "--json", *task])
    assert C.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["model"], out["mode"], out["profile"]) == (
        "Qwen2.5 Coder 0.5B Instruct AWQ",
        "answer",
        profile,
    )
