"""The profile artifact: :class:`DetectorProfile` (versioned JSON, schema 3; 1 and 2 load,
migrated), its :class:`RateCounts`, the bundled profiles and :func:`load_profile`. Files are
read defensively (regular file, at most :data:`MAX_PROFILE_BYTES`, UTF-8, JSON depth at most
:data:`MAX_JSON_DEPTH`); every failure is a :class:`ProfileError` naming file and field."""

from __future__ import annotations

import json
import logging
import math
import numbers
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .._io import read_regular_file
from ..engine.beliefs import RecalibrationMap
from ..engine.positions import diagnosticity, interpolate_grid, resample_curve
from ..engine.priors import RankMap, ScoreMap
from ..errors import ProfileError
from ._checks import (
    LEARNED_RANGES,
    MAX_JSON_DEPTH,
    as_list,
    check_rates,
    describe_validation_error,
    increasing_within,
    json_depth,
    learned_problem,
    strict_int,
    strict_int_list,
)

__all__ = [
    "MAX_PROFILE_BYTES",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "DetectorProfile",
    "RateCounts",
    "bundled_profiles",
    "load_profile",
]

logger = logging.getLogger(__name__)


SCHEMA_VERSION = 3
"""Version written by this release; :data:`SUPPORTED_SCHEMA_VERSIONS` are read."""
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
MAX_PROFILE_BYTES = 5 * 1024 * 1024
"""Largest profile file read (a 1,000-position profile with counts is ~100 kB)."""
_BUNDLED_PACKAGE = "gold_panning_integrations.profiles.bundled"


class _Model(BaseModel):
    """A frozen pydantic model whose validation errors are one :class:`ProfileError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err)) from err


class RateCounts(_Model):
    """The evidence behind a profile's measured rates, per measured position.

    All lists have shape ``(P,)``. Counts may be fractional: learning from traces
    (:mod:`gold_panning_integrations.calibration.traces`) adds expected counts under soft labels.
    TPR at ``positions[i]`` is estimated from ``gold_cited[i] / gold_shown[i]`` and FPR from
    ``distractor_cited[i] / distractor_shown[i]`` (Jeffreys-smoothed).
    """

    positions: list[int]
    """0-based profile positions the counts belong to, strictly increasing."""
    gold_cited: list[float]
    """Times a relevant document shown at the position was cited."""
    gold_shown: list[float]
    """Times a relevant document was shown at the position."""
    distractor_cited: list[float]
    """Times an irrelevant document shown at the position was cited."""
    distractor_shown: list[float]
    """Times an irrelevant document was shown at the position."""

    @field_validator("positions", mode="before")
    @classmethod
    def _positions(cls, v: Any) -> Any:
        return strict_int_list("counts.positions", v)

    @field_validator("gold_cited", "gold_shown", "distractor_cited", "distractor_shown", mode="before")
    @classmethod
    def _counts(cls, v: Any, info: Any) -> Any:
        name = f"counts.{info.field_name}"
        v = as_list(name, v, "numbers")
        for i, x in enumerate(v):
            if not isinstance(x, numbers.Real) or isinstance(x, (bool, np.bool_)) or not math.isfinite(x):
                raise ValueError(f"{name}[{i}] = {x!r} is not a finite number")
            if x < 0:
                raise ValueError(f"{name}[{i}] = {x!r} is negative")
        return [float(x) for x in v]

    @model_validator(mode="after")
    def _shape(self) -> RateCounts:
        p = len(self.positions)
        for name in ("gold_cited", "gold_shown", "distractor_cited", "distractor_shown"):
            if len(getattr(self, name)) != p:
                raise ValueError(
                    f"counts.{name} has {len(getattr(self, name))} values but counts.positions has {p}"
                )
        if not increasing_within(self.positions):
            raise ValueError(f"counts.positions must be strictly increasing and >= 0, got {self.positions}")
        for c, m in (("gold_cited", "gold_shown"), ("distractor_cited", "distractor_shown")):
            for i, (x, n) in enumerate(zip(getattr(self, c), getattr(self, m))):
                if x > n + 1e-9:
                    raise ValueError(f"counts.{c}[{i}] = {x} exceeds counts.{m}[{i}] = {n}")
        return self

    def arrays(self) -> dict[str, NDArray[np.float64]]:
        """Every list as a float array of shape ``(P,)`` (``positions`` as intp)."""
        out: dict[str, Any] = {"positions": np.asarray(self.positions, dtype=np.intp)}
        for name in ("gold_cited", "gold_shown", "distractor_cited", "distractor_shown"):
            out[name] = np.asarray(getattr(self, name), dtype=np.float64)
        return out


class DetectorProfile(_Model):
    """Calibrated true/false positive rate of each context position.

    Position ``j`` (0-based, ``j = 0`` is the first document of the prompt) cites a
    relevant document with probability ``tpr[j]`` and an irrelevant one with ``fpr[j]``.
    The values learned for the reader and its retriever (``blind_rate``, ``false_leads``,
    ``prior_head_decay``, ``evidence_temperature``, ``expected_relevant``, ``silent_rate``,
    ``prior_temperature``, ``score_map``; None: not measured) are the panner's
    when its options leave them to the profile.
    """

    schema_version: int = SCHEMA_VERSION
    """Version of the JSON layout; :data:`SUPPORTED_SCHEMA_VERSIONS` are understood."""
    model: str = "unknown"
    """The model the profile was measured on (e.g. ``SmolLM2-135M-Instruct``)."""
    task: str = "unknown"
    """The calibration task (``kv``, ``monorel``, ``pir``, ``nq``, ``synthetic``)."""
    n_positions: int
    """Number of positions; ``tpr`` and ``fpr`` have this length."""
    tpr: list[float]
    """True positive rate per position, each in [0, 1]."""
    fpr: list[float]
    """False positive rate per position, each in [0, 1]."""
    grid_positions: list[int] | None = None
    """0-based positions that were measured (the rest were interpolated), if known."""
    trials: list[int] | None = None
    """Calibration trials per grid position, if known."""
    counts: RateCounts | None = None
    """The cited/shown counts behind the measured rates (schema 2), if known."""
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    """When the profile was made (UTC)."""
    notes: str = ""
    """How the profile was made: command line, data, trial counts."""
    blind_rate: float | None = None
    """Probability, in [0, 1), that a relevant document is one this reader cannot
    recognise, measured on labelled traces (:func:`~gold_panning_integrations.calibration.traces.learn_profile`)."""
    false_leads: float | None = None
    """Expected number of irrelevant documents per question (>= 0) that this reader cites
    the way it cites a relevant one, measured on labelled traces."""
    prior_head_decay: float | None = None
    """Shape of the base retriever's rank prior inside its top 10, in (0, 1], fitted to
    where the relevant documents sat in labelled traces."""
    evidence_temperature: float | None = None
    """Divisor of every log-likelihood ratio (> 0) fitted for this reader."""
    expected_relevant: float | None = None
    """Mean number of relevant documents per question among the candidates (> 0), counted
    on labelled traces: the prior's mass (never ``k``)."""
    silent_rate: float | None = None
    """Probability, in [0, 1), that a reply cites nothing whatever its prompt holds,
    measured on labelled traces (empty replies beyond what the rates predict)."""
    content_free: float | None = None
    """Prior probability, in [0, 1), that on a question the reader's citations follow the
    positions rather than the documents, learned from traces (labelled or not)."""
    prior_temperature: float | None = None
    """Softness (> 0, in standard deviations of the scores) of the score prior for the
    retriever the traces came from, fitted on labelled traces. Without it,
    ``retriever_prior="auto"`` reads only the retriever's order."""
    score_map: dict[str, float] | None = None
    """The base retriever's scores as prior probabilities, fitted for the retriever the
    traces came from (``calibrate --from-traces`` on traces that record its scores):
    ``{"score", "log_rank", "offset", "low", "high"}``
    (:class:`~gold_panning_integrations.engine.priors.ScoreMap`). It reads the scores'
    level, so a query whose candidates all score low starts with a high ``p_none``; used by
    ``retriever_prior="auto"`` before ``prior_temperature``, and only for queries whose top
    score lies in ``[low, high]``. None: not measured."""
    rank_map: dict[str, float] | None = None
    """The base retriever's order as prior probabilities that do not depend on how many
    candidates there are, ``{"log_rank", "offset"}``
    (:class:`~gold_panning_integrations.engine.priors.RankMap`), learned from traces
    (labelled or not). None: not measured (even odds that the first 10 candidates hold
    something relevant, or ``expected_relevant`` among them)."""
    abstention_map: tuple[float, float] | None = None
    """``(slope, offset)``: what a prompt's first-token probability ``p`` of the way out
    (:attr:`~gold_panning_integrations.engine.records.Reading.abstain_p`) tells, as
    ``slope * logit(p) + offset`` nats added to the evidence of every document the prompt
    showed, fitted per query on labelled traces that carry it (``calibrate
    --from-traces``). None: not measured, and the reading is not used."""
    recalibration: dict[str, Any] | None = None
    """Monotone map from the panner's posterior log-odds to calibrated probabilities,
    learned from labelled traces (``gold-panning calibrate --from-traces``):
    ``{"kind": "platt", "slope", "intercept"}`` or ``{"kind": "isotonic", "x", "y"}``
    (:class:`~gold_panning_integrations.engine.beliefs.RecalibrationMap`). Applied to
    every probability the panner reports. None: the posteriors as the update gives them."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata (how a value was fitted, calibration seeds, ...)."""

    @field_validator("abstention_map")
    @classmethod
    def _abstention_map(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        """Two finite numbers, or None."""
        if value is not None and not all(math.isfinite(v) for v in value):
            raise ValueError(f"abstention_map must be two finite numbers (slope, offset), got {value!r}")
        return value

    @field_validator("score_map", mode="before")
    @classmethod
    def _score_map(cls, value: Any) -> Any:
        """A valid :class:`~gold_panning_integrations.engine.priors.ScoreMap` as a dict, or None."""
        if value is None:
            return None
        if isinstance(value, ScoreMap):
            return value.to_dict()
        return ScoreMap.from_dict(value).to_dict()  # ValueError names the bad field

    @field_validator("rank_map", mode="before")
    @classmethod
    def _rank_map(cls, value: Any) -> Any:
        """A valid :class:`~gold_panning_integrations.engine.priors.RankMap` as a dict, or None."""
        if value is None:
            return None
        if isinstance(value, RankMap):
            return value.to_dict()
        return RankMap.from_dict(value).to_dict()  # ValueError names the bad field

    @field_validator("recalibration", mode="before")
    @classmethod
    def _recalibration(cls, value: Any) -> Any:
        """A valid map (monotone, finite, probabilities in [0, 1]) or None."""
        if value is None:
            return None
        if isinstance(value, RecalibrationMap):
            return value.to_dict()
        return RecalibrationMap.from_dict(value).to_dict()  # ValueError names the bad value

    @property
    def recalibration_map(self) -> RecalibrationMap | None:
        """:attr:`recalibration` as a :class:`RecalibrationMap` (None: no map)."""
        return None if self.recalibration is None else RecalibrationMap.from_dict(self.recalibration)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(
                f"schema_version {v!r} is not supported (this release reads versions "
                f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}); upgrade gold-panning-integrations or recalibrate"
            )
        return v

    @field_validator("schema_version", "n_positions", mode="before")
    @classmethod
    def _no_bool_int(cls, v: Any, info: Any) -> Any:
        return strict_int(info.field_name, v)

    @field_validator("grid_positions", "trials", mode="before")
    @classmethod
    def _no_bool_ints(cls, v: Any, info: Any) -> Any:
        return strict_int_list(info.field_name, v)

    @field_validator("tpr", "fpr", mode="before")
    @classmethod
    def _rates(cls, v: Any, info: Any) -> Any:
        return check_rates(info.field_name, as_list(info.field_name, v, "numbers"))

    @model_validator(mode="after")
    def _lengths(self) -> DetectorProfile:
        if self.n_positions < 1:
            raise ValueError(f"n_positions must be >= 1, got {self.n_positions}")
        for name in ("tpr", "fpr"):
            got = len(getattr(self, name))
            if got != self.n_positions:
                raise ValueError(f"{name} has {got} values but n_positions is {self.n_positions}")
        if self.grid_positions is not None:
            g = self.grid_positions
            if not increasing_within(g, self.n_positions):
                raise ValueError(
                    f"grid_positions must be strictly increasing within [0, {self.n_positions - 1}], got {g}"
                )
            if self.trials is not None and len(self.trials) != len(g):
                raise ValueError(f"trials has {len(self.trials)} values but grid_positions has {len(g)}")
        if self.counts is not None and not increasing_within(self.counts.positions, self.n_positions):
            raise ValueError(
                f"counts.positions must lie within [0, {self.n_positions - 1}], got {self.counts.positions}"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Schema 1 and 2 kept the learned values in ``extra``: they become the typed
        fields (a bad value fails here, named where the file holds it), and the profile
        is schema 3. Every version's ``extra`` entries of those names move alike."""
        if not isinstance(data, dict):
            return data
        extra = data.get("extra")
        version = data.get("schema_version", SCHEMA_VERSION)
        moved = [key for key in LEARNED_RANGES if isinstance(extra, dict) and key in extra]
        if not moved and version not in (1, 2):
            return data
        data = dict(data)
        if moved:
            extra = dict(extra)  # type: ignore[arg-type]  # a dict: checked above
            for key in moved:
                value = extra.pop(key)
                problem = learned_problem(key, value)
                if problem is not None:
                    raise ValueError(f"extra[{key!r}] {problem}")
                if data.get(key) is not None:
                    raise ValueError(f"{key} is given both as a field and in extra[{key!r}]; keep the field")
                data[key] = value
            data["extra"] = extra
        if version in (1, 2) and not isinstance(version, bool):
            data["schema_version"] = SCHEMA_VERSION
        return data

    @field_validator(*LEARNED_RANGES, mode="before")
    @classmethod
    def _learned(cls, value: Any, info: Any) -> float | None:
        """A learned value is None (not measured) or a number in its range."""
        if value is None:
            return None
        problem = learned_problem(info.field_name, value)
        if problem is not None:
            raise ValueError(problem)
        return float(value)

    def rate_counts(self) -> RateCounts | None:
        """The counts behind the rates: the ``counts`` field, else (schema-1 files made by
        ``gold-panning calibrate``) ``extra["counts"]`` on ``grid_positions``, else None."""
        if self.counts is not None:
            return self.counts
        old = self.extra.get("counts") if isinstance(self.extra, dict) else None
        if not isinstance(old, dict) or self.grid_positions is None:
            return None
        try:
            return RateCounts(
                positions=self.grid_positions,
                gold_cited=old["tp"],
                gold_shown=old["tp_trials"],
                distractor_cited=old["fp"],
                distractor_shown=old["fp_trials"],
            )
        except (KeyError, ValidationError) as err:
            logger.debug("extra['counts'] of a schema-1 profile is unusable: %s", err)
            return None

    # ------------------------------------------------------------------ views
    @property
    def tpr_array(self) -> NDArray[np.float64]:
        """TPR as an array, shape ``(n_positions,)``."""
        return np.asarray(self.tpr, dtype=np.float64)

    @property
    def fpr_array(self) -> NDArray[np.float64]:
        """FPR as an array, shape ``(n_positions,)``."""
        return np.asarray(self.fpr, dtype=np.float64)

    @property
    def diagnosticity(self) -> NDArray[np.float64]:
        """``|TPR - FPR|`` per position, shape ``(n_positions,)``."""
        return diagnosticity(self.tpr, self.fpr)

    @property
    def is_informative(self) -> bool:
        """False when TPR equals FPR everywhere: no position carries any evidence."""
        return bool(np.any(self.diagnosticity > 1e-9))

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_grid(
        cls,
        grid_positions: ArrayLike,
        tpr: ArrayLike,
        fpr: ArrayLike,
        *,
        n_positions: int,
        trials: ArrayLike | None = None,
        counts: RateCounts | None = None,
        **metadata: Any,
    ) -> DetectorProfile:
        """Build a full profile from rates measured on a grid (linear interpolation).

        Args:
            grid_positions: 0-based measured positions, shape ``(K,)``, increasing.
            tpr: TPR measured at each grid position, shape ``(K,)``.
            fpr: FPR measured at each grid position, shape ``(K,)``.
            n_positions: Length of the full profile.
            trials: Trials per grid position, shape ``(K,)``.
            counts: The cited/shown counts behind the rates.
            **metadata: ``model``, ``task``, ``notes``, ``extra``, ``created``.
        """
        g = np.asarray(grid_positions, dtype=np.intp)
        try:
            t = interpolate_grid(g, tpr, n_positions)
            f = interpolate_grid(g, fpr, n_positions)
        except ValueError as err:
            raise ProfileError(f"cannot interpolate the calibration grid: {err}") from err
        return cls.model_validate(
            {
                "n_positions": n_positions,
                "tpr": t.tolist(),
                "fpr": f.tolist(),
                "grid_positions": g.tolist(),
                "trials": None if trials is None else [int(x) for x in np.asarray(trials)],
                "counts": counts,
                **metadata,
            }
        )

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> DetectorProfile:  # type: ignore[override]
        """Validate like pydantic, but raise :class:`ProfileError` naming field and value."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as err:
            raise ProfileError(describe_validation_error(err)) from err

    def resample(self, n_positions: int) -> DetectorProfile:
        """The same profile at another number of positions, by relative position.

        A profile measured at 100 positions used for 37 documents keeps its first and
        last positions and interpolates in between. Returns ``self`` when unchanged.
        """
        if n_positions == self.n_positions:
            return self
        if n_positions < 1:
            raise ProfileError(f"n_positions must be >= 1 to resample, got {n_positions}")
        return self.model_copy(
            update={
                "n_positions": n_positions,
                "tpr": resample_curve(self.tpr, n_positions).tolist(),
                "fpr": resample_curve(self.fpr, n_positions).tolist(),
                "grid_positions": None,
                "trials": None,
                "counts": None,
                "notes": (self.notes + f" [resampled from {self.n_positions} positions]").strip(),
            }
        )

    # --------------------------------------------------------------------- I/O
    def to_json(self) -> str:
        """Serialise to indented JSON."""
        return self.model_dump_json(indent=2)

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON (atomically: a temp file, then rename)."""
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        try:
            tmp.write_text(self.to_json() + "\n", encoding="utf-8")
            tmp.replace(p)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return p

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "<string>") -> DetectorProfile:
        """Parse a profile from JSON text; errors name the source, the field and the value."""
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as err:
                raise ProfileError(
                    f"{source} is not UTF-8 text (invalid byte at offset {err.start}); "
                    "a profile is a JSON file written by `gold-panning calibrate`"
                ) from err
        depth = json_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise ProfileError(
                f"{source} nests JSON {depth} levels deep (a profile needs 3, at most {MAX_JSON_DEPTH} "
                "are read): not a detector profile"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ProfileError(
                f"{source} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
                "the file may be truncated: recalibrate or restore it"
            ) from err
        except (RecursionError, ValueError) as err:  # ValueError: e.g. huge integer literals
            raise ProfileError(
                f"{source} is not a readable JSON profile ({type(err).__name__}: {err})"
            ) from err
        if not isinstance(data, dict):
            raise ProfileError(f"{source} must hold a JSON object, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ProfileError as err:
            raise ProfileError(f"{source}: {err}") from err

    @classmethod
    def load(cls, path: str | Path) -> DetectorProfile:
        """Load a profile from a JSON file (a regular file of at most
        :data:`MAX_PROFILE_BYTES`, after resolving symlinks)."""
        p = Path(path)
        raw = read_regular_file(p, max_bytes=MAX_PROFILE_BYTES, what="profile file", error=ProfileError)
        return cls.from_json(raw, source=f"profile file {str(p)!r}")

    @classmethod
    def bundled(cls, name: str) -> DetectorProfile:
        """Load a profile shipped with the package by name (see :func:`bundled_profiles`)."""
        names = bundled_profiles()
        if name not in names:
            raise ProfileError(
                f"no bundled profile named {name!r}; available: {', '.join(names) or 'none'}. "
                "Pass a DetectorProfile or a path to a profile JSON file instead."
            )
        text = resources.files(_BUNDLED_PACKAGE).joinpath(f"{name}.json").read_text(encoding="utf-8")
        return cls.from_json(text, source=f"bundled profile {name!r}")


def bundled_profiles() -> list[str]:
    """Names of the profiles shipped with the package."""
    root = resources.files(_BUNDLED_PACKAGE)
    return sorted(p.name[: -len(".json")] for p in root.iterdir() if p.name.endswith(".json"))


def load_profile(profile: DetectorProfile | str | Path) -> DetectorProfile:
    """Resolve a profile given as an object, a bundled name, or a path to a JSON file."""
    if isinstance(profile, DetectorProfile):
        return profile
    if isinstance(profile, Path):
        return DetectorProfile.load(profile)
    if isinstance(profile, str):
        if profile in bundled_profiles():
            return DetectorProfile.bundled(profile)
        if profile.endswith(".json") or Path(profile).exists():
            return DetectorProfile.load(profile)
        raise ProfileError(
            f"{profile!r} is neither a bundled profile ({', '.join(bundled_profiles())}) "
            "nor an existing JSON file"
        )
    raise ProfileError(
        f"profile must be a DetectorProfile, a bundled name or a path, got {type(profile).__name__}"
    )
