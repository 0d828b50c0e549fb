#!/usr/bin/env bash
# A lease for issue "llm": decoder fine-tunes (0.2B and 1.1B Llama shapes, GPT-2 XL's
# shape) in full fp32, true bf16, AMP fp16/bf16, activation checkpointing and LoRA,
# three processes at a time on the GPU (allocator peaks are per process); meanwhile each
# job is described on the CPUs with the machine's torch 2.x. Results to $OUT or
# ./device-out.
source lab/gpu/device_setup.sh
export PYTHONPATH=python
start_env_txt name,memory.total,memory.used,driver_version
python3 -c "import torch,transformers,peft;print(torch.__version__, transformers.__version__, peft.__version__)" | tee -a "$OUT/env.txt"
JOBS=llama-0.2b/full_fp32@4x1024,llama-0.2b/full_bf16@4x1024,llama-0.2b/full_fp32_amp_fp16@4x1024
JOBS+=,llama-0.2b/full_fp32_amp_bf16@4x1024,llama-0.2b/full_fp32_ckpt@4x1024,llama-0.2b/full_bf16_ckpt@4x1024
JOBS+=,llama-0.2b/lora_bf16@4x1024,llama-0.2b/lora_bf16_ckpt@4x1024,llama-0.2b/full_bf16@1x1024
JOBS+=,llama-0.2b/full_bf16@16x1024,llama-0.2b/lora_bf16@16x1024,llama-0.2b/full_fp32_ckpt@16x2048
JOBS+=,gpt2-xl/full_fp32@2x1024,gpt2-xl/full_fp32_amp_fp16@2x1024,gpt2-xl/lora_bf16@4x1024
JOBS+=,gpt2-xl/full_bf16_ckpt@8x1024
JOBS+=,llama-1.1b/full_fp32@4x1024,llama-1.1b/full_bf16@4x1024,llama-1.1b/full_fp32_amp_bf16@4x1024
JOBS+=,llama-1.1b/full_bf16_ckpt@8x2048,llama-1.1b/lora_bf16@4x1024,llama-1.1b/lora_bf16_ckpt@8x2048
JOBS+=,llama-7b/lora_bf16@1x2048,llama-7b/lora_bf16_ckpt@1x2048,llama-7b/full_bf16_ckpt@1x2048
CUDA_VISIBLE_DEVICES= timeout 330 python3 lab/gpu/measure_llm_finetune.py --no-measure \
  --jobs "$JOBS" --parallel 6 --describe-dir "$OUT/llm_descriptions" 2>"$OUT/describe.log" &
timeout 330 python3 lab/gpu/measure_llm_finetune.py --steps 2 --timeout-s 150 --parallel 3 \
  --jobs "$JOBS" --out "$OUT/llm_finetune.jsonl"
wait
tail -n 30 "$OUT/describe.log"
nvidia-smi --query-gpu=memory.used --format=csv
