#!/usr/bin/env bash
# One lease (issue "bound"), about 5 minutes, what the served bound still lacked:
#  1. the context of this node's stack, as `gpuest-collect context` measures it for the
#     server, with lazy module loading (PyTorch's default) and with eager loading;
#  2. clean runs (cuDNN benchmark off, uncapped, fp32 SGD with momentum as timm's
#     train.py) of one model of each timm architecture group that neither the shared
#     A100 rows nor the H200 rows hold, six processes at a time, each with its own
#     context read from NVML's per-process figure;
#  3. decoder fine-tunes (described already in data/h200-llm-finetune/) on this GPU;
#  4. meanwhile, on the CPUs: every timm row of the A100 data described with a trace on
#     the machine's torch (the calibration's input), then the new architecture groups' rows.
# Needs .devcarry/ (ignored by git; carry it):
#   mkdir -p .devcarry && cp ../shared/vendor/timm-src-*.tar.gz \
#     ../shared/data/timm/timm_a100.csv .devcarry/
# Results to $OUT.
source lab/gpu/device_setup.sh
unpack_timm_src
export PYTHONPATH="python:$TIMM_SRC"
start_env_txt name,memory.total,memory.used,driver_version
python3 -c "import torch,timm,transformers,peft;print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'timm', timm.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$OUT/env.txt"

# 1, alone on the GPU.
timeout 90 python3 -m gpuest.collect context --out "$OUT/context_lazy.json"
CUDA_MODULE_LOADING=EAGER timeout 90 python3 -m gpuest.collect context --out "$OUT/context_eager.json"

# 4a, in the background, no GPU.
mkdir -p /tmp/timm
for k in $(seq 0 9); do
  CUDA_VISIBLE_DEVICES= timeout 330 python3 lab/data/describe_timm.py \
    --csv .devcarry/timm_a100.csv --out /tmp/timm/shard$k.jsonl --shard $k/10 \
    2>/tmp/timm/shard$k.log &
done

# 2 and 3 on the GPU.
NEW=cait_xxs24_224,coat_lite_tiny,crossvit_9_240,deit_small_patch16_224,densenet121,dla34
NEW+=,dpn68,edgenext_small,efficientformer_l1,efficientformerv2_s1,efficientvit_b1
NEW+=,efficientvit_m2,eva02_tiny_patch14_224,fasternet_t1,fastvit_sa12,focalnet_tiny_srf
NEW+=,gcvit_xtiny,hrnet_w18_small_v2,inception_next_tiny,inception_v3,inception_v4
NEW+=,mambaout_femto,mvitv2_tiny,nextvit_small,pit_s_224,pvt_v2_b1,rdnet_tiny
NEW+=,repghostnet_100,res2net50_26w_4s,resnetv2_50,selecsls42b,legacy_seresnet50
NEW+=,sequencer2d_s,shvit_s2,starnet_s2,swiftformer_s,swin_tiny_patch4_window7_224
NEW+=,tnt_s_patch16_224,twins_svt_small,vit_small_r26_s32_224
NEW+=,vit_relpos_small_patch16_224,samvit_base_patch16_224,xception41
NEW+=,xcit_tiny_12_p16_224,csatv2,inception_resnet_v2,legacy_xception,cpubone_s0
JOBS=$(echo "$NEW" | tr , '\n' | sed 's/$/@32/' | paste -sd,)
JOBS+=,dla34@64,densenet121@64,res2net50_26w_4s@64,resnetv2_50@64,inception_v3@64
JOBS+=,xception41@64,edgenext_small@64,swin_tiny_patch4_window7_224@64
JOBS+=,deit_small_patch16_224@64,hrnet_w18_small_v2@64
timeout 200 python3 lab/gpu/measure_cudnn_benchmark.py --modes off --parallel 6 \
  --steps 2 --deadline-s 160 --timeout-s 60 --jobs "$JOBS" \
  --out "$OUT/clean_runs.jsonl" 2> "$OUT/clean_runs.log"
grep -c '"OK"' "$OUT/clean_runs.jsonl"

# 4b: the new rows described (their input size as measured), while the GPU runs 3.
python3 - "$OUT/clean_runs.jsonl" > /tmp/new_rows.csv <<'PY'
import json, sys
print("model,input_size,batch_size,max_gpu_memory_mib,status,faketensor_mib")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("status") == "OK":
        print(f"{r['model']},{r['input_size']},{r['batch_size']},{r['steady_reserved_mib']},OK,")
PY
for k in 0 1 2 3 4; do
  CUDA_VISIBLE_DEVICES= timeout 150 python3 lab/data/describe_timm.py \
    --csv /tmp/new_rows.csv --out /tmp/new$k.jsonl --shard $k/5 2>/tmp/new$k.log &
done
LLM=llama-0.2b/full_bf16@4x1024,llama-0.2b/full_fp32_amp_bf16@4x1024
LLM+=,llama-0.2b/lora_bf16@4x1024,llama-0.2b/lora_bf16_ckpt@4x1024
LLM+=,gpt2-xl/lora_bf16@4x1024,llama-1.1b/full_bf16@4x1024,llama-1.1b/lora_bf16_ckpt@8x2048
timeout 110 python3 lab/gpu/measure_llm_finetune.py --steps 2 --timeout-s 90 --parallel 4 \
  --jobs "$LLM" --out "$OUT/llm_finetune.jsonl" 2> "$OUT/llm.log"
wait
cat /tmp/new*.jsonl | gzip -9 > "$OUT/new_groups_traced.jsonl.gz"
cat /tmp/timm/shard*.jsonl | gzip -9 > "$OUT/timm_traced.jsonl.gz"
tail -qn 2 /tmp/timm/shard*.log /tmp/new*.log > "$OUT/describe.log"
grep -h "cannot build\|Error" /tmp/timm/shard*.log /tmp/new*.log | head
echo "described: $(zcat "$OUT/timm_traced.jsonl.gz" | wc -l) A100 rows, $(zcat "$OUT/new_groups_traced.jsonl.gz" | wc -l) new rows"
ls -la "$OUT"
python3 -c "import json;[print(json.load(open(f))['context_mib'], f) for f in ['$OUT/context_lazy.json','$OUT/context_eager.json']]"
