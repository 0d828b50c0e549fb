#!/usr/bin/env bash
# Retrains every GPUMemNet / GPUUtilNet ensemble into models/ and rewrites
# docs/accuracy.md. Deterministic for a seed (one libtorch thread per trainer); two
# trainers run side by side on separate work, then the report is written from the
# manifests. About 20 minutes on 2 cores.
# Usage: deploy/train.sh [extra gpuest-train flags, e.g. --seed 7]
set -euo pipefail
cd "$(dirname "$0")/.."
# GPUEST_DATA_DIR: the folder holding the measured datasets (README.md, "The measured data").
DATA="${GPUEST_DATA_DIR:-../shared/data}/gpumemnet"
bash deploy/build.sh
mkdir -p build/datasets
# The Transformer sample has no layer list: rebuild each row's model and describe it.
PYTHONPATH=python /usr/bin/python3 -m gpuest.synthetic.export \
  --csv "$DATA/transformer_sample.csv" --out build/datasets/transformer.jsonl
TRAIN=(build/lab/trainer/gpuest-train --out models --data-dir "$DATA"
  --transformer-rows build/datasets/transformer.jsonl "$@")
mkdir -p build/train-logs
# Two halves of about equal work (the CNN Transformer-based ensemble is the longest).
"${TRAIN[@]}" --families cnn 2> build/train-logs/cnn.log &
first=$!
"${TRAIN[@]}" --families mlp,transformer 2> build/train-logs/mlp-and-transformer.log
wait "$first"
"${TRAIN[@]}" --report-only --report docs/accuracy.md
echo "models/gpumemnet-* and docs/accuracy.md rewritten; logs in build/train-logs/"
