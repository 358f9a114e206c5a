"""``gold-panning calibrate``: measure a model's per-position TPR/FPR and save a profile."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from ._reader_args import add_reader_arguments

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
            "positions. Completed trials go to a checkpoint file, so an interrupted run resumes."
        ),
    )
    add_reader_arguments(p)
    p.add_argument("--task", choices=("kv", "monorel", "pir", "nq"), default="kv", help="calibration task")
    p.add_argument("--data", default=None, help="JSONL(.gz) file for --task nq")
    p.add_argument("--n", type=int, default=20, help="documents per prompt (default 20)")
    p.add_argument("--grid", type=int, default=11, help="measured positions (default 11)")
    p.add_argument("--trials", type=int, default=50, help="trials per position (default 50)")
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--plot", default=None, help="also save a PNG of TPR, FPR and diagnosticity")
    p.add_argument("--checkpoint", default=None, help="trial log for resuming (default: OUT.checkpoint.jsonl)")
    p.add_argument("--concurrency", type=int, default=4, help="simultaneous calls for remote readers")
    p.add_argument("--seed", type=int, default=0, help="seed of the calibration instances")
    p.add_argument("--notes", default="", help="text appended to the profile notes")
    p.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..calibration import Calibrator
    from ..tasks import make_task
    from ._reader_args import make_reader
    from ._util import Progress, format_table

    task = make_task(args.task, data=args.data)
    reader = make_reader(args, seed=args.seed)
    out = Path(args.out)
    checkpoint = args.checkpoint or str(out) + ".checkpoint.jsonl"
    argv = _command_line(args)
    bar = Progress(args.trials * args.grid, label="calibrate")
    concurrency = args.concurrency if args.reader == "openai" else 1
    cal = Calibrator(
        reader,
        task,
        n=args.n,
        grid=args.grid,
        trials=args.trials,
        seed=args.seed,
        checkpoint=checkpoint,
        concurrency=concurrency,
        progress=lambda done, total: bar.update(done),
        notes="",
    )
    bar.total = len(cal.plan)
    result = cal.run(limit=args.limit)
    bar.close()
    c = result.counts
    assert c is not None
    complete = len(result.records) == len(cal.plan)
    mode = getattr(reader, "mode", None)
    notes = (
        f"Made with: {argv}. Task {args.task}, n={args.n}, grid of "
        f"{c.grid.size} positions {c.grid.tolist()}, {args.trials} trials planned per position, "
        f"{len(result.records)} of {len(cal.plan)} trials completed ({c.failed} failed, excluded); "
        f"gold-at-position trials per grid position: {c.tp_trials.tolist()}. Reader mode: {mode}. "
        "Rates smoothed with a Jeffreys prior, (x+0.5)/(m+1); linear interpolation between grid positions."
        + ("" if complete else " INCOMPLETE: resume with the same command to finish.")
        + (f" {args.notes}" if args.notes else "")
    )
    profile = result.profile.model_copy(update={"notes": notes})
    profile.save(out)
    rows = [
        [int(g), int(c.tp[i]), int(c.tp_trials[i]), profile.tpr[int(g)], int(c.fp[i]), int(c.fp_trials[i]), profile.fpr[int(g)]]
        for i, g in enumerate(c.grid)
    ]
    print(format_table(["position", "tp", "of", "TPR", "fp", "of", "FPR"], rows))
    print(
        f"wrote {out} ({len(result.records)}/{len(cal.plan)} trials; {result.ran} run now, "
        f"{result.resumed} resumed from {checkpoint}; {result.seconds:.1f}s)"
    )
    if args.plot:
        plot_profile(profile, args.plot)
        print(f"wrote {args.plot}")
    return 0 if complete else 3


def _command_line(args: argparse.Namespace) -> str:
    """The calibration-relevant options as a command line (for the profile notes)."""
    parts = ["gold-panning", "calibrate", "--reader", args.reader]
    for opt in ("model_path", "base_url", "model", "mode", "data"):
        v = getattr(args, opt, None)
        if v is not None:
            parts += ["--" + opt.replace("_", "-"), str(v)]
    parts += ["--task", args.task, "--n", str(args.n), "--grid", str(args.grid), "--trials", str(args.trials)]
    parts += ["--seed", str(args.seed), "--temperature", str(args.temperature), "--out", str(args.out)]
    return " ".join(shlex.quote(x) for x in parts)


def plot_profile(profile: Any, path: str | Path) -> Path:
    """Save a PNG of TPR, FPR and diagnosticity by position (needs the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        from ..errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot", "Plotting a profile") from err
    import numpy as np

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
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p
