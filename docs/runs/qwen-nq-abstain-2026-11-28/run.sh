#!/usr/bin/env bash
# issue 42: the 0.5B model in answer mode with the first token's probability of "unknown" recorded
set -x
Q=$(../shared/models/get-qwen2.5-coder-0.5b.sh)
common="--task beir --data nq-heldout --n 10 --mode answer --threads 1 --reader embedded --model-path $Q --profile qwen2.5-coder-0.5b-nq"
gold-panning evaluate $common --split calibration --run nq-heldout/run-calibration-bm25-quarter-none.trec \
  --instances 20 --seed 15 --methods gp-defaults --traces qwen-cal-lp.jsonl --checkpoint ck-cal-lp.jsonl --out out-cal
gold-panning evaluate $common --split test --run nq-heldout/run-test-bm25-quarter-none.trec \
  --instances 26 --seed 16 --methods base,gp-defaults --traces qwen-test-lp.jsonl --checkpoint ck-test-lp.jsonl --out out-test
