"""Shared plumbing of the framework adapters (LangChain retriever, LlamaIndex postprocessor).

Both adapters do the same four things around the engine, and do them here:

1. hold the panning options as validated pydantic fields (:class:`PanningOptions`, a
   mixin both adapters inherit, so every option is declared and documented once);
2. turn the user's reader argument (a reader, a LangChain chat model or any chat-model
   Runnable, a LlamaIndex LLM, or ``"local"``) into a reader, once, on first use, and
   resolve the detector profile once with the one profile rule
   (:func:`~gold_panning_integrations.profiles.resolve_profile`);
3. compute the retriever-informed prior from the base retriever's order or scores;
4. run :class:`~gold_panning_integrations.engine.GoldPanner` and turn the
   :class:`~gold_panning_integrations.engine.PanningResult` into ``(input index,
   posterior, 1-based rank)`` triples the adapters map onto their document types, and
   hand each result to the user's ``on_result`` hook.

It also checks what the user and the base retriever pass in (``k``, the documents) and
gives the adapters a short ``repr`` and a JSON-safe ``model_dump``.
Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field, PrivateAttr, field_serializer, field_validator, model_validator

from .engine import GoldPanner, PanningResult
from .engine.config import PanningConfig
from .engine.priors import DEFAULT_HEAD_DECAY, profile_head_decay, rank_prior_probs, score_prior_probs
from .errors import InvalidInputError
from .profiles import DetectorProfile, load_profile, resolve_profile

__all__ = [
    "PANNED_KEY",
    "POSTERIOR_KEY",
    "RANK_KEY",
    "RELEVANCE_KEY",
    "PanningOptions",
    "Ranked",
    "RetrieverPrior",
    "check_count",
    "check_items",
    "describe",
    "describe_object",
    "describe_profile",
    "empty_result",
    "model_name",
    "prior_probs",
    "ranked",
    "reader_repr",
    "resolve_reader",
]

logger = logging.getLogger(__name__)

_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(PanningConfig))

RetrieverPrior = Literal["rank", "score", "none"]

POSTERIOR_KEY = "gold_panning_posterior"
"""Metadata key of the posterior probability of relevance (float in [0, 1])."""
RANK_KEY = "gold_panning_rank"
"""Metadata key of the 1-based rank after panning."""
PANNED_KEY = "gold_panning_panned"
"""Metadata key: False when no evidence was used (the order is the prior's)."""
RELEVANCE_KEY = "relevance_score"
"""Metadata key LangChain rerankers (Cohere, FlashRank, LLMListwiseRerank) use for their
score; here the posterior again, so code written for them reads ours unchanged."""


def check_count(value: Any, *, name: str) -> int:
    """``value`` as a positive ``int``, or :class:`InvalidInputError` naming ``name``.

    Rejects bools (``True`` is not a count), floats (``1.5`` and also ``2.0``), strings
    and numbers below 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidInputError(
            f"{name} must be a positive integer (an int >= 1: how many documents to return), "
            f"got {value!r} ({type(value).__name__})"
        )
    return int(value)


def check_items(items: Any, expected: type | tuple[type, ...], *, source: str, what: str) -> list[Any]:
    """``items`` as a list whose every element is an instance of ``expected``.

    Args:
        items: What ``source`` returned: must be a list/tuple (any iterable that is not a
            string, bytes or mapping) of ``expected``.
        expected: The class(es) each item must be.
        source: Who produced ``items``, as the message's start (e.g. ``"the base
            retriever BM25 returned"``, ``"compress_documents was given"``).
        what: How to name the expected items (e.g. ``"langchain_core Document objects"``).

    Raises:
        InvalidInputError: ``items`` is None, a string, a mapping or not iterable, or an
            item is of the wrong type (the message gives its index and type).
    """
    if items is None or isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError(f"{source} {type(items).__name__} {_short(items)}; expected a list of {what}")
    out = list(items)
    for i, item in enumerate(out):
        if not isinstance(item, expected):
            raise InvalidInputError(
                f"{source} a {type(item).__name__} at index {i} ({_short(item)}); expected a list of {what}"
            )
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_profile(profile: DetectorProfile | None) -> str:
    """Short text for a profile: model, task and number of positions (not 2n floats)."""
    if profile is None:
        return "None"
    return (
        f"DetectorProfile(model={profile.model!r}, task={profile.task!r}, n_positions={profile.n_positions})"
    )


def reader_repr(reader: Any) -> str:
    """Short text for the user's reader argument: its class and model name."""
    if isinstance(reader, str) or reader is None:
        return repr(reader)
    name = model_name(reader)
    cls = type(reader).__name__
    return cls if name == cls else f"{cls}({name!r})"


def describe_object(obj: Any) -> dict[str, Any]:
    """JSON-safe description of a user object (reader, base retriever): its class and,
    when it has one, the model name. Used where the object itself cannot be serialised."""
    if obj is None:
        return {}
    if isinstance(obj, str):
        return {"name": obj}
    out: dict[str, Any] = {"class": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    name = model_name(obj)
    if name != type(obj).__name__:
        out["model_name"] = name
    return out


def resolve_reader(obj: Any) -> Any:
    """Return a reader for ``obj``.

    An object with ``read`` or ``aread`` is used as it is; anything else (a LangChain
    ``BaseChatModel`` or any chat-model Runnable: ``.bind(...)``, ``.with_retry()``,
    ``.with_fallbacks([...])``, ``.configurable_fields(...)``; a LlamaIndex ``LLM``; the
    string ``"local"``) goes to :func:`gold_panning_integrations.readers.as_reader`,
    which decides, imported here so that the adapters import no reader backend until
    one is needed. Nothing is rejected here before ``as_reader`` has seen it.
    """
    if obj is None:
        raise TypeError(
            "no reader given: pass a reader (an object with read/aread), a LangChain chat "
            "model, a LlamaIndex LLM, or 'local' for the embedded model"
        )
    if (
        not isinstance(obj, str)
        and not _is_runnable(obj)
        and (callable(getattr(obj, "read", None)) or callable(getattr(obj, "aread", None)))
    ):
        return obj
    try:
        from .readers import as_reader
    except ImportError as err:  # pragma: no cover - only while readers are being written
        raise TypeError(
            f"{type(obj).__name__} is not a reader (it has no read/aread method) and "
            "gold_panning_integrations.readers.as_reader is unavailable to wrap it"
        ) from err
    return as_reader(obj)


def _is_runnable(obj: Any) -> bool:
    """Whether ``obj`` is a LangChain Runnable (without importing LangChain: an instance
    cannot exist before its module is loaded). Runnables forward unknown attributes to
    what they wrap, so they always go to ``as_reader``, which knows how to unwrap them."""
    import sys

    mod = sys.modules.get("langchain_core.runnables.base")
    klass = getattr(mod, "Runnable", None) if mod is not None else None
    return isinstance(klass, type) and isinstance(obj, klass)


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
    head_decay: float = DEFAULT_HEAD_DECAY,
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
        head_decay: For ``"rank"``: ratio between consecutive ranks inside the top 10.
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
    return rank_prior_probs(n, k=k, top10_recall=top10_recall, head_decay=head_decay)


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
    """The result for zero documents: no calls, ``stop_reason="no-documents"``.

    :meth:`PanningResult.empty`, except that the framework adapters have always left
    ``prior_log_odds`` unset (``None``, written as ``null`` in a trace).
    """
    return dataclasses.replace(PanningResult.empty(policy), prior_log_odds=None)


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

    profile: DetectorProfile | None = None
    """Detector profile of the reading model: a ``DetectorProfile``, a bundled profile
    name (see ``gold_panning_integrations.bundled_profiles()``), or a path to a profile
    JSON file (e.g. from ``gold-panning calibrate``); loaded and checked at construction.
    None (the default): the profile the reader names for itself (the embedded model
    names ``smollm2-135m-kv``, measured for it), else the generic ``lost-in-the-middle``
    profile with a one-time warning. Resolved once per instance, on first use; from then
    on this field holds the profile in use."""

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
    """Stop early once the mean posterior of the selected documents reaches this value.
    With the rank prior, 0.6 spent 36-50% of PSC's calls and still beat its 8-round F1 in
    our simulations (``gold-panning bench efficiency``). Evidence is bounded, so a needle
    the retriever ranked low tops out near 0.6-0.7: thresholds above that rarely stop."""

    min_gain: float | None = Field(default=None, gt=0.0)
    """Stop early once another round is expected to raise that mean posterior by less
    than this. None disables it."""

    min_rounds: int = Field(default=1, ge=1)
    """Rounds always run before ``stop_at``/``min_gain`` may stop."""

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

    prior_head_decay: float | None = Field(default=None, gt=0.0, le=1.0)
    """Shape of the rank prior inside the top 10: the ratio between consecutive ranks
    (0.6: the first document 0.34, the second 0.21 at 10 documents). Closer to 1 trusts
    the retriever's order less (1: flat inside the top 10); lower protects its first
    documents more from a reader that cannot answer. None: the profile's
    ``extra["prior_head_decay"]`` (fitted on labelled traces by ``gold-panning calibrate
    --from-traces``), else 0.6."""

    expected_relevant: int | None = Field(default=None, ge=1)
    """How many relevant documents a query usually has among the base results; sets the
    prior's total mass so posteriors read as probabilities. None: the number of
    documents requested (``k`` / ``top_n``). Set 1 for single-answer questions when you
    request several documents."""

    prior_temperature: float = Field(default=1.0, gt=0.0)
    """Softness of the score prior, in standard deviations of the scores; larger is flatter."""

    config: PanningConfig | None = None
    """Engine options the adapter does not declare itself, as a ``PanningConfig`` (e.g.
    ``PanningConfig.paper()`` for the paper's GP-Belief update). Options this adapter declares
    (``rounds``, ``policy``, ...) and ``k`` override the same fields of ``config``."""

    seed: int | None = None
    """Seed of the panner's random generator (the ``random`` policy and tie-breaking).
    The same seed gives the same placements on every call; None draws fresh entropy."""

    on_result: Callable[[PanningResult], Any] | None = Field(default=None, exclude=True)
    """Called with each :class:`~gold_panning_integrations.PanningResult` after panning
    (not for an empty input, where nothing was panned), e.g. a trace writer that learns
    the profile from use. Runs in the caller's thread; an exception it raises is logged
    and the documents are returned all the same. Not serialised."""

    _reader_cache: Any = PrivateAttr(default=None)
    _reader_lock: Any = PrivateAttr(default_factory=threading.Lock)
    _profile_resolved: bool = PrivateAttr(default=False)

    @model_validator(mode="before")
    @classmethod
    def _engine_options_go_in_config(cls, data: Any) -> Any:
        """An engine option the adapter does not declare (``robust=False``) is an error
        that says where it goes, not an unknown field silently dropped."""
        if isinstance(data, dict):
            misplaced = sorted(k for k in data if k in _CONFIG_FIELDS and k not in cls.model_fields)
            if misplaced:
                shown = ", ".join(f"{k}={data[k]!r}" for k in misplaced)
                raise ValueError(
                    f"{', '.join(misplaced)} is an engine option of PanningConfig, not a field of "
                    f"{cls.__name__}: pass config=PanningConfig({shown})"
                )
        return data

    @field_validator("profile", mode="before")
    @classmethod
    def _load_profile(cls, value: Any) -> DetectorProfile | None:
        if value is None or isinstance(value, DetectorProfile):
            return value
        if isinstance(value, (str, Path)):
            return load_profile(value)  # ProfileError (a ValueError) names the problem
        raise ValueError(
            "profile must be a DetectorProfile, a bundled profile name or a path to a "
            f"profile JSON file, got {type(value).__name__}"
        )

    @field_serializer("profile")
    def _dump_profile(self, profile: DetectorProfile | None) -> dict[str, Any] | None:
        # JSON-ready in both modes (the profile's ``created`` is a datetime), so a plain
        # model_dump() goes through json.dumps too.
        return None if profile is None else profile.model_dump(mode="json")

    # ----------------------------------------------------------------- helpers
    def _repr_fields(self) -> dict[str, Any]:
        """The adapter's own fields to show first in ``repr`` (overridden by each adapter)."""
        return {}

    def __repr__(self) -> str:
        """Short: the reader, the profile's model/task/shape, and options that differ
        from their defaults (not the profile's 2 x n_positions floats)."""
        profile = (
            describe_profile(self.profile) if self.profile is not None else "None (resolved on first use)"
        )
        parts = {**self._repr_fields(), "profile": profile}
        for name in PanningOptions.model_fields:
            if name in ("profile", "on_result") or name in parts:
                continue
            value = getattr(self, name)
            if value != PanningOptions.model_fields[name].default:
                parts[name] = repr(value)
        if self.on_result is not None:
            parts["on_result"] = getattr(self.on_result, "__qualname__", type(self.on_result).__name__)
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v}" for k, v in parts.items()) + ")"

    def __str__(self) -> str:
        return self.__repr__()

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

    def _get_profile(self) -> DetectorProfile:
        """The profile in use, resolved once per instance by the one profile rule
        (explicit, else the reader's ``recommended_profile``, else generic with a
        one-time warning); stored in ``self.profile`` so every later query, and
        :meth:`_panner`, uses the same one."""
        if not self._profile_resolved:
            reader = self._get_reader()
            with self._reader_lock:
                if not self._profile_resolved:
                    self.profile = resolve_profile(self.profile, reader=reader)
                    self._profile_resolved = True
        return self.profile  # type: ignore[return-value]  # set just above

    def _notify(self, result: PanningResult) -> None:
        """Hand ``result`` to ``on_result``; its errors are logged, never raised."""
        if self.on_result is None:
            return
        try:
            self.on_result(result)
        except Exception:
            logger.exception(
                "on_result callback %r raised; the panned documents are returned anyway", self.on_result
            )

    def _panner(self, k: int, reader: Any = None) -> GoldPanner:
        """A fresh panner per query: no state is shared between concurrent queries.

        The options become one :class:`~gold_panning_integrations.engine.config.PanningConfig`
        (validated there): ``config`` (or the engine defaults) with every option this adapter
        declares under the same name laid on top, and ``k`` for this query."""
        from .panning import GoldPanner as EdgePanner

        base = self.config if self.config is not None else PanningConfig()
        options = {name: getattr(self, name) for name in _CONFIG_FIELDS & type(self).model_fields.keys()}
        return EdgePanner(
            self._get_reader() if reader is None else reader,
            self.profile,
            dataclasses.replace(base, **{**options, "k": k}),
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
            head_decay=profile_head_decay(self.profile, self.prior_head_decay),
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
        (``reader`` overrides the resolved one for this call), then call ``on_result``."""
        self._get_profile()
        result = self._panner(k, reader).run(
            question, list(texts), prior_probs=self._prior(len(texts), k, scores)
        )
        self._notify(result)
        return result

    async def _arun(
        self,
        question: str,
        texts: Sequence[str],
        *,
        k: int,
        scores: Sequence[float | None] | None,
        reader: Any = None,
    ) -> PanningResult:
        """Pan ``texts`` with the reader's ``aread`` (no threads), then call ``on_result``."""
        self._get_profile()
        result = await self._panner(k, reader).arun(
            question, list(texts), prior_probs=self._prior(len(texts), k, scores)
        )
        self._notify(result)
        return result
