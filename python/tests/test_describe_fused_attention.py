"""Self-attention is traced with the memory of the CUDA fused kernels: no
batch x heads x L x L attention weights are stored, unless the model asks for them."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import gpuest
from helpers import check_trace_shape, live_curve, describe_dict

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
    d = describe_dict(model, input_shape=(L,), input_dtype="int64", batch_size=B)
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


class SdpaBlock(nn.Module):
    """Attention written against torch 2.x's F.scaled_dot_product_attention, as timm's
    models are, with an optional learned relative-position bias (BEiT)."""

    def __init__(self, bias=False):
        super().__init__()
        self.embed = nn.Embedding(100, E)
        self.qkv = nn.Linear(E, 3 * E)
        self.head = nn.Linear(E, 3)
        self.bias = nn.Parameter(torch.zeros(1, H, L, L)) if bias else None

    def forward(self, x):
        x = self.embed(x)
        q, k, v = self.qkv(x).view(x.shape[0], L, 3, H, E // H).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, dropout_p=0.1)
        return self.head(x.transpose(1, 2).reshape(x.shape[0], L, E).mean(dim=1))


def _with_torch2_attention(fn):
    from gpuest.describe import fused_attention
    installed = fused_attention.provide_torch2_attention()
    try:
        return fn()
    finally:
        if installed:
            del F.scaled_dot_product_attention


def test_torch2_attention_on_fake_tensors_stores_no_weights():
    trace = _with_torch2_attention(lambda: _trace(SdpaBlock()))
    assert WEIGHTS not in [int(s) for s in trace["sizeBytes"]]
    sizes = [int(s) for s, c in zip(trace["sizeBytes"], trace["category"])
             if c == "ALLOCATION_CATEGORY_ACTIVATION"]
    assert B * H * L * 4 in sizes  # the kernel's log-sum-exp


def test_torch2_attention_bias_gets_its_gradient_at_its_own_shape():
    trace = _with_torch2_attention(lambda: _trace(SdpaBlock(bias=True)))
    bias_bytes = H * L * L * 4
    sizes = [int(s) for s in trace["sizeBytes"]]
    assert sizes.count(bias_bytes) >= 2  # the parameter and its gradient
    assert WEIGHTS not in sizes


def test_torch2_attention_computes_the_reference_on_real_tensors():
    from gpuest.describe.fused_attention import scaled_dot_product_attention
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, H, 5, 8) for _ in range(3))
    bias = torch.randn(1, H, 5, 5)
    expected = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5 + bias, -1) @ v
    assert torch.allclose(scaled_dot_product_attention(q, k, v, bias), expected,
                          atol=1e-6)
    causal = scaled_dot_product_attention(q, k, v, is_causal=True)
    # The first query sees only the first key.
    assert torch.allclose(causal[..., 0, :], v[..., 0, :], atol=1e-6)


class BlockedSdpa(nn.Module):
    """NesT's call: attention within T blocks, inputs (batch, heads, T, L, dim), 5-D.
    No fused CUDA kernel takes 5-D inputs (sdp_utils_cpp.h check_tensor_shapes), so
    torch 2.x runs the math path and keeps the L x L weights for backward."""

    def __init__(self, blocks=2):
        super().__init__()
        self.blocks = blocks
        self.embed = nn.Embedding(100, E)
        self.qkv = nn.Linear(E, 3 * E)
        self.head = nn.Linear(E, 3)

    def forward(self, x):
        x = self.embed(x)  # (B, T * L, E)
        t = self.blocks
        q, k, v = self.qkv(x).view(x.shape[0], t, L, 3, H, E // H).permute(3, 0, 4, 1, 2, 5)
        x = F.scaled_dot_product_attention(q, k, v)  # (B, H, T, L, dim)
        return self.head(x.permute(0, 2, 3, 1, 4).reshape(x.shape[0], t * L, E).mean(dim=1))


def test_five_dimensional_attention_takes_the_math_path_and_keeps_its_weights():
    def trace():
        d = describe_dict(BlockedSdpa(), input_shape=(2 * L,), input_dtype="int64",
                          batch_size=B)
        check_trace_shape(d["trace"])
        return d["trace"]

    blocked = _with_torch2_attention(trace)
    weights = 2 * WEIGHTS  # B x H x T x L x L, fp32, T = 2 blocks
    sizes = [int(s) for s, c in zip(blocked["sizeBytes"], blocked["category"])
             if c == "ALLOCATION_CATEGORY_ACTIVATION"]
    assert weights in sizes  # the softmax's output, saved for backward
    # The same attention in 4-D takes the fused kernel: no L x L weights at all.
    four_d = _with_torch2_attention(lambda: _trace(SdpaBlock()))
    assert WEIGHTS not in [int(s) for s in four_d["sizeBytes"]]


KV_HEADS = 2


class GroupedQueryBlock(nn.Module):
    """Llama-3/Mistral-style grouped-query attention as transformers calls it on torch
    2.5+: fewer key/value heads than query heads, and ``enable_gqa=True``."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, E)
        self.q = nn.Linear(E, E)
        self.kv = nn.Linear(E, 2 * KV_HEADS * (E // H))
        self.head = nn.Linear(E, 3)
        # Stands for Llama's rotary cos/sin, kept in fp32: under autocast, q and k
        # come out of it in fp32 (elementwise ops are not cast).
        self.register_buffer("rotary", torch.ones(L, E // H))

    def forward(self, x):
        x = self.embed(x)
        q = self.q(x).view(x.shape[0], L, H, E // H).transpose(1, 2) * self.rotary
        k, v = self.kv(x).view(x.shape[0], L, 2, KV_HEADS, E // H).permute(2, 0, 3, 1, 4)
        k = k * self.rotary
        x = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.head(x.transpose(1, 2).reshape(x.shape[0], L, E).mean(dim=1))


def _grouped_trace(dtype, amp=False):
    def trace():
        d = describe_dict(GroupedQueryBlock(), input_shape=(L,), input_dtype="int64",
                          batch_size=B, dtype=dtype, amp=amp)
        assert "trace" in d, d.get("traceUnavailableReason")
        check_trace_shape(d["trace"])
        return [int(s) for s in d["trace"]["sizeBytes"]]

    return _with_torch2_attention(trace)


def test_grouped_query_attention_in_half_precision_takes_flash_with_expanded_grads():
    sizes = _grouped_trace("bfloat16")
    assert B * H * L * L * 2 not in sizes  # no L x L weights
    # flash's backward writes dK and dV at the query's head count before summing the
    # groups: two such bf16 temporaries beside dQ (the same size) and the query.
    query_bytes = B * H * L * (E // H) * 2
    assert sizes.count(query_bytes) >= 4


def test_grouped_query_attention_in_float32_takes_the_math_path_with_repeated_heads():
    sizes = _grouped_trace("float32")
    assert WEIGHTS in sizes  # the reference path keeps the softmax for backward
    assert sizes.count(B * H * L * (E // H) * 4) >= 3  # K and V repeated, and Q


def test_grouped_query_attention_computes_the_reference_on_real_tensors():
    from gpuest.describe.fused_attention import scaled_dot_product_attention
    torch.manual_seed(0)
    q = torch.randn(2, H, 5, 8)
    k, v = torch.randn(2, KV_HEADS, 5, 8), torch.randn(2, KV_HEADS, 5, 8)
    groups = H // KV_HEADS
    full_k, full_v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    expected = torch.softmax(q @ full_k.transpose(-1, -2) / 8 ** 0.5, -1) @ full_v
    assert torch.allclose(scaled_dot_product_attention(q, k, v, enable_gqa=True), expected,
                          atol=1e-6)


def test_grouped_query_attention_under_amp_is_cast_to_16_bits_and_takes_flash():
    # Llama's rotary embedding leaves q and k in fp32 under autocast; CUDA autocast
    # casts attention's inputs to 16 bits, so flash takes them: no L x L weights.
    sizes = _grouped_trace("float32", amp=True)
    assert WEIGHTS not in sizes and B * H * L * L * 2 not in sizes
