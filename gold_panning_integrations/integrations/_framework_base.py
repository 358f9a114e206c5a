"""The framework adapters' shared base (LangChain retriever and compressor, LlamaIndex
postprocessor); nothing here imports LangChain or LlamaIndex.

:class:`PanningFields` is the mixin of their pydantic fields, generated from the one
declaration of every engine option (``PanningConfig.options()``) and validated by building
the ``PanningConfig`` they describe. On first use it builds one
:class:`~gold_panning_integrations.GoldPanner` (reader adapted, profile resolved, options
laid over the config), kept until a field it was built from is set again; each query
passes only its own options (``k``, scores, the framework's run config) to it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    SkipValidation,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)

from ..engine import PanningResult
from ..engine.beliefs import select
from ..engine.config import PanningConfig
from ..engine.records import check_rng_option
from ..errors import InvalidInputError
from ..panning import GoldPanner, short_repr
from ..profiles import DetectorProfile, load_profile

__all__ = [
    "ADAPTER_OWN_OPTIONS",
    "CUT_KEY",
    "ENGINE_OPTIONS",
    "PANNED_KEY",
    "POSTERIOR_KEY",
    "P_NONE_KEY",
    "RANK_KEY",
    "RELEVANCE_KEY",
    "PanningFields",
    "Ranked",
    "check_count",
    "check_items",
    "check_limit",
    "describe",
    "describe_object",
    "empty_result",
    "given_reader",
    "model_name",
    "ranked",
    "reader_repr",
]

logger = logging.getLogger(__name__)

ADAPTER_OWN_OPTIONS = frozenset({"k"})
"""Engine options an adapter holds as its own field under its framework's name (the
retriever's ``k``, the compressor's and postprocessor's ``top_n``), set per query."""

POSTERIOR_KEY = "gold_panning_posterior"
"""Metadata key of the posterior probability of relevance (float in [0, 1])."""
RANK_KEY = "gold_panning_rank"
"""Metadata key of the 1-based rank after panning."""
PANNED_KEY = "gold_panning_panned"
"""Metadata key: False when no evidence was used (the order is the prior's)."""
P_NONE_KEY = "gold_panning_p_none"
"""Metadata key of the probability that none of the query's candidates is relevant (the
same float on every returned document; :attr:`PanningResult.p_none`)."""
CUT_KEY = "gold_panning_cut"
"""Metadata key of the prompts in which the reader showed the document cut to fit the model's
context (an int; 0: always whole), as :attr:`PanningResult.times_cut` counts them: its
posterior rests on what the model saw of it."""
RELEVANCE_KEY = "relevance_score"
"""Metadata key LangChain's scoring rerankers (``CohereRerank``, ``FlashrankRerank``) use
for their score; here the posterior again, so code written for them reads ours
unchanged. (``LLMListwiseRerank`` only reorders: it sets no score.)"""


def check_count(value: Any, *, name: str) -> int:
    """``value`` as a positive ``int``, or :class:`InvalidInputError` naming ``name``
    (bools, floats such as ``2.0``, strings and numbers below 1 are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidInputError(
            f"{name} must be a positive integer (an int >= 1: how many documents to return), "
            f"got {value!r} ({type(value).__name__})"
        )
    return int(value)


def check_limit(value: Any, *, name: str) -> int | None:
    """:func:`check_count`, or None: no count limit (every document that passes
    ``min_relevance`` and ``recall_target``)."""
    return None if value is None else check_count(value, name=name)


def check_items(items: Any, expected: type | tuple[type, ...], *, source: str, what: str) -> list[Any]:
    """``items`` (any iterable but a string, bytes or mapping) as a list of ``expected``.

    ``source`` starts the message (``"compress_documents was given"``); ``what`` names the
    expected items in it (``"langchain_core Document objects"``).

    Raises:
        InvalidInputError: ``items`` is None, a string, a mapping or not iterable, or an
            item is of the wrong type (the message gives its index and type).
    """
    if items is None or isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError(
            f"{source} {type(items).__name__} {short_repr(items)}; expected a list of {what}"
        )
    out = list(items)
    for i, item in enumerate(out):
        if not isinstance(item, expected):
            raise InvalidInputError(
                f"{source} a {type(item).__name__} at index {i} ({short_repr(item)}); expected a list of {what}"
            )
    return out


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


def given_reader(obj: Any) -> Any:
    """``obj``, the user's reader argument, unless it is None (a TypeError that says what
    to pass); :class:`~gold_panning_integrations.GoldPanner` adapts it
    (:func:`~gold_panning_integrations.readers.as_reader`)."""
    if obj is None:
        raise TypeError(
            "no reader given: pass a reader (an object with read/aread), a LangChain chat "
            "model, a LlamaIndex LLM, or 'local' for the embedded model"
        )
    return obj


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


@dataclass(frozen=True)
class Ranked:
    """One selected document: its index in the input, posterior, and 1-based rank."""

    index: int
    posterior: float
    rank: int


def ranked(
    result: PanningResult, *, every: bool = False, config: PanningConfig | None = None
) -> list[Ranked]:
    """The selected documents of ``result``, best first (``every``: every document of
    ``result.ranking`` that ``config``'s ``min_relevance`` and ``recall_target`` keep, with
    no count limit: ``top_n=None``)."""
    if every:
        rules = config if config is not None else PanningConfig()
        chosen = select(
            result.posteriors,
            result.ranking,
            k=None,
            min_relevance=rules.min_relevance,
            recall_target=rules.recall_target,
        )
    else:
        chosen = result.selected
    return [
        Ranked(index=int(i), posterior=float(result.posteriors[i]), rank=r + 1) for r, i in enumerate(chosen)
    ]


def empty_result(policy: str) -> PanningResult:
    """:meth:`PanningResult.empty` (no calls, ``stop_reason="no-documents"``) with
    ``prior_log_odds`` unset (``null`` in a trace), as the adapters report zero documents."""
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


def _engine_option_fields() -> dict[str, Any]:
    """One pydantic field per engine option (but :data:`ADAPTER_OWN_OPTIONS`): the
    declaration's name, type, default and doc; validated by :class:`PanningConfig`,
    not by pydantic, so there is one set of checks and messages."""
    return {
        spec.name: (Annotated[spec.type, SkipValidation], Field(default=spec.default, description=spec.doc))
        for spec in PanningConfig.options()
        if spec.name not in ADAPTER_OWN_OPTIONS
    }


if TYPE_CHECKING:  # the fields are generated at import: a type checker sees a plain model
    _EngineOptions = BaseModel
else:
    _EngineOptions = create_model(
        "_EngineOptions",
        __doc__="The engine options as pydantic fields, generated from PanningConfig.options().",
        __module__=__name__,
        **_engine_option_fields(),
    )
ENGINE_OPTIONS = tuple(name for name in _EngineOptions.model_fields if name not in BaseModel.model_fields)
"""Names of the engine options every adapter takes as fields."""

_ENGINE_FIELDS = frozenset({*ENGINE_OPTIONS, "profile", "config", "seed", "reader", "llm"})
"""The fields an adapter's engine is built from: setting one builds it again."""


class PanningFields(_EngineOptions):
    """Panning options shared by the adapters (a pydantic mixin; not used on its own).

    Every ``PanningConfig`` option but ``k`` is a field of the same name, default and doc,
    checked at construction by building the ``PanningConfig``; the adapters add the model,
    ``k`` / ``top_n``, ``profile``, ``config``, ``seed`` and ``on_result``.
    """

    profile: DetectorProfile | None = None
    """Detector profile of the reading model: a ``DetectorProfile``, a bundled profile
    name (``gold_panning_integrations.bundled_profiles()``) or a profile JSON path; loaded
    and checked at construction. None (the default): the profile the reader recommends,
    else the generic ``lost-in-the-middle`` one with a one-time warning; resolved on first
    use, after which this field holds the profile in use."""

    config: PanningConfig | None = None
    """A base ``PanningConfig`` (e.g. ``PanningConfig.paper()`` for the paper's GP-Belief
    update): engine options set explicitly on this adapter override its fields, the
    others keep the config's values; ``k`` / ``top_n`` sets ``k`` per query."""

    seed: int | Literal["fresh"] | None = None
    """Seed of the panner's random stream (placements, labels, tie-breaking). None (the
    default): derived from the query and the documents' text, so a repeated query repeats
    its prompts and ranking; an int: that stream for every query; ``"fresh"``: new entropy."""

    on_result: Callable[[PanningResult], Any] | None = Field(default=None, exclude=True)
    """Called with each ``PanningResult`` after panning (not for an empty input), e.g. a
    trace writer; runs in the caller's thread, and an exception it raises is logged, not
    raised. Not serialised."""

    _engine: Any = PrivateAttr(default=None)
    _reader_lock: Any = PrivateAttr(default_factory=threading.Lock)

    @model_validator(mode="after")
    def _engine_options_are_valid(self) -> PanningFields:
        """The engine options make a valid ``PanningConfig`` (its messages name the option)."""
        if self.panning_config().policy == "oracle":
            raise ValueError(
                "policy 'oracle' is for simulation only (it needs the true relevance); "
                "use 'belief', 'entropy' or 'random'"
            )
        return self

    @field_validator("seed", mode="before")
    @classmethod
    def _check_seed(cls, value: Any) -> Any:
        return check_rng_option(value, name="seed")

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
        # mode="json" always: ``created`` is a datetime, and a plain model_dump() must json.dumps
        return None if profile is None else profile.model_dump(mode="json")

    def panning_config(self, k: Any = ...) -> PanningConfig:
        """``config`` (or the defaults) with the options set explicitly on this adapter
        laid over it, and ``k`` when given (an int, or None for no count limit).

        Raises:
            ValueError: an option is invalid (the message names it and its value).
        """
        options = {name: getattr(self, name) for name in ENGINE_OPTIONS if name in self.model_fields_set}
        if k is not ...:
            options["k"] = k
        return PanningConfig.from_options(self.config, **options)

    def _repr_fields(self) -> dict[str, Any]:
        """The adapter's own fields to show first in ``repr`` (overridden by each adapter)."""
        return {}

    def __repr__(self) -> str:
        """Short: the reader, the profile's model/task/shape, and options that differ
        from their defaults (not the profile's 2 x n_positions floats)."""
        profile = "None (resolved on first use)"
        if self.profile is not None:
            model, task, size = self.profile.model, self.profile.task, self.profile.n_positions
            profile = f"DetectorProfile(model={model!r}, task={task!r}, n_positions={size})"
        parts = {**self._repr_fields(), "profile": profile}
        for name, field in PanningFields.model_fields.items():
            if name in ("profile", "on_result") or name in parts:
                continue
            value = getattr(self, name)
            if value != field.default:
                parts[name] = repr(value)
        if self.on_result is not None:
            parts["on_result"] = getattr(self.on_result, "__qualname__", type(self.on_result).__name__)
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v}" for k, v in parts.items()) + ")"

    def __str__(self) -> str:
        return self.__repr__()

    def _reader_source(self) -> Any:
        """The user's reader argument (overridden by each adapter)."""
        raise NotImplementedError

    def _reported(self, reader: Any) -> Any:
        """``reader`` as the engine calls it: each adapter wraps a reader that does not report
        its model calls to the adapter's framework (:mod:`._model_calls`); here, as given."""
        return reader

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field; one the engine is built from (the model, ``profile``, ``config``,
        ``seed``, an engine option) drops the engine, built again on the next query."""
        super().__setattr__(name, value)
        if name in _ENGINE_FIELDS:
            self._engine = None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """pydantic's copy; one that ``update``s a field the engine is built from builds
        its own engine on its first query."""
        copy = super().model_copy(update=update, deep=deep)
        if update and _ENGINE_FIELDS.intersection(update):
            copy._engine = None
        return copy

    def _get_engine(self) -> GoldPanner:
        """The ``GoldPanner`` built once from the user's reader, profile and options: the
        one edge that resolves them, so ``"local"`` loads one model and every later query
        uses the same profile (kept in ``self.profile``); its reader reports each model
        call to the framework (:meth:`_reported`)."""
        engine: GoldPanner | None = self._engine
        if engine is None:
            with self._reader_lock:
                engine = self._engine
                if engine is None:
                    # k None: no count limit unless a query passes its own (the adapters always do)
                    config = self.panning_config(None)
                    engine = GoldPanner(
                        given_reader(self._reader_source()), self.profile, config, seed=self.seed
                    )
                    engine.reader = self._reported(engine.reader)
                    if isinstance(engine.profile, DetectorProfile):  # what the profile rule returns
                        self.profile = engine.profile
                    self._engine = engine
        return engine

    def _notify(self, result: PanningResult) -> PanningResult:
        """Hand ``result`` to ``on_result`` (its errors are logged, never raised); ``result``."""
        if self.on_result is None:
            return result
        try:
            self.on_result(result)
        except Exception:
            logger.exception(
                "on_result callback %r raised; the panned documents are returned anyway", self.on_result
            )
        return result
