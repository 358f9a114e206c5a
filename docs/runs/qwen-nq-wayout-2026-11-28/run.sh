#!/usr/bin/env bash
set -x
cd /work/runs
. /work/venv/bin/activate
export PYTHONPATH=/work/wt-run
Q=/root/.cache/gold-panning-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
common="--task beir --data nq-heldout --n 10 --mode answer --threads 2 --reader embedded --model-path $Q --profile qwen2.5-coder-0.5b-nq"
python -m gold_panning_integrations.cli evaluate $common --split calibration --run nq-heldout/run-calibration-bm25-quarter-none.trec \
  --instances 14 --seed 15 --methods gp-defaults --traces qwen-cal-wayout.jsonl --checkpoint ck-cal-wayout.jsonl --out out-cal
python -m gold_panning_integrations.cli evaluate $common --split test --run nq-heldout/run-test-bm25-quarter-none.trec \
  --instances 26 --seed 16 --methods base,gp-defaults --traces qwen-test-wayout.jsonl --checkpoint ck-test-wayout.jsonl --out out-test
