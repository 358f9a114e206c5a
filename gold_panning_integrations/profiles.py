"""Detector profiles: per-position TPR/FPR of one model under one prompting protocol.

A profile is a versioned JSON artifact::

    {"schema_version": 1, "model": "...", "task": "...", "n_positions": 100,
     "tpr": [...], "fpr": [...], "grid_positions": [...], "trials": [...],
     "created": "2026-11-21T00:00:00Z", "notes": "..."}

Profiles are made by the calibration protocol (:mod:`gold_panning_integrations.calibration`)
on a grid of positions and interpolated linearly; they are resampled by relative position
to the number of documents actually shown in a prompt.
"""

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

from .engine.assignment import diagnosticity
from .engine.curves import interpolate_grid, resample_curve
from .errors import ProfileError

__all__ = [
    "GENERIC_PROFILE",
    "SCHEMA_VERSION",
    "DetectorProfile",
    "bundled_profiles",
    "load_profile",
    "resolve_profile",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_BUNDLED_PACKAGE = "gold_panning_integrations._data.profiles"


def _check_rates(name: str, values: list[float]) -> list[float]:
    if len(values) == 0:
        raise ValueError(f"{name} is empty: a profile needs at least one position")
    for i, v in enumerate(values):
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)) or math.isnan(v):
            raise ValueError(f"{name}[{i}] = {v!r} is not a number")
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}[{i}] = {v!r} is outside [0, 1]")
    return [float(v) for v in values]


class DetectorProfile(BaseModel):
    """Calibrated true/false positive rate of each context position.

    Position ``j`` (0-based, ``j = 0`` is the first document of the prompt) cites a
    relevant document with probability ``tpr[j]`` and an irrelevant one with ``fpr[j]``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    """Version of the JSON layout; only :data:`SCHEMA_VERSION` is understood."""
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
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    """When the profile was made (UTC)."""
    notes: str = ""
    """How the profile was made: command line, data, trial counts."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata (e.g. a fitted posterior temperature)."""

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v!r} is not supported (this release reads version "
                f"{SCHEMA_VERSION}); upgrade gold-panning-integrations or recalibrate"
            )
        return v

    @field_validator("tpr", "fpr", mode="before")
    @classmethod
    def _rates(cls, v: Any, info: Any) -> Any:
        if isinstance(v, np.ndarray):
            v = v.tolist()
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"{info.field_name} must be a list of numbers, got {type(v).__name__}")
        return _check_rates(info.field_name, list(v))

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
            if any(p < 0 or p >= self.n_positions for p in g) or any(b <= a for a, b in zip(g, g[1:])):
                raise ValueError(
                    f"grid_positions must be strictly increasing within [0, {self.n_positions - 1}], got {g}"
                )
            if self.trials is not None and len(self.trials) != len(g):
                raise ValueError(
                    f"trials has {len(self.trials)} values but grid_positions has {len(g)}"
                )
        return self

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
        **metadata: Any,
    ) -> DetectorProfile:
        """Build a full profile from rates measured on a grid (linear interpolation).

        Args:
            grid_positions: 0-based measured positions, shape ``(K,)``, increasing.
            tpr: TPR measured at each grid position, shape ``(K,)``.
            fpr: FPR measured at each grid position, shape ``(K,)``.
            n_positions: Length of the full profile.
            trials: Trials per grid position, shape ``(K,)``.
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
                **metadata,
            }
        )

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> DetectorProfile:  # type: ignore[override]
        """Validate like pydantic, but raise :class:`ProfileError` naming field and value."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as err:
            raise ProfileError(_describe(err)) from err

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ProfileError(_describe(err)) from err

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
        tmp.write_text(self.to_json() + "\n", encoding="utf-8")
        tmp.replace(p)
        return p

    @classmethod
    def from_json(cls, text: str, *, source: str = "<string>") -> DetectorProfile:
        """Parse a profile from JSON text; errors name the source, the field and the value."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ProfileError(
                f"{source} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
                "the file may be truncated: recalibrate or restore it"
            ) from err
        if not isinstance(data, dict):
            raise ProfileError(f"{source} must hold a JSON object, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ProfileError as err:
            raise ProfileError(f"{source}: {err}") from err

    @classmethod
    def load(cls, path: str | Path) -> DetectorProfile:
        """Load a profile from a JSON file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as err:
            raise ProfileError(f"cannot read profile file {str(p)!r}: {err.strerror or err}") from err
        return cls.from_json(text, source=str(p))

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


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e.get("loc", ())) or "profile"
        msg = e.get("msg", "invalid")
        msg = msg.removeprefix("Value error, ")
        if "input" in e and e.get("type") not in ("value_error",):
            inp = e["input"]
            shown = repr(inp) if len(repr(inp)) < 80 else repr(inp)[:77] + "..."
            parts.append(f"{loc}: {msg} (got {shown})")
        else:
            parts.append(f"{loc}: {msg}")
    return "invalid detector profile: " + "; ".join(parts)


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


GENERIC_PROFILE = "lost-in-the-middle"
"""The bundled profile used when neither the user nor the reader names one."""

_warned_generic = False


def resolve_profile(profile: DetectorProfile | str | Path | None = None, *, reader: Any = None) -> DetectorProfile:
    """The one profile rule every entry point (CLI, ``GoldPanner``, integrations) follows.

    1. An explicit ``profile`` (object, bundled name or JSON path) wins.
    2. Else the profile the reader names for itself: a reader may expose
       ``recommended_profile`` (a bundled name, a path or a ``DetectorProfile``), e.g. the
       embedded SmolLM2 reader names ``"smollm2-135m-kv"``, measured for it.
    3. Else the generic bundled profile, with a one-time warning that says how to
       calibrate one for this model.
    """
    global _warned_generic
    if profile is not None:
        return load_profile(profile)
    named = getattr(reader, "recommended_profile", None)
    if named is not None:
        return load_profile(named)
    if not _warned_generic:
        _warned_generic = True
        logger.warning(
            "no detector profile measured for this model: using the generic %r profile. "
            "Measure one with `gold-panning calibrate --budget 100 ...` and pass profile=PATH.",
            GENERIC_PROFILE,
        )
    return DetectorProfile.bundled(GENERIC_PROFILE)
