"""Time gpuest.describe of a 70B-parameter Llama-shaped decoder built on the meta device,
without transformers (which Debian does not package): RMSNorm, rotary embeddings,
grouped-query attention through scaled_dot_product_attention, a SwiGLU MLP, the shape
of Llama-2-70B (hidden 8,192, 80 layers, 64 query and 8 key/value heads, MLP 28,672,
vocabulary 32,000: 69.0B parameters). Issue "llm": under 5 minutes on a 2-CPU machine.

    PYTHONPATH=python python3 lab/gpu/describe_70b.py [--lora] [--layers N]
"""
import argparse
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "python")
from gpuest.describe.api import describe_json  # noqa: E402


# Every module is made on the meta device through its factory arguments (torch 1.13
# has no `with torch.device(...)`).
META = {"device": "meta"}


class RMSNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width, **META))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.weight * h.to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, width, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q_proj = nn.Linear(width, width, bias=False, **META)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False, **META)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False, **META)
        self.o_proj = nn.Linear(width, width, bias=False, **META)

    def repeat_kv(self, x):
        """transformers' repeat_kv: each key/value head serves heads / kv_heads queries."""
        b, kv, t, d = x.shape
        repeat = self.heads // kv
        return x[:, :, None].expand(b, kv, repeat, t, d).reshape(b, kv * repeat, t, d)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, width, heads, kv_heads, mlp):
        super().__init__()
        self.input_layernorm = RMSNorm(width)
        self.self_attn = Attention(width, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(width)
        self.gate_proj = nn.Linear(width, mlp, bias=False, **META)
        self.up_proj = nn.Linear(width, mlp, bias=False, **META)
        self.down_proj = nn.Linear(mlp, width, bias=False, **META)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Decoder(nn.Module):
    def __init__(self, vocab=32000, width=8192, layers=80, heads=64, kv_heads=8,
                 mlp=28672):
        super().__init__()
        self.head_dim = width // heads
        self.embed_tokens = nn.Embedding(vocab, width, **META)
        self.layers = nn.ModuleList(Block(width, heads, kv_heads, mlp) for _ in range(layers))
        self.norm = RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False, **META)

    def forward(self, tokens):
        t = tokens.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, device=tokens.device).float()
                               / self.head_dim))
        angles = torch.outer(torch.arange(t, device=tokens.device).float(), inv)
        emb = torch.cat((angles, angles), dim=-1)
        x = self.embed_tokens(tokens)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def lm_step(model, tokens):
    logits = model(tokens).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lora", action="store_true",
                   help="freeze the weights and train rank-16 adapters on q and v "
                        "(float32, as peft keeps them)")
    p.add_argument("--layers", type=int, default=80)
    p.add_argument("--out", default="")
    args = p.parse_args()
    started = time.time()
    model = Decoder(layers=args.layers).to(torch.bfloat16)
    if args.lora:
        for p_ in model.parameters():
            p_.requires_grad_(False)
        for layer in model.layers:
            for name in ("q_proj", "v_proj"):
                base = getattr(layer.self_attn, name)
                adapter = nn.Sequential(nn.Linear(base.in_features, 16, bias=False, **META),
                                        nn.Linear(16, base.out_features, bias=False, **META))
                setattr(layer.self_attn, name, _Adapted(base, adapter))
    params = sum(p_.numel() for p_ in model.parameters())
    built = time.time()
    d = describe_json(model, input_shape=(2048,), input_dtype="int64", batch_size=1,
                      optimizer="adamw", dtype="bfloat16", step=lm_step,
                      name=f"llama-70b-shape{'-lora' if args.lora else ''}")
    done = time.time()
    if args.out:
        import json
        with open(args.out, "w") as f:
            json.dump(d, f)
    events = len(d.get("trace", {}).get("sizeBytes", []))
    print(f"torch {torch.__version__}: {params / 1e9:.1f}B parameters, built in "
          f"{built - started:.1f} s, described in {done - built:.1f} s ({events} trace "
          f"events{'' if 'trace' in d else ', no trace: ' + d.get('traceUnavailableReason', '')}); "
          f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


class _Adapted(nn.Module):
    """peft's LoRA Linear: the frozen base, plus float32 adapters on the input cast up."""

    def __init__(self, base, adapter):
        super().__init__()
        self.base = base
        self.adapter = adapter.float()

    def forward(self, x):
        return self.base(x) + self.adapter(x.float()).to(x.dtype) * 2.0


if __name__ == "__main__":
    main()
