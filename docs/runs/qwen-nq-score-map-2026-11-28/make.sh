#!/usr/bin/env bash
# issue 42: the bundled NQ profiles get BM25's score map (no model call). Run from the
# repository root with the held-out collection in nq-heldout/ (docs/probabilities.md).
set -euo pipefail
D=docs/runs/qwen-nq-score-map-2026-11-28
R=docs/runs
# 1. the map, fitted on the 200 calibration-split questions (prints it, and the prior alone on the test split)
python -m benchmarks.score_prior_fit nq-heldout --run nq-heldout/run-calibration-bm25-quarter-none.trec \
  --heldout-split test --heldout-run nq-heldout/run-test-bm25-quarter-none.trec
MAP='{"score": 0.449541, "log_rank": -1.388849, "offset": -3.401718, "low": 2.5796, "high": 21.6105}'
for who in qwen smol; do
  python - "$D/profile-$who-before.json" "$MAP" "$D/profile-$who-map.json" <<'PY'
import json, sys
from gold_panning_integrations.profiles import load_profile
load_profile(sys.argv[1]).model_copy(update={"score_map": json.loads(sys.argv[2])}).save(sys.argv[3])
PY
done
# 2. the calibration traces rescored with it (the 0.5B model: both calibration runs, 40 traces)
python -m benchmarks.replay_options rescore $R/qwen-nq-calibration-2026-11-28/qwen-cal-auto-traces.jsonl \
  --checkpoint $R/qwen-nq-calibration-2026-11-28/ck-qwen-cal-auto.jsonl \
  --run nq-heldout/run-calibration-bm25-quarter-none.trec --score-map $D/profile-qwen-map.json --out a.jsonl
python -m benchmarks.replay_options rescore $R/qwen-nq-abstain-2026-11-28/qwen-cal-lp.jsonl \
  --checkpoint $R/qwen-nq-abstain-2026-11-28/ck-cal-lp.jsonl \
  --run nq-heldout/run-calibration-bm25-quarter-none.trec --score-map $D/profile-qwen-map.json --out b.jsonl
cat a.jsonl b.jsonl > $D/qwen-cal-rescored.jsonl
python -m benchmarks.replay_options rescore $R/smollm2-nq-calibration-2026-11-28/smol-cal-auto-traces.jsonl \
  --checkpoint $R/smollm2-nq-calibration-2026-11-28/ck-smol-cal-auto.jsonl \
  --run nq-heldout/run-calibration-bm25-quarter-none.trec --score-map $D/profile-smol-map.json --out $D/smol-cal-rescored.jsonl
# 3. the Platt maps refitted on them, the rates kept (the bundled files are these, with a note added)
gold-panning calibrate --from-traces $D/qwen-cal-rescored.jsonl --prior $D/profile-qwen-map.json --keep-rates --out qwen-nq.json
gold-panning calibrate --from-traces $D/smol-cal-rescored.jsonl --prior $D/profile-smol-map.json --keep-rates --out smol-nq.json
# 4. the kept test traces replayed under the profiles before and after
python -m benchmarks.score_map_replay --before $D/profile-qwen-before.json --after qwen2.5-coder-0.5b-nq \
  --set $R/qwen-nq-test-2026-11-28/qwen-test-auto-traces.jsonl $R/qwen-nq-test-2026-11-28/ck-qwen-test-auto.jsonl \
  --set $R/qwen-nq-abstain-2026-11-28/qwen-test-lp.jsonl $R/qwen-nq-abstain-2026-11-28/ck-test-lp.jsonl \
  --run nq-heldout/run-test-bm25-quarter-none.trec --qrels nq-heldout/qrels/test.tsv --emptied nq-heldout/quarter-none-test.txt
python -m benchmarks.score_map_replay --before $D/profile-smol-before.json --after smollm2-135m-nq-labelled \
  --set $R/smollm2-nq-test40-2026-11-28/smol-test40-auto-traces.jsonl $R/smollm2-nq-test40-2026-11-28/ck-smol-test40-auto.jsonl \
  --set $R/smollm2-nq-test-2026-11-28/smol-test-auto-traces.jsonl $R/smollm2-nq-test-2026-11-28/ck-smol-test-auto.jsonl \
  --run nq-heldout/run-test-bm25-quarter-none.trec --qrels nq-heldout/qrels/test.tsv --emptied nq-heldout/quarter-none-test.txt
