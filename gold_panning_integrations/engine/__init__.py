"""The numpy engine: beliefs and the functions of them (:mod:`.beliefs`), the options
(:mod:`.config`), retriever priors (:mod:`.priors`), positions and their matching
(:mod:`.positions`), what a reader is given and returns (:mod:`.reading`), one round, batched
(:mod:`.rounds`), the panning loop's parts (:mod:`.panner`), the one result type
(:mod:`.result`) and its reranking pairs (:mod:`.reranked`), simulation
(:mod:`.simulator`); the one panner class, ``GoldPanner``, drives them.

Imports numpy only (never langchain, llama_index or openai). The simulator's names load on
first access: importing the engine, a query's path and ``gold-panning rerank`` never load the
lab's batch simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .beliefs import (
    POLICIES,
    binary_entropy,
    initial_log_odds,
    log_likelihood_ratios,
    score_documents,
    sigmoid,
    update_log_odds,
    vote_ranking,
)
from .config import PanningConfig
from .positions import (
    assign,
    diagnosticity,
    grid_positions,
    interpolate_grid,
    position_order,
    resample_curve,
    shown_order,
)
from .records import PanningResult, ProfileLike, Reader, Reading, RoundTrace

if TYPE_CHECKING:
    from .simulator import Attack, PolicyCurve, SimulatedReader, SimulationResult, simulate

__all__ = [
    "POLICIES",
    "Attack",
    "PanningConfig",
    "PanningResult",
    "PolicyCurve",
    "ProfileLike",
    "Reader",
    "Reading",
    "RoundTrace",
    "SimulatedReader",
    "SimulationResult",
    "assign",
    "binary_entropy",
    "diagnosticity",
    "grid_positions",
    "initial_log_odds",
    "interpolate_grid",
    "log_likelihood_ratios",
    "position_order",
    "resample_curve",
    "score_documents",
    "shown_order",
    "sigmoid",
    "simulate",
    "update_log_odds",
    "vote_ranking",
]

_SIMULATOR = frozenset({"Attack", "PolicyCurve", "SimulatedReader", "SimulationResult", "simulate"})


def __getattr__(name: str) -> Any:
    if name in _SIMULATOR:
        from . import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
