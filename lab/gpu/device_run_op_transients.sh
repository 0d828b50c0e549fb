#!/usr/bin/env bash
# One lease (issue "requirement", deliverable 4), two measurements the simulation's
# reserved peak needs, about 5 minutes:
#  1. what each operation holds only while it runs, measured per call
#     (measure_op_transients.py), benchmark off, on timm jobs
#     whose clean H200 runs reserved the most beyond the simulated step
#     (data/h200-benchmark-off/README.md: darknet17@128, levit_128@128, hieradet_small@64)
#     and on the benchmark-mode check's models, one job at a time;
#  2. reserved memory step by step on GPUMemNet CNNs whose simulated second step
#     reserves up to 11 GB more than the first (measure_step_reserved.py), uncapped and
#     capped as the A100 40GB was.
# Needs .devcarry/ (ignored by git; carry it):
#   mkdir -p .devcarry && cp ../shared/vendor/timm-src-*.tar.gz \
#     ../shared/data/gpumemnet/cnn.csv .devcarry/
# Results to $OUT.
source lab/gpu/device_setup.sh
unpack_timm_src
start_env_txt name,memory.total,driver_version
PYTHONPATH="python:$TIMM_SRC" timeout 240 python3 \
  lab/gpu/measure_op_transients.py --deadline-s 200 --timeout-s 90 \
  --jobs darknet17@128,levit_128@128,hieradet_small@64,resnet50@32,convnext_tiny@32,vgg16@64,mobilevitv2_100@32,nest_tiny@32,regnety_320@32 \
  --out "$OUT/op_transients.jsonl" 2> "$OUT/op_transients.log"
cat "$OUT/op_transients.log"
wc -l "$OUT/op_transients.jsonl"
for cap in 0 39531; do
  PYTHONPATH=python timeout 150 python3 lab/gpu/measure_step_reserved.py \
    --csv .devcarry/cnn.csv --rows lab/gpu/step_reserved_rows.json --cap-mib $cap \
    --deadline-s 120 --timeout-s 60 --out "$OUT/step_reserved.jsonl"
done
