#!/usr/bin/env bash
# issue 42: the 0.5B model as run with the bundled profile's score map (answer mode, library defaults):
# the 26 test questions of docs/runs/qwen-nq-abstain-2026-11-28 and the 40 of docs/runs/qwen-nq-test-2026-11-28
set -x
Q=$(../shared/models/get-qwen2.5-coder-0.5b.sh)
common="--task beir --data nq-heldout --n 10 --mode answer --threads 2 --reader embedded --model-path $Q --profile qwen2.5-coder-0.5b-nq --split test --run nq-heldout/run-test-bm25-quarter-none.trec --methods base,gp-defaults"
gold-panning evaluate $common --instances 26 --seed 16 --traces qwen-test-sm.jsonl --checkpoint ck-test-sm.jsonl --out out-test26
gold-panning evaluate $common --instances 40 --seed 6 --traces qwen-test40-sm.jsonl --checkpoint ck-test40-sm.jsonl --out out-test40
# the third set (2026-11-29): 30 test questions neither set above used, from a run file and
# qrels without those 63 (the corpus and queries as in nq-heldout/)
python - <<'PY'
import json, os
used = {json.loads(l)["qid"] for f in ("ck-test-sm.jsonl", "ck-test40-sm.jsonl") for l in open(f) if '"row"' in l}
lines = [l for l in open("nq-heldout/run-test-bm25-quarter-none.trec") if l.split()[0] not in used]
open("run-test-rest.trec", "w").writelines(lines)
keep = {l.split()[0] for l in lines}
os.makedirs("nq-rest/qrels", exist_ok=True)
for name in ("corpus.jsonl", "queries.jsonl"):
    if not os.path.exists(f"nq-rest/{name}"):
        os.symlink(os.path.abspath(f"nq-heldout/{name}"), f"nq-rest/{name}")
head, *rows = open("nq-heldout/qrels/test.tsv").read().splitlines()
open("nq-rest/qrels/test.tsv", "w").write("\n".join([head] + [r for r in rows if r.split("\t")[0] in keep]) + "\n")
PY
rest=${common/--data nq-heldout/--data nq-rest}
rest=${rest/nq-heldout\/run-test-bm25-quarter-none.trec/run-test-rest.trec}
gold-panning evaluate $rest --instances 30 --seed 21 --traces qwen-test30-sm.jsonl --checkpoint ck-test30-sm.jsonl --out out-test30
