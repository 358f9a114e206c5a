"""Which bundled profile was measured for a model: the model-name -> bundled profile rule,
and, for one model, the profile measured on the kind of documents at hand.

A reader whose model name (e.g. ``general.name`` from a GGUF file's metadata) matches a
bundled profile's ``model`` (:func:`model_key`) and whose mode matches the profile's
(:func:`profile_mode`) recommends that profile (its ``recommended_profile``, read by
:func:`~gold_panning_integrations.profiles.resolved_profile`); any other model gets the
generic profile with the one-time warning.

A model may have several bundled profiles, measured on different documents
(:func:`task_kind`: ``"passages"``, retrieved text such as NQ's, or ``"kv"``, one-sentence
key-value facts). :func:`profile_for_task` picks, for the model of a bundled profile, the
one measured on the documents the caller pans: ``"passages"`` for the integrations,
``gold-panning run --docs`` and ``evaluate``'s NQ and collection tasks, ``"kv"`` for the kv
tasks.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Literal, NamedTuple, get_args

from .detector_profile import DetectorProfile, bundled_profiles

__all__ = [
    "TASK_KINDS",
    "TaskKind",
    "bundled_profile_for",
    "model_key",
    "profile_for_task",
    "profile_mode",
    "task_kind",
]

logger = logging.getLogger(__name__)

TaskKind = Literal["passages", "kv"]
"""The kinds of documents a profile is measured on and a caller pans."""
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)

_KIND_OF_TASK: dict[str, TaskKind] = {"passages": "passages", "nq": "passages", "kv": "kv"}
"""A kind, or a profile's ``task``, -> the kind of documents it means."""

_NOTES_MODE = re.compile(r"Reader mode: (answer|cite)\b")

_warned_fallback: set[tuple[str, str]] = set()


def task_kind(task: str) -> TaskKind | None:
    """The kind of documents ``task`` names: ``"passages"`` for ``"passages"`` and a
    profile measured on ``nq``; ``"kv"`` for ``"kv"``; None for any other task
    (``synthetic``, ``unknown``, ...)."""
    return _KIND_OF_TASK.get(task)


def model_key(name: str) -> str:
    """``name`` reduced for matching: lowercase letters and digits only
    (``"SmolLM2 135M Instruct"`` and ``"SmolLM2-135M-Instruct"`` both give
    ``"smollm2135minstruct"``)."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def profile_mode(profile: DetectorProfile) -> str | None:
    """The reader mode a profile was measured in: ``extra["mode"]``, else the
    ``"Reader mode: ..."`` that ``gold-panning calibrate`` writes in the notes, else None."""
    mode = profile.extra.get("mode") if isinstance(profile.extra, dict) else None
    if isinstance(mode, str):
        return mode
    found = _NOTES_MODE.search(profile.notes)
    return found.group(1) if found else None


class _Bundled(NamedTuple):
    name: str
    model: str
    key: str
    task: str
    mode: str | None
    mapped: bool


@functools.cache
def _index() -> tuple[_Bundled, ...]:
    """Name, model (and its :func:`model_key`), task, mode and whether it has a
    recalibration map, of every bundled profile."""
    out = []
    for name in bundled_profiles():
        p = DetectorProfile.bundled(name)
        out.append(
            _Bundled(name, p.model, model_key(p.model), p.task, profile_mode(p), p.recalibration is not None)
        )
    return tuple(out)


def bundled_profile_for(model: str, *, mode: str = "answer", task: str = "kv") -> str | None:
    """The bundled profile measured for ``model`` read in ``mode``, or None.

    Among the bundled profiles whose model matches (see :func:`model_key`) and whose
    mode is ``mode``, the one measured on ``task``'s kind of documents (:func:`task_kind`)
    is preferred, then one with a recalibration map, then the first by name.

    Args:
        model: The reader's model name (``LocalReader`` reads it from the GGUF metadata).
        mode: The reader's mode, ``"answer"`` or ``"cite"``: a profile measured in one
            mode says nothing about the other.
        task: The kind of documents (``"passages"``, ``"kv"``) or a profile's task
            (``"nq"``) preferred when several profiles match.
    """
    key = model_key(model)
    if not key:
        return None
    kind = task_kind(task)
    found = [
        (task_kind(b.task) != kind, not b.mapped, b.name) for b in _index() if b.key == key and b.mode == mode
    ]
    return min(found)[2] if found else None


def profile_for_task(name: str, task: str, *, model: str | None) -> str:
    """What a reader of ``model`` that recommends the bundled profile ``name`` gets for
    ``task``'s kind of documents: the bundled profile of the same model and mode measured
    on that kind (:func:`bundled_profile_for`).

    ``name`` itself when it is not a bundled profile measured for ``model`` on passages or
    kv (a test double's or a simulator's choice, the generic profile), or is measured on
    that kind already; when the model has no bundled profile for that kind, ``name`` with a
    one-time warning naming what it was measured on.

    Raises:
        ValueError: ``task`` is not a kind of documents (:data:`TASK_KINDS`).
    """
    kind = task_kind(task)
    if kind is None:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASK_KINDS))}, got {task!r}")
    own = next((b for b in _index() if b.name == name), None)
    if own is None or not own.key or own.key != model_key(model or "") or task_kind(own.task) in (None, kind):
        return name
    picked = bundled_profile_for(own.model, mode=own.mode, task=kind) if own.mode else None
    if picked is not None and any(b.name == picked and task_kind(b.task) == kind for b in _index()):
        return picked
    if (name, kind) not in _warned_fallback:
        _warned_fallback.add((name, kind))
        logger.warning(
            "no bundled profile of %s is measured on %s: using %r, measured on %r. Measure one on "
            "your documents with `gold-panning calibrate --from-traces ...` and pass profile=PATH.",
            own.model,
            "passages" if kind == "passages" else "key-value facts",
            name,
            own.task,
        )
    return name
