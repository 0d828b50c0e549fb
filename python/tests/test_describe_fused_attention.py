"""Self-attention is traced with the memory of the CUDA fused kernels: no
batch x heads x L x L attention weights are stored, unless the model asks for them."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import gpuest
from helpers import check_trace_shape, live_curve

B, L, E, H = 4, 64, 32, 4
WEIGHTS = B * H * L * L * 4  # one fp32 attention-weight tensor


class Encoder(nn.Module):
    def __init__(self, need_weights=False):
        super().__init__()
        self.embed = nn.Embedding(100, E)
        self.attn = nn.MultiheadAttention(E, H, dropout=0.1, batch_first=True)
        self.head = nn.Linear(E, 3)
        self.need_weights = need_weights

    def forward(self, x):
        x = self.embed(x)
        x = self.attn(x, x, x, need_weights=self.need_weights)[0]
        return self.head(x.mean(dim=1))


def _trace(model):
    d = gpuest.describe(model, input_shape=(L,), input_dtype="int64", batch_size=B)
    check_trace_shape(d["trace"])
    return d["trace"]


def test_fused_path_stores_no_attention_weights():
    trace = _trace(Encoder())
    assert WEIGHTS not in [int(s) for s in trace["sizeBytes"]]
    # Saved for backward: q, k, v and the output (each B x L x E) and the per-row
    # log-sum-exp (B x H x L, fp32), all as activations.
    sizes = [int(s) for s, c in zip(trace["sizeBytes"], trace["category"])
             if c == "ALLOCATION_CATEGORY_ACTIVATION"]
    assert B * H * L * 4 in sizes


def test_asking_for_the_weights_takes_the_materialising_path():
    fused, weights = _trace(Encoder()), _trace(Encoder(need_weights=True))
    assert WEIGHTS in [int(s) for s in weights["sizeBytes"]]
    assert live_curve(weights)[1] > live_curve(fused)[1] + WEIGHTS


def test_the_original_function_is_restored():
    original = F.multi_head_attention_forward
    _trace(Encoder())
    assert F.multi_head_attention_forward is original
    # And still computes real attention outside describe.
    out, _ = nn.MultiheadAttention(E, H)(torch.ones(L, 1, E), torch.ones(L, 1, E),
                                         torch.ones(L, 1, E))
    assert out.shape == (L, 1, E)
