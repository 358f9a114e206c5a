#!/usr/bin/env bash
# issue 42: the 0.5B model as run with the bundled profile's score map (answer mode, library defaults):
# the 26 test questions of docs/runs/qwen-nq-abstain-2026-11-28 and the 40 of docs/runs/qwen-nq-test-2026-11-28
set -x
Q=$(../shared/models/get-qwen2.5-coder-0.5b.sh)
common="--task beir --data nq-heldout --n 10 --mode answer --threads 2 --reader embedded --model-path $Q --profile qwen2.5-coder-0.5b-nq --split test --run nq-heldout/run-test-bm25-quarter-none.trec --methods base,gp-defaults"
gold-panning evaluate $common --instances 26 --seed 16 --traces qwen-test-sm.jsonl --checkpoint ck-test-sm.jsonl --out out-test26
gold-panning evaluate $common --instances 40 --seed 6 --traces qwen-test40-sm.jsonl --checkpoint ck-test40-sm.jsonl --out out-test40
