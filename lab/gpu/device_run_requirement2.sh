#!/usr/bin/env bash
# The second lease of the session (issues "requirement" and "llm"), in one call:
#  1. GPU: more timm jobs with cuDNN benchmark off (lab/gpu/timm_clean_jobs.txt:
#     a second model of each architecture group, then the first lease's models at
#     batches 8, 64 and 128), twelve processes at a time;
#  2. GPU, beside it: lora_gap.py again, after describe kept PEFT's float32 adapters;
#  3. CPUs: the LoRA jobs of data/h200-llm-finetune described again, for the same reason.
# Needs .devcarry/ (the timm source tarball). Results to $OUT.
source lab/gpu/device_setup.sh
unpack_timm_src
LORA=llama-0.2b/lora_bf16@4x1024,llama-0.2b/lora_bf16_ckpt@4x1024,llama-0.2b/lora_bf16@16x1024
LORA+=,llama-1.1b/lora_bf16@4x1024,llama-1.1b/lora_bf16_ckpt@8x2048,gpt2-xl/lora_bf16@4x1024
LORA+=,llama-7b/lora_bf16@1x2048,llama-7b/lora_bf16_ckpt@1x2048
CUDA_VISIBLE_DEVICES= PYTHONPATH=python timeout 300 python3 lab/gpu/measure_llm_finetune.py \
  --no-measure --jobs "$LORA" --parallel 4 --describe-dir /tmp/lora-desc 2>"$OUT/describe.log" &
PYTHONPATH=python timeout 200 python3 lab/gpu/lora_gap.py llama-0.2b/lora_bf16@4x1024 \
  > "$OUT/lora_gap.txt" 2>&1 &
PYTHONPATH="python:$TIMM_SRC" timeout 330 python3 lab/gpu/measure_cudnn_benchmark.py \
  --modes off --parallel 12 --steps 2 --deadline-s 230 --timeout-s 60 \
  --jobs "$(paste -sd, lab/gpu/timm_clean_jobs.txt)" \
  --out "$OUT/cudnn_benchmark_off.jsonl" 2> "$OUT/timm_off.log"
wait
tar -cJf "$OUT/lora_descriptions.tar.xz" -C /tmp lora-desc
wc -l "$OUT/cudnn_benchmark_off.jsonl"; grep -c '"OK"' "$OUT/cudnn_benchmark_off.jsonl"
tail -n 3 "$OUT/timm_off.log"; cat "$OUT/describe.log" | cut -c1-200; head -n 30 "$OUT/lora_gap.txt"
