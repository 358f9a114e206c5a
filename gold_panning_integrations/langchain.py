"""Deprecated (0.6; removed in 0.7): :mod:`gold_panning_integrations.integrations.langchain_rerankers`."""

from ._moved import alias

alias(__name__, "gold_panning_integrations.integrations.langchain_rerankers")
