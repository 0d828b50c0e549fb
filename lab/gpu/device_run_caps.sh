#!/usr/bin/env bash
# The second lease: timm models with cuDNN benchmark on, capped at gpuest's predicted
# requirement for the H200 (.devcarry/caps.json: the allocsim upper bound less the H200's
# context, from the shipped calibration), beside the same job uncapped and with
# benchmark off. Results to $OUT (device tool) or ./device-out.
set -uo pipefail
OUT="${OUT:-device-out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
mkdir -p /tmp/timm-src && tar -xzf .devcarry/timm-src-*.tar.gz -C /tmp/timm-src
export PYTHONPATH="python:/tmp/timm-src/timm"
timeout 280 python3 lab/gpu/measure_cudnn_benchmark.py --deadline-s 235 --timeout-s 60 \
  --cap-factors "" --cap-file .devcarry/caps.json \
  --jobs nest_tiny@32,vgg16@64,mobilevitv2_100@32,resnet50@32,convnext_tiny@32,regnety_320@32,nest_tiny@64 \
  --out "$OUT/cudnn_benchmark_predicted_caps.jsonl"
