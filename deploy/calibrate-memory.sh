#!/usr/bin/env bash
# Calibrates the allocator-simulation estimators (models/allocsim, models/analytic) and
# the A100's context (models/gpu_profiles.json) on GPUMemNet's training split and the
# timm measurements of real models (left out a whole architecture group at a time), then
# rewrites the simulation section of docs/accuracy.md with every estimator scored on the
# held-out split. The traced export (each dataset row rebuilt and described with a
# FakeTensor trace) is made once into build/datasets/, about 15 minutes on 2 cores;
# later runs reuse it and take well under a minute.
# Usage: deploy/calibrate-memory.sh [extra gpuest-calibrate-memory flags]
# GPUEST_SCORE_MODELS=1: leave models/ as it is and score it (--score-models), the
# report showing this run's fits for comparison only: for models/ whose terms were
# fitted on inputs this machine lacks (the torch-2.11 timm traces, below).
set -euo pipefail
cd "$(dirname "$0")/.."
# GPUEST_DATA_DIR: the folder holding the measured datasets (README.md, "The measured data").
DATA="${GPUEST_DATA_DIR:-../shared/data}/gpumemnet"
bash deploy/build.sh
mkdir -p build/datasets
export PYTHONPATH=python:build/python
for family in mlp cnn transformer_sample; do
  out="build/datasets/${family}_traced.jsonl"
  if [[ ! -s "$out" ]]; then
    echo "describing every row of $family.csv with a trace -> $out"
    /usr/bin/python3 -m gpuest.synthetic.export --trace \
      --csv "$DATA/$family.csv" --out "$out.partial"
    mv "$out.partial" "$out"
  fi
done
if [[ ! -s build/datasets/transformer.jsonl ]]; then
  /usr/bin/python3 -m gpuest.synthetic.export \
    --csv "$DATA/transformer_sample.csv" --out build/datasets/transformer.jsonl
fi
# The real models: every timm row described with a trace (about an hour on 2 cores the
# first time; resumable, so a second run continues where a killed one stopped). The
# shipped calibration used rows traced on a GPU machine's torch 2.11 in 14 shards
# (lab/gpu/device_run.sh), their layers' inputs (Layer.input_activations, which the
# layer rule needs) merged in afterwards from a layers-only describe, seconds a model:
#   describe_timm.py --layers-only --out L
#   lab/data/merge_layer_inputs.py --traced ROWS --layers L --out MERGED
# Give such a file as GPUEST_TIMM_ROWS to use it as is.
TIMM_CSV="${GPUEST_TIMM_CSV:-${GPUEST_DATA_DIR:-../shared/data}/timm/timm_a100.csv}"
TIMM_SRC_TARBALL="${GPUEST_TIMM_SOURCE:-../shared/vendor/timm-src-aa4b5850.tar.gz}"
timm_rows="${GPUEST_TIMM_ROWS:-build/datasets/timm_traced.jsonl}"
if [[ ! -d build/timm-src/timm/timm ]]; then
  mkdir -p build/timm-src && tar -xzf "$TIMM_SRC_TARBALL" -C build/timm-src
fi
if [[ -z "${GPUEST_TIMM_ROWS:-}" ]]; then
  PYTHONPATH="python:build/python:build/timm-src/timm" /usr/bin/python3 lab/data/describe_timm.py \
    --csv "$TIMM_CSV" --out "$timm_rows"
fi
# Which tensor each layer reads (Layer.input_from) and, for a tensor no module made, the
# operation that made it (Layer.input_op), from a layers-only describe of one row per
# model here (about 15 minutes the first time on 2 cores, resumable; the layer list is
# per sample), given to every row of the model: the layer rule reads it in place of
# matching by size. The files are kept: delete build/datasets/*layer_sources.jsonl to
# describe again after the describer changes.
layer_sources=build/datasets/timm_layer_sources.jsonl
PYTHONPATH="python:build/python:build/timm-src/timm" /usr/bin/python3 lab/data/describe_timm.py \
  --csv "$TIMM_CSV" --out "$layer_sources" --layers-only --one-row-per-model
/usr/bin/python3 lab/data/merge_layer_inputs.py --traced "$timm_rows" \
  --layers "$layer_sources" --out build/datasets/timm_traced_sourced.jsonl --by-model
timm_rows=build/datasets/timm_traced_sourced.jsonl
# The project's own clean runs (benchmark off, uncapped), their models traced here by the
# describer as it is (cuDNN's workspaces at each convolution, which the lease machines'
# traces predate): a few minutes the first time, resumable, then seconds. A model torch
# 1.13 cannot trace (ConViT, PoolFormerV2) takes its row of FALLBACK, traced elsewhere
# without workspaces (the served bound adds its stand-in for those).
#   trace_clean_runs GPU RUNS OUT [FALLBACK]
trace_clean_runs() {
  local models="build/datasets/$1_clean_models.csv"
  local traced="build/datasets/$1_clean_models_traced.jsonl"
  /usr/bin/python3 lab/data/export_clean_runs.py --gpu "$1" --runs "$2" \
    --models-csv --out "$models"
  echo "describing the $1 clean runs' models with a trace -> $traced" >&2
  PYTHONPATH="python:build/python:build/timm-src/timm" /usr/bin/python3 lab/data/describe_timm.py \
    --csv "$models" --out "$traced"
  # Their layers' sources, as for the timm rows above.
  local sources="build/datasets/$1_clean_layer_sources.jsonl"
  PYTHONPATH="python:build/python:build/timm-src/timm" /usr/bin/python3 lab/data/describe_timm.py \
    --csv "$models" --out "$sources" --layers-only --one-row-per-model
  /usr/bin/python3 lab/data/merge_layer_inputs.py --traced "$traced" --layers "$sources" \
    --out "$traced.sourced" --by-model
  local fallback=()
  [[ -n "${4:-}" ]] && fallback=(--descriptions "$4")
  /usr/bin/python3 lab/data/export_clean_runs.py --gpu "$1" --runs "$2" \
    --descriptions "$traced.sourced" "${fallback[@]}" --out "$3"
}
# The H200's runs (data/h200-benchmark-off/) fit the clean terms served for every GPU
# (lab/calibration/clean_runs.h).
trace_clean_runs h200 data/h200-benchmark-off/cudnn_benchmark_off.jsonl \
  build/datasets/h200_clean_runs.jsonl "$timm_rows"
# Runs no fit sees, for the bound's goal table: the H100's of architecture groups no
# dataset holds (data/h100-clean-runs/), and the decoder fine-tunes on the H100 and the
# H200 (descriptions in data/h200-llm-finetune/).
trace_clean_runs h100-80gb data/h100-clean-runs/clean_runs.jsonl \
  build/datasets/h100_clean_runs.jsonl
holdout=(h100-80gb=build/datasets/h100_clean_runs.jsonl)
/usr/bin/python3 lab/data/export_clean_runs.py --gpu h100-80gb \
  --runs data/h100-clean-runs/llm_finetune.jsonl \
  --llm-descriptions data/h200-llm-finetune/llm_descriptions --out build/datasets/h100_llm_runs.jsonl
/usr/bin/python3 lab/data/export_clean_runs.py --gpu h200 \
  --runs data/h200-llm-finetune/llm_finetune.jsonl \
  --llm-descriptions data/h200-llm-finetune/llm_descriptions --out build/datasets/h200_llm_runs.jsonl
holdout+=(h100-80gb=build/datasets/h100_llm_runs.jsonl h200=build/datasets/h200_llm_runs.jsonl)
models_flag=--write-models
[[ "${GPUEST_SCORE_MODELS:-}" == 1 ]] && models_flag=--score-models
build/lab/calibration/gpuest-calibrate-memory --data-dir "$DATA" --models models \
  --timm-rows "$timm_rows" --gpu-runs h200=build/datasets/h200_clean_runs.jsonl \
  --holdout-runs "$(IFS=,; echo "${holdout[*]}")" \
  "$models_flag" --report docs/accuracy.md "$@"
if [[ "$models_flag" == --score-models ]]; then
  echo "docs/accuracy.md rewritten, scoring models/ as it is"
else
  echo "models/allocsim, models/analytic, models/gpu_profiles.json and docs/accuracy.md rewritten"
fi
