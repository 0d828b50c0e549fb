"""What autograd saves for backward in one forward of the 0.2B decoder's LoRA job
(measure_llm_finetune.py's llama-0.2b/lora_bf16 at 4 x 1,024), on the GPU: the bytes
of each distinct storage packed by saved_tensors_hooks, by the tensor's last
dimension and dtype. A lead for the trace's LoRA gap (issue "llm": the trace is 7-11 %
under the measured allocated peak without checkpointing).

    python3 lab/gpu/saved_census.py      (on a GPU machine, from the checkout)
"""
import collections
import sys

sys.path.insert(0, "lab/gpu")
sys.path.insert(0, "python")
import torch  # noqa: E402

import measure_llm_finetune as m  # noqa: E402

def census(device):
    model = m.build("lora_bf16", device, "llama-0.2b")
    ids = torch.randint(0, 32000, (4, 1024), device=device)
    seen = {}
    def pack(t):
        key = (tuple(t.shape), str(t.dtype), t.requires_grad)
        try:  # One storage saved by several ops counts once.
            ptr = t.untyped_storage().data_ptr()
        except RuntimeError:
            ptr = id(t)
        seen[(ptr, key)] = t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m.lm_step(model, ids)
    by = collections.Counter()
    for (ptr, key), b in seen.items():
        by[(key[0][-1] if key[0] else 0, key[1])] += b
    return sum(seen.values()), by

real_total, real_by = census("cuda")
print("real saved MiB", real_total / 2**20)
for (last, dt), b in sorted(real_by.items(), key=lambda x: -x[1])[:15]:
    print("  last dim", last, dt, round(b / 2**20, 1), "MiB")
