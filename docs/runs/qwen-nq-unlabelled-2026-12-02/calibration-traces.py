"""The calibration split's 40 kept traces of the 0.5B model (two earlier runs, rescored under
the bundled profile), each with the question's id and BM25's scores of its candidates
added: one file with their labels, one without. From the repository root."""

import json

from gold_panning_integrations.ir.collection import read_run

R = "docs/runs"
OUT = f"{R}/qwen-nq-unlabelled-2026-12-02"
SETS = [
    (
        f"{R}/qwen-nq-calibration-2026-11-28/qwen-cal-auto-traces.jsonl",
        f"{R}/qwen-nq-calibration-2026-11-28/ck-qwen-cal-auto.jsonl",
    ),
    (f"{R}/qwen-nq-abstain-2026-11-28/qwen-cal-lp.jsonl", f"{R}/qwen-nq-abstain-2026-11-28/ck-cal-lp.jsonl"),
]

# the rescored traces are in the order of the two runs' panning rows
with open(f"{R}/qwen-nq-score-map-2026-11-28/qwen-cal-rescored.jsonl") as f:
    rescored = [json.loads(line) for line in f]
qids: list[str] = []
for traces, checkpoint in SETS:
    with open(checkpoint) as f:
        rows = [json.loads(line) for line in f]
    ids = [str(r["qid"]) for r in rows if r.get("type") == "row" and r.get("method") == "gp-defaults"]
    with open(traces) as f:
        assert len(ids) == sum(1 for _ in f), traces
    qids += ids
assert len(qids) == len(rescored)
run = read_run("nq-heldout/run-calibration-bm25-quarter-none.trec", depth=10, queries=set(qids))
out = []
for q, trace in zip(qids, rescored):
    trace = dict(trace)
    trace["scores"] = [float(s) for s in run.scores[q][: int(trace["n"])]]
    trace["qid"] = q
    out.append(trace)
with open(f"{OUT}/cal-scores-labelled.jsonl", "w") as f:
    f.writelines(json.dumps(t) + "\n" for t in out)
with open(f"{OUT}/cal-scores-unlabelled.jsonl", "w") as f:
    f.writelines(json.dumps({k: v for k, v in t.items() if k != "relevant"}) + "\n" for t in out)
print(len(out), "traces")
