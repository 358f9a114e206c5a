"""What ``gold-panning evaluate`` and ``gold-panning rerank`` share about one query: its
random stream (:func:`method_rng`, from the seed, the query's position in the input and
the method's place in :data:`METHODS`) and the ``k`` it pans with (:func:`query_k`).

A neutral module, so that the batch job (:mod:`.batch`) reproduces ``evaluate``'s panning
run without importing any of ``evaluate``'s private modules, and ``evaluate`` keeps using
the same two functions. Imports numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METHODS", "method_rng", "query_k"]

METHODS: tuple[str, ...] = (
    "base",
    "psc",
    "gp-belief",
    "gp-cost",
    "gp-belief-flat",
    "gp-defaults",
    "langchain-listwise",
    "llamaindex-llmrerank",
    "llamaindex-rankgpt",
)
"""``evaluate``'s methods in their fixed order: a method's random stream follows its place
here, so an entry keeps its place (a new method goes at the end of its group, and seeds of
the others do not move). ``evaluate``'s ``ALL_METHODS`` is this tuple."""


def method_rng(seed: int, index: int, method: str) -> np.random.Generator:
    """The random stream of the query at position ``index`` (from 0) for ``method`` under
    ``seed``: ``default_rng([seed, index, METHODS.index(method)])``.

    Raises:
        ValueError: ``method`` is not one of :data:`METHODS`.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return np.random.default_rng([int(seed), int(index), METHODS.index(method)])


def query_k(k: int, n: int) -> int:
    """The ``k`` a query with ``n`` candidates pans with: ``k``, at most ``n - 1``, at least 1."""
    return max(1, min(k, n - 1))
