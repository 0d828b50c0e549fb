#!/usr/bin/env bash
# One lease of a GPU machine (the workplace's device tool), everything in one call:
#  1. cuDNN benchmark mode on/off and capped, on timm models   (measure_cudnn_benchmark.py)
#  2. small-decoder fine-tunes: full, bf16, checkpointed, LoRA (measure_llm_finetune.py)
#  3. meanwhile, on the CPUs: every timm row described with a trace on the machine's
#     torch 2.x (describe_timm.py, 14 shards), for the calibration.
# Needs .devcarry/ (timm_a100.csv and the timm source tarball, copied from ../shared).
# Results go to $OUT (device tool) or ./device-out.
source lab/gpu/device_setup.sh
unpack_timm_src
export GPUEST_TIMM_SRC="$TIMM_SRC"
export PYTHONPATH="python:$GPUEST_TIMM_SRC"
start_env_txt name,memory.total,memory.used,driver_version
python3 -c "import torch,timm;print(torch.__version__, torch.backends.cudnn.version(), timm.__version__)" | tee -a "$OUT/env.txt"

# 3, in the background, no GPU.
mkdir -p /tmp/timm
for k in $(seq 0 13); do
  CUDA_VISIBLE_DEVICES= timeout 400 python3 lab/data/describe_timm.py \
    --csv .devcarry/timm_a100.csv --out /tmp/timm/shard$k.jsonl --shard $k/14 \
    2>/tmp/timm/shard$k.log &
done
CUDA_VISIBLE_DEVICES= timeout 400 python3 lab/gpu/measure_llm_finetune.py --no-measure \
  --configs full_fp32,full_bf16,full_fp32_ckpt,lora_bf16 --describe-dir /tmp/llm-desc \
  2>/tmp/llm-describe.log &

# 1 and 2 on the GPU, one process at a time.
timeout 300 python3 lab/gpu/measure_cudnn_benchmark.py --deadline-s 250 --timeout-s 60 \
  --jobs resnetaa50d@8,resnetaa50d@16,regnety_320@16,resnet26t@8,mobilevitv2_100@16,resnet50@32,nest_tiny@32,vgg13@32,mobilevitv2_100@32 \
  --out "$OUT/cudnn_benchmark.jsonl"
timeout 120 python3 lab/gpu/measure_llm_finetune.py --steps 2 --timeout-s 60 \
  --configs full_fp32,full_bf16,full_fp32_ckpt,lora_bf16 --out "$OUT/llm_finetune.jsonl"
wait
cat /tmp/llm-describe.log
tail -n 3 /tmp/timm/shard*.log > "$OUT/timm_describe.log"
grep -h "cannot build\|Error" /tmp/timm/shard*.log | head -20
cat /tmp/timm/shard*.jsonl > /tmp/timm_traced.jsonl
wc -l /tmp/timm_traced.jsonl; ls -la /tmp/timm_traced.jsonl
tar -cJf "$OUT/llm_describe.tar.xz" -C /tmp llm-desc
xz -T16 -6 -c /tmp/timm_traced.jsonl > /tmp/timm_traced.jsonl.xz
split -b 15M -d /tmp/timm_traced.jsonl.xz "$OUT/timm_traced.jsonl.xz."
ls -la "$OUT"
