"""``bench compare --reader embedded --model-path F`` names the model F's metadata names,
and picks the bundled profile measured for it (no server started: the server is a fake)."""

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
    assert C.embedded_profile("beir", smol, mode="answer") == C.EMBEDDED_COLLECTION_PROFILE
    qwen = "Qwen2.5 Coder 0.5B Instruct AWQ"
    assert C.embedded_profile("nq", qwen, mode="answer") == "qwen2.5-coder-0.5b-kv"
    assert C.embedded_profile("nq", qwen, mode="cite") is None  # none measured: the generic one, warned
    assert C.embedded_profile("nq", "Some Other Model 1B", mode="answer") is None
