"""Deprecated (0.6; removed in 0.7): :mod:`gold_panning_integrations.bench.compare` is now
:mod:`gold_panning_integrations.evaluate.compare` (``gold-panning evaluate``). The other
benchmarks (``sim``, ``engine``, ``efficiency``, ``real``, ``real_efficiency``,
``latency``) left the package for the repository's ``benchmarks/`` folder, which runs from a
clone (``python -m benchmarks NAME``)."""

import warnings

warnings.warn(
    "gold_panning_integrations.bench is deprecated and will be removed in 0.7: import "
    "gold_panning_integrations.evaluate.compare instead of gold_panning_integrations.bench.compare; "
    "the other benchmarks moved to the repository's benchmarks/ folder (python -m benchmarks NAME)",
    DeprecationWarning,
    stacklevel=2,
)
