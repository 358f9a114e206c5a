"""Detector profiles: per-position TPR/FPR of one model under one prompting protocol.

A profile (:class:`DetectorProfile`) is a versioned JSON artifact (schema 3; 1 and 2 load,
migrated), made by :mod:`gold_panning_integrations.calibration`, interpolated linearly
between grid positions and resampled by relative position to each prompt's size. Files are
read defensively (regular file, at most :data:`MAX_PROFILE_BYTES`, UTF-8, JSON depth at most
:data:`MAX_JSON_DEPTH`); every failure is a :class:`ProfileError` naming file and field.
The bundled profiles are JSON files in ``profiles/bundled/``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, NamedTuple

from ._lookup import profile_for_task, task_kind
from .detector_profile import (
    MAX_PROFILE_BYTES,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    DetectorProfile,
    RateCounts,
    bundled_profiles,
    load_profile,
)

__all__ = [
    "GENERIC_PROFILE",
    "MAX_PROFILE_BYTES",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "DetectorProfile",
    "RateCounts",
    "ResolvedProfile",
    "bundled_profiles",
    "load_profile",
    "resolve_profile",
    "resolved_profile",
]

logger = logging.getLogger(__name__)


GENERIC_PROFILE = "lost-in-the-middle"
"""The bundled profile used when neither the user nor the reader names one."""

_warned_generic = False


class ResolvedProfile(NamedTuple):
    """A profile picked by :func:`resolve_profile`'s rule, and how reports name it."""

    profile: DetectorProfile
    label: str
    """The bundled name or path it came from, else ``"model (task)"`` for an object."""


def resolve_profile(
    profile: DetectorProfile | str | Path | None = None, *, reader: Any = None, task: str = "passages"
) -> DetectorProfile:
    """The profile :func:`resolved_profile` picks (the one profile rule)."""
    return resolved_profile(profile, reader=reader, task=task).profile


def resolved_profile(
    profile: DetectorProfile | str | Path | None = None, *, reader: Any = None, task: str = "passages"
) -> ResolvedProfile:
    """The one profile rule every entry point (CLI, ``GoldPanner``, integrations) follows.

    1. An explicit ``profile`` (object, bundled name or JSON path) wins.
    2. Else the profile the reader names for itself: a reader may expose
       ``recommended_profile`` (a bundled name, a path or a ``DetectorProfile``), e.g. the
       embedded SmolLM2 reader names ``"smollm2-135m-kv"``, measured for it. When that is
       a bundled profile of the reader's own model (its ``model_name`` matches the
       profile's ``model``), the bundled profile of that model and mode measured on
       ``task``'s documents is used (:func:`~._lookup.profile_for_task`): for
       ``"passages"`` (the default) ``"smollm2-135m-nq-labelled"`` and
       ``"qwen2.5-coder-0.5b-nq"``, with their recalibration maps; for ``"kv"`` the
       ``-kv`` ones. A model with no profile for that kind keeps the one it names, with a
       one-time warning.
    3. Else the generic bundled profile, with a one-time warning that says how to
       calibrate one for this model.

    Args:
        profile: The user's profile, or None.
        reader: The reader (for its ``recommended_profile`` and ``model_name``).
        task: The kind of documents panned: ``"passages"`` (retrieved text: the
            integrations, ``evaluate`` on NQ and collections) or ``"kv"`` (key-value facts).

    Raises:
        ProfileError: the profile named cannot be loaded (the message says why).
        ValueError: ``task`` is not ``"passages"`` or ``"kv"``.
    """
    global _warned_generic
    if task_kind(task) is None:
        raise ValueError(f"task must be 'passages' or 'kv' (the documents panned), got {task!r}")
    given = profile if profile is not None else getattr(reader, "recommended_profile", None)
    if profile is None and isinstance(given, str):
        model = getattr(reader, "model_name", None)
        given = profile_for_task(given, task, model=model if isinstance(model, str) else None)
    if given is not None:
        loaded = load_profile(given)
        label = str(given) if isinstance(given, (str, os.PathLike)) else f"{loaded.model} ({loaded.task})"
        return ResolvedProfile(loaded, label)
    if not _warned_generic:
        _warned_generic = True
        logger.warning(
            "no detector profile measured for this model: using the generic %r profile. "
            "Measure one with `gold-panning calibrate --budget 100 ...` and pass profile=PATH.",
            GENERIC_PROFILE,
        )
    return ResolvedProfile(DetectorProfile.bundled(GENERIC_PROFILE), GENERIC_PROFILE)
