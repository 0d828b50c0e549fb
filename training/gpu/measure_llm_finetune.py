"""Fine-tune a small Llama-style decoder on a real GPU and record what PyTorch's
allocator reports (issue "llm": full, LoRA, activation checkpointing, bf16, AMP), and
describe the same step with gpuest.describe on fake tensors for comparison.

Each configuration runs in a fresh process: the step (forward with labels, backward,
AdamW step) once, then the peaks are reset and --steps more run. Rows record
max_memory_allocated / max_memory_reserved of the first step and of the steady state.
With --describe-dir, each configuration is also described (on the CPU, no GPU) into
DIR/<config>.json.

    python3 training/gpu/measure_llm_finetune.py --out llm.jsonl --describe-dir desc/
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20
# A ~0.2B-parameter Llama-style decoder, built from its config (no download).
DECODER = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
               num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=16,
               max_position_embeddings=2048)
CONFIGS = {
    # name: (parameter dtype, amp, lora, checkpointing)
    "full_fp32": ("float32", False, False, False),
    "full_bf16": ("bfloat16", False, False, False),
    "full_fp32_amp_fp16": ("float32", True, False, False),
    "full_fp32_ckpt": ("float32", False, False, True),
    "lora_bf16": ("bfloat16", False, True, False),
    "lora_bf16_ckpt": ("bfloat16", False, True, True),
}


def build(config: str, device: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    dtype, _, lora, ckpt = CONFIGS[config]
    cfg = LlamaConfig(**DECODER, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype)).to(device)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"]))
    model.train()
    return model


def lm_step(model, batch):
    return model(input_ids=batch, labels=batch).loss


def measure(config, batch, seq, steps):
    import torch
    _, amp, _, _ = CONFIGS[config]
    model = build(config, "cuda")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    scaler = torch.amp.GradScaler("cuda") if amp else None
    ids = torch.randint(0, DECODER["vocab_size"], (batch, seq), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        if amp:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = lm_step(model, ids)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            lm_step(model, ids).backward()
            opt.step()

    row = {"config": config, "batch_size": batch, "seq_len": seq,
           "params": sum(p.numel() for p in model.parameters()),
           "trainable_params": sum(p.numel() for p in params),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "weights_mib": torch.cuda.memory_allocated() / MIB}
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
        row["status"] = "OK"
    except torch.OutOfMemoryError as e:
        row["status"] = "OOM"
        row["error"] = str(e).splitlines()[0][:300]
    return row


def describe(config, batch, seq, path):
    import torch
    from gpuest.describe.api import describe_json
    dtype, amp, _, _ = CONFIGS[config]
    with torch.device("meta"):
        model = build(config, "meta")
    d = describe_json(model, input_shape=(seq,), input_dtype="int64", batch_size=batch,
                      optimizer="adamw", dtype=dtype, amp=amp, name=f"llama-0.2b-{config}",
                      step=lm_step)
    with open(path, "w") as f:
        json.dump(d, f)


def run_measure(base, config, timeout_s):
    started = time.time()
    try:
        r = subprocess.run(base + ["--child", config], capture_output=True, text=True,
                           timeout=timeout_s)
        rows = [json.loads(l[4:]) for l in r.stdout.splitlines() if l.startswith("ROW ")]
        row = rows[0] if rows else {"config": config, "status": "CRASHED",
                                    "error": r.stderr[-800:]}
    except subprocess.TimeoutExpired:
        row = {"config": config, "status": "TIMEOUT"}
    row["seconds"] = round(time.time() - started, 1)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def run_describe(base, config, directory, timeout_s):
    """Describes on the CPU (no CUDA context), in its own process."""
    os.makedirs(directory, exist_ok=True)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    started = time.time()
    try:
        r = subprocess.run(base + ["--child", config, "--describe-to",
                                   os.path.join(directory, config + ".json")],
                           capture_output=True, text=True, env=env, timeout=timeout_s)
        print(f"describe {config}: rc {r.returncode}, {time.time() - started:.1f} s "
              f"{r.stderr[-800:] if r.returncode else ''}", file=sys.stderr, flush=True)
    except subprocess.TimeoutExpired:
        print(f"describe {config}: timeout", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--describe-to", default="", help=argparse.SUPPRESS)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", default="-")
    p.add_argument("--describe-dir", default="")
    p.add_argument("--no-measure", action="store_true", help="describe only (no GPU)")
    p.add_argument("--timeout-s", type=float, default=180)
    args = p.parse_args(argv)
    if args.child:
        if args.describe_to:
            describe(args.child, args.batch, args.seq, args.describe_to)
        else:
            print("ROW " + json.dumps(measure(args.child, args.batch, args.seq, args.steps)))
        return 0
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    base = [sys.executable, __file__, "--batch", str(args.batch), "--seq", str(args.seq),
            "--steps", str(args.steps)]
    for config in args.configs.split(","):
        if not args.no_measure:
            out.write(json.dumps(run_measure(base, config, args.timeout_s)) + "\n")
            out.flush()
        if args.describe_dir:
            run_describe(base, config, args.describe_dir, args.timeout_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
