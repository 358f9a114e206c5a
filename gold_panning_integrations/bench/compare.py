"""Deprecated alias of :mod:`gold_panning_integrations.evaluate.compare` (removed in 0.7);
importing it warns once (:mod:`gold_panning_integrations.bench`)."""

from typing import Any

from ..evaluate import compare as _compare
from ..evaluate.compare import *
from ..evaluate.compare import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    return getattr(_compare, name)
