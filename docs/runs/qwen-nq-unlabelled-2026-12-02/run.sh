#!/usr/bin/env bash
# issue 48: the 0.5B model as run with the profile it learned without labels (from the
# calibration split's 40 traces, labels removed), on 30 held-out test questions no earlier
# run used (answer mode, library defaults). From the repository root, nq-heldout/ built as
# docs/probabilities.md says.
set -euo pipefail
D=docs/runs/qwen-nq-unlabelled-2026-12-02
S=docs/runs/qwen-nq-score-map-2026-11-28
Q=$(../shared/models/get-qwen2.5-coder-0.5b.sh)
# the questions no earlier as-run set used
python - <<'PY'
import json, os
S = "docs/runs/qwen-nq-score-map-2026-11-28"
used = {json.loads(l)["qid"] for f in ("ck-test-sm.jsonl", "ck-test40-sm.jsonl", "ck-test30-sm.jsonl")
        for l in open(f"{S}/{f}") if '"row"' in l}
lines = [l for l in open("nq-heldout/run-test-bm25-quarter-none.trec") if l.split()[0] not in used]
os.makedirs("nq-rest2/qrels", exist_ok=True)
open("nq-rest2/run-test-rest2.trec", "w").writelines(lines)
keep = {l.split()[0] for l in lines}
for name in ("corpus.jsonl", "queries.jsonl"):
    if not os.path.exists(f"nq-rest2/{name}"):
        os.symlink(os.path.abspath(f"nq-heldout/{name}"), f"nq-rest2/{name}")
head, *rows = open("nq-heldout/qrels/test.tsv").read().splitlines()
open("nq-rest2/qrels/test.tsv", "w").write("\n".join([head] + [r for r in rows if r.split("\t")[0] in keep]) + "\n")
print(len(keep), "questions left")
PY
python -m gold_panning_integrations.cli evaluate --task beir --data nq-rest2 --n 10 --mode answer --threads 2 \
  --reader embedded --model-path "$Q" --profile $D/profile-unlabelled.json --split test \
  --run nq-rest2/run-test-rest2.trec --methods base,gp-defaults --instances 30 --seed 31 \
  --traces $D/qwen-test-unlabelled.jsonl --checkpoint $D/ck-test-unlabelled.jsonl --out $D/out-test-unlabelled
