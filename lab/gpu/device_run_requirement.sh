#!/usr/bin/env bash
# One lease (issues "requirement" and "llm"), everything in one call:
#  1. GPU: one timm model of each architecture group at batch 32 with cuDNN benchmark
#     off (no search transient: the step's own requirement), six processes at a time
#     (measure_cudnn_benchmark.py --modes off);
#  2. GPU, first: what is live at the peak of the Llama LoRA step, on the GPU and in the
#     trace (lora_gap.py);
#  3. CPUs, meanwhile: describe of a 70B decoder (Llama-2-70B's shape) on the meta
#     device, timed, with its peak RSS.
# Needs .devcarry/ (the timm source tarball, copied from ../shared). Results to $OUT.
source lab/gpu/device_setup.sh
unpack_timm_src
start_env_txt name,memory.total,driver_version
python3 -c "import torch,transformers,peft;print(torch.__version__, torch.backends.cudnn.version(), transformers.__version__, peft.__version__)" | tee -a "$OUT/env.txt"

# 3, in the background, no GPU.
for config in lora_bf16 full_bf16_ckpt; do
  ( start=$(date +%s%N)
    CUDA_VISIBLE_DEVICES= PYTHONPATH=python timeout 400 python3 -c "
import resource, runpy, sys
sys.argv = ['measure_llm_finetune.py', '--child', '$config', '--model', 'llama-70b',
            '--batch', '1', '--seq', '2048', '--describe-to', '/tmp/llama-70b_$config.json']
try:
    runpy.run_path('lab/gpu/measure_llm_finetune.py', run_name='__main__')
except SystemExit:
    pass
print('max RSS MiB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
" > "/tmp/describe70b_$config.log" 2>&1
    rc=$?; echo "llama-70b $config: rc $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms" >> "/tmp/describe70b_$config.log"
  ) &
done

# 2, then 1.
PYTHONPATH=python timeout 150 python3 lab/gpu/lora_gap.py \
  llama-0.2b/lora_bf16@4x1024 llama-0.2b/full_bf16@4x1024 > "$OUT/lora_gap.txt" 2>&1
JOBS=beitv2_base_patch16_224@32,coatnet_0_224@32,coatnext_nano_rw_224@32,convit_base@32
JOBS+=,convmixer_1024_20_ks9_p14@32,convnext_atto@32,cs3darknet_focus_l@32,cspresnext50@32
JOBS+=,darknet17@32,davit_base@32,dm_nfnet_f0@32,ese_vovnet19b_dw@32,fbnetc_100@32
JOBS+=,gcresnet33ts@32,ghostnetv2_100@32,gmlp_b16_224@32,halonet26t@32,hardcorenas_a@32
JOBS+=,hgnet_base@32,hiera_base_224@32,hieradet_small@32,lambda_resnet26rpt_256@32
JOBS+=,lcnet_035@32,levit_128@32,maxxvit_rmlp_nano_rw_256@32,maxxvitv2_nano_rw_256@32
JOBS+=,mixnet_l@32,mobilenet_edgetpu_100@32,mobilenetv1_100@32,mobilevitv2_075@32
JOBS+=,nest_base@32,poolformerv2_m36@32,regnety_002@32,regnetz_005@32,repvgg_a0@32
JOBS+=,repvit_m0_9@32,resmlp_12_224@32,resnest101e@32,resnet101@32,resnetaa101d@32
JOBS+=,resnext101_32x16d@32,rexnetr_100@32,sam2_hiera_tiny@32,sebotnet33ts_256@32
JOBS+=,sedarknet21@32,semnasnet_050@32,seresnext101_32x4d@32,seresnextaa101d_32x8d@32
JOBS+=,skresnet18@32,spnasnet_100@32,swinv2_base_window12_192@32,test_byobnet@32
JOBS+=,tf_efficientnet_b0@32,tiny_vit_11m_224@32,tinynet_a@32,tresnet_l@32,vgg11@32
JOBS+=,visformer_small@32,vitamin_large2_224@32,volo_d1_224@32,vovnet39a@32
PYTHONPATH="python:$TIMM_SRC" timeout 330 python3 lab/gpu/measure_cudnn_benchmark.py \
  --modes off --parallel 6 --steps 2 --deadline-s 260 --timeout-s 60 --jobs "$JOBS" \
  --out "$OUT/cudnn_benchmark_off.jsonl" 2> "$OUT/timm_off.log"
wait
cat /tmp/describe70b_*.log | grep -v "^ *$" | tail -n 12 | tee "$OUT/describe70b.log"
tar -cJf "$OUT/llama70b_descriptions.tar.xz" -C /tmp llama-70b_lora_bf16.json llama-70b_full_bf16_ckpt.json 2>/dev/null
ls -la "$OUT"; tail -n 3 "$OUT/timm_off.log"; head -n 60 "$OUT/lora_gap.txt"
