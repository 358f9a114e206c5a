#!/usr/bin/env bash
# The two runs of this folder, from a folder holding nq-heldout/ (docs/probabilities.md builds
# it), with the package of the commit measured on the path.
set -x
Q=$(../shared/models/get-qwen2.5-coder-0.5b.sh)  # the path of the GGUF file
common="--task beir --data nq-heldout --n 10 --mode answer --threads 2 --reader embedded --model-path $Q --profile qwen2.5-coder-0.5b-nq"
gold-panning evaluate $common --split calibration --run nq-heldout/run-calibration-bm25-quarter-none.trec \
  --instances 14 --seed 15 --methods gp-defaults --traces qwen-cal-wayout.jsonl --checkpoint ck-cal-wayout.jsonl --out out-cal
gold-panning evaluate $common --split test --run nq-heldout/run-test-bm25-quarter-none.trec \
  --instances 26 --seed 16 --methods base,gp-defaults --traces qwen-test-wayout.jsonl --checkpoint ck-test-wayout.jsonl --out out-test
