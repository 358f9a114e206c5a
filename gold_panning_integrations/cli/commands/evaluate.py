"""``gold-panning evaluate``: Gold Panning side by side with the peers on the user's own
endpoint and data; implemented in :mod:`gold_panning_integrations.evaluate.compare`."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    from ...evaluate.compare import register as add

    add(sub)
