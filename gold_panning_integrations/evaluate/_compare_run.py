"""``gold-panning evaluate``'s runner and summary: every method on every instance, resumable from a
JSONL checkpoint (:func:`run_compare`), then the per-method summary of quality, cost and
per-round accuracy (:func:`summarize`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._io import check_same_run, checkpoint_lines
from ..errors import CheckpointError
from ..ir.ranking_metrics import wilson_interval
from ._endpoints import _USAGE_KEYS
from ._instances import CompareInstance, complete_ranking
from ._methods import PANNING, MethodFn, MethodOutcome, TracesNotWritten
from ._scoring import carry_forward

__all__ = ["CHECKPOINT_FORMAT", "run_compare", "summarize"]

logger = logging.getLogger("gold_panning_integrations.evaluate")
"""Logs under the command's name (``gold-panning evaluate``)."""


CHECKPOINT_FORMAT = 2
"""The row layout: each method's ranking (scored on resume) and its instance's fingerprint."""


_CHECKPOINT_KEYS = (
    "task",
    "split",
    "n",
    "seed",
    "rounds",
    "model",
    "mode",
    "profile",
    "top_n",
    "version",
    "format",
    "data",
    "first_stage",
    "gp_k",
)
"""Settings a checkpoint must share with the run resuming it (``version``: a method's meaning
can change between versions); each row's instance fingerprint is checked too."""


# =================================================================================== runner
class _Checkpoint:
    """JSONL: a meta line with the run's settings, then one line per (instance, method)."""

    def __init__(self, path: str | Path, meta: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.rows: dict[tuple[int, str], dict[str, Any]] = {}
        old_meta = None
        if self.path.exists():
            if not self.path.is_file():
                raise CheckpointError(f"checkpoint {str(self.path)!r} is not a regular file")
            with self.path.open("rb") as fh:
                for _, _, obj in checkpoint_lines(
                    self.path,
                    fh,
                    corrupt=lambda lineno, err: CheckpointError(
                        f"checkpoint {str(self.path)!r} line {lineno} is corrupt ({err}); delete the file "
                        "to start over"
                    ),
                    torn="checkpoint %s: dropping a cut last line; that row reruns",
                    log=logger,
                    not_object="not a JSON object",
                ):
                    if obj.get("type") == "meta":
                        old_meta = obj
                    elif obj.get("type") == "row":
                        self.rows[(int(obj["instance"]), str(obj["method"]))] = obj
        if old_meta is not None:
            advice = "use another --checkpoint path or delete the file"
            check_same_run(self.path, old_meta, meta, _CHECKPOINT_KEYS, what="comparison", advice=advice)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        if old_meta is None:
            self.write({"type": "meta", **{k: meta.get(k) for k in _CHECKPOINT_KEYS}})

    def resumed(self, i: int, name: str, inst: CompareInstance, fingerprint: str) -> dict[str, Any] | None:
        """The row of ``(i, name)`` from an earlier run, if any (one made on other documents is an error)."""
        old = self.rows.get((i, name))
        if old is not None and old.get("fingerprint") != fingerprint:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} holds a {name} row for instance {i} made on other documents "
                f"(query {old.get('qid')!r}, now {inst.query_id!r}); use another --checkpoint path or "
                "delete the file"
            )
        return old

    def write(self, obj: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(obj) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class _NoUsage:
    def stats(self) -> dict[str, int]:
        return dict.fromkeys(_USAGE_KEYS, 0)


def run_compare(
    instances: Sequence[CompareInstance],
    methods: Mapping[str, MethodFn],
    *,
    usage: Any = None,
    checkpoint: str | Path | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    top_n: int | None = None,
    alive: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every method on every instance, instance after instance; one row per pair.

    Args:
        instances: The evaluation instances (same for every method).
        methods: Name -> ``instance -> MethodOutcome``; an exception is recorded with its
            type as a method that returned nothing (``KeyboardInterrupt``, ``SystemExit``
            and :class:`TracesNotWritten` end the run).
        usage: Object with ``stats()`` (a :class:`UsageProxy`) read around each call.
        checkpoint: JSONL path; finished pairs are appended and skipped on a rerun.
        meta: Settings of the checkpoint's meta line, checked on resume (``_CHECKPOINT_KEYS``).
        progress: Called with the number of finished pairs.
        top_n: How many returned documents count (:func:`~._instances.complete_ranking`);
            None: all of them.
        alive: Called before each pair is run and again before its row is kept; raising
            ends the run, and that pair's row is neither returned nor checkpointed (the
            embedded server's :meth:`~._endpoints.EmbeddedServer.check`: a server that
            died is reported at once, its failed rows are not kept for a resume).

    Returns:
        Rows ``{"instance", "qid", "fingerprint", "method", "ranking" (returned indices),
        "top1", "top3", "gold_rank" (on the completed ranking), "ranking_len",
        "per_round", "round_tokens", "calls", "prompt_tokens", "completion_tokens",
        "http_errors", "usage_missing", "seconds", "error", "error_message", "unusable",
        "same_as_base", "note", "scores"}`` in (instance, method) order; ``scores`` is the
        method's probability of relevance per candidate (None for a method without one).
    """
    usage = usage or _NoUsage()
    ck = _Checkpoint(checkpoint, meta or {}) if checkpoint is not None else None
    rows: list[dict[str, Any]] = []
    try:
        for i, inst in enumerate(instances):
            fingerprint = inst.fingerprint()
            for name, fn in methods.items():
                old = ck.resumed(i, name, inst, fingerprint) if ck is not None else None
                if old is None:
                    if alive is not None:
                        alive()
                    old = _row(i, inst, name, fn, usage, fingerprint=fingerprint, top_n=top_n)
                    if alive is not None:
                        alive()
                    if ck is not None:
                        ck.write(old)
                rows.append(old)
                if progress:
                    progress(len(rows))
    finally:
        if ck is not None:
            ck.close()
    return rows


def _row(
    i: int, inst: CompareInstance, name: str, fn: MethodFn, usage: Any, *, fingerprint: str, top_n: int | None
) -> dict[str, Any]:
    """Run ``fn`` on ``inst``: the row of :func:`run_compare`."""
    before = usage.stats()
    t0 = time.perf_counter()
    error = error_message = None
    try:
        out = fn(inst)
    except TracesNotWritten:
        raise
    except Exception as err:  # noqa: BLE001 - recorded with its type; the method returned nothing
        logger.info("%s raised on instance %d: %s: %s", name, i, type(err).__name__, err)
        error, error_message = type(err).__name__, str(err)[:300]
        out = MethodOutcome(ranking=[])
    seconds = time.perf_counter() - t0
    after = usage.stats()
    n = len(inst.documents)
    full = complete_ranking(out.ranking, n, top_n=n if top_n is None else top_n)
    gold = set(inst.gold)
    rank = next((r for r, j in enumerate(full) if j in gold), None)
    return {
        "type": "row",
        "instance": i,
        "qid": inst.query_id,
        "fingerprint": fingerprint,
        "method": name,
        "ranking": [int(j) for j in out.ranking],
        "top1": rank is not None and rank < 1,
        "top3": rank is not None and rank < 3,
        "gold_rank": rank,
        "ranking_len": len(out.ranking),
        "per_round": out.per_round,
        "round_tokens": out.round_tokens,
        "seconds": round(seconds, 3),
        "error": error,
        "error_message": error_message,
        "unusable": int(out.unusable),
        "same_as_base": name != "base" and bool(out.ranking) and full[:3] == list(range(min(3, n))),
        "note": out.note,
        "scores": out.scores,
        **{k: after[k] - before[k] for k in after},
    }


def _failures(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Exception counts, types and first message; unusable, same-as-base, HTTP and usage counts."""
    errors = [r for r in rs if r["error"] is not None]
    return {
        "exceptions": len(errors),
        "exception_types": dict(Counter(r["error"] for r in errors)),
        "first_error": next(
            (f"{r['error']}: {r.get('error_message') or ''}" for r in rs if r["error"]), None
        ),
        "unusable": sum(int(r["unusable"]) for r in rs),
        "same_as_base": sum(bool(r["same_as_base"]) for r in rs),
        "http_errors": sum(int(r.get("http_errors", 0)) for r in rs),
        "usage_missing": sum(int(r.get("usage_missing", 0)) for r in rs),
    }


def _summarize_method(rs: Sequence[Mapping[str, Any]], method: str) -> dict[str, Any]:
    """One method's summary (see :func:`summarize`) from its rows: top-1/top-3 with their
    Wilson 95% intervals, means per query, failure counts and, for a panning method, the
    mean top-1 and prompt tokens after each round."""
    d: dict[str, Any] = {"status": "ran", "instances": len(rs)}
    for key in ("top1", "top3"):
        hits = sum(bool(r[key]) for r in rs)
        d[key] = round(hits / len(rs), 4) if rs else None
        d[f"{key}_ci95"] = [round(x, 4) for x in wilson_interval(hits, len(rs))]
    for key, digits in (("calls", 3), ("prompt_tokens", 1), ("completion_tokens", 1), ("seconds", 2)):
        d[f"{key}_per_query"] = round(sum(r[key] for r in rs) / len(rs), digits) if rs else None
    d.update(_failures(rs))
    tok = d["prompt_tokens_per_query"]
    d["top1_per_1k_prompt_tokens"] = round(1000 * d["top1"] / tok, 4) if rs and tok else None
    per_round = [r["per_round"] for r in rs if r.get("per_round")]
    if method in PANNING and per_round:
        tokens = [r["round_tokens"] for r in rs if r.get("round_tokens")]
        d["per_round"] = [round(float(x), 4) for x in _carried(per_round)]
        d["per_round_prompt_tokens"] = [round(float(x), 1) for x in _carried(tokens)] if tokens else []
    return d


def _carried(rows: Sequence[Sequence[float]]) -> NDArray[np.float64]:
    """The mean of per-round values, shape ``(longest row,)``: a shorter row (a method
    run with fewer rounds, rows resumed from another run) carries its last value forward."""
    width = max(len(r) for r in rows)
    return np.mean([carry_forward(r, width) for r in rows], axis=0)


def summarize(
    rows: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    *,
    rounds: int,
    skipped: Mapping[str, str] | None = None,
    instances: Sequence[CompareInstance] | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    top_n: int | None = None,
    recall_k: int = 10,
    relevance_level: int = 1,
) -> dict[str, dict[str, Any]]:
    """Per-method results from the rows of :func:`run_compare`.

    With ``instances`` and ``qrels`` every method is also scored on its full ranking
    (:func:`~._scoring.score_methods`) and its probabilities' ``calibration``
    (:func:`~._calibration.calibration`); when a query has several relevant documents,
    top-1/top-3 are ``None``.

    Returns:
        ``{method: {"status", "instances", "top1", "top1_ci95", "top3", "top3_ci95",
        "per_round", "per_round_prompt_tokens", "calls_per_query",
        "prompt_tokens_per_query", "completion_tokens_per_query", "seconds_per_query",
        "top1_per_1k_prompt_tokens", "exceptions", "exception_types", "first_error", "unusable",
        "same_as_base", "http_errors", "usage_missing", and the metrics above}}``; a skipped
        method has only ``status`` and ``reason``.
    """
    skipped = dict(skipped or {})
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m in skipped:
            out[m] = {"status": "skipped", "reason": skipped[m]}
        else:
            out[m] = _summarize_method([r for r in rows if r["method"] == m], m)
    if instances is not None and qrels is not None:
        from ..ir.ranking_metrics import single_relevant
        from ._calibration import calibration
        from ._scoring import score_methods

        ran = [m for m in methods if m not in skipped]
        n = max((len(i.documents) for i in instances), default=1)
        scores = score_methods(
            rows,
            instances,
            qrels,
            ran,
            top_n=n if top_n is None else top_n,
            recall_k=recall_k,
            relevance_level=relevance_level,
        )
        single = single_relevant(qrels, relevance_level=relevance_level)
        for m in ran:
            out[m].update(scores.get(m, {}))
            cal = calibration(rows, instances, m)
            if cal is not None:
                out[m]["calibration"] = cal
            if not single:  # top-1/top-3 assume one relevant document per query
                out[m].update(
                    dict.fromkeys(("top1", "top1_ci95", "top3", "top3_ci95", "top1_per_1k_prompt_tokens"))
                )
    return out
