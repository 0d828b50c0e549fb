"""describe's traced step against PyTorch's own MemTracker (torch 2.5+,
torch.distributed._tools.mem_tracker), on small decoders on the CPU: an independent
count of the same step (issue "llm", Checks). Run by hand where torch 2.x is installed,
e.g. a Debian trixie root made with debootstrap (bookworm's torch is 1.13):

    chroot /tmp/trixie sh -c 'cd /work/main && PYTHONPATH=python python3 \\
        lab/gpu/memtracker_check.py'

MemTracker runs the real step on real CPU tensors and reports, per device, the peak of
live bytes by category (parameters, gradients, optimizer state, activations,
temporaries, inputs). describe runs the same step on fake tensors; its trace's peak of
live bytes is what allocsim replays. Both count tensor storage bytes (no allocator
rounding), so the peaks compare directly.
"""
import sys

import torch
import torch.nn as nn
from torch.distributed._tools.mem_tracker import MemTracker

sys.path.insert(0, "python")
from gpuest.describe.api import describe_json  # noqa: E402

MIB = 1 << 20


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab, width, layers, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def step(model, tokens):
    logits = model(tokens)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       tokens.reshape(-1))


def measured_peak(model, batch, seq, vocab, lora):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    tokens = torch.randint(0, vocab, (batch, seq))
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        step(model, tokens).backward()
        opt.step()
    peak = tracker.get_tracker_snapshot("peak")
    cpu = next(v for k, v in peak.items() if str(k) == "cpu")
    return cpu


def traced_peak(model, batch, seq):
    d = describe_json(model, input_shape=(seq,), input_dtype="int64", batch_size=batch,
                      optimizer="adamw", step=step)
    trace = d["trace"]
    events = []
    for size, a, f in zip(trace["sizeBytes"], trace["allocAt"], trace["freeAt"]):
        events.append((int(a), int(size)))
        if int(f):
            events.append((int(f), -int(size)))
    live = peak = 0
    for _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}")
    print("| model | batch x seq | MemTracker peak MiB | describe's trace peak MiB | "
          "trace / MemTracker |")
    print("|---|---|---|---|---|")
    for name, vocab, width, layers, heads, batch, seq, lora in (
            ("decoder 4 x 256", 8000, 256, 4, 4, 8, 256, False),
            ("decoder 8 x 512", 16000, 512, 8, 8, 4, 512, False),
            ("decoder 6 x 768", 32000, 768, 6, 12, 2, 1024, False)):
        # (Frozen parameters, as in LoRA, are left out: torch 2.6's MemTracker hooks
        # every parameter's gradient and refuses one that does not require it.)
        model = Decoder(vocab, width, layers, heads)
        if lora:
            for p in model.parameters():
                p.requires_grad_(False)
            for p in model.blocks[-1].parameters():
                p.requires_grad_(True)
        traced = traced_peak(model, batch, seq)
        measured = measured_peak(model, batch, seq, vocab, lora)
        total = measured.get("Total", sum(v for k, v in measured.items() if k != "Total"))
        print(f"| {name} | {batch} x {seq} | {total / MIB:,.1f} | {traced / MIB:,.1f} | "
              f"{traced / total:.3f} |")
        print("  MemTracker by category at its peak (MiB): " + ", ".join(
            f"{k}: {v / MIB:.1f}" for k, v in measured.items() if k != "Total"),
            file=sys.stderr)


if __name__ == "__main__":
    main()
