"""What a rerank checkpoint's records depend on (:func:`job_ledger`), written on its first
line and compared with a rerun's: a record is reused only by a job with the same
ledger, so the outputs never mix two endpoints, two prompt budgets or two profiles.

The ledger holds every setting that can change a question's record:

* ``reader``: the reader's class, model and endpoint (base URL) and every declared reader
  option but the operational ones (:data:`OPERATIONAL`: calls in flight, rate limits, reply
  cache, retry wait, timeout), i.e. the mode, template, response format, temperature,
  prompt budget (``context_tokens``), attempts, ... (:func:`reader_ledger`);
* ``profile``: the profile's name and a SHA-256 of its contents (:func:`profile_ledger`);
* ``config``: every engine option (but ``on_failure``: a fallback record is provisional,
  :func:`is_provisional`, and asked again, whatever the option);
* ``seed``; ``input``: the number of questions and a SHA-256 of their fingerprints
  (:func:`input_fingerprint`); ``format`` and ``version``.

:func:`ledger_differences` names every setting that differs, in full, with the flag that
sets it. The local job (:mod:`._job`) and the Ray path (:mod:`.ray`) write the same ledger,
so one checkpoint folder serves both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ._inputs import input_fingerprint

__all__ = [
    "CHECKPOINT_FORMAT",
    "LEDGER_KEYS",
    "OPERATIONAL",
    "input_fingerprint",
    "is_provisional",
    "job_ledger",
    "ledger_differences",
    "profile_ledger",
    "reader_ledger",
]

CHECKPOINT_FORMAT = 2
"""The checkpoint's layout: a ledger line (``{"type": "meta", ...}``), then question lines
``{"type": "question", "index", "fingerprint", "record"}`` (the last line of an index wins).
Format 1 recorded the model, mode, profile name, engine options, seed and the input's kind."""

LEDGER_KEYS = ("format", "version", "input", "reader", "profile", "config", "seed")
"""The ledger's sections, compared one setting at a time."""

OPERATIONAL = frozenset(
    {"max_concurrency", "requests_per_minute", "tokens_per_minute", "cache", "wait", "timeout"}
)
"""Reader options that decide how fast and how patiently the endpoint is asked, never what
a reply means: they may change between runs (a question that failed under them is recorded
as failed, and provisional)."""

_READER_EXTRAS = ("top_p", "max_tokens", "extra_body", "logprobs")
"""Attributes beside the declared options that change a reply (``OpenAIReader``'s)."""

_NOT_COMPARED_CONFIG = frozenset({"on_failure"})
"""Engine options that change no kept record (a fallback record is asked again)."""


def is_provisional(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a fallback, recorded because the endpoint failed (every prompt
    failed: ``panned`` false, ``stop_reason`` ``"all-rounds-failed"``): a rerun asks it
    again unless told to keep fallbacks."""
    return record.get("panned") is False and record.get("stop_reason") == "all-rounds-failed"


def _plain(value: Any) -> Any:
    """``value`` as JSON that is the same in every run for the same setting: a callable
    by its qualified name, an object whose ``repr`` shows an address by its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": kind, **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if callable(value):
        name = getattr(value, "__qualname__", None) or type(value).__qualname__
        return f"callable {getattr(value, '__module__', None) or type(value).__module__}.{name}"
    text = repr(value)
    return kind if " at 0x" in text else text


def reader_ledger(reader: Any) -> dict[str, Any]:
    """What of ``reader`` can change a record: its class, ``model`` (its ``model_name``),
    ``endpoint`` (an ``OpenAIReader``'s base URL), every declared reader option it holds
    but :data:`OPERATIONAL`, and ``top_p``/``max_tokens``/``extra_body``/``logprobs``."""
    from ..readers._options import READER_OPTIONS

    inner = getattr(reader, "reader", reader) if type(reader).__name__ == "AdaptedReader" else reader
    out: dict[str, Any] = {
        "class": f"{type(inner).__module__}.{type(inner).__qualname__}",
        "model": _plain(getattr(inner, "model_name", None)),
        "endpoint": _plain(getattr(inner, "url", None) or getattr(inner, "base_url", None)),
    }
    for name in (*READER_OPTIONS, *_READER_EXTRAS):
        if name not in OPERATIONAL and name not in out and hasattr(inner, name):
            out[name] = _plain(getattr(inner, name))
    return out


def profile_ledger(panner: Any) -> dict[str, Any]:
    """The profile's name (as reports give it) and the SHA-256 of its contents (a
    ``DetectorProfile``'s JSON; any other profile's ``tpr`` and ``fpr``)."""
    profile = panner.profile
    dump = getattr(profile, "model_dump", None)
    content = (
        dump(mode="json")
        if callable(dump)
        else {"tpr": [float(x) for x in profile.tpr], "fpr": [float(x) for x in profile.fpr]}
    )
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return {
        "name": getattr(panner, "profile_label", None),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def job_ledger(panner: Any, *, seed: int | None, questions: int, fingerprint: str) -> dict[str, Any]:
    """The ledger of a job of ``panner`` (a ``GoldPanner``) on ``questions`` questions whose
    :func:`input_fingerprint` is ``fingerprint``, with ``seed`` (see the module docstring)."""
    from .. import __version__

    config = {k: v for k, v in panner.config.to_dict().items() if k not in _NOT_COMPARED_CONFIG}
    return {
        "format": CHECKPOINT_FORMAT,
        "version": __version__,
        "input": {"questions": int(questions), "fingerprint": fingerprint},
        "reader": reader_ledger(panner.reader),
        "profile": profile_ledger(panner),
        "config": _plain(config),
        "seed": seed,
    }


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = value
    return out


def _flag(key: str) -> str | None:
    """The command-line flag that sets the ledger's setting ``key`` (None: none)."""
    section, _, name = key.partition(".")
    if section == "reader":
        from ..readers._options import READER_OPTIONS

        option = READER_OPTIONS.get(name)
        named = {"endpoint": "--base-url", "model": "--model", "class": "--reader"}
        return named.get(name) or (option.flag if option is not None else None)
    if section == "config":
        return "--" + name.replace("_", "-")
    return {"profile": "--profile", "seed": "--seed", "input": "--input/--run, --depth"}.get(section)


_ABSENT = object()


def ledger_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per setting in which the ledger ``old`` (a checkpoint's) differs from
    ``new`` (this job's): ``"reader.temperature (--temperature): 0.0 -> 0.9"``, the values
    in full (JSON), ``(absent)`` where one ledger lacks the setting."""
    a = _flat({k: old.get(k, _ABSENT) for k in LEDGER_KEYS}, "", {})
    b = _flat({k: new.get(k, _ABSENT) for k in LEDGER_KEYS}, "", {})
    lines = []
    for key in [*a, *(k for k in b if k not in a)]:
        was, now = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if was == now:
            continue
        flag = _flag(key)
        shown = [
            "(absent)" if v is _ABSENT else json.dumps(v, ensure_ascii=False, sort_keys=True)
            for v in (was, now)
        ]
        lines.append(f"{key}{f' ({flag})' if flag else ''}: {shown[0]} -> {shown[1]}")
    return lines
