"""``gold-panning calibrate``: measure a model's per-position TPR/FPR and save a profile."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...readers._cli_args import add_reader_arguments
from ._config_args import flag

__all__ = ["main", "plot_profile", "register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure a model's TPR/FPR by context position and write a profile JSON",
        description=(
            "The calibration protocol: for each of --grid positions and each of --trials trials, "
            "build a task instance with its gold document at that position and ask the model once. "
            "TPR at a position is how often the gold there was cited; FPR is how often a distractor "
            "there was cited. Rates are smoothed (Jeffreys) and interpolated linearly to all "
            "positions. Completed trials go to a checkpoint file, so an interrupted run resumes. "
            "Three cheaper paths: --budget CALLS spends at most that many calls, each on the position "
            "whose rate is least certain; --task haystack --docs FILE measures on your own passages; "
            "--from-traces FILE re-estimates a profile from saved panning traces with no model calls."
        ),
    )
    add_reader_arguments(p)
    p.add_argument(
        "--task",
        choices=("kv", "monorel", "pir", "nq", "haystack"),
        default="kv",
        help="calibration task (haystack: a made-up fact inserted into your passages, see --docs)",
    )
    p.add_argument("--data", default=None, help="JSONL(.gz) file for --task nq")
    p.add_argument(
        "--docs",
        default=None,
        help='your passages for --task haystack: JSONL (a string or {"text": ...} per line) or plain text '
        "with passages separated by blank lines",
    )
    p.add_argument("--n", type=int, default=20, help="documents per prompt (default 20)")
    p.add_argument("--grid", type=int, default=11, help="measured positions (default 11)")
    p.add_argument("--trials", type=int, default=50, help="trials per position (default 50)")
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="CALLS",
        help="spend at most CALLS calls, each at the grid position whose TPR is least certain "
        "(instead of --trials per position); 100 keeps most of the benefit in simulation",
    )
    p.add_argument(
        "--from-traces",
        default=None,
        metavar="FILE",
        help="no model calls: re-estimate the rates from panning traces (TraceWriter JSONL) by EM, "
        "blended with --prior by counts; traces labelled with 'relevant' (TraceWriter(result, relevant=...), "
        "evaluate --traces) also measure the reader's blind_rate and false_leads",
    )
    p.add_argument(
        "--prior",
        default=None,
        metavar="PROFILE",
        help="with --from-traces: the profile the traces were panned with (bundled name or JSON; "
        "default: the generic profile)",
    )
    p.add_argument(
        "--relevance",
        choices=("independent", "one"),
        default="independent",
        help="with --from-traces: each document relevant on its own (default), or exactly one per query",
    )
    p.add_argument(
        "--recalibrate",
        choices=("platt", "isotonic", "none"),
        default="platt",
        help="with --from-traces and labelled traces: fit this map from the panner's posteriors to "
        "calibrated probabilities and store it in the profile (default platt; see docs/probabilities.md)",
    )
    p.add_argument(
        "--keep-rates",
        action="store_true",
        help="with --from-traces: keep --prior's rates and mistake rates as they are and fit only the "
        "recalibration map (on the traces' own posteriors): for a measured profile and a few labelled queries",
    )
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--plot", default=None, help="also save a PNG of TPR, FPR and diagnosticity")
    p.add_argument(
        "--checkpoint", default=None, help="trial log for resuming (default: OUT.checkpoint.jsonl)"
    )
    p.add_argument("--concurrency", type=int, default=4, help="simultaneous calls for remote readers")
    p.add_argument("--seed", type=int, default=0, help="seed of the calibration instances")
    p.add_argument("--notes", default="", help="text appended to the profile notes")
    p.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..._console import Progress, format_table
    from ...calibration import Calibrator
    from ...readers._cli_args import make_reader

    out = Path(args.out)
    _check_out(out)
    if args.from_traces is not None:
        return _from_traces(args, out)
    if args.budget is not None and args.budget < 1:
        raise ValueError(f"--budget must be a number of calls >= 1, got {args.budget}")
    task = _make_task(args)
    checkpoint = args.checkpoint or str(out) + ".checkpoint.jsonl"
    reader = make_reader(args, seed=args.seed)
    cal = Calibrator(
        reader,
        task,
        n=args.n,
        grid=args.grid,
        trials=args.trials,
        budget=args.budget,
        seed=args.seed,
        checkpoint=checkpoint,
        concurrency=args.concurrency if args.reader == "openai" else 1,
        notes="",
    )
    bar = Progress(cal.total, label="calibrate")
    cal.progress = lambda done, total: bar.update(done)
    result = cal.run(limit=args.limit)
    bar.close()
    c = result.counts
    assert c is not None
    complete = len(result.records) >= cal.total
    mode = getattr(reader, "mode", None)
    extra = {**result.profile.extra, **({"mode": mode} if isinstance(mode, str) else {})}
    notes = _notes(args, result, total=cal.total, mode=mode, complete=complete)
    profile = result.profile.model_copy(update={"notes": notes, "extra": extra})
    rows = [
        [int(g), int(c.tp[i]), int(c.tp_trials[i]), profile.tpr[int(g)]]
        + [int(c.fp[i]), int(c.fp_trials[i]), profile.fpr[int(g)]]
        for i, g in enumerate(c.grid)
    ]
    print(format_table(["position", "tp", "of", "TPR", "fp", "of", "FPR"], rows))
    saved = _save(profile, out, checkpoint=checkpoint)
    if saved is None:
        return 2
    print(
        f"wrote {saved} ({len(result.records)}/{cal.total} trials; {result.ran} run now, "
        f"{result.resumed} resumed from {checkpoint}; {result.seconds:.1f}s)"
    )
    if args.plot:
        plot_profile(profile, args.plot)
        print(f"wrote {args.plot}")
    if c.failed * 2 > len(result.records):
        first = next((r.get("error") for r in result.records if r.get("failed")), None)
        return _error(
            f"{c.failed} of {len(result.records)} trials failed, so the profile rests on "
            f"{len(result.records) - c.failed} trials (first error: {first}); fix the cause, delete "
            f"{checkpoint} and rerun",
            code=3,
        )
    return 0 if complete else 3


def _notes(args: argparse.Namespace, result: Any, *, total: int, mode: Any, complete: bool) -> str:
    """The profile notes of a measured calibration: the command, the design, what ran."""
    c = result.counts
    layout = (
        f"a budget of {args.budget} calls (each at the grid position whose TPR was least certain)"
        if args.budget is not None
        else f"{args.trials} trials planned per position"
    )
    return (
        f"Made with: {_command_line(args)}. Task {args.task}, n={args.n}, grid of "
        f"{c.grid.size} positions {c.grid.tolist()}, {layout}, "
        f"{len(result.records)} of {total} trials completed ({c.failed} failed, excluded); "
        f"gold-at-position trials per grid position: {c.tp_trials.tolist()}. Reader mode: {mode}. "
        "Rates smoothed with a Jeffreys prior, (x+0.5)/(m+1); linear interpolation between grid positions."
        + ("" if complete else " INCOMPLETE: resume with the same command to finish.")
        + (f" {args.notes}" if args.notes else "")
    )


def _error(message: str, *, code: int = 2) -> int:
    """Write ``gold-panning calibrate: error: MESSAGE`` to stderr and return ``code``."""
    print(f"gold-panning calibrate: error: {message}", file=sys.stderr)
    return code


def _save(profile: Any, out: Path, *, checkpoint: str | None) -> Path | None:
    """:func:`save_profile_or_fallback`, the problem (if any) reported on stderr; the path
    written, or None when nothing could be."""
    saved, problem = save_profile_or_fallback(profile, out, checkpoint=checkpoint)
    if problem is not None:
        _error(problem)
    return saved if problem is None else None


def _check_out(out: Path) -> None:
    """Fail before any call when --out cannot be a file (a folder, or a missing folder)."""
    if out.is_dir():
        raise ValueError(
            f"--out {str(out)!r} is a folder; pass a file path such as {str(out / 'profile.json')!r}"
        )
    if not out.parent.is_dir():
        raise ValueError(f"--out {str(out)!r}: folder {str(out.parent)!r} does not exist; create it first")


def _make_task(args: argparse.Namespace) -> Any:
    if args.task == "haystack":
        if args.docs is None:
            raise ValueError("--task haystack builds trials from your passages: pass --docs FILE")
        from ...tasks.haystack import HaystackTask

        task = HaystackTask(args.docs)
        if task.max_n < args.n:
            raise ValueError(
                f"--docs {args.docs!r} holds {task.max_n} distinct passages but --n {args.n} documents per "
                "prompt need at least as many; add passages or lower --n"
            )
        return task
    if args.docs is not None:
        raise ValueError("--docs is for --task haystack; use --data for --task nq")
    from ...tasks import make_task

    return make_task(args.task, data=args.data)


def save_profile_or_fallback(
    profile: Any, out: Path, *, checkpoint: str | os.PathLike[str] | None
) -> tuple[Path | None, str | None]:
    """Save ``profile`` to ``out``, else (read-only folder, full disk) next to the checkpoint,
    else in the temp folder, else print its JSON to stdout, so finished work is never lost.
    Returns ``(path written, None)``, ``(fallback path, message)`` or ``(None, message)``."""
    try:
        return profile.save(out), None
    except OSError as err:
        first = err
    tried = [str(out)]
    candidates = [Path(tempfile.gettempdir()) / f"gold-panning-profile-{os.getpid()}.json"]
    if checkpoint is not None:
        candidates.insert(0, Path(os.fspath(checkpoint) + ".profile.json"))
    for cand in candidates:
        try:
            saved = profile.save(cand)
        except OSError:
            tried.append(str(cand))
            continue
        return saved, (
            f"cannot write --out {str(out)!r} ({first.strerror or first}); the profile was saved to "
            f"{str(saved)!r} instead: move it where you want it"
        )
    sys.stdout.write(profile.to_json() + "\n")
    return None, (
        f"cannot write the profile anywhere (tried {', '.join(tried)}: {first.strerror or first}); "
        "its JSON was printed to stdout above"
    )


def _from_traces(args: argparse.Namespace, out: Path) -> int:
    from ..._console import format_table
    from ...calibration.traces import learn_profile, read_traces
    from ...profiles import GENERIC_PROFILE, load_profile

    traces = read_traces(args.from_traces)
    prior = load_profile(args.prior if args.prior is not None else GENERIC_PROFILE)
    if args.keep_rates:
        return _map_only(args, traces, prior, out)
    if not any(t.get("relevant") is not None for t in traces):
        return _unlabelled(args, traces, prior, out)
    res = learn_profile(traces, prior, relevance=args.relevance)
    notes = f"{_traces_command(args, '--relevance', args.relevance)}{res.profile.notes}"
    profile = res.profile.model_copy(update={"notes": notes})
    if args.recalibrate != "none":
        profile = _recalibrated(traces, profile, args.recalibrate)
    rows = [
        [pos, prior.tpr[pos], profile.tpr[pos], shown, prior.fpr[pos], profile.fpr[pos]]
        for pos, shown in zip(res.new_counts.positions, res.new_counts.gold_shown)
    ]
    print(format_table(["position", "TPR before", "TPR after", "gold seen", "FPR before", "FPR after"], rows))
    saved = _save(profile, out, checkpoint=None)
    if saved is None:
        return 2
    if res.mixture is not None:
        m = res.mixture
        print(
            f"measured on {m.queries} labelled traces ({m.relevant} relevant, {m.irrelevant} irrelevant documents): "
            f"blind_rate {m.blind_rate:.3f} (share of relevant documents this reader reads as irrelevant), "
            f"false_leads {m.false_leads:.3f} per query; panning with this profile uses them unless you set them"
        )
    else:
        print(
            "no trace carries 'relevant' labels: rates learned by EM alone (label some queries to also "
            "measure blind_rate and false_leads)"
        )
    if res.retriever is not None:
        r = res.retriever
        print(
            f"the base retriever's first document was relevant in {r.top1_share:.0%} of {r.queries} labelled queries: "
            f"prior_head_decay {r.head_decay:g} fits its ranks (default 0.6); the integrations use it with this "
            "profile unless you set prior_head_decay"
        )
    fit = profile.extra.get("abstention_fit")
    if profile.abstention_map is not None and fit is not None:
        slope, offset = profile.abstention_map
        print(
            f"abstention_map slope {slope:.3f}, offset {offset:.3f}, fitted on {fit['prompts']} prompts of "
            f"{fit['queries']} labelled queries ({fit['with_relevant']} with a relevant document): a reply "
            "that starts the way out is read as evidence that nothing it was shown is relevant"
        )
    map_fit = profile.extra.get("score_map_fit")
    if profile.score_map is not None and map_fit is not None:
        smap = profile.score_map
        print(
            f"score_map: log-odds {smap['score']:.3f} per unit of score, {smap['log_rank']:.3f} per log(1 + rank), "
            f"offset {smap['offset']:.3f}, fitted on {map_fit['candidates']} candidates of {map_fit['queries']} labelled queries "
            f"({map_fit['relevant']} relevant), for top scores in [{smap['low']:.4g}, {smap['high']:.4g}]: the prior reads "
            "this retriever's scores, level included (use the profile with this retriever only)"
        )
    print(
        f"wrote {saved} (learned from {res.queries} traces, {res.sightings} document sightings; "
        f"EM {res.iterations} iterations{'' if res.converged else ', not converged'})"
    )
    return 0


def _unlabelled(args: argparse.Namespace, traces: list[dict[str, Any]], prior: Any, out: Path) -> int:
    """``--from-traces`` on traces without labels: :func:`~...calibration.unlabelled.learn_unlabelled`."""
    from ..._console import format_table
    from ...calibration.unlabelled import NotEnoughTracesError, learn_unlabelled

    print(
        "no trace carries 'relevant' labels: learning the reader's rates, silence and prior without labels (EM)"
    )
    try:
        fit = learn_unlabelled(traces, prior)
    except NotEnoughTracesError as err:
        return _error(str(err))
    profile = fit.profile.model_copy(update={"notes": f"{_traces_command(args)}{fit.profile.notes}"})
    grid = profile.grid_positions or []
    rows = [
        [
            pos,
            prior.tpr[pos],
            f"{profile.tpr[pos]:.3f} ± {fit.tpr_se[i]:.3f}",
            f"{fit.relevant_sightings[i]:.1f}",
            prior.fpr[pos],
            f"{profile.fpr[pos]:.3f} ± {fit.fpr_se[i]:.3f}",
        ]
        for i, pos in enumerate(grid)
    ]
    print(
        format_table(
            ["position", "TPR before", "TPR after", "relevant seen", "FPR before", "FPR after"], rows
        )
    )
    saved = _save(profile, out, checkpoint=None)
    if saved is None:
        return 2
    rank = profile.rank_map or {}
    print(
        f"silent_rate {fit.silent_rate:.3f} (replies empty whatever they were shown); prior: rank map "
        f"log_rank {rank.get('log_rank', 0.0):.3f}, offset {rank.get('offset', 0.0):.3f}"
        + (", and a score map for this retriever's scores" if profile.score_map is not None else "")
        + f"; mean p_none over the traces {fit.p_none:.3f}"
    )
    print(
        f"false_leads {profile.false_leads} and blind_rate {profile.blind_rate}, weakly measured: without labels "
        "a document the reader keeps citing looks relevant (label some queries to measure them, and to fit a "
        "recalibration map)"
    )
    print(
        f"wrote {saved} (learned from {fit.queries} traced queries, {fit.replies} replies; "
        f"EM {fit.iterations} iterations{'' if fit.converged else ', not converged'})"
    )
    return 0


def _traces_command(args: argparse.Namespace, *options: str) -> str:
    """``Made with: gold-panning calibrate --from-traces FILE --prior PROFILE OPTIONS. ``
    (the start of a profile's notes)."""
    from ...profiles import GENERIC_PROFILE

    words = ["--from-traces", shlex.quote(args.from_traces), "--prior"]
    words += [shlex.quote(str(args.prior or GENERIC_PROFILE)), *options]
    return f"Made with: gold-panning calibrate {' '.join(words)}. "


def _map_only(args: argparse.Namespace, traces: list[dict[str, Any]], prior: Any, out: Path) -> int:
    """``--keep-rates``: ``prior`` unchanged but for a recalibration map fitted on ``traces``."""
    if args.recalibrate == "none":
        return _error("--keep-rates fits only a map; drop --recalibrate none")
    notes = _traces_command(args, "--keep-rates", "--recalibrate", args.recalibrate) + prior.notes
    profile = _recalibrated(traces, prior.model_copy(update={"notes": notes}), args.recalibrate)
    if profile.recalibration is None:
        return _error("no map fitted, nothing written")
    saved = _save(profile, out, checkpoint=None)
    if saved is None:
        return 2
    print(
        f"wrote {saved} ({prior.model} {prior.task} rates kept, a {args.recalibrate} map from {len(traces)} traces)"
    )
    return 0


MIN_RECALIBRATION_QUERIES = 10
"""Labelled traces needed before ``--from-traces`` fits a recalibration map."""


def _recalibrated(traces: list[dict[str, Any]], profile: Any, kind: str) -> Any:
    """``profile`` with a recalibration map of ``kind`` fitted on the labelled traces,
    replayed through ``profile`` (its new rates); the held-out calibration of each map
    (5-fold) is printed. Unchanged, with a note, when too few traces are labelled."""
    import numpy as np

    from ..._console import format_table
    from ...calibration.recalibration import cross_validate, fit_map, labelled_queries

    queries = labelled_queries(traces, profile=profile)
    if len(queries) < MIN_RECALIBRATION_QUERIES:
        print(
            f"{len(queries)} labelled traces: no recalibration map fitted (label at least "
            f"{MIN_RECALIBRATION_QUERIES} queries: TraceWriter(result, relevant=[...]) or gold-panning evaluate --traces)"
        )
        return profile
    cv = cross_validate(queries)
    rows = [[k, v["ece"], v["adaptive_ece"], v["brier"]] for k, v in cv.items()]
    print(f"held-out calibration of the posteriors on {len(queries)} labelled queries (5-fold):")
    print(format_table(["map", "ECE (10 bins)", "ECE (10 equal-count)", "Brier"], rows))
    lo = np.concatenate([q[0] for q in queries])
    rel = np.concatenate([q[1] for q in queries])
    m = fit_map(lo, rel, kind=kind)
    print(
        f"stored a {kind} recalibration map in the profile: every probability the panner reports goes through it"
    )
    extra = {**profile.extra, "recalibration_fit": {"queries": len(queries), "pairs": int(lo.size), "cv": cv}}
    return profile.model_copy(update={"recalibration": m.to_dict(), "extra": extra})


def _command_line(args: argparse.Namespace) -> str:
    """The calibration-relevant options given (not None) as a command line (for the profile notes)."""
    names = ("reader", "model_path", "base_url", "model", "mode", "data", "task", "docs", "n", "grid")
    given = {name: getattr(args, name, None) for name in names}
    given |= {"budget": args.budget} if args.budget is not None else {"trials": args.trials}
    given |= {"seed": args.seed, "temperature": args.temperature, "out": args.out}
    parts = ["gold-panning", "calibrate"]
    for name, value in given.items():
        if value is not None:
            parts += [flag(name), str(value)]
    return " ".join(shlex.quote(x) for x in parts)


def plot_profile(profile: Any, path: str | Path) -> Path:
    """Save a PNG of TPR, FPR and diagnosticity by position (needs the ``plot`` extra)."""
    import numpy as np

    from ...plots import pyplot, save_figure

    plt = pyplot("Plotting a profile")

    x = np.arange(1, profile.n_positions + 1)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(x, profile.tpr, "-", label="TPR")
    ax.plot(x, profile.fpr, "--", label="FPR")
    ax.plot(x, profile.diagnosticity, ":", label="|TPR - FPR|")
    if profile.grid_positions:
        g = np.asarray(profile.grid_positions)
        ax.plot(g + 1, np.asarray(profile.tpr)[g], "o", color="C0", ms=3)
        ax.plot(g + 1, np.asarray(profile.fpr)[g], "o", color="C1", ms=3)
    ax.set_xlabel("position in prompt (1 = first)")
    ax.set_ylabel("rate")
    ax.set_ylim(0, 1)
    ax.set_title(f"{profile.model} on {profile.task} (n={profile.n_positions})")
    ax.legend(loc="upper center", ncol=3, fontsize=8)
    return save_figure(plt, fig, path)
