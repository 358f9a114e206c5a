"""Gold Panning for LangChain and LlamaIndex: position bias as a measuring instrument.

The top-level package imports no framework: ``GoldPanningRetriever`` (LangChain) and
``GoldPanningPostprocessor`` (LlamaIndex) are loaded on first access.
"""

from __future__ import annotations

from typing import Any

from .engine import PanningResult, Reading, RoundTrace, SimulatedReader, simulate
from .errors import (
    AllRoundsFailedError,
    CheckpointError,
    CitationParseError,
    FatalReaderError,
    GoldPanningError,
    MissingExtraError,
    ProfileError,
    ReaderError,
    TransientReaderError,
)
from .panning import GoldPanner, PanningConfig
from .profiles import DetectorProfile, bundled_profiles, load_profile

__version__ = "0.1.0"

__all__ = [
    "AllRoundsFailedError",
    "ChatModelReader",
    "CheckpointError",
    "CitationParseError",
    "DetectorProfile",
    "FatalReaderError",
    "GoldPanner",
    "GoldPanningError",
    "GoldPanningPostprocessor",
    "GoldPanningRetriever",
    "LlamaIndexLLMReader",
    "LocalReader",
    "MissingExtraError",
    "OpenAIReader",
    "PanningConfig",
    "PanningResult",
    "ProfileError",
    "Reading",
    "ReaderError",
    "RoundTrace",
    "SimulatedReader",
    "TransientReaderError",
    "__version__",
    "as_reader",
    "bundled_profiles",
    "load_profile",
    "simulate",
]

_LAZY = {
    "GoldPanningRetriever": ".langchain",
    "GoldPanningPostprocessor": ".llama_index",
    "OpenAIReader": ".readers",
    "ChatModelReader": ".readers",
    "LlamaIndexLLMReader": ".readers",
    "LocalReader": ".readers",
    "as_reader": ".readers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
