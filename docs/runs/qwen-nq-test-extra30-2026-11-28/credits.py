"""How often the 0.5B model's replies credited each question's top passage, by whether the
question had a relevant candidate: the 70 held-out questions (the 40 and these 30).

    python docs/runs/qwen-nq-test-extra30-2026-11-28/credits.py
"""

import json
from pathlib import Path

import numpy as np

RUNS = Path(__file__).resolve().parent.parent
pairs = []
for run, traces in (
    ("qwen-nq-test-2026-11-28", "qwen-test-auto-traces.jsonl"),
    ("qwen-nq-test-extra30-2026-11-28", "qwen-extra-traces.jsonl"),
):
    probs = (RUNS / run / "probabilities-gp-defaults.jsonl").read_text().splitlines()
    trace = (RUNS / run / traces).read_text().splitlines()
    pairs += [(json.loads(p), json.loads(t)) for p, t in zip(probs, trace, strict=True)]
for label, none in (("nothing relevant", True), ("a relevant passage", False)):
    cited, empty, top_relevant_uncredited, relevant_uncredited = [], [], 0, 0
    for p, t in pairs:
        relevant = {i for i, d in enumerate(p["docs"]) if d in set(p["relevant"])}
        if (not relevant) != none:
            continue
        top = int(np.argmax(t["posteriors"]))
        prompts = [pr for r in t["rounds"] for pr in r["prompts"]]
        cited.append(sum(top in pr["cited"] for pr in prompts))
        empty.append(sum(not pr["cited"] for pr in prompts))
        never = relevant and not any(relevant & set(pr["cited"]) for pr in prompts)
        relevant_uncredited += bool(never)
        top_relevant_uncredited += bool(never) and top in relevant
    print(
        f"{label}: {len(cited)} questions; the top passage credited in k of 6 prompts, k = 0..6: "
        f"{np.bincount(cited, minlength=7).tolist()}; replies crediting nothing, 0..6: "
        f"{np.bincount(empty, minlength=7).tolist()}"
    )
    if not none:
        print(
            f"  no reply credited a relevant passage: {relevant_uncredited} questions; "
            f"in {top_relevant_uncredited} of them the top passage is relevant all the same"
        )
