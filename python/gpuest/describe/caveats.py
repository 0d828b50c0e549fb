"""What a fake-tensor trace cannot see as the job will run it, said in the description
(ModelDescription.trace_caveats) rather than silently skipped (issue "llm")."""
from __future__ import annotations

import collections
from typing import List, Tuple

import torch
import torch.nn as nn

MIB = 1 << 20
# Storage of quantized weights: int8 / uint8 (8- and 4-bit), int32 (GPTQ / AWQ pack
# eight 4-bit values in one). Token ids and position tables are int64.
_PACKED_WEIGHT_DTYPES = (torch.int8, torch.uint8, torch.int32)


def unwrap_compiled(model: nn.Module) -> Tuple[nn.Module, List[str]]:
    """A torch.compile'd model (torch._dynamo's OptimizedModule) is traced through the
    module it wraps, eagerly; the caveat says so."""
    inner = getattr(model, "_orig_mod", None)
    if isinstance(inner, nn.Module) and type(model).__name__ == "OptimizedModule":
        return inner, ["the model is compiled with torch.compile and was traced eagerly, op "
                       "by op: the compiled graph's fused kernels free intermediates sooner, "
                       "and mode='reduce-overhead' keeps CUDA graphs' own memory pool, so "
                       "the compiled step can hold less or more"]
    return model, []


def weight_caveats(model: nn.Module) -> List[str]:
    """Weights the trace takes as plain tensors of their stored dtype: tensor
    subclasses (bitsandbytes' Params4bit, torchao's quantized tensors, ...) and integer
    weights (int8 / uint8 storage of quantized layers). Their kernels dequantize on the
    fly, with buffers the trace never sees; a subclass's own storage can differ too."""
    subclasses = collections.Counter()
    quantized, quantized_bytes = 0, 0
    for t in list(model.parameters()) + list(model.buffers()):
        if type(t) not in (nn.Parameter, torch.Tensor):
            subclasses[type(t).__name__] += 1
        elif t.is_quantized or (t.dtype in _PACKED_WEIGHT_DTYPES and t.dim() >= 2):
            quantized += 1
            quantized_bytes += t.numel() * t.element_size()
    out = []
    if subclasses:
        names = ", ".join(f"{n} x {name}" for name, n in sorted(subclasses.items()))
        out.append(f"weights held as tensor subclasses ({names}) were traced as plain "
                   "tensors of their stored shape and dtype: the library's own storage "
                   "and its kernels' buffers are not in the trace")
    if quantized:
        out.append(f"{quantized} integer weight tensors ({quantized_bytes / MIB:.1f} MiB as "
                   "stored, quantized) were traced as stored: the buffers their kernels "
                   "dequantize into are not in the trace")
    return out
