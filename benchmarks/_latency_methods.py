"""The methods of ``python -m benchmarks latency``: one :class:`LatencyMethod` per row of the
report (:data:`METHODS`, the one place their settings live), the paths each runs on
(:data:`PATHS`), the loopback model and reader they share, and how each method answers one
query on the sync and the async path (:func:`panning_calls`, :func:`base_calls`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gold_panning_integrations.engine.config import SETTINGS, PanningConfig
from gold_panning_integrations.evaluate._instances import CompareInstance
from gold_panning_integrations.evaluate._methods import MethodOutcome

from ._loopback import PositionBiasedModel

__all__ = [
    "METHODS",
    "MODEL_NAME",
    "PATHS",
    "AsyncQueryFn",
    "LatencyMethod",
    "QueryFn",
    "base_calls",
    "make_reader",
    "panning_calls",
    "relevance_model",
    "resolved_config",
    "setting_of",
]


PATHS: tuple[str, ...] = ("sync", "async")
MODEL_NAME = "loopback-position-biased"
_DEFAULTS = PanningConfig()


@dataclass(frozen=True)
class LatencyMethod:
    """One row of the benchmark.

    Attributes:
        name: Name on the command line (``--methods``).
        label: Name in the report.
        kind: ``"base"`` (the input order, no call), ``"panning"`` (our
            :class:`~gold_panning_integrations.GoldPanner` with ``options``) or ``"peer"`` (a peer
            reranker through its own package, :func:`._methods.peer_methods`).
        options: :class:`~..engine.config.PanningConfig` options laid over the defaults
            (``"panning"`` only).
    """

    name: str
    label: str
    kind: Literal["base", "panning", "peer"]
    options: Mapping[str, Any] = field(default_factory=dict)


METHODS: tuple[LatencyMethod, ...] = (
    LatencyMethod("base", "base order", "base"),
    LatencyMethod(
        "psc-8",
        "PSC, 8 prompts at once",
        "panning",
        {"policy": "random", "prior": "uniform", "rounds": 1, "prompts_per_round": 8},
    ),
    LatencyMethod(
        "gp-defaults",
        f"GP defaults ({_DEFAULTS.rounds} rounds x {_DEFAULTS.prompts_per_round} prompts)",
        "panning",
        {},
    ),
    LatencyMethod(
        "gp-0.4", "GP, 0.4 defaults (4 rounds x 1 prompt)", "panning", {"rounds": 4, "prompts_per_round": 1}
    ),
    *(
        LatencyMethod(f"gp-{name}", f"GP, {name} setting", "panning", dict(opts))
        for name, opts in SETTINGS.items()
    ),
    LatencyMethod("langchain-listwise", "LangChain LLMListwiseRerank", "peer"),
    LatencyMethod("llamaindex-llmrerank", "LlamaIndex LLMRerank", "peer"),
    LatencyMethod("llamaindex-rankgpt", "LlamaIndex RankGPTRerank", "peer"),
)
"""Every method of the benchmark, in report order: the one place their settings live."""

_BY_NAME = {m.name: m for m in METHODS}


# ================================================================================ methods
QueryFn = Callable[[CompareInstance], MethodOutcome]
AsyncQueryFn = Callable[[CompareInstance], Coroutine[Any, Any, MethodOutcome]]


def resolved_config(method: LatencyMethod) -> Any:
    """The :class:`~..engine.config.PanningConfig` a panning method runs with."""
    from gold_panning_integrations.engine.config import PanningConfig

    return PanningConfig.from_options(None, **dict(method.options))


def setting_of(method: LatencyMethod) -> str:
    """``"rounds x prompts per round"`` of a panning method (its sequential calls and
    prompts sent together), ``"-"`` otherwise."""
    if method.kind != "panning":
        return "-"
    cfg = resolved_config(method)
    text = f"{cfg.rounds} x {cfg.prompts_per_round}"
    if cfg.stop_at is not None:
        text += f", stop_at={cfg.stop_at:g}"
    return text


def _failed_readings(result: Any) -> int:
    return sum(bool(r.failed) for t in result.rounds for r in t.readings)


def panning_calls(
    method: LatencyMethod, reader: Any, *, profile: Any, seed: int
) -> tuple[QueryFn, AsyncQueryFn]:
    """``(sync, async)`` query functions of a panning method: a fresh
    :class:`~gold_panning_integrations.GoldPanner` per query, its generator seeded by ``(seed,
    query index, method)``, so both paths send the same prompts. The panners start from
    the flat prior (``retriever_prior="none"``) unless the method's options say
    otherwise."""
    from gold_panning_integrations.panning import GoldPanner

    code = [m.name for m in METHODS].index(method.name) if method.name in _BY_NAME else len(METHODS)
    options = {"retriever_prior": "none", **method.options}

    def panner(inst: CompareInstance) -> Any:
        rng = np.random.default_rng([seed, inst.index, code])
        return GoldPanner(reader, profile, rng=rng, on_failure="fallback", **options)

    def outcome(result: Any) -> MethodOutcome:
        return MethodOutcome(
            ranking=[int(i) for i in result.ranking],
            unusable=_failed_readings(result),
            note=result.stop_reason,
        )

    def run(inst: CompareInstance) -> MethodOutcome:
        return outcome(panner(inst).run(inst.question, inst.documents))

    async def arun(inst: CompareInstance) -> MethodOutcome:
        return outcome(await panner(inst).arun(inst.question, inst.documents))

    return run, arun


def base_calls() -> tuple[QueryFn, AsyncQueryFn]:
    """``(sync, async)`` query functions of the base order (no call)."""

    def run(inst: CompareInstance) -> MethodOutcome:
        return MethodOutcome(ranking=list(range(len(inst.documents))))

    async def arun(inst: CompareInstance) -> MethodOutcome:
        return run(inst)

    return run, arun


def relevance_model(instances: Sequence[CompareInstance], profile: Any, *, seed: int) -> PositionBiasedModel:
    """The loopback model of ``instances``: each question's gold documents are relevant."""
    model = PositionBiasedModel(profile, seed=seed)
    for inst in instances:
        model.add_relevant(inst.question, [inst.documents[g] for g in inst.gold])
    return model


def make_reader(base_url: str, *, max_concurrency: int | None, timeout: float) -> Any:
    """The ``OpenAIReader`` our methods use: cite mode, temperature 0, one call limit."""
    from gold_panning_integrations.readers.openai import OpenAIReader

    return OpenAIReader(
        model=MODEL_NAME,
        base_url=base_url,
        api_key="not-needed",
        mode="cite",
        temperature=0.0,
        max_tokens=256,
        timeout=timeout,
        max_concurrency=max_concurrency,
    )
