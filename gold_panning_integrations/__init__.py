"""Gold Panning for LangChain and LlamaIndex: position bias as a measuring instrument.

The top-level package imports no framework: ``GoldPanningRetriever`` and
``GoldPanningCompressor`` (LangChain, extra ``langchain``), ``GoldPanningPostprocessor``
(LlamaIndex, extra ``llama-index``) and the framework readers are loaded on first access;
without their framework that access raises :class:`MissingExtraError` with the exact
``pip install`` line. The simulator (``simulate``, ``SimulatedReader``) is loaded on first
access too: importing the reranker loads none of the lab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import PanningResult, Reading, RoundTrace
from .errors import (
    AllRoundsFailedError,
    CheckpointError,
    CitationParseError,
    CollectionError,
    FatalReaderError,
    GoldPanningError,
    InvalidInputError,
    MissingExtraError,
    NativeCrashError,
    ProfileError,
    ReaderError,
    TransientReaderError,
)
from .panning import GoldPanner, PanningConfig
from .profiles import DetectorProfile, bundled_profiles, load_profile

if TYPE_CHECKING:
    from .engine.simulator import SimulatedReader, simulate

__version__ = "0.6.0.dev0"

__all__ = [
    "AllRoundsFailedError",
    "ChatModelReader",
    "CheckpointError",
    "CitationParseError",
    "CollectionError",
    "DetectorProfile",
    "FatalReaderError",
    "GoldPanner",
    "GoldPanningCompressor",
    "GoldPanningError",
    "GoldPanningPostprocessor",
    "GoldPanningRetriever",
    "InvalidInputError",
    "LlamaIndexLLMReader",
    "LocalReader",
    "MissingExtraError",
    "NativeCrashError",
    "OpenAIReader",
    "PanningConfig",
    "PanningResult",
    "ProfileError",
    "ReaderError",
    "Reading",
    "RoundTrace",
    "SimulatedReader",
    "TransientReaderError",
    "__version__",
    "as_reader",
    "bundled_profiles",
    "load_profile",
    "simulate",
]

_LANGCHAIN = ("langchain_core", "langchain-core", "langchain")
_LLAMA_INDEX = ("llama_index", "llama-index-core", "llama-index")

# Loaded on first access: name -> (module, None or the framework it needs: (top-level module
# it imports, PyPI package, extra)).
_LAZY: dict[str, tuple[str, tuple[str, str, str] | None]] = {
    "GoldPanningRetriever": (".integrations.langchain_rerankers", _LANGCHAIN),
    "GoldPanningCompressor": (".integrations.langchain_rerankers", _LANGCHAIN),
    "GoldPanningPostprocessor": (".integrations.llama_index_postprocessor", _LLAMA_INDEX),
    "OpenAIReader": (".readers", None),
    "ChatModelReader": (".readers", _LANGCHAIN),
    "LlamaIndexLLMReader": (".readers", _LLAMA_INDEX),
    "LocalReader": (".readers", None),
    "as_reader": (".readers", None),
    "SimulatedReader": (".engine.simulator", None),
    "simulate": (".engine.simulator", None),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        module, need = _LAZY[name]
        try:
            return getattr(import_module(module, __name__), name)
        except MissingExtraError:
            raise
        except ImportError as err:
            if need is None or not (err.name or "").startswith(need[0]):
                raise
            raise MissingExtraError(need[1], need[2], name) from err
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
