"""Self-attention traced as the CUDA fused kernels run it.

On a GPU, torch 2.x's ``F.multi_head_attention_forward`` with ``need_weights=False``
(what ``nn.TransformerEncoderLayer`` and most models ask for) calls
``scaled_dot_product_attention``, whose flash / memory-efficient kernels never store
the batch x heads x L x L attention weights: forward saves q, k, v, the output and a
per-row log-sum-exp; backward makes dq, dk, dv. A CPU trace (torch 1.13 has no
fused attention; 2.0's CPU path is the math one) materialises the weights, their
softmax and its dropout mask, which over-states long sequences several times over (the
A100 measurements of the Transformer dataset: median measured / traced 0.75 at 512
tokens).

``cuda_attention()`` swaps ``F.multi_head_attention_forward`` for the same
projections around one autograd function with the fused kernels' memory, for the
cases that take the fused path; every other call goes to the original. It swaps
``F.scaled_dot_product_attention`` (torch 2.x, which timm's models call) likewise.
``provide_torch2_attention()`` gives torch 1.13 that function, for describing on 1.13 a
job that runs on 2.x.
"""
from __future__ import annotations

import contextlib
import inspect

import torch
import torch.nn.functional as F


class _FusedAttention(torch.autograd.Function):
    """Allocations of a fused attention kernel; q, k, v are (batch, heads, L, dim)."""

    @staticmethod
    def forward(ctx, q, k, v):
        out = torch.empty_like(q)
        logsumexp = q.new_empty(q.shape[:-1], dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, logsumexp)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, _, _ = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _fused_forward(p: dict):
    """torch 2.x's need_weights=False path of multi_head_attention_forward (packed
    self-attention projections), with the kernel's memory; inputs are (L, batch, E)."""
    query = p["query"]
    length, batch, embed = query.shape
    heads = p["num_heads"]
    head_dim = embed // heads
    proj = F.linear(query, p["in_proj_weight"], p["in_proj_bias"])
    proj = proj.unflatten(-1, (3, embed)).unsqueeze(0).transpose(0, -2).squeeze(-2)
    proj = proj.contiguous()

    def heads_first(t):
        return t.view(length, batch * heads, head_dim).transpose(0, 1).view(
            batch, heads, length, head_dim)

    out = _FusedAttention.apply(heads_first(proj[0]), heads_first(proj[1]),
                                heads_first(proj[2]))
    out = out.permute(2, 0, 1, 3).contiguous().view(batch * length, embed)
    out = F.linear(out, p["out_proj_weight"], p["out_proj_bias"])
    return out.view(length, batch, embed), None


def _takes_fused_path(p: dict) -> bool:
    query = p["query"]
    return (not p.get("need_weights", True) and query is p["key"] and query is p["value"]
            and query.dim() == 3 and not p.get("use_separate_proj_weight", False)
            and p.get("in_proj_weight") is not None and p.get("bias_k") is None
            and not p.get("add_zero_attn", False) and p.get("static_k") is None
            and p.get("static_v") is None)


@contextlib.contextmanager
def cuda_attention(autocast=None):
    """Within the block, eligible self-attention calls allocate as the CUDA fused
    kernels do; the original function is restored after, whatever happens.
    ``autocast`` (a CudaAutocast) says, through ``dtype()``, when its region casts:
    CUDA autocast casts scaled_dot_product_attention's inputs to 16 bits (a
    lower_precision_fp op in autocast_mode.h), which the Python function installed here
    must do itself, being called in place of the aten op the emulation casts."""
    original = F.multi_head_attention_forward
    signature = inspect.signature(original)

    def multi_head_attention_forward(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if _takes_fused_path(bound.arguments):
            return _fused_forward(bound.arguments)
        return original(*args, **kwargs)

    F.multi_head_attention_forward = multi_head_attention_forward
    # torch 2.x's own function (or the one provide_torch2_attention gave 1.13) would
    # take the CPU's path on fake tensors; the CUDA kernel's memory is what the job has.
    original_sdpa = getattr(F, "scaled_dot_product_attention", None)

    def autocast_sdpa(query, key, value, attn_mask=None, *args, **kwargs):
        lower = autocast.dtype() if autocast is not None else None
        if lower is not None:
            query, key, value, attn_mask = (
                t.to(lower) if t is not None and t.is_floating_point() else t
                for t in (query, key, value, attn_mask))
        return scaled_dot_product_attention(query, key, value, attn_mask, *args, **kwargs)

    if original_sdpa is not None:
        F.scaled_dot_product_attention = autocast_sdpa
    try:
        yield
    finally:
        F.multi_head_attention_forward = original
        if original_sdpa is not None:
            F.scaled_dot_product_attention = original_sdpa


class _FusedBiasedAttention(torch.autograd.Function):
    """The memory-efficient kernel with an additive bias (an attention mask or a
    relative-position bias): as _FusedAttention, plus the bias's gradient when it
    needs one, made at the bias's own shape."""

    @staticmethod
    def forward(ctx, q, k, v, bias):
        out = torch.empty_like(q)
        logsumexp = q.new_empty(q.shape[:-1], dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, logsumexp, bias)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, _, _, bias = ctx.saved_tensors
        grad_bias = torch.empty_like(bias) if ctx.needs_input_grad[3] else None
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), grad_bias


class _FlashGqaAttention(_FusedAttention):
    """Flash attention with grouped-query (or multi-query) key and value: the kernel
    reads the shared heads in place, so forward is _FusedAttention's; its backward
    (flash_api.cpp mha_bwd) writes dK and dV at the query's head count ("dk_expanded",
    "dv_expanded") and sums each group into the real gradients after."""

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, _, _ = ctx.saved_tensors
        grads = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        expanded = (*k.shape[:-3], q.shape[-3], *k.shape[-2:])
        dk_expanded, dv_expanded = k.new_empty(expanded), v.new_empty(expanded)
        del dk_expanded, dv_expanded  # summed into grads[1:], then freed
        return grads


def _repeat_kv_heads(query, key, value):
    """The reference path's grouped-query step (aten's math SDPA with enable_gqa): key
    and value repeated to the query's head count, real copies (expand then reshape, as
    repeat_interleave does, without its data-dependent form on fake tensors)."""
    groups = query.shape[-3] // key.shape[-3]

    def repeat(t):
        *lead, heads, length, dim = t.shape
        return t.unsqueeze(-3).expand(*lead, heads, groups, length, dim).reshape(
            *lead, heads * groups, length, dim)

    return repeat(key), repeat(value)


def _math_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
               scale=None, enable_gqa=False):
    """torch 2.x's reference ("math") scaled_dot_product_attention, for real tensors."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        key, value = _repeat_kv_heads(query, key, value)
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    weights = query @ key.transpose(-2, -1) * scale
    if is_causal:
        length, source = query.shape[-2], key.shape[-2]
        causal = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        weights = weights.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            weights = weights.masked_fill(~attn_mask, float("-inf"))
        else:
            weights = weights + attn_mask
    weights = torch.softmax(weights, dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return weights @ value


def _fused_kernel_takes(query, key, value) -> bool:
    """Whether torch 2.x's CUDA dispatch can pick a fused kernel for these inputs.
    Both flash and memory-efficient attention need 4-D (batch, heads, L, dim) inputs
    (aten/src/ATen/native/transformers/sdp_utils_cpp.h, check_tensor_shapes: "Both fused
    kernels requires query, key and value to be 4 dimensional"); anything else runs the
    math path, which materialises the L x L weights and keeps them for backward. timm's
    NesT calls it with (batch, heads, blocks, L, dim): 5-D."""
    return query.dim() == 4 and key.dim() == 4 and value.dim() == 4


def _flash_takes_grouped(query, key, value, attn_mask) -> bool:
    """Whether torch 2.x's CUDA dispatch can run grouped-query inputs (fewer key/value
    heads than query heads, ``enable_gqa=True``) in a fused kernel. Flash attention is
    the one that takes them (sdp_utils.cpp: check_batch_size_and_num_heads_dense with
    supports_gqa for flash; the memory-efficient kernel requires equal head counts): it
    needs half precision and no additive mask. Otherwise the math path repeats K and V
    (what transformers' repeat_kv does by hand where it does not pass enable_gqa)."""
    half = (torch.float16, torch.bfloat16)
    return query.dtype in half and attn_mask is None and query.shape[-3] % key.shape[-3] == 0


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """torch 2.x's ``F.scaled_dot_product_attention`` for torch 1.13: on fake tensors
    (a traced step) it allocates as the CUDA memory-efficient kernel does, which is
    what torch 2.x runs for float32 inputs (flash attention needs half precision):
    nothing of size L x L, dropout drawn in the kernel; where no fused kernel takes the
    inputs (not 4-D), and on real tensors, it runs the reference ("math") path.
    ``enable_gqa`` (torch 2.5+, passed by transformers for Llama-3/Mistral/Qwen-style
    grouped-query attention) takes flash attention's path or the math path's copies."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(query, FakeTensor) or not _fused_kernel_takes(query, key, value):
        return _math_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
                          enable_gqa)
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        if _flash_takes_grouped(query, key, value, attn_mask):
            return _FlashGqaAttention.apply(query, key, value)
        return _math_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
                          enable_gqa)
    if attn_mask is None or attn_mask.dtype == torch.bool:
        # A boolean mask is applied in the kernel, like causality: no extra memory.
        return _FusedAttention.apply(query, key, value)
    return _FusedBiasedAttention.apply(query, key, value, attn_mask)


def provide_torch2_attention() -> bool:
    """Gives torch 1.13 the ``F.scaled_dot_product_attention`` of torch 2.x, so that a
    library imported afterwards takes its fused-attention path (timm decides at
    import), as the job does on the torch 2.x it runs on. For describing, on 1.13, a
    job that trains on 2.x; a no-op on 2.x. Returns whether it installed anything."""
    if hasattr(F, "scaled_dot_product_attention"):
        return False
    F.scaled_dot_product_attention = scaled_dot_product_attention
    return True
