#!/usr/bin/env bash
# The third lease (issue "requirement"): does a tight requirement hold under a cap?
# 60 timm jobs with cuDNN benchmark ON, each capped (set_per_process_memory_fraction)
# at the allocator's share of a bound fitted on data/h200-benchmark-off without the
# job's architecture group (lab/gpu/tight_caps.json, written by
# compare_with_estimates.py --group-out-bound --write-caps): the 16 jobs whose
# benchmark-off peak the bound misses, and the 44 it holds most tightly. Twelve
# processes at a time. Needs .devcarry/ (the timm source tarball). Results to $OUT.
source lab/gpu/device_setup.sh
unpack_timm_src
JOBS=$(python3 -c "import json;print(','.join(json.load(open('lab/gpu/tight_caps.json'))))")
PYTHONPATH="python:$TIMM_SRC" timeout 200 python3 lab/gpu/measure_cudnn_benchmark.py \
  --modes cap --cap-file lab/gpu/tight_caps.json --parallel 12 --steps 2 \
  --deadline-s 150 --timeout-s 60 --jobs "$JOBS" \
  --out "$OUT/cudnn_benchmark_tight_caps.jsonl" 2> "$OUT/tight_caps.log"
wc -l "$OUT/cudnn_benchmark_tight_caps.jsonl"
grep -c '"OK"' "$OUT/cudnn_benchmark_tight_caps.jsonl"
grep -v '"OK"' "$OUT/cudnn_benchmark_tight_caps.jsonl" | cut -c1-200
