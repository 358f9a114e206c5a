"""Checks behind :class:`~gold_panning_integrations.profiles.DetectorProfile` and
:class:`~gold_panning_integrations.profiles.RateCounts`, each failure a message naming the
field and the bad value.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..errors import ProfileError

__all__ = [
    "LEARNED_RANGES",
    "MAX_JSON_DEPTH",
    "as_list",
    "check_rates",
    "describe_validation_error",
    "increasing_within",
    "json_depth",
    "learned_problem",
    "strict_int",
    "strict_int_list",
]


LEARNED_RANGES: dict[str, tuple[float, float | None, bool, bool]] = {
    # field: (low, high, low open, high open)
    "blind_rate": (0.0, 1.0, False, True),
    "false_leads": (0.0, None, False, True),
    "prior_head_decay": (0.0, 1.0, True, False),
    "evidence_temperature": (0.0, None, True, True),
    "expected_relevant": (0.0, None, True, True),
    "silent_rate": (0.0, 1.0, False, True),
    "prior_temperature": (0.0, None, True, True),
    "content_free": (0.0, 1.0, False, True),
}
"""The learned fields of a profile (schema 3; ``extra`` entries before) and their ranges."""


MAX_JSON_DEPTH = 32
"""Deepest JSON nesting accepted in a profile file (a real profile nests 3 levels)."""


def as_list(name: str, v: Any, of: str) -> list[Any]:
    """``v`` (a list, tuple or array) as a list; a ValueError naming ``name`` otherwise."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{name} must be a list of {of}, got {type(v).__name__}")  # noqa: TRY004 - pydantic reports ValueErrors
    return list(v)


def check_rates(name: str, values: list[float]) -> list[float]:
    """``values`` as floats when each is a number in [0, 1]; a ValueError naming the first bad one."""
    if len(values) == 0:
        raise ValueError(f"{name} is empty: a profile needs at least one position")
    for i, v in enumerate(values):
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)) or math.isnan(v):
            raise ValueError(f"{name}[{i}] = {v!r} is not a number")
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}[{i}] = {v!r} is outside [0, 1]")
    return [float(v) for v in values]


def learned_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the learned field ``name`` (None when it is valid)."""
    low, high, low_open, high_open = LEARNED_RANGES[name]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        x = float(value)
        ok = (x > low if low_open else x >= low) and (high is None or (x < high if high_open else x <= high))
    if ok:
        return None
    span = (
        f"{'(' if low_open else '['}{low:g}, {'inf' if high is None else format(high, 'g')}"
        f"{')' if high_open or high is None else ']'}"
    )
    return f"must be a number in {span}, got {value!r:.40}"


def increasing_within(values: list[int], stop: float = math.inf) -> bool:
    """Whether ``values`` increase strictly and lie within ``0..stop-1``."""
    return all(b > a for a, b in itertools.pairwise(values)) and all(0 <= x < stop for x in values)


def strict_int(name: str, v: Any) -> Any:
    """Reject bools (and non-integral floats) where an integer is expected."""
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got the boolean {v!r}")  # noqa: TRY004 - pydantic reports ValueErrors
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"{name} must be an integer, got {v!r}")
    return v


def strict_int_list(name: str, v: Any) -> Any:
    """A list (or array) of integers as a list, each checked by :func:`strict_int`; None as is."""
    if v is None:
        return v
    v = as_list(name, v, "integers")
    for i, x in enumerate(v):
        strict_int(f"{name}[{i}]", x)
    return v


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text (brackets inside strings ignored); linear
    time with no recursion, so 100,000 levels cost milliseconds."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0
    brackets = "".join(_BRACKETS.findall(_JSON_STRING.sub('""', text)))
    if not brackets:
        return 0
    steps = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    delta = np.where((steps == ord("[")) | (steps == ord("{")), 1, -1)
    return int(np.cumsum(delta).max())


def describe_validation_error(err: ValidationError) -> str:
    """A pydantic validation error as one message naming each bad field (``loc: msg (got ...)``)."""
    parts = []
    for e in err.errors():
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, ProfileError):  # already described (pydantic calls our __init__)
            parts.append(str(inner).removeprefix("invalid detector profile: "))
            continue
        loc = ".".join(str(x) for x in e.get("loc", ())) or "profile"
        msg = e.get("msg", "invalid").removeprefix("Value error, ")
        if "input" in e and e.get("type") != "value_error":
            inp = e["input"]
            shown = repr(inp) if len(repr(inp)) < 80 else repr(inp)[:77] + "..."
            parts.append(f"{loc}: {msg} (got {shown})")
        else:
            parts.append(f"{loc}: {msg}")
    return "invalid detector profile: " + "; ".join(parts)
