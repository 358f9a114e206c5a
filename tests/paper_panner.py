"""The panner with the paper's update, for engine tests that pin numbers by hand.

Import it (``from paper_panner import GoldPanner``); it needs no framework. One definition:
before, this wrapper lived in four test files.
"""

from __future__ import annotations

from typing import Any

from gold_panning_integrations import GoldPanner as _GoldPanner


def GoldPanner(*args: Any, **kwargs: Any) -> _GoldPanner:
    """The panner with the paper's update (``shuffle_top=0``, ``robust=False``,
    ``empty_prompts="evidence"``, ``adapt_level=False``) unless given: these tests pin
    placements and updates by hand from the profile's own rates (the shuffle is tested in
    ``test_engine_labels.py``, the robust likelihood in ``test_engine_robust.py``)."""
    kwargs.setdefault("shuffle_top", 0)
    kwargs.setdefault("robust", False)
    kwargs.setdefault("empty_prompts", "evidence")
    kwargs.setdefault("adapt_level", False)
    return _GoldPanner(*args, **kwargs)
