"""Frameworks are extras: the base import loads none, and a missing one says how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gold_panning_integrations as gp
from gold_panning_integrations.errors import MissingExtraError

ROOT = Path(__file__).resolve().parents[1]

# (public name, module that provides it, framework module blocked, extra named in the message)
NEEDS_FRAMEWORK = [
    (
        "GoldPanningRetriever",
        "gold_panning_integrations.integrations.langchain_rerankers",
        "langchain_core",
        "langchain",
    ),
    (
        "GoldPanningCompressor",
        "gold_panning_integrations.integrations.langchain_rerankers",
        "langchain_core",
        "langchain",
    ),
    ("ChatModelReader", "gold_panning_integrations.readers.chat_model", "langchain_core", "langchain"),
    (
        "GoldPanningPostprocessor",
        "gold_panning_integrations.integrations.llama_index_postprocessor",
        "llama_index",
        "llama-index",
    ),
    (
        "LlamaIndexLLMReader",
        "gold_panning_integrations.readers.llama_index_llm",
        "llama_index",
        "llama-index",
    ),
]


def _without(monkeypatch: pytest.MonkeyPatch, framework: str, module: str) -> None:
    """Make ``framework`` unimportable (None in sys.modules) and forget ``module`` so it
    is imported afresh; monkeypatch restores both."""
    for name in list(sys.modules):
        if name == framework or name.startswith(framework + "."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, framework, None)
    if module in sys.modules:
        monkeypatch.delitem(sys.modules, module)


@pytest.mark.parametrize(("name", "module", "framework", "extra"), NEEDS_FRAMEWORK)
def test_missing_framework_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str, framework: str, extra: str
) -> None:
    _without(monkeypatch, framework, module)
    with pytest.raises(MissingExtraError, match=rf'pip install "gold-panning-integrations\[{extra}\]"'):
        getattr(gp, name)


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("gold_panning_integrations.integrations.langchain_rerankers", "langchain_core", "langchain"),
        ("gold_panning_integrations.integrations.llama_index_postprocessor", "llama_index", "llama-index"),
    ],
)
def test_importing_the_integration_module_directly(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    import importlib

    _without(monkeypatch, framework, module)
    with pytest.raises(MissingExtraError, match=rf"\[{extra}\]"):
        importlib.import_module(module)


def test_missing_extra_is_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # code written as `except ImportError` around an optional integration keeps working
    _without(monkeypatch, "llama_index", "gold_panning_integrations.integrations.llama_index_postprocessor")
    with pytest.raises(ImportError, match="llama-index-core"):
        from gold_panning_integrations import GoldPanningPostprocessor  # noqa: F401


def test_unrelated_import_error_is_not_relabelled(monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken module of our own must surface as itself, not as "install the extra".
    monkeypatch.setitem(sys.modules, "gold_panning_integrations.readers.openai", None)
    with pytest.raises(ImportError) as info:
        gp.OpenAIReader  # noqa: B018
    assert not isinstance(info.value, MissingExtraError)


def test_base_import_loads_no_framework() -> None:
    code = (
        "import sys\n"
        "import gold_panning_integrations as g\n"
        "import gold_panning_integrations.readers, gold_panning_integrations.profiles\n"
        "import gold_panning_integrations.integrations._framework_base, gold_panning_integrations.cli\n"
        "g.GoldPanner, g.DetectorProfile, g.SimulatedReader, g.OpenAIReader\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'llama_index', 'llama_cpp', 'matplotlib'))\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def _names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_base_dependencies_have_no_framework() -> None:
    deps = _names(_pyproject()["project"]["dependencies"])
    # scipy: calibrate --from-traces fits its recalibration map on the base install
    assert deps == {"numpy", "scipy", "pydantic", "tenacity", "openai", "tqdm", "typing-extensions"}


def test_only_the_local_extra_compiles() -> None:
    """llama-cpp-python (compiled from source, the embedded model and its server) is in
    ``local`` and what includes it; ``compare`` (evaluate on your own endpoint) and ``test``
    compile nothing."""
    extras = _pyproject()["project"]["optional-dependencies"]
    assert "llama-cpp-python[server]>=0.3.7" in extras["local"]
    for name in ("compare", "test", "langchain", "llama-index", "plot"):
        assert "llama-cpp-python" not in _names(extras[name]), name
        assert not any("local" in r for r in extras[name] if r.startswith("gold-panning-integrations")), name
    assert "gold-panning-integrations[langchain,llama-index,local,plot,examples,compare]" in extras["all"]
    assert "pytest-timeout" in _names(extras["test"])


def test_serving_the_embedded_model_without_it_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from gold_panning_integrations.evaluate._endpoints import check_server_extra

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a)
    )
    with pytest.raises(MissingExtraError, match=r'pip install "gold-panning-integrations\[local\]"') as info:
        check_server_extra()
    assert info.value.extra == "local" and "--reader embedded" in str(info.value)
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install' in str(info.value)  # it compiles llama.cpp


def test_langchain_extra_does_not_pull_llama_index() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    assert _names(extras["langchain"]) == {"langchain-core"}


def test_llama_index_extra_does_not_pull_langchain() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    assert _names(extras["llama-index"]) == {"llama-index-core"}


def test_no_extra_depends_on_the_archived_langchain_community() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    assert not any("langchain-community" in _names(reqs) for reqs in extras.values())
