"""Fine-tune a small Llama-style decoder on a real GPU and record what PyTorch's
allocator reports (issue "llm": full, LoRA, activation checkpointing, bf16, AMP), and
describe the same step with gpuest.describe on fake tensors for comparison.

Each configuration runs in a fresh process: the step (forward with labels, backward,
AdamW step) once, then the peaks are reset and --steps more run. Rows record
max_memory_allocated / max_memory_reserved of the first step and of the steady state.
With --describe-dir, each configuration is also described (on the CPU, no GPU) into
DIR/<config>.json.

    python3 lab/gpu/measure_llm_finetune.py --out llm.jsonl --describe-dir desc/
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20
VOCAB = {"llama": 32000, "gpt2": 50257}
# Decoders built from their configs (no download): name -> (family, config kwargs).
MODELS = {
    # ~0.2B Llama-style
    "llama-0.2b": ("llama", dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                                 num_hidden_layers=12, num_attention_heads=16,
                                 num_key_value_heads=16, max_position_embeddings=2048)),
    # TinyLlama-1.1B's shape (grouped-query attention, 4 KV heads)
    "llama-1.1b": ("llama", dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                                 num_hidden_layers=22, num_attention_heads=32,
                                 num_key_value_heads=4, max_position_embeddings=2048)),
    # Llama-2-7B's shape (describe only: the GPU runs here stay small)
    "llama-7b": ("llama", dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                               num_hidden_layers=32, num_attention_heads=32,
                               num_key_value_heads=32, max_position_embeddings=4096)),
    # Llama-2-70B's shape (describe only: how long a 70B describe takes)
    "llama-70b": ("llama", dict(vocab_size=32000, hidden_size=8192, intermediate_size=28672,
                                num_hidden_layers=80, num_attention_heads=64,
                                num_key_value_heads=8, max_position_embeddings=4096)),
    # GPT-2 XL's shape (1.56B)
    "gpt2-xl": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=1600, n_layer=48,
                             n_head=25)),
}
CONFIGS = {
    # name: (parameter dtype, autocast dtype or None, lora, checkpointing)
    "full_fp32": ("float32", None, False, False),
    "full_bf16": ("bfloat16", None, False, False),
    "full_fp32_amp_fp16": ("float32", "float16", False, False),
    "full_fp32_amp_bf16": ("float32", "bfloat16", False, False),
    "full_fp32_ckpt": ("float32", None, False, True),
    "full_bf16_ckpt": ("bfloat16", None, False, True),
    "lora_bf16": ("bfloat16", None, True, False),
    "lora_bf16_ckpt": ("bfloat16", None, True, True),
}


def build(config: str, device: str, model_name: str = "llama-0.2b"):
    import torch
    family, kwargs = MODELS[model_name]
    dtype, _, lora, ckpt = CONFIGS[config]
    if family == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg, cls, targets = LlamaConfig(**kwargs, attn_implementation="sdpa"), \
            LlamaForCausalLM, ["q_proj", "v_proj"]
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg, cls, targets = GPT2Config(**kwargs, attn_implementation="sdpa"), \
            GPT2LMHeadModel, ["c_attn"]
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: no host copy of the weights
        model = cls(cfg).to(getattr(torch, dtype))
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                 target_modules=targets))
    model.train()
    return model


def lm_step(model, batch):
    return model(input_ids=batch, labels=batch).loss


def measure(model_name, config, batch, seq, steps):
    import torch
    from lease import outside_allocator_mib
    _, amp, _, _ = CONFIGS[config]
    model = build(config, "cuda", model_name)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    scaler = torch.amp.GradScaler("cuda") if amp == "float16" else None
    ids = torch.randint(0, VOCAB[MODELS[model_name][0]], (batch, seq), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = lm_step(model, ids)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        elif amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = lm_step(model, ids)
            loss.backward()
            opt.step()
        else:
            lm_step(model, ids).backward()
            opt.step()

    row = {"model": model_name, "config": config, "batch_size": batch, "seq_len": seq,
           "params": sum(p.numel() for p in model.parameters()),
           "trainable_params": sum(p.numel() for p in params),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "weights_mib": torch.cuda.memory_allocated() / MIB}
    # The model was initialised in fp32 and converted: its fp32 blocks sit in the cache,
    # which a job loading its weights in their dtype never has. Released, so that the
    # reserved peaks are the step's.
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        step()
        torch.cuda.synchronize()
        row["first_allocated_mib"] = torch.cuda.max_memory_allocated() / MIB
        row["first_reserved_mib"] = torch.cuda.max_memory_reserved() / MIB
        torch.cuda.reset_peak_memory_stats()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        row["steady_allocated_mib"] = torch.cuda.max_memory_allocated() / MIB
        row["steady_reserved_mib"] = torch.cuda.max_memory_reserved() / MIB
        row.update(outside_allocator_mib())
        row["status"] = "OK"
    except torch.OutOfMemoryError as e:
        row["status"] = "OOM"
        row["error"] = str(e).splitlines()[0][:300]
    return row


def describe(model_name, config, batch, seq, path):
    from gpuest.describe.api import describe_json
    dtype, amp, _, _ = CONFIGS[config]
    model = build(config, "meta", model_name)
    d = describe_json(model, input_shape=(seq,), input_dtype="int64", batch_size=batch,
                      optimizer="adamw", dtype=dtype, amp=amp or False,
                      name=f"{model_name}-{config}-b{batch}-s{seq}", step=lm_step)
    with open(path, "w") as f:
        json.dump(d, f)


def run_measure(base, job, timeout_s):
    model_name, config, batch, seq = job
    started = time.time()
    try:
        r = subprocess.run(base + _job_args(job), capture_output=True, text=True,
                           timeout=timeout_s)
        rows = [json.loads(l[4:]) for l in r.stdout.splitlines() if l.startswith("ROW ")]
        row = rows[0] if rows else {"model": model_name, "config": config,
                                    "batch_size": batch, "seq_len": seq,
                                    "status": "CRASHED", "error": r.stderr[-800:]}
    except subprocess.TimeoutExpired:
        row = {"model": model_name, "config": config, "batch_size": batch, "seq_len": seq,
               "status": "TIMEOUT"}
    row["seconds"] = round(time.time() - started, 1)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def run_describe(base, job, directory, timeout_s):
    """Describes on the CPU (no CUDA context), in its own process."""
    os.makedirs(directory, exist_ok=True)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    model_name, config, batch, seq = job
    path = os.path.join(directory, f"{model_name}_{config}_b{batch}_s{seq}.json")
    started = time.time()
    try:
        r = subprocess.run(base + _job_args(job) + ["--describe-to", path],
                           capture_output=True, text=True, env=env, timeout=timeout_s)
        print(f"describe {path}: rc {r.returncode}, {time.time() - started:.1f} s "
              f"{r.stderr[-800:] if r.returncode else ''}", file=sys.stderr, flush=True)
    except subprocess.TimeoutExpired:
        print(f"describe {path}: timeout", file=sys.stderr, flush=True)


def _job_args(job):
    model_name, config, batch, seq = job
    return ["--child", config, "--model", model_name, "--batch", str(batch), "--seq", str(seq)]


def parse_jobs(text, default_model, configs, batch, seq):
    """Jobs as MODEL/CONFIG@BATCHxSEQ, comma-separated; without --jobs, --configs on
    --model at --batch and --seq."""
    if not text:
        return [(default_model, c, batch, seq) for c in configs.split(",")]
    jobs = []
    for item in text.split(","):
        head, _, shape = item.partition("@")
        model_name, _, config = head.partition("/")
        b, _, s = shape.partition("x")
        if model_name not in MODELS or config not in CONFIGS:
            raise SystemExit(f"unknown model or config in job {item!r}")
        jobs.append((model_name, config, int(b or batch), int(s or seq)))
    return jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--describe-to", default="", help=argparse.SUPPRESS)
    p.add_argument("--model", default="llama-0.2b", choices=sorted(MODELS))
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--jobs", default="",
                   help="MODEL/CONFIG@BATCHxSEQ,... (overrides --model/--configs)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", default="-")
    p.add_argument("--describe-dir", default="")
    p.add_argument("--no-measure", action="store_true", help="describe only (no GPU)")
    p.add_argument("--parallel", type=int, default=1,
                   help="jobs at once (each its own process; peaks are per process)")
    p.add_argument("--timeout-s", type=float, default=180)
    args = p.parse_args(argv)
    if args.child:
        if args.describe_to:
            describe(args.model, args.child, args.batch, args.seq, args.describe_to)
        else:
            print("ROW " + json.dumps(measure(args.model, args.child, args.batch, args.seq,
                                              args.steps)))
        return 0
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    base = [sys.executable, __file__, "--steps", str(args.steps)]
    jobs = parse_jobs(args.jobs, args.model, args.configs, args.batch, args.seq)

    def one(job):
        if not args.no_measure:
            row = run_measure(base, job, args.timeout_s)
            out.write(json.dumps(row) + "\n")
            out.flush()
        if args.describe_dir:
            run_describe(base, job, args.describe_dir, args.timeout_s)

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        list(pool.map(one, jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
