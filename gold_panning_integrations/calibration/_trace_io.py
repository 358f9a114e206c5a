"""Panning traces on disk: one JSON line per panning result (:func:`trace_record`, appended by
:class:`TraceWriter`), and reading them back, every line checked field by field
(:func:`read_traces`). A trace holds document indices, never their text.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from .._io import read_regular_file

__all__ = ["MAX_TRACE_BYTES", "TRACE_VERSION", "TraceWriter", "check_relevant", "read_traces", "trace_record"]

logger = logging.getLogger("gold_panning_integrations.calibration.traces")

TRACE_VERSION = 1
MAX_TRACE_BYTES = 512 * 1024 * 1024
"""Largest trace file read (a 20-document, 8-round trace line is ~2 kB)."""


def trace_record(
    result: Any, *, profile_positions: int | None = None, relevant: Iterable[int] | None = None
) -> dict[str, Any]:
    """One JSON-ready trace line for a panning result.

    Args:
        result: A :class:`~gold_panning_integrations.engine.panner.PanningResult`.
        profile_positions: Positions of the profile the panner used; only needed when
            it ran with ``resample_profile=False`` and dummy positions (otherwise the
            positions of each prompt are ``0..m-1`` for its ``m`` documents).
        relevant: Input indices of the documents known to be relevant (a labelled
            query), or None. Labelled traces let :func:`learn_profile` count instead of
            guess, and measure the reader's ``false_leads`` and ``blind_rate``.

    Returns:
        ``{"type": "trace", "version", "n", "k", "policy", "prior_log_odds",
        "posteriors", "rounds": [{"round", "prompts": [{"docs", "positions", "span",
        "cited", "failed"}]}]}`` (a prompt also ``"abstain_p"`` when its reading had
        one), plus ``"scores"`` (the base retriever's, when every document had one) and ``"raw_posteriors"`` (the update's posteriors
        before the profile's recalibration map) when a map was applied; ``docs``/``cited`` are input indices, ``positions``
        the prompt positions of ``docs`` (same order), ``span`` the number of positions
        the prompt's profile had (relative depth of position ``j`` is ``j / (span - 1)``).
    """
    rounds = []
    for r in result.rounds:
        prompts = []
        for docs, pos, reading in zip(r.windows, r.positions, r.readings):
            docs_l = [int(d) for d in docs]
            pos_l = [int(p) for p in pos]
            span = len(pos_l)
            if sorted(pos_l) != list(range(span)):  # dummy positions: the profile's, else up to the last
                span = profile_positions if profile_positions is not None else max(pos_l) + 1
            prompts.append(
                {
                    "docs": docs_l,
                    "positions": pos_l,
                    "span": int(span),
                    # this prompt's own citations (positions into its documents): a round's
                    # prompts may show the same document, each read on its own
                    "cited": [docs_l[int(c)] for c in getattr(reading, "cited", ())],
                    "failed": bool(getattr(reading, "failed", False)),
                }
            )
            abstain = getattr(reading, "abstain_p", None)
            if abstain is not None:  # the way out's first-token probability (Reading.abstain_p)
                prompts[-1]["abstain_p"] = round(float(abstain), 6)
        rounds.append({"round": int(r.round), "prompts": prompts})
    prior = getattr(result, "prior_log_odds", None)
    record: dict[str, Any] = {
        "type": "trace",
        "version": TRACE_VERSION,
        "n": len(result.posteriors),
        "k": int(result.k),
        "policy": str(result.policy),
        "prior_log_odds": None if prior is None else [round(float(x), 6) for x in prior],
        "posteriors": [round(float(p), 6) for p in result.posteriors],
        "rounds": rounds,
    }
    scores = getattr(result, "scores", None)
    if scores is not None and np.all(np.isfinite(scores)):  # what a score map is fitted on
        record["scores"] = [float(x) for x in scores]
    raw = getattr(result, "raw_log_odds", None)
    if raw is not None:  # a recalibrated result: the update's own posteriors too
        record["raw_posteriors"] = [round(float(1.0 / (1.0 + np.exp(-x))), 6) for x in raw]
    if relevant is not None:
        record["relevant"] = check_relevant(relevant, len(result.posteriors))
    return record


def check_relevant(relevant: Iterable[int], n: int) -> list[int]:
    """Sorted distinct indices in ``0..n-1``; a ValueError naming the bad one otherwise."""
    if isinstance(relevant, (str, bytes)):
        raise ValueError(f"relevant must be document indices, got {relevant!r:.40}")  # noqa: TRY004 - as the others
    out = set()
    for d in relevant:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= int(d) < n:
            where = f"in 0..{n - 1}" if n else "(this result has no documents)"
            raise ValueError(f"relevant must hold document indices {where}, got {d!r:.40}")
        out.add(int(d))
    return sorted(out)


class TraceWriter:
    """Append panning traces to a JSONL file; usable as an ``on_result`` callback.

    ``writer(result)`` (extra positional or keyword arguments, e.g. the query, are
    ignored: no document or query text is ever written) appends one line and flushes it;
    ``writer(result, relevant=[2])`` also records which documents are relevant (a
    labelled query, see :func:`trace_record`).
    Thread-safe within a process; each line is written with one ``write`` call in
    append mode, so lines from several processes do not interleave on local disks.

    Args:
        path: The JSONL file (created with its folder if missing).
        profile_positions: See :func:`trace_record`.
        fsync: Also ``fsync`` after every line (durable, slower).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, profile_positions: int | None = None, fsync: bool = False
    ) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(
                f"trace path {str(self.path)!r} is a directory; pass a file such as traces.jsonl"
            )
        self.profile_positions = profile_positions
        self.fsync = fsync
        self.written = 0
        self._lock = threading.Lock()

    def __call__(self, result: Any, *args: Any, relevant: Iterable[int] | None = None, **kwargs: Any) -> None:
        record = trace_record(result, profile_positions=self.profile_positions, relevant=relevant)
        line = json.dumps(record) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self.written += 1


def _bad(path: str, lineno: int, what: str) -> ValueError:
    return ValueError(f"trace file {path!r} line {lineno}: {what}; traces are written by TraceWriter")


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(map(_is_int, v))


def _header_problem(obj: Any) -> str | None:
    """What is wrong with a trace's type, version, ``n`` and the lists of ``n`` numbers
    (``None`` when nothing is)."""
    if not isinstance(obj, dict) or obj.get("type") != "trace":
        return "not a trace object (field 'type' must be 'trace')"
    if obj.get("version") != TRACE_VERSION:
        return f"trace version {obj.get('version')!r} is not {TRACE_VERSION}"
    n = obj.get("n")
    if not _is_int(n) or n < 0:
        return f"field 'n' must be an integer >= 0, got {n!r:.40}"
    for key in ("posteriors", "prior_log_odds", "raw_posteriors"):  # only posteriors are never null
        v = obj.get(key)
        if (v is not None or key == "posteriors") and not (
            isinstance(v, list) and len(v) == n and all(_is_int(x) or isinstance(x, float) for x in v)
        ):
            return f"field {key!r} must be a list of {n} numbers"
    return None


def _prompt_problem(p: Any, n: int) -> str | None:
    """What is wrong with one prompt record of a trace over ``n`` documents."""
    if not isinstance(p, dict):
        return "a prompt must be an object"
    for key in ("docs", "positions", "cited"):
        if not _int_list(p.get(key)):
            return f"prompt field {key!r} must be a list of integers"
    if len(p["docs"]) != len(p["positions"]):
        return "prompt fields 'docs' and 'positions' differ in length"
    span = p.get("span")
    if not _is_int(span) or (p["positions"] and span <= max(p["positions"])):
        return f"prompt field 'span' must be an integer above every position, got {span!r:.20}"
    if any(not 0 <= d < n for d in p["docs"]) or not set(p["cited"]) <= set(p["docs"]):
        return "prompt documents must be in 0..n-1 and cited ones among them"
    if not isinstance(p.get("failed", False), bool):
        return "prompt field 'failed' must be true or false"
    a = p.get("abstain_p")
    if a is not None and not (isinstance(a, (int, float)) and not isinstance(a, bool) and 0.0 <= a <= 1.0):
        return f"prompt field 'abstain_p' must be a probability in [0, 1], got {a!r:.20}"
    return None


def _rounds_problem(rounds: Any, n: int) -> str | None:
    """What is wrong with a trace's ``rounds`` (a list of rounds, each with a list of prompts)."""
    if not isinstance(rounds, list):
        return "field 'rounds' must be a list"
    for r in rounds:
        prompts = r.get("prompts") if isinstance(r, dict) else None
        if not isinstance(prompts, list):
            return "every round needs a list 'prompts'"
        for p in prompts:
            problem = _prompt_problem(p, n)
            if problem is not None:
                return problem
    return None


def _check_trace(obj: Any, path: str, lineno: int) -> dict[str, Any]:
    """``obj`` when it is a valid trace record; else raise the ValueError naming the file and line."""
    problem = _header_problem(obj)
    if problem is None:
        problem = _rounds_problem(obj.get("rounds"), obj["n"])
    if problem is None and obj.get("relevant") is not None:
        rel = obj["relevant"]
        if not _int_list(rel) or len(set(rel)) != len(rel) or any(not 0 <= d < obj["n"] for d in rel):
            problem = "field 'relevant' must be a list of distinct document indices in 0..n-1"
    if problem is not None:
        raise _bad(path, lineno, problem)
    return obj


def read_traces(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every trace line of a JSONL file, validated; a torn last line is skipped.

    Raises:
        ValueError: Not a regular file, too large, not UTF-8, or a line that is not a
            trace (the message names the file and the line).
    """
    p = str(path)
    raw = read_regular_file(path, max_bytes=MAX_TRACE_BYTES, what="trace file", error=ValueError)
    lines = raw.split(b"\n")
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as err:
            if not b"".join(lines[i:]).strip():
                logger.warning("trace file %s: skipping a torn last line", p)
                break
            raise _bad(p, i, f"not JSON ({err})") from err
        out.append(_check_trace(obj, p, i))
    if not out:
        raise ValueError(f"trace file {p!r} holds no traces; save some with TraceWriter first")
    return out
