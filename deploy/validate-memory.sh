#!/usr/bin/env bash
# Calibrates the allocator-simulation estimators (models/allocsim, models/analytic) and
# the A100's context (models/gpu_profiles.json) on GPUMemNet's training split and the
# timm measurements of real models (left out a whole architecture family at a time), then
# rewrites the simulation section of docs/accuracy.md with every estimator scored on the
# held-out split. The traced export (each dataset row rebuilt and described with a
# FakeTensor trace) is made once into build/datasets/, about 15 minutes on 2 cores;
# later runs reuse it and take well under a minute.
# Usage: deploy/validate-memory.sh [extra gpuest-validate-memory flags]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${GPUEST_DATA_DIR:-../shared/data/gpumemnet}"
bash deploy/build.sh
mkdir -p build/datasets
export PYTHONPATH=python
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
# (training/gpu/device_run.sh), their layers' inputs (Layer.input_activations, which the
# layer rule needs) merged in afterwards from a layers-only describe, seconds a model:
#   describe_timm.py --layers-only --out L
#   training/data/merge_layer_inputs.py --traced ROWS --layers L --out MERGED
# Give such a file as GPUEST_TIMM_ROWS to use it as is.
TIMM_CSV="${GPUEST_TIMM_CSV:-../shared/data/timm/timm_a100.csv}"
TIMM_SRC_TARBALL="${GPUEST_TIMM_SOURCE:-../shared/vendor/timm-src-aa4b5850.tar.gz}"
timm_rows="${GPUEST_TIMM_ROWS:-build/datasets/timm_traced.jsonl}"
if [[ -z "${GPUEST_TIMM_ROWS:-}" ]]; then
  if [[ ! -d build/timm-src/timm/timm ]]; then
    mkdir -p build/timm-src && tar -xzf "$TIMM_SRC_TARBALL" -C build/timm-src
  fi
  PYTHONPATH="python:build/timm-src/timm" /usr/bin/python3 training/data/describe_timm.py \
    --csv "$TIMM_CSV" --out "$timm_rows"
fi
# The project's own clean runs on the H200 (data/h200-benchmark-off/: benchmark off,
# uncapped) with the same traced descriptions: that GPU's own calibration, served for it
# where it beats the A100's terms there (training/calibration/clean_runs.h).
/usr/bin/python3 training/data/export_clean_runs.py --gpu h200 \
  --runs data/h200-benchmark-off/cudnn_benchmark_off.jsonl \
  --descriptions "$timm_rows" --out build/datasets/h200_clean_runs.jsonl
# Runs no fit sees, for the bound's goal table: the project's clean runs on an H100 of
# families no dataset holds (data/h100-clean-runs/; the shipped report used the
# descriptions traced on the lease's machine by training/gpu/device_run_bound.sh, given
# as GPUEST_H100_ROWS; without them they are traced here, a few minutes), and the
# decoder fine-tunes on the H100 and the H200 (descriptions in data/h200-llm-finetune/).
holdout=()
h100_rows="${GPUEST_H100_ROWS:-build/datasets/h100_new_families_traced.jsonl}"
if [[ ! -s "$h100_rows" ]]; then
  echo "describing the H100 clean runs' models with a trace -> $h100_rows" >&2
  /usr/bin/python3 - data/h100-clean-runs/clean_runs.jsonl > build/datasets/h100_rows.csv <<'PY'
import json, sys
print("model,input_size,batch_size,max_gpu_memory_mib,status,faketensor_mib")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("status") == "OK":
        print(f"{r['model']},{r['input_size']},{r['batch_size']},{r['steady_reserved_mib']},OK,")
PY
  PYTHONPATH="python:build/timm-src/timm" /usr/bin/python3 training/data/describe_timm.py \
    --csv build/datasets/h100_rows.csv --out "$h100_rows"
fi
if [[ -s "$h100_rows" ]]; then
  /usr/bin/python3 training/data/export_clean_runs.py --gpu h100-80gb \
    --runs data/h100-clean-runs/clean_runs.jsonl \
    --descriptions "$h100_rows" \
    --out build/datasets/h100_clean_runs.jsonl
  holdout+=(h100-80gb=build/datasets/h100_clean_runs.jsonl)
else
  echo "no traced descriptions of the H100 rows (GPUEST_H100_ROWS): their goal rows are left out" >&2
fi
/usr/bin/python3 training/data/export_clean_runs.py --gpu h100-80gb \
  --runs data/h100-clean-runs/llm_finetune.jsonl \
  --llm-descriptions data/h200-llm-finetune/llm_descriptions --out build/datasets/h100_llm_runs.jsonl
/usr/bin/python3 training/data/export_clean_runs.py --gpu h200 \
  --runs data/h200-llm-finetune/llm_finetune.jsonl \
  --llm-descriptions data/h200-llm-finetune/llm_descriptions --out build/datasets/h200_llm_runs.jsonl
holdout+=(h100-80gb=build/datasets/h100_llm_runs.jsonl h200=build/datasets/h200_llm_runs.jsonl)
build/training/calibration/gpuest-validate-memory --data-dir "$DATA" --models models \
  --timm-rows "$timm_rows" --gpu-runs h200=build/datasets/h200_clean_runs.jsonl \
  --holdout-runs "$(IFS=,; echo "${holdout[*]}")" \
  --write-models --report docs/accuracy.md "$@"
echo "models/allocsim, models/analytic, models/gpu_profiles.json and docs/accuracy.md rewritten"
