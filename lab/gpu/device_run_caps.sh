#!/usr/bin/env bash
# The second lease: timm models with cuDNN benchmark on, capped at gpuest's predicted
# requirement for the H200 (.devcarry/caps.json: the allocsim upper bound less the H200's
# context, from the shipped calibration), beside the same job uncapped and with
# benchmark off. Results to $OUT (device tool) or ./device-out.
source lab/gpu/device_setup.sh
unpack_timm_src
export PYTHONPATH="python:$TIMM_SRC"
timeout 280 python3 lab/gpu/measure_cudnn_benchmark.py --deadline-s 235 --timeout-s 60 \
  --cap-factors "" --cap-file .devcarry/caps.json \
  --jobs nest_tiny@32,vgg16@64,mobilevitv2_100@32,resnet50@32,convnext_tiny@32,regnety_320@32,nest_tiny@64 \
  --out "$OUT/cudnn_benchmark_predicted_caps.jsonl"
