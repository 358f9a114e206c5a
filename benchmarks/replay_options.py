"""What other engine options would make of the same looks: labelled traces replayed
through the update, no model call.

``gold-panning evaluate --traces`` stores every prompt of a panning run: which documents
were shown where and which the reply credited. Replaying those looks through the update
with other options (``self_citing=0.5``, ``false_leads=0``, ...) says what those options
would have read from the same replies. It is a counterfactual of the *update* only: with
other options the engine may have placed round 2's documents elsewhere, so a real run can
differ; a change chosen here still has to be measured with a real run on held-out
questions.

``compare`` prints, for each option set (``--set``, comma-separated ``NAME=VALUE``; the
defaults always come first), on the calibration traces and, when given, the test traces:

- per stratum of the first stage's order (``first``: the first candidate relevant;
  ``slice``: a lower one is, not the first; ``none``: no candidate is), the mean paired
  difference from that order in MRR@10 and nDCG@10 (ir-measures, the judged candidates
  as qrels);
- the per-document ECE (10 equal-width bins), the top pick's gap and ``p_none``'s AUROC,
  before and after a Platt map fitted on the *calibration* replays under the same options
  (as ``calibrate --from-traces --recalibrate platt`` would fit it).

``rescore`` writes a copy of a trace file whose prior is the first stage's scores
(``retriever_prior="score"`` at ``--prior-temperature``; ``--retriever-prior rank`` for the
rank prior; ``--score-map PROFILE`` for that profile's score map)
instead of the one it was panned with; the traces carry no
question ids, so they are matched, in order, to the panning rows of the ``evaluate``
checkpoint that wrote them, and the scores come from that checkpoint's run file.

    python -m benchmarks.replay_options compare --profile qwen2.5-coder-0.5b-kv \\
        --calibration traces-qwen-cal.jsonl --set self_citing=0.25 --set self_citing=0.5
    python -m benchmarks.replay_options rescore traces-qwen-cal.jsonl --checkpoint ck-qwen-cal.jsonl \\
        --run nq-heldout/run-calibration-bm25-quarter-none.trec --out cal-score.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gold_panning_integrations.calibration.metrics import summarize
from gold_panning_integrations.calibration.recalibration import fit_platt, replay_log_odds
from gold_panning_integrations.calibration.traces import read_traces
from gold_panning_integrations.cli.commands._config_args import add_config_arguments, given_options
from gold_panning_integrations.engine.beliefs import logit, sigmoid
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.panner import _retriever_prior, score_map_of
from gold_panning_integrations.engine.priors import DEFAULT_SCORE_TEMPERATURE
from gold_panning_integrations.ir.collection import read_run
from gold_panning_integrations.ir.ranking_metrics import per_query_metrics
from gold_panning_integrations.profiles import load_profile

STRATA = ("first", "slice", "none")
PRIOR_OPTIONS = ("retriever_prior", "prior_temperature", "prior_top10_recall", "prior_head_decay")
"""Options that only shape the prior, which a trace carries as it was panned (``rescore``
rewrites it)."""
Replayed = list[tuple[NDArray[np.float64], NDArray[np.bool_]]]


def stratum(relevant: Sequence[int]) -> str:
    """A trace's stratum from its relevant candidates (indices in the first stage's order)."""
    rel = set(relevant)
    return "first" if 0 in rel else ("slice" if rel else "none")


def option_set(text: str) -> dict[str, Any]:
    """``"a=1,b=x"`` -> ``{"a": 1.0, "b": "x"}`` (numbers where they parse)."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise SystemExit(f"replay_options: --set takes NAME=VALUE[,NAME=VALUE...], got {part!r}")
        name, value = part.split("=", 1)
        if name in PRIOR_OPTIONS:
            raise SystemExit(
                f"replay_options: --set {name} would change nothing: a trace replays the prior it was "
                "panned with; write traces with another prior with 'rescore --retriever-prior/--prior-temperature'"
            )
        try:
            out[name] = float(value)
        except ValueError:
            out[name] = value
    return out


def replay(traces: Sequence[Mapping[str, Any]], profile: Any, options: Mapping[str, Any]) -> Replayed:
    """``(log_odds (n,), relevant (n,))`` per labelled trace, replayed with ``options``."""
    config = PanningConfig.from_options(PanningConfig(), **options)
    out: Replayed = []
    for t in traces:
        if t.get("relevant") is None or not t["n"]:
            continue
        rel = np.zeros(int(t["n"]), dtype=bool)
        rel[list(t["relevant"])] = True
        out.append((replay_log_odds(t, profile, config=config), rel))
    return out


def strata_differences(replayed: Replayed) -> dict[str, tuple[int, float, float]]:
    """Per stratum: ``(queries, mean MRR@10 difference, mean nDCG@10 difference)`` of the
    replayed order (ties kept in the first stage's order) from the first stage's order."""
    qrels = {str(i): {str(d): 1 for d in np.flatnonzero(rel)} for i, (_, rel) in enumerate(replayed)}
    panned = {str(i): [str(d) for d in np.argsort(-lo, kind="stable")] for i, (lo, _) in enumerate(replayed)}
    first = {str(i): [str(d) for d in range(lo.size)] for i, (lo, _) in enumerate(replayed)}
    judged = {q: j for q, j in qrels.items() if j}  # ir-measures skips a query with no judgement
    m, b = per_query_metrics(judged, panned), per_query_metrics(judged, first)
    out = {}
    for s in STRATA:
        qs = [str(i) for i, (_, rel) in enumerate(replayed) if stratum(np.flatnonzero(rel).tolist()) == s]
        if s == "none":
            out[s] = (len(qs), 0.0, 0.0)
            continue
        d_mrr = [m[q]["mrr@10"] - b[q]["mrr@10"] for q in qs]
        d_ndcg = [m[q]["ndcg@10"] - b[q]["ndcg@10"] for q in qs]
        out[s] = (len(qs), float(np.mean(d_mrr)) if qs else 0.0, float(np.mean(d_ndcg)) if qs else 0.0)
    return out


def _calibration_cells(replayed: Replayed, fitted_on: Replayed) -> list[str]:
    """ECE, top gap and p_none AUROC before -> after a Platt map fitted on ``fitted_on``."""
    lo_fit = np.concatenate([lo for lo, _ in fitted_on])
    y_fit = np.concatenate([y for _, y in fitted_on])
    platt = fit_platt(lo_fit, y_fit)
    raw = summarize([(sigmoid(lo), y) for lo, y in replayed])
    mapped = summarize([(platt.probabilities(lo), y) for lo, y in replayed])

    def auroc(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    return [
        f"{raw.ece:.3f} -> {mapped.ece:.3f}",
        f"{raw.top_gap:+.3f} -> {mapped.top_gap:+.3f}",
        f"{auroc(raw.p_none_auroc)} -> {auroc(mapped.p_none_auroc)}",
    ]


def compare(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    splits = {"calibration": read_traces(args.calibration)}
    if args.test is not None:
        splits["test"] = read_traces(args.test)
    sets: list[dict[str, Any]] = [{}] + [option_set(s) for s in args.set]
    print(
        "| options | split | first / slice / none | MRR@10 difference: first, slice | "
        "nDCG@10 difference: first, slice | ECE, raw -> Platt | top gap | p_none AUROC |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for options in sets:
        name = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in options.items())
        cal = replay(splits["calibration"], profile, options)
        for split, traces in splits.items():
            rep = cal if split == "calibration" else replay(traces, profile, options)
            d = strata_differences(rep)
            counts = " / ".join(str(d[s][0]) for s in STRATA)
            cells = [
                name or "defaults",
                split,
                counts,
                f"{d['first'][1]:+.3f}, {d['slice'][1]:+.3f}",
                f"{d['first'][2]:+.3f}, {d['slice'][2]:+.3f}",
                *_calibration_cells(rep, cal),
            ]
            print("| " + " | ".join(cells) + " |")
    return 0


def rescore(args: argparse.Namespace) -> int:
    traces = read_traces(args.traces)
    qids = [
        str(row["qid"])
        for row in map(json.loads, Path(args.checkpoint).read_text(encoding="utf-8").splitlines())
        if row.get("type") == "row" and row.get("method") == args.method
    ]
    if len(qids) != len(traces):
        raise SystemExit(
            f"replay_options: {len(traces)} traces but {len(qids)} {args.method} rows in {args.checkpoint}: "
            "pass the checkpoint of the run that wrote these traces"
        )
    scores: dict[str, dict[str, float]] = {}
    for line in Path(args.run).read_text(encoding="utf-8").splitlines():
        q, _, doc, _, score, _ = line.split()
        scores.setdefault(q, {})[doc] = float(score)
    run = read_run(Path(args.run), depth=max(int(t["n"]) for t in traces))
    if args.retriever_prior not in ("score", "rank"):
        raise SystemExit(
            f"replay_options: rescore writes the score or the rank prior, not {args.retriever_prior!r}"
        )
    config = PanningConfig.from_options(PanningConfig(), **given_options(args)).with_profile(None)
    # The lab's runs are BM25 over NQ passages, the retriever DEFAULT_SCORE_TEMPERATURE was
    # fitted for: the score prior is written at that fitted temperature (not bounded), as a
    # profile fitted on these traces would give it, unless --prior-temperature says otherwise.
    temperature = DEFAULT_SCORE_TEMPERATURE if config.prior_temperature is None else config.prior_temperature
    score_map = None
    if args.score_map is not None:
        score_map = score_map_of(config, load_profile(args.score_map))
        if score_map is None:
            raise SystemExit(f"replay_options: the profile {args.score_map} has no score_map")
    with open(args.out, "w", encoding="utf-8") as out:
        for trace, q in zip(traces, qids):
            n = int(trace["n"])
            s = [scores[q][d] for d in run.candidates[q][:n]]
            prior = _retriever_prior(config, n, s, temperature, score_map)
            assert prior is not None  # "score" with n finite scores, or "rank"
            out.write(json.dumps({**trace, "prior_log_odds": logit(prior).round(6).tolist()}) + "\n")
    what = f"score prior (temperature {temperature:g})" if args.retriever_prior == "score" else "rank prior"
    if score_map is not None:
        what = f"score map of {args.score_map}"
    print(f"{len(traces)} traces with the {what} -> {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.replay_options", description=__doc__.split("\n\n")[0]
    )
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="replay labelled traces with option sets")
    c.add_argument("--profile", required=True, help="the profile the traces were panned with (name or path)")
    c.add_argument(
        "--calibration",
        type=Path,
        required=True,
        help="labelled calibration traces (the map is fitted on them)",
    )
    c.add_argument("--test", type=Path, default=None, help="labelled held-out traces (reported only)")
    c.add_argument(
        "--set", action="append", default=[], help="an option set NAME=VALUE[,NAME=VALUE...] (repeatable)"
    )
    r = sub.add_parser("rescore", help="a copy of a trace file with the score prior")
    r.add_argument("traces", type=Path)
    r.add_argument(
        "--checkpoint", type=Path, required=True, help="the evaluate checkpoint that wrote the traces"
    )
    r.add_argument(
        "--run", type=Path, required=True, help="that checkpoint's run file (the first stage's scores)"
    )
    r.add_argument(
        "--method", default="gp-defaults", help="the checkpoint's panning method (default gp-defaults)"
    )
    add_config_arguments(
        r,
        only=("retriever_prior", "prior_temperature"),
        defaults={"retriever_prior": "score"},
        title="the prior to write (rank: the library's, not a profile's head decay)",
    )
    r.add_argument(
        "--score-map",
        default=None,
        help="a profile (name or path) whose score_map writes the prior instead (queries off its scale: as without)",
    )
    r.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    return compare(args) if args.command == "compare" else rescore(args)


if __name__ == "__main__":
    raise SystemExit(main())
