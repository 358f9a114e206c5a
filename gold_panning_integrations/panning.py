"""The user-facing :class:`GoldPanner`: the engine's panner with profiles resolved at the edge.

The numpy engine takes any object with ``tpr``/``fpr``
(:class:`~gold_panning_integrations.engine.result.ProfileLike`) and never imports
:mod:`gold_panning_integrations.profiles`. This subclass accepts what a user has at hand
(a ``DetectorProfile``, a bundled name, a path to a profile JSON file, or nothing) and
resolves it with :func:`~gold_panning_integrations.profiles.resolve_profile`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .engine import panner as _engine
from .engine.config import PanningConfig
from .profiles import DetectorProfile, resolve_profile

__all__ = ["GoldPanner", "PanningConfig"]


class GoldPanner(_engine.GoldPanner):
    """Bayesian active search for the relevant documents of one question.

    The same as :class:`gold_panning_integrations.engine.GoldPanner` (see it for the round
    loop), except ``profile`` may be:

    * a ``DetectorProfile`` or any object with ``tpr``/``fpr``;
    * a bundled profile name (``gold_panning_integrations.bundled_profiles()``) or a path
      to a profile JSON file (e.g. from ``gold-panning calibrate``);
    * None: the profile the reader recommends for itself (its ``recommended_profile``),
      else the generic ``lost-in-the-middle`` profile with a one-time warning.

    Args:
        reader: Object with ``read(question, documents, *, labels=None)`` and/or ``aread``.
        profile: See above.
        config: A :class:`PanningConfig`; None for the defaults.
        rng: ``numpy.random.Generator`` or seed.
        **options: Any :class:`PanningConfig` field (``rounds=4, k=1, ...``).

    Raises:
        ProfileError: the name or file is not a valid profile (the message says which).
        ValueError: an option is out of range (the message names it and its value).
    """

    def __init__(
        self,
        reader: Any = None,
        profile: DetectorProfile | str | Path | Any | None = None,
        config: PanningConfig | None = None,
        *,
        rng: np.random.Generator | int | None = None,
        **options: Any,
    ) -> None:
        if profile is None or isinstance(profile, (str, Path, DetectorProfile)):
            profile = resolve_profile(profile, reader=reader)
        super().__init__(reader, profile, config, rng=rng, **options)
