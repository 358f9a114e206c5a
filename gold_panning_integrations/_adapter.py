"""Shared plumbing of the framework adapters (LangChain retriever, LlamaIndex postprocessor).

Both adapters do the same four things around the engine, and do them here:

1. hold the panning options as validated pydantic fields (:class:`PanningOptions`, a
   mixin both adapters inherit, so every option is declared and documented once);
2. turn the user's reader argument (a reader, a LangChain chat model, a LlamaIndex
   LLM, or ``"local"``) into a reader, once, on first use;
3. compute the retriever-informed prior from the base retriever's order or scores;
4. run :class:`~gold_panning_integrations.engine.GoldPanner` and turn the
   :class:`~gold_panning_integrations.engine.PanningResult` into ``(input index,
   posterior, 1-based rank)`` triples the adapters map onto their document types.

Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field, PrivateAttr, field_validator

from .engine import GoldPanner, PanningResult
from .engine.priors import rank_prior_probs, score_prior_probs
from .profiles import DetectorProfile, load_profile

__all__ = [
    "PANNED_KEY",
    "POSTERIOR_KEY",
    "RANK_KEY",
    "PanningOptions",
    "Ranked",
    "RetrieverPrior",
    "describe",
    "empty_result",
    "model_name",
    "prior_probs",
    "ranked",
    "resolve_reader",
]

logger = logging.getLogger(__name__)

RetrieverPrior = Literal["rank", "score", "none"]

POSTERIOR_KEY = "gold_panning_posterior"
"""Metadata key of the posterior probability of relevance (float in [0, 1])."""
RANK_KEY = "gold_panning_rank"
"""Metadata key of the 1-based rank after panning."""
PANNED_KEY = "gold_panning_panned"
"""Metadata key: False when no evidence was used (the order is the prior's)."""


def resolve_reader(obj: Any) -> Any:
    """Return a reader for ``obj``.

    An object with ``read`` or ``aread`` is used as it is; anything else (a LangChain
    ``BaseChatModel``, a LlamaIndex ``LLM``, the string ``"local"``) is wrapped by
    :func:`gold_panning_integrations.readers.as_reader`, imported here so that the
    adapters import no reader backend until one is needed.
    """
    if obj is None:
        raise TypeError(
            "no reader given: pass a reader (an object with read/aread), a LangChain chat "
            "model, a LlamaIndex LLM, or 'local' for the embedded model"
        )
    if not isinstance(obj, str) and (hasattr(obj, "read") or hasattr(obj, "aread")):
        return obj
    try:
        from .readers import as_reader
    except ImportError as err:  # pragma: no cover - only while readers are being written
        raise TypeError(
            f"{type(obj).__name__} is not a reader (it has no read/aread method) and "
            "gold_panning_integrations.readers.as_reader is unavailable to wrap it"
        ) from err
    return as_reader(obj)


def model_name(reader: Any) -> str:
    """A display name for the model behind ``reader`` (for tracing events)."""
    if isinstance(reader, str):
        return reader
    for owner in (reader, getattr(reader, "llm", None), getattr(reader, "model", None)):
        if owner is None:
            continue
        meta = getattr(owner, "metadata", None)
        name = getattr(meta, "model_name", None)
        if isinstance(name, str) and name:
            return name
        for attr in ("model_name", "model"):
            value = getattr(owner, attr, None)
            if isinstance(value, str) and value:
                return value
    return type(reader).__name__


def prior_probs(
    n: int,
    *,
    k: int,
    mode: RetrieverPrior,
    top10_recall: float,
    scores: Sequence[float | None] | None = None,
    temperature: float = 1.0,
) -> NDArray[np.float64] | None:
    """Prior probability of relevance for ``n`` documents in the base retriever's order.

    Args:
        n: Number of documents (index 0 is the base retriever's first).
        k: Expected number of relevant documents.
        mode: ``"rank"``: a prior decaying with rank
            (:func:`~gold_panning_integrations.engine.priors.rank_prior_probs`);
            ``"score"``: a softmax over the retriever's scores, standardised (divided by
            their standard deviation) so ``temperature`` is in standard deviations; falls
            back to ``"rank"`` when a score is missing or not finite, and to the flat
            prior when all scores are equal; ``"none"``: flat (returns None, the engine's
            base rate ``min(k/n, 0.5)``).
        top10_recall: For ``"rank"``: how often the retriever's top 10 holds the answer.
        scores: For ``"score"``: one score per document (None where unknown), shape ``(n,)``.
        temperature: For ``"score"``: softmax temperature in standard deviations (> 0).

    Returns:
        Prior probabilities, shape ``(n,)``, or None for the flat prior.
    """
    if n == 0 or mode == "none":
        return None
    if mode == "score":
        if (
            scores is not None
            and len(scores) == n
            and all(
                isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores
            )
        ):
            s = np.asarray(scores, dtype=np.float64)
            spread = float(s.std())
            if spread <= 0.0:
                return None
            return score_prior_probs(s / spread, k=k, temperature=temperature)
        logger.warning(
            "retriever_prior='score' but not every document has a finite score; using the rank prior instead"
        )
    elif mode != "rank":
        raise ValueError(f"retriever_prior must be 'rank', 'score' or 'none', got {mode!r}")
    return rank_prior_probs(n, k=k, top10_recall=top10_recall)


@dataclass(frozen=True)
class Ranked:
    """One selected document: its index in the input, posterior, and 1-based rank."""

    index: int
    posterior: float
    rank: int


def ranked(result: PanningResult) -> list[Ranked]:
    """The selected documents of ``result``, best first."""
    return [
        Ranked(index=int(i), posterior=float(result.posteriors[i]), rank=r + 1)
        for r, i in enumerate(result.selected)
    ]


def empty_result(policy: str) -> PanningResult:
    """The result for zero documents: no calls, ``stop_reason="no-documents"``."""
    return PanningResult(
        posteriors=np.zeros(0),
        log_odds=np.zeros(0),
        ranking=np.zeros(0, dtype=np.intp),
        selected=np.zeros(0, dtype=np.intp),
        citation_counts=np.zeros(0, dtype=np.int64),
        rounds=(),
        calls=0,
        stop_reason="no-documents",
        panned=False,
        policy=policy,
        k=0,
    )


def describe(result: PanningResult) -> str:
    """One line for callback/tracing text: calls, stop reason, tokens, selection."""
    return (
        f"gold panning: {result.calls} call(s), stop={result.stop_reason}, "
        f"panned={result.panned}, failed_rounds={result.failed_rounds}, "
        f"invalid_labels={result.invalid_labels}, prompt_tokens={result.prompt_tokens}, "
        f"completion_tokens={result.completion_tokens}, selected={result.selected.tolist()}, "
        "posteriors=" + str([round(float(result.posteriors[i]), 4) for i in result.selected])
    )


class PanningOptions(BaseModel):
    """Panning options shared by :class:`GoldPanningRetriever` and
    :class:`GoldPanningPostprocessor` (a pydantic mixin; not used on its own)."""

    profile: DetectorProfile = Field(default="lost-in-the-middle", validate_default=True)  # type: ignore[assignment]
    """Detector profile of the reading model: a ``DetectorProfile``, a bundled profile
    name (see ``gold_panning_integrations.bundled_profiles()``), or a path to a profile
    JSON file (e.g. from ``gold-panning calibrate``). Loaded and checked at construction."""

    rounds: int = Field(default=4, ge=1)
    """Maximum number of panning rounds (one model call each)."""

    policy: Literal["belief", "entropy", "random"] = "belief"
    """How documents are placed each round: ``belief`` (most likely documents on the
    most diagnostic positions), ``entropy`` (most uncertain documents there), or
    ``random`` (permutation self-consistency, ranked by citation votes)."""

    max_docs_per_prompt: int | None = Field(default=None, ge=1)
    """Context budget: at most this many documents per prompt. When the base retriever
    returns more, the lowest-belief documents sit out each round. None: show all."""

    windows: bool = False
    """With more documents than ``max_docs_per_prompt``: split each round into several
    prompts sent together (concurrently on the async path) instead of leaving the
    lowest-belief documents out of the round."""

    stop_at: float | None = Field(default=None, gt=0.0, lt=1.0)
    """Stop early once the mean posterior of the selected documents reaches this value."""

    min_gain: float | None = Field(default=None, gt=0.0)
    """Stop early once another round is expected to raise that mean posterior by less
    than this. None disables it."""

    min_rounds: int = Field(default=1, ge=1)
    """Rounds always run before ``stop_at``/``min_gain`` may stop. With the retriever
    prior, ``min_rounds=2, stop_at=0.3`` was the cheapest setting that still matched
    PSC's 8-round F1 in our simulations (about 34% of its calls)."""

    max_calls: int | None = Field(default=None, ge=1)
    """Hard budget of model calls (prompts) per query (None: ``rounds`` is the limit)."""

    max_prompt_tokens: int | None = Field(default=None, ge=1)
    """Hard budget of prompt tokens per query, from the usage the reader reports (the
    first round always runs). None: no token budget."""

    prune_below: float | None = Field(default=None, gt=0.0, lt=1.0)
    """Documents whose posterior falls below this floor leave later prompts (shorter
    prompts); the selected top documents are never pruned. None: no pruning."""

    evidence_temperature: float | None = Field(default=None, gt=0.0)
    """Divides each citation's log-likelihood ratio (> 1 tempers over-confident
    evidence). None: the profile's fitted value when it has one, else 1."""

    on_failure: Literal["raise", "fallback"] = "raise"
    """When every round fails: ``raise`` an ``AllRoundsFailedError``, or ``fallback`` to
    the prior order with ``gold_panning_panned=False`` on each result."""

    retriever_prior: RetrieverPrior = "rank"
    """Prior belief from the base retriever: ``rank`` (decays with the retriever's rank,
    see ``prior_top10_recall``), ``score`` (from retriever scores where every document
    has one, else ``rank``), or ``none`` (flat, the paper's setting)."""

    prior_top10_recall: float = Field(default=0.5, gt=0.0, lt=1.0)
    """Strength of the rank prior: how often the base retriever's top 10 holds a relevant
    document (measure it on a few labelled queries). Higher trusts the retriever's order
    more; about ``10/n`` is nearly flat."""

    expected_relevant: int | None = Field(default=None, ge=1)
    """How many relevant documents a query usually has among the base results; sets the
    prior's total mass so posteriors read as probabilities. None: the number of
    documents requested (``k`` / ``top_n``). Set 1 for single-answer questions when you
    request several documents."""

    prior_temperature: float = Field(default=1.0, gt=0.0)
    """Softness of the score prior, in standard deviations of the scores; larger is flatter."""

    seed: int | None = None
    """Seed of the panner's random generator (the ``random`` policy and tie-breaking).
    The same seed gives the same placements on every call; None draws fresh entropy."""

    _reader_cache: Any = PrivateAttr(default=None)
    _reader_lock: Any = PrivateAttr(default_factory=threading.Lock)

    @field_validator("profile", mode="before")
    @classmethod
    def _load_profile(cls, value: Any) -> DetectorProfile:
        if isinstance(value, DetectorProfile):
            return value
        if isinstance(value, (str, Path)):
            return load_profile(value)  # ProfileError (a ValueError) names the problem
        raise ValueError(
            "profile must be a DetectorProfile, a bundled profile name or a path to a "
            f"profile JSON file, got {type(value).__name__}"
        )

    # ----------------------------------------------------------------- helpers
    def _reader_source(self) -> Any:
        """The user's reader argument (overridden by each adapter)."""
        raise NotImplementedError

    def _get_reader(self) -> Any:
        """The resolved reader, created once (``"local"`` loads a model: not twice)."""
        if self._reader_cache is None:
            with self._reader_lock:
                if self._reader_cache is None:
                    self._reader_cache = resolve_reader(self._reader_source())
        return self._reader_cache

    def _panner(self, k: int, reader: Any = None) -> GoldPanner:
        """A fresh panner per query: no state is shared between concurrent queries.

        The options become one :class:`~gold_panning_integrations.engine.config.PanningConfig`
        (validated there); options not exposed here keep the config's defaults."""
        from .panning import GoldPanner as EdgePanner
        from .panning import PanningConfig

        options = {
            name: getattr(self, name)
            for name in (
                "rounds", "policy", "max_docs_per_prompt", "windows", "stop_at", "min_gain",
                "min_rounds", "max_calls", "max_prompt_tokens", "prune_below",
                "evidence_temperature", "on_failure",
            )
        }
        return EdgePanner(
            self._get_reader() if reader is None else reader,
            self.profile,
            PanningConfig(k=k, **options),
            rng=np.random.default_rng(self.seed),
        )

    def _prior(self, n: int, k: int, scores: Sequence[float | None] | None) -> NDArray[np.float64] | None:
        mass = k if self.expected_relevant is None else self.expected_relevant
        if self.retriever_prior == "none":
            # flat at the base rate of the expected number of relevant documents
            return None if n == 0 else np.full(n, min(mass / n, 0.5))
        return prior_probs(
            n,
            k=mass,
            mode=self.retriever_prior,
            top10_recall=self.prior_top10_recall,
            scores=scores,
            temperature=self.prior_temperature,
        )

    def _run(
        self,
        question: str,
        texts: Sequence[str],
        *,
        k: int,
        scores: Sequence[float | None] | None,
        reader: Any = None,
    ) -> PanningResult:
        """Pan ``texts`` (in the base retriever's order) with the synchronous reader
        (``reader`` overrides the resolved one for this call)."""
        return self._panner(k, reader).run(
            question, list(texts), prior_probs=self._prior(len(texts), k, scores)
        )

    async def _arun(
        self,
        question: str,
        texts: Sequence[str],
        *,
        k: int,
        scores: Sequence[float | None] | None,
        reader: Any = None,
    ) -> PanningResult:
        """Pan ``texts`` with the reader's ``aread`` (no threads)."""
        return await self._panner(k, reader).arun(
            question, list(texts), prior_probs=self._prior(len(texts), k, scores)
        )
