"""Builds the nq-extra collection of docs/runs/qwen-nq-test-extra30-2026-11-28: 30 held-out
test questions of nq-heldout that the 40-question run did not use, 16 of the emptied ones
and 14 of the others (seeded), with the quarter-emptied BM25 run. Run beside nq-heldout/."""

import json
from pathlib import Path

import numpy as np

src, out = Path("nq-heldout"), Path("nq-extra")
used = {
    json.loads(line)["qid"] for line in Path("probabilities-gp-defaults-40.jsonl").read_text().splitlines()
}
qrels = (src / "qrels" / "test.tsv").read_text().splitlines()
test_q = list(dict.fromkeys(line.split("\t")[0] for line in qrels[1:]))  # file order, once each
emptied = set((src / "quarter-none-test.txt").read_text().split())
un_e = sorted(q for q in test_q if q in emptied and q not in used)
un_n = sorted(q for q in test_q if q not in emptied and q not in used)
rng = np.random.default_rng(7)
pick = [un_e[i] for i in rng.choice(len(un_e), 16, replace=False)]
pick += [un_n[i] for i in rng.choice(len(un_n), 14, replace=False)]
keep = set(pick)
(out / "qrels").mkdir(parents=True, exist_ok=True)
queries = (src / "queries.jsonl").read_text().splitlines(keepends=True)
(out / "queries.jsonl").write_text("".join(q for q in queries if json.loads(q)["_id"] in keep))
(out / "qrels" / "test.tsv").write_text(
    "\n".join([qrels[0]] + [x for x in qrels[1:] if x.split("\t")[0] in keep]) + "\n"
)
run = (src / "run-test-bm25-quarter-none.trec").read_text().splitlines(keepends=True)
(out / "run.trec").write_text("".join(x for x in run if x.split()[0] in keep))
(out / "qids.txt").write_text("\n".join(sorted(pick)) + "\n")
if not (out / "corpus.jsonl").exists():
    (out / "corpus.jsonl").symlink_to((src / "corpus.jsonl").resolve())
