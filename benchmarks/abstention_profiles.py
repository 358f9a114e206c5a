"""Two profiles from the same labelled calibration traces, to measure what the way out's
first-token probability (``abstain_p``) adds on a real model with no new call.

From ``--prior`` (the profile the traces were panned with) and labelled traces whose
prompts carry ``abstain_p`` (``gold-panning evaluate --reader embedded --mode answer
--traces``), it writes:

- ``OUT/without.json``: the prior, its Platt map refitted on the traces replayed under it;
- ``OUT/with.json``: the prior plus the ``abstention_map`` fitted on the traces
  (:func:`fit_abstention_map`), its Platt map refitted on the traces replayed under it.

Both maps are fitted on the calibration traces only; compare them on held-out traces with
``benchmarks.probabilities_heldout --profile OUT/with.json --replay TEST_TRACES``.

    python -m benchmarks.abstention_profiles qwen-cal-lp.jsonl --prior qwen2.5-coder-0.5b-nq --out profiles
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gold_panning_integrations.calibration.recalibration import fit_platt, labelled_queries
from gold_panning_integrations.calibration.traces import fit_abstention_map, read_traces
from gold_panning_integrations.profiles import DetectorProfile, load_profile


def with_platt(profile: DetectorProfile, traces: list[dict[str, Any]], name: str) -> DetectorProfile:
    """``profile`` with a Platt map fitted on ``traces`` replayed under it."""
    pairs = labelled_queries(traces, profile=profile.model_copy(update={"recalibration": None}))
    lo = np.concatenate([p[0] for p in pairs])
    rel = np.concatenate([p[1] for p in pairs])
    notes = f"{profile.notes} [{name}: Platt map refitted on {len(pairs)} labelled calibration traces]"
    return profile.model_copy(update={"recalibration": fit_platt(lo, rel).to_dict(), "notes": notes})


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", type=Path, help="labelled calibration traces carrying abstain_p")
    ap.add_argument("--prior", required=True, help="the profile the traces were panned with")
    ap.add_argument("--out", type=Path, required=True, help="folder for without.json and with.json")
    args = ap.parse_args(argv)
    traces = [t for t in read_traces(args.traces) if t.get("relevant") is not None]
    prior = load_profile(args.prior)
    fitted = fit_abstention_map(traces)
    if fitted is None:
        print(f"too few labelled traces with abstain_p of both kinds in {args.traces} to fit a map")
        return 2
    (slope, offset), how = fitted
    print(f"abstention_map: slope {slope:.4f}, offset {offset:.4f} ({how})")
    args.out.mkdir(parents=True, exist_ok=True)
    base = prior.model_copy(update={"abstention_map": None})
    for name, prof in (
        ("without", base),
        ("with", base.model_copy(update={"abstention_map": (slope, offset)})),
    ):
        done = with_platt(prof, traces, name)
        path = done.save(args.out / f"{name}.json")
        print(f"wrote {path}: recalibration {done.recalibration}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
