"""Builds the nq-extra collection of docs/runs/qwen-nq-test-extra30-2026-11-28: 30 held-out
test questions of nq-heldout that the 40-question run did not use, 16 of the emptied ones
and 14 of the others (seeded), with the quarter-emptied BM25 run. Run beside nq-heldout/."""

import json
import os

import numpy as np

used = {json.loads(line)["qid"] for line in open("probabilities-gp-defaults-40.jsonl")}
test_q: list[str] = []
for line in open("nq-heldout/qrels/test.tsv").read().splitlines()[1:]:
    q = line.split("\t")[0]
    if q not in test_q:
        test_q.append(q)
emptied = set(open("nq-heldout/quarter-none-test.txt").read().split())
un_e = sorted(q for q in test_q if q in emptied and q not in used)
un_n = sorted(q for q in test_q if q not in emptied and q not in used)
rng = np.random.default_rng(7)
pick = [un_e[i] for i in rng.choice(len(un_e), 16, replace=False)]
pick += [un_n[i] for i in rng.choice(len(un_n), 14, replace=False)]
keep = set(pick)
os.makedirs("nq-extra/qrels", exist_ok=True)
with open("nq-extra/queries.jsonl", "w") as f:
    f.writelines(line for line in open("nq-heldout/queries.jsonl") if json.loads(line)["_id"] in keep)
lines = open("nq-heldout/qrels/test.tsv").read().splitlines()
with open("nq-extra/qrels/test.tsv", "w") as f:
    f.write("\n".join([lines[0]] + [x for x in lines[1:] if x.split("\t")[0] in keep]) + "\n")
with open("nq-extra/run.trec", "w") as f:
    f.writelines(x for x in open("nq-heldout/run-test-bm25-quarter-none.trec") if x.split()[0] in keep)
with open("nq-extra/qids.txt", "w") as f:
    f.write("\n".join(sorted(pick)) + "\n")
if not os.path.exists("nq-extra/corpus.jsonl"):
    os.symlink(os.path.abspath("nq-heldout/corpus.jsonl"), "nq-extra/corpus.jsonl")
