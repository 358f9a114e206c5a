"""Which bundled profile was measured for a model: the model-name -> bundled profile rule.

A reader whose model name (e.g. ``general.name`` from a GGUF file's metadata) matches a
bundled profile's ``model`` (:func:`model_key`) and whose mode matches the profile's
(:func:`profile_mode`) recommends that profile (its ``recommended_profile``, read by
:func:`~gold_panning_integrations.profiles.resolve_profile`); any other model gets the
generic profile with the one-time warning.
"""

from __future__ import annotations

import functools
import re

from . import DetectorProfile, bundled_profiles

__all__ = ["bundled_profile_for", "model_key", "profile_mode"]

_NOTES_MODE = re.compile(r"Reader mode: (answer|cite)\b")


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


@functools.cache
def _index() -> tuple[tuple[str, str, str, str | None], ...]:
    """``(bundled name, model key, task, mode)`` of every bundled profile."""
    out = []
    for name in bundled_profiles():
        p = DetectorProfile.bundled(name)
        out.append((name, model_key(p.model), p.task, profile_mode(p)))
    return tuple(out)


def bundled_profile_for(model: str, *, mode: str = "answer", task: str = "kv") -> str | None:
    """The bundled profile measured for ``model`` read in ``mode``, or None.

    Among the bundled profiles whose model matches (see :func:`model_key`) and whose
    mode is ``mode``, the one measured on ``task`` is preferred, then the first by name.

    Args:
        model: The reader's model name (``LocalReader`` reads it from the GGUF metadata).
        mode: The reader's mode, ``"answer"`` or ``"cite"``: a profile measured in one
            mode says nothing about the other.
        task: The calibration task preferred when several profiles match.
    """
    key = model_key(model)
    if not key:
        return None
    found = [(t != task, name) for name, k, t, m in _index() if k == key and m == mode]
    return min(found)[1] if found else None
