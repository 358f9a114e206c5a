"""The numpy engine: beliefs, policies, assignment, one round (batch), the panning loop's
parts, simulation (the one panner class, ``GoldPanner``, drives them).

Imports numpy only (never langchain, llama_index or openai).
"""

from .beliefs import initial_log_odds, log_likelihood_ratios, sigmoid, update_log_odds
from .config import PanningConfig
from .policies import POLICIES, binary_entropy, score_documents, vote_ranking
from .positions import (
    assign,
    diagnosticity,
    grid_positions,
    interpolate_grid,
    position_order,
    resample_curve,
    shown_order,
)
from .reading import Reader, Reading
from .result import PanningResult, ProfileLike, RoundTrace
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
