#!/usr/bin/env bash
# issue 48, no model call: the calibration split's 40 traces of the 0.5B model (kept by
# earlier runs), with the retriever's scores added and the labels removed; profiles learned
# from them with and without labels; the 93 kept test traces replayed through each.
# From the repository root, nq-heldout/ built as docs/probabilities.md says.
set -euo pipefail
D=docs/runs/qwen-nq-unlabelled-2026-12-02
S=docs/runs/qwen-nq-score-map-2026-11-28
python $D/calibration-traces.py
gold-panning calibrate --from-traces $D/cal-scores-labelled.jsonl --prior lost-in-the-middle \
  --relevance independent --out $D/profile-labelled.json
gold-panning calibrate --from-traces $D/cal-scores-unlabelled.jsonl --prior lost-in-the-middle \
  --out $D/profile-unlabelled-final.json
python -m benchmarks.score_map_replay --before qwen2.5-coder-0.5b-nq \
  --after $D/profile-labelled.json --after lost-in-the-middle --after $D/profile-unlabelled-final.json --after $D/profile-unlabelled.json \
  --set $S/qwen-test-sm.jsonl $S/ck-test-sm.jsonl --set $S/qwen-test40-sm.jsonl $S/ck-test40-sm.jsonl \
  --set $S/qwen-test30-sm.jsonl $S/ck-test30-sm.jsonl \
  --run nq-heldout/run-test-bm25-quarter-none.trec --qrels nq-heldout/qrels/test.tsv \
  --emptied nq-heldout/quarter-none-test.txt
